package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/internal/batcher"
	"github.com/cloudgate/cloudgate/limiter"
)

// batchCallTimeout bounds one batch call (its token wait is bounded by the
// family's waitTimeout instead), or one list call, token wait included. A
// variable for tests.
var batchCallTimeout = time.Minute

// nodeBatches is enforce mode's batching of node lookups: the path of an
// InstancesV2 read's miss from the caller's lookup (nodeFetch) to the
// caches its answer fills, in this file. It coalesces concurrent per-node
// lookups into BatchInstanceStatus calls (internal/batcher, which calls
// its Admit and Send): with batch.sendAtOnce (the default) a lookup
// is sent at once when no batch call is in flight and the read bucket has
// a token; lookups arriving while a call is in flight, or while the batch
// waits for its token (Admit), go together when it returns or the token
// comes. A batch is sent (Send) at the latest when it holds batch.maxSize
// nodes or batch.maxWait after its first node joined, and costs one
// token. Every caller gets exactly its own node's answer; a caller whose
// context ends leaves the batch, which goes on for the others. Answers
// fill the InstanceMetadata, InstanceExists and InstanceShutdown caches of
// every node in the batch (fill), and of the lifecycle peers riding along.
type nodeBatches struct {
	*batcher.Batcher[*v1.Node, InstanceStatus]
	e    *enforcer
	up   BatchInstances
	size int // the batches' largest size
}

// batchPlan is what the upstream's InstancesV2 offers, as configured:
// batches of up to size nodes through up (size 0: no batching), and list
// prefetch through lister (nil: none).
type batchPlan struct {
	up     BatchInstances
	size   int
	lister InstanceLister
}

// planBatching decides batching and list prefetch from the upstream's
// InstancesV2 as it is now. Until the upstream offers InstancesV2 the
// decision is left open (decided false) unless final: providers that build
// their clients in Initialize are looked at again then (final) and on
// first use. MaxBatchSize is read now: <= 0 means the upstream takes no
// batches.
func planBatching(upstream cloudprovider.Interface, cfg *Config, final bool) (p batchPlan, decided bool) {
	v2, ok := upstream.InstancesV2()
	if !ok || v2 == nil {
		return p, final
	}
	if l, ok := v2.(InstanceLister); ok && cfg.Batch.ListPrefetch {
		p.lister = l
	}
	if up, ok := v2.(BatchInstances); ok && *cfg.Batch.Enabled && up.MaxBatchSize() > 0 {
		p.up, p.size = up, min(cfg.Batch.MaxSize, up.MaxBatchSize())
	}
	return p, true
}

// buildBatcher sets up batching and list prefetch as planBatching decides,
// once it decides.
func (g *enforcer) buildBatcher(final bool) {
	g.batchMu.Lock()
	defer g.batchMu.Unlock()
	if g.batchDecided.Load() {
		return
	}
	p, decided := planBatching(g.upstream, g.cfg, final)
	if !decided {
		return
	}
	g.lister = p.lister
	if p.size > 0 {
		nb := &nodeBatches{e: g, up: p.up, size: p.size}
		b, err := batcher.New(batcher.Options{
			Name:         "BatchInstanceStatus",
			MaxTimeout:   g.cfg.Batch.MaxWait.Duration,
			MaxItems:     p.size,
			SendAtOnce:   *g.cfg.Batch.SendAtOnce,
			AdmitTimeout: g.admitTimeout(),
			Clock:        g.clock,
		}, batcher.Executor[*v1.Node, InstanceStatus](nb))
		if err != nil {
			// Not reached: Config.Validate checked maxSize and maxWait,
			// and MaxBatchSize is used only when positive.
			klog.ErrorS(err, "cloudgate: batching off")
		} else {
			nb.Batcher, g.batch = b, nb
		}
	}
	g.batchDecided.Store(true) // publishes g.batch and g.lister
}

// batcher returns the batching of node lookups, nil without batching.
func (g *enforcer) batcher() *nodeBatches {
	if !g.batchDecided.Load() {
		g.buildBatcher(false)
		if !g.batchDecided.Load() {
			return nil
		}
	}
	return g.batch
}

// nodeFetch is an InstancesV2 read's miss (enforceNodeRead): the node's
// lookup in a batch when the upstream batches (p.of picks the method's
// answer from the node's InstanceStatus), else a call of its own.
type nodeFetch[V any] struct {
	e    *enforcer
	p    *nodePath[V]
	up   cloudprovider.InstancesV2
	node *v1.Node
	key  nodeKey
	prio limiter.Priority
	call nodeCall[V]
}

