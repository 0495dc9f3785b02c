package provider

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Lifecycle peers. The node lifecycle controller checks every
// NotReady Node every node-monitor period: InstanceExists, then
// InstanceShutdown, one Node after the other. Their answers live
// InstanceExists' and InstanceShutdown's TTLs, far shorter by default than
// a list refresh's interval: a listed answer serves them only just after a
// refresh, and a fresh-enough one cannot serve them without a longer TTL (a
// staleness trade). So every NotReady Node would cost its own batch call
// every InstanceShutdown TTL, one Node at a time.
//
// Instead, a batch call about to go out also carries the other Nodes the
// lifecycle controller checked lately ("peers") whose answers are older
// than half the shortest of the two TTLs: one call per half-TTL refreshes
// every NotReady Node (up to the batch's size), whatever their number.
// Nothing is served older than before (a peer's answer is fresher, not
// older); a peer's answer fills the caches as any batch answer does
// (g.fill: "does not exist" is negative and reaches the lifecycle
// controller only through the not-found guard), and no caller waits on it.

// peerIdle is how long a Node stays a peer after its last lifecycle check:
// a Node that turned Ready is no longer checked, and stops being refreshed
// after this long.
const peerIdle = time.Minute

type lifecyclePeers struct {
	mu    sync.Mutex
	nodes map[nodeKey]*peer
}

type peer struct {
	node      *v1.Node
	checked   time.Time // the last lifecycle check (InstanceExists/InstanceShutdown)
	refreshed time.Time // the last time a batch carried it
}

// note records a lifecycle check of node (key has an identity).
func (p *lifecyclePeers) note(key nodeKey, node *v1.Node, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodes == nil {
		p.nodes = map[nodeKey]*peer{}
	}
	if e, ok := p.nodes[key]; ok {
		e.node, e.checked = node, now
		return
	}
	p.nodes[key] = &peer{node: node, checked: now, refreshed: now}
}

// take returns up to max peers not among in whose last refresh is at least
// age old, and marks them refreshed now; it forgets peers idle for peerIdle.
func (p *lifecyclePeers) take(in map[nodeKey]bool, max int, age time.Duration, now time.Time) []*v1.Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*v1.Node
	for k, e := range p.nodes {
		switch {
		case now.Sub(e.checked) > peerIdle:
			delete(p.nodes, k)
		case in[k]:
			e.refreshed = now
		case len(out) < max && now.Sub(e.refreshed) >= age:
			e.refreshed = now
			out = append(out, e.node)
		}
	}
	return out
}

// notePeer records a lifecycle check of node when batching is on and the
// answers are cached (otherwise there is nothing to refresh ahead).
func (g *gate) notePeer(node *v1.Node) {
	if g.peerAge() <= 0 {
		return
	}
	key := keyOfNode(node)
	if key.id == "" {
		return
	}
	if g.batcher() == nil {
		return
	}
	g.peers.note(key, node, g.clock.Now())
}

// peerAge is the age from which a peer is refreshed: half the shorter of
// InstanceExists' and InstanceShutdown's TTLs (0: one of them is uncached).
func (g *gate) peerAge() time.Duration {
	return min(g.m.instanceExists.ttl, g.m.instanceShutdown.ttl) / 2
}

// withPeers appends to a batch's nodes the peers due for a refresh, up to
// size nodes in all.
func (g *gate) withPeers(nodes []*v1.Node, size int) []*v1.Node {
	if size <= len(nodes) || g.peerAge() <= 0 {
		return nodes
	}
	in := make(map[nodeKey]bool, len(nodes))
	for _, n := range nodes {
		in[keyOfNode(n)] = true
	}
	return append(nodes, g.peers.take(in, size-len(nodes), g.peerAge(), g.clock.Now())...)
}