func (f *nodeFetch[V]) fetch(ctx context.Context) (V, error) {
	if b := f.e.batcher(); b != nil && f.key.id != "" {
		// Lookups of one node share a slot, the batch at the priority of
		// its most urgent lookup: a critical lookup never rides a
		// background one.
		st, err := b.Add(ctx, f.key.String(), int(f.prio), f.node)
		if err != nil {
			var zero V
			return zero, err
		}
		// Callers that joined one batch slot share st, and each must get a
		// value of its own: the cache's copies, or without one p.clone.
		v, err := f.p.of(st)
		if f.p.c == nil && f.p.clone != nil {
			v = f.p.clone(v)
		}
		return v, err
	}
	return invoke(ctx, f.e, f.p.m, f.prio, func(ctx context.Context) (V, error) {
		return f.call(f.up, ctx, f.node)
	})
}

// existsOf, shutdownOf and metadataOf answer each InstancesV2 method from a
// node's batched InstanceStatus as the upstream's own method would.
func existsOf(st InstanceStatus) (bool, error) {
	switch {
	case errors.Is(st.Err, cloudprovider.InstanceNotFound):
		return false, nil
	case st.Err != nil:
		return false, st.Err
	}
	return !st.Deleted, nil
}

func shutdownOf(st InstanceStatus) (bool, error) { return st.Shutdown, st.Err }

// metadataOf does not copy: the cache does (see nodeFetch).
func metadataOf(st InstanceStatus) (*cloudprovider.InstanceMetadata, error) {
	if st.Err == nil && st.MetadataErr != nil {
		return nil, st.MetadataErr
	}
	return st.Metadata, st.Err
}

// String names a node's lookups: its key in the instance caches (their
// KeyString) and its slot in a batch.
func (k nodeKey) String() string {
	if k.byProviderID {
		return "providerID:" + k.id
	}
	return "name:" + k.id
}

// Admit takes the token of a batch's first call while the batch is
// still open (internal/batcher's Admit): lookups arriving during the wait
// join it, so one token answers every lookup that waited for it. The wait
// is at the batch's priority; the batcher ends it (ctx) when a more urgent
// batch takes it over, and when the batch's whole wait, across such
// takeovers, reaches admitTimeout (an *api.RetryError, as a call's own
// wait gives). Only a closed breaker lets a batch take its token first: an
// open one would refuse the call, and a half-open one may (its probes in
// flight), so the batch goes on to Send without a token, where the breaker
// is asked first, as for any other call.
func (b *nodeBatches) Admit(ctx context.Context, prio int, _ []*v1.Node) (bool, error) {
	g := b.e
	m := g.m.batchInstanceStatus
	opened := m.breaker.Opened() // before the check: an opening in between ends the wait at once
	if m.breaker.State() != limiter.StateClosed {
		return false, nil
	}
	if err := g.wait(ctx, m, limiter.Priority(prio), opened, 0); err != nil {
		if context.Cause(ctx) == batcher.ErrAdmitTimeout {
			return false, noToken(m, g.admitTimeout())
		}
		return false, err
	}
	return true, nil
}

// admitTimeout bounds a batch's token wait in all (batcher.Options): the
// read family's waitTimeout, or with none batchCallTimeout, as no caller's
// context can bound a batch's.
func (g *enforcer) admitTimeout() time.Duration {
	if t := g.m.batchInstanceStatus.waitTimeout; t > 0 {
		return t
	}
	return batchCallTimeout
}

// Send answers one batch of nodes with a BatchInstanceStatus call
// (bisected on failure, see isolate); each call that answers fills the
// instance caches. f.Admitted: the first call's token is taken already
// (Admit). It runs on a goroutine of the batcher's own, with a context no
// caller can cancel (unused: see below).
func (b *nodeBatches) Send(_ context.Context, reqs []*v1.Node, f batcher.Flush, answer func(int, InstanceStatus)) (results []InstanceStatus) {
	g := b.e
	nodes := slices.Clone(reqs) // peers are appended: reqs is the batcher's
	prio := limiter.Priority(f.Priority)
	g.rec.Batch(len(nodes), f.Reason)
	switch {
	case errors.Is(f.Err, batcher.ErrAdmitTimeout): // it waited behind a more urgent batch
		return failAll(len(nodes), noToken(g.m.batchInstanceStatus, g.admitTimeout()))
	case f.Err != nil: // no token within the wait: nothing was sent
		return failAll(len(nodes), f.Err)
	}
	// The lifecycle controller's other NotReady Nodes ride along (see
	// lifecyclePeers); their answers fill the caches, no caller waits on them.
	if nodes = g.withPeers(nodes, b.size); len(nodes) > len(reqs) {
		callers := len(reqs)
		if toCaller := answer; toCaller != nil {
			answer = func(i int, st InstanceStatus) {
				if i < callers {
					toCaller(i, st)
				}
			}
		}
		defer func() { results = results[:callers] }()
	}
	// A batch outlives the callers that left it, so it cannot use their
	// contexts: its own timeout counts as a hung cloud (errCallTimeout). It
	// bounds each call, not the token waits, which the family's waitTimeout
	// bounds and answers with an *api.RetryError as for a call of its own
	// (with no waitTimeout: the first token's wait by admitTimeout, see
	// Admit, then the bisection's calls with their waits by this context).
	ctx, cancel := g.withCallTimeout(context.Background(), batchCallTimeout, errCallTimeout)
	if g.m.batchInstanceStatus.waitTimeout > 0 {
		cancel()
		ctx, cancel = context.WithCancel(context.Background())
	}
	defer cancel()
	bc := batchCall{g: g, up: b.up, answer: answer}
	var err error
	results, err = bc.call(ctx, nodes, prio, 0, admissionOf(f.Admitted))
	if err != nil {
		results = bc.isolate(ctx, nodes, prio, err, 0)
	}
	return results
}

// batchCall sends BatchInstanceStatus calls for one batch.
type batchCall struct {
	g  *enforcer
	up BatchInstances
	// answer hands the batch's request i its answer at once (nil: at the
	// end), so a caller does not wait, holding an aging answer, while the
	// rest of a failed batch is bisected.
	answer func(i int, st InstanceStatus)
}

// call sends one BatchInstanceStatus call and, when it answers, fills the
// instance caches with its nodes' answers at once: an answer's age runs from
// when the cloud gave it, even while bisection goes on with other nodes;
// off is the index of nodes[0] in the batch, for answer; a: whether its
// token is taken already (Admit).
func (b batchCall) call(ctx context.Context, nodes []*v1.Node, prio limiter.Priority, off int, a admission) ([]InstanceStatus, error) {
	marks := b.g.fillMarks() // before the call: see fill
	c, err := b.g.begin(ctx, b.g.m.batchInstanceStatus, prio, a)
	if err != nil {
		return nil, err
	}
	callCtx, cancel := b.g.withCallTimeout(ctx, batchCallTimeout, errCallTimeout)
	results, err := b.up.BatchInstanceStatus(withCall(callCtx, b.g.m.batchInstanceStatus, prio), nodes)
	cancel()
	err = c.end(ctx, err)
	if err == nil && len(results) != len(nodes) {
		err = fmt.Errorf("cloudgate: upstream BatchInstanceStatus returned %d results for %d nodes", len(results), len(nodes))
	}
	if err == nil {
		// Every answer is in the caches before any caller has its own: a
		// caller handed its answer goes on at once (the lifecycle
		// controller to its next NotReady Node), and a Node of this batch
		// it asks about next must hit, not miss and send a batch of its own.
		for i, node := range nodes {
			results[i].Err = bareNotFound(results[i].Err)
			key := keyOfNode(node)
			b.g.fill(key, results[i], marks)
			if pk, ok := providerIDKey(key, results[i]); ok {
				b.g.fill(pk, results[i], marks)
			}
		}
		if b.answer != nil {
			for i := range nodes {
				b.answer(off+i, results[i])
			}
		}
	}
	return results, err
}

// isolate answers nodes after their batch failed as a whole with err: a
// node the cloud rejects (a malformed ID) must not fail the others. It
// bisects — two calls per level — and stops as soon as both halves fail
// (the cloud is failing, not a node), so at most 2*ceil(log2(len(nodes)))
// more calls. It does not split at all when err says the cloud is throttling,
// the breaker is open, a wait ran out or the call hung: more calls would
// not help.
func (b batchCall) isolate(ctx context.Context, nodes []*v1.Node, prio limiter.Priority, err error, off int) []InstanceStatus {
	if len(nodes) == 1 || !b.isolatable(ctx, err) {
		return failAll(len(nodes), err)
	}
	h := len(nodes) / 2
	left, lerr := b.call(ctx, nodes[:h], prio, off, awaitToken)
	right, rerr := b.call(ctx, nodes[h:], prio, off+h, awaitToken)
	switch {
	case lerr != nil && rerr != nil:
		return append(failAll(h, lerr), failAll(len(nodes)-h, rerr)...)
	case lerr != nil:
		left = b.isolate(ctx, nodes[:h], prio, lerr, off)
	case rerr != nil:
		right = b.isolate(ctx, nodes[h:], prio, rerr, off+h)
	}
	return append(left, right...)
}

func (b batchCall) isolatable(ctx context.Context, err error) bool {
	var retry *cloudproviderapi.RetryError
	if ctx.Err() != nil || limiter.IsOpen(err) || errors.As(err, &retry) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	throttled, _ := b.g.throttle.Classify(err)
	return !throttled
}

func failAll(n int, err error) []InstanceStatus {
	out := make([]InstanceStatus, n)
	for i := range out {
		out[i].Err = err
	}
	return out
}

// fillMarks are the instance caches' marks (cache.Mark) and the not-found
// guard's (notFoundGuard.mark) taken before a batch or list call is sent.
type fillMarks struct {
	exists, shutdown, metadata cache.Mark
	guard                      uint64
	// maxFresh bounds how long the answers are fresh (0: their TTLs): a
	// list page's answers live at most listInterval × 1.1 from the page's
	// own fetch.
	maxFresh time.Duration
	// listed: the answers are a list page's, whose "terminated" records
	// the list marks for the guard once it has ended (see prefetch).
	listed bool
	// at is when the answers were read, if they are stored later (a list's
	// answers held until its end); zero: now.
	at time.Time
}

func (g *enforcer) fillMarks() fillMarks {
	return fillMarks{exists: mark(g.inst.exists.c), shutdown: mark(g.inst.shutdown.c), metadata: mark(g.inst.metadata.c), guard: g.nf.mark()}
}

// mark, putSince and putNegativeSince fill a cache that may be off (nil)
// from a batch or list call (cache.Mark).
func mark[K comparable, V any](c *cache.Cache[K, V]) cache.Mark {
	if c == nil {
		return cache.Mark{}
	}
	return c.Mark()
}

func putSince[K comparable, V any](c *cache.Cache[K, V], key K, v V, m cache.Mark, maxFresh time.Duration, at time.Time) {
	if c != nil {
		c.PutSinceForAt(key, v, m, maxFresh, at)
	}
}

func putNegativeSince[K comparable, V any](c *cache.Cache[K, V], key K, err error, m cache.Mark, at time.Time) {
	if c != nil {
		c.PutNegativeSinceAt(key, err, m, at)
	}
}

// fill stores one node's batch or list answer in the instance caches.
// "Does not exist" in any form — InstanceNotFound, or an instance the cloud
// still describes as terminated (Deleted) — is a negative answer: it lives
// negativeTTL and is never served stale. marks were taken before the call
// was sent: an answer read before an invalidation of its key is not stored
// after it (as a fetch of the cache's own is not), so the not-found guard's
// re-read, which invalidates and asks again, can never be answered by a
// batch that was on its way before it. Nor does an "exists" answer to a
// call sent before the guard began holding the key's "does not exist" refute
// that hold or replace the held answer: it may have been read before the
// instance went (the guard's own re-read decides).
func (g *enforcer) fill(key nodeKey, st InstanceStatus, marks fillMarks) {
	switch {
	case errors.Is(st.Err, cloudprovider.InstanceNotFound):
		putNegativeSince(g.inst.metadata.c, key, cloudprovider.InstanceNotFound, marks.metadata, marks.at)
		putNegativeSince(g.inst.shutdown.c, key, cloudprovider.InstanceNotFound, marks.shutdown, marks.at)
		putSince(g.inst.exists.c, key, false, marks.exists, 0, marks.at) // a negative value
	case st.Err != nil:
		// A per-node failure is not an answer: nothing to remember.
	default:
		if st.Metadata != nil {
			putSince(g.inst.metadata.c, key, st.Metadata, marks.metadata, marks.maxFresh, marks.at)
		}
		putSince(g.inst.shutdown.c, key, st.Shutdown, marks.shutdown, marks.maxFresh, marks.at)
		switch {
		case st.Deleted:
			putSince(g.inst.exists.c, key, false, marks.exists, 0, marks.at)
			if !marks.listed {
				g.nf.markDeleted(key, marks.guard)
			}
		case g.nf.markExists(key, marks.guard):
			putSince(g.inst.exists.c, key, true, marks.exists, marks.maxFresh, marks.at)
		}
	}
}

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
func (g *enforcer) notePeer(node *v1.Node) {
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

// has reports whether key is a peer.
func (p *lifecyclePeers) has(key nodeKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.nodes[key]
	return ok
}

// adopt makes node a peer, refreshed now (the caller puts it in the batch
// being sent), unless it is one already.
func (p *lifecyclePeers) adopt(key nodeKey, node *v1.Node, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.nodes[key]; ok {
		return false
	}
	if p.nodes == nil {
		p.nodes = map[nodeKey]*peer{}
	}
	p.nodes[key] = &peer{node: node, checked: now, refreshed: now}
	return true
}

// withPeers appends to a batch's nodes the peers due for a refresh, then
// the Nodes of the node informer about to be looked up (informerRiders), up
// to size nodes in all.
func (g *enforcer) withPeers(nodes []*v1.Node, size int) []*v1.Node {
	if size <= len(nodes) {
		return nodes
	}
	in := make(map[nodeKey]bool, len(nodes))
	for _, n := range nodes {
		in[keyOfNode(n)] = true
	}
	now := g.clock.Now()
	if g.peerAge() > 0 {
		due := g.peers.take(in, size-len(nodes), g.peerAge(), now)
		for _, n := range due {
			in[keyOfNode(n)] = true
		}
		nodes = append(nodes, due...)
	}
	if ix := g.nodes.Load(); ix != nil && size > len(nodes) {
		nodes = g.informerRiders(ix, nodes, in, size, now)
	}
	return nodes
}

// Informer riders. Two kinds of lookup come in bursts, one Node after the
// other, and each would cost a call of its own:
//
//   - Nodes joining together (a node group scaling up): the cloud node
//     controller initialises them one at a time (one worker by default),
//     each by InstanceMetadata of a Node without a provider ID (a lookup
//     by node name). A batch call that carries one such Node also carries
//     the other Nodes still tainted uninitialized whose metadata is not
//     cached: the worker's next Node hits.
//   - Nodes that just went NotReady (instances terminated together): the
//     lifecycle controller checks them one after the other. A batch call
//     carries every NotReady Node that is not yet a lifecycle peer, and
//     makes it one (refreshed now): the next checks hit, and from then on
//     it is refreshed with the other peers.
//
// Their answers fill the caches as any batch answer does (fill: "does not
// exist" is negative and reaches the lifecycle controller only through the
// not-found guard); no caller waits on them, and no answer is served older
// than before (a rider's answer is fresher, not older).

// informerRiders appends to nodes (whose keys are in) the node informer's
// Nodes about to be looked up, up to size nodes in all.
func (g *enforcer) informerRiders(ix *nodeIndex, nodes []*v1.Node, in map[nodeKey]bool, size int, now time.Time) []*v1.Node {
	metadata := g.inst.metadata.c
	joining := metadata != nil && slices.ContainsFunc(nodes, uninitialised)
	lifecycle := g.peerAge() > 0
	if !joining && !lifecycle {
		return nodes
	}
	// The candidates in key order, so that which ones ride when there are
	// more than the batch holds does not follow the informer's map order.
	var riders []*v1.Node
	for _, obj := range ix.informer.GetStore().List() {
		n, ok := obj.(*v1.Node)
		if !ok || n.DeletionTimestamp != nil {
			continue
		}
		key := keyOfNode(n)
		if key.id == "" || in[key] {
			continue
		}
		if (joining && uninitialised(n) && !metadata.Holds(key)) || (lifecycle && !nodeReady(n) && !g.peers.has(key)) {
			riders = append(riders, n)
		}
	}
	slices.SortFunc(riders, func(a, b *v1.Node) int { return strings.Compare(keyOfNode(a).String(), keyOfNode(b).String()) })
	for _, n := range riders {
		if len(nodes) >= size {
			break
		}
		key := keyOfNode(n)
		if lifecycle && !nodeReady(n) {
			g.peers.adopt(key, n, now)
		}
		in[key] = true
		nodes = append(nodes, n)
	}
	return nodes
}

// uninitialised: the Node still carries the cloud provider's uninitialized
// taint (the cloud node controller has not initialised it).
func uninitialised(n *v1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == cloudproviderapi.TaintExternalCloudProvider })
}

// nodeReady: the Node's Ready condition is True (the lifecycle controller
// checks every other Node).
func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// providerIDKey is the provider-ID key a by-name answer also answers: a
// live instance's metadata names its provider ID, which the cloud node
// controller then sets on the Node, so the Node's next lookups (by
// provider ID: the status loop's, the lifecycle controller's) hit instead
// of waiting for the next list. A terminated or missing instance's answer
// is kept to its own key.
func providerIDKey(key nodeKey, st InstanceStatus) (nodeKey, bool) {
	if key.byProviderID || st.Err != nil || st.Deleted || st.Metadata == nil || st.Metadata.ProviderID == "" {
		return nodeKey{}, false
	}
	return nodeKey{byProviderID: true, id: st.Metadata.ProviderID}, true
}
