package provider

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/internal/recorder"
)

// InstancesV2: the wrapper, its read paths keyed by the node's instance,
// and the not-found guard that the "does not exist" answers go through
// (InstanceExists', and the v1 InstanceExistsByProviderID's) and that batch
// and list fills consult.

// instancesV2 wraps the upstream's InstancesV2. In enforce mode a miss
// joins a batch (one upstream call for many nodes, batching.go) when
// batching is on, instead of a call of its own; a batch answer fills all
// three caches for every node in it.
type instancesV2 struct {
	g  *gate
	r  runner
	up cloudprovider.InstancesV2
}

var _ cloudprovider.InstancesV2 = (*instancesV2)(nil)

func (i *instancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	i.r.notePeer(node) // only the lifecycle controller asks (NotReady Nodes): lifecyclePeers
	p := i.g.inst.exists
	exists, err := p.read(ctx, i.up, node, cloudprovider.InstancesV2.InstanceExists)
	nf := i.r.guard()
	if exists || err != nil || nf == nil {
		if exists {
			nf.refute(keyOfNode(node)) // an "exists" answer ends a hold
		}
		return exists, err
	}
	key := keyOfNode(node)
	return nf.check(key, node.CreationTimestamp.Time, exists, err, func() (bool, error) {
		invalidate(p.c, key)
		return p.read(ctx, i.up, node, cloudprovider.InstancesV2.InstanceExists)
	})
}

func (i *instancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	i.r.notePeer(node)
	return i.g.inst.shutdown.read(ctx, i.up, node, cloudprovider.InstancesV2.InstanceShutdown)
}

func (i *instancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return i.g.inst.metadata.read(ctx, i.up, node, cloudprovider.InstancesV2.InstanceMetadata)
}

// nodeKey identifies a node's instance: by provider ID when the node has
// one, else by node name. The flag keeps a provider ID and a node name that
// happen to be equal strings apart.
type nodeKey struct {
	byProviderID bool
	id           string
}

func keyOfNode(node *v1.Node) nodeKey {
	if node.Spec.ProviderID != "" {
		return nodeKey{byProviderID: true, id: node.Spec.ProviderID}
	}
	return nodeKey{id: node.Name}
}

// nodePath is the read path of an InstancesV2 read, keyed by the node's
// instance: of answers it from a batched InstanceStatus.
type nodePath[V any] struct {
	m     *method
	c     *cache.Cache[nodeKey, V]
	of    func(InstanceStatus) (V, error)
	clone func(V) V // the cache's copy (nil: none needed)
	run   nodeRun[V]
}

// nodeRun is a mode's InstancesV2 read; call is the upstream's own method,
// a static function, so that a cache hit allocates nothing.
type nodeRun[V any] interface {
	nodeRead(ctx context.Context, p *nodePath[V], up cloudprovider.InstancesV2, node *v1.Node, key nodeKey, call nodeCall[V]) (V, error)
}

type nodeCall[V any] func(cloudprovider.InstancesV2, context.Context, *v1.Node) (V, error)

func (p *nodePath[V]) read(ctx context.Context, up cloudprovider.InstancesV2, node *v1.Node, call nodeCall[V]) (V, error) {
	return p.run.nodeRead(ctx, p, up, node, keyOfNode(node), call)
}

// buildV2 builds the InstancesV2 reads' paths.
func (c *instanceCaches) buildV2(b pathBuilder) {
	type nk = cacheOpts[nodeKey, bool]
	c.exists = newNodePath(b, "InstanceExists", existsOf, nk{keyString: nodeKey.String, negativeValue: notExists, shortLived: nodeByName})
	c.shutdown = newNodePath(b, "InstanceShutdown", shutdownOf, nk{keyString: nodeKey.String, shortLived: nodeByName})
	c.metadata = newNodePath(b, "InstanceMetadata", metadataOf, cacheOpts[nodeKey, *cloudprovider.InstanceMetadata]{clone: cloneMetadata, keyString: nodeKey.String, shortLived: nodeByName})
}

// notFoundGuard holds back a single "instance does not exist" answer.
//
// The cloud node lifecycle controller deletes a NotReady Node as soon as
// InstanceExists (or InstanceExistsByProviderID) answers false once; an
// eventually consistent cloud (EC2's DescribeInstances) sometimes answers
// so for an instance that exists. The guard answers such a false with a
// retryable *api.RetryError — the lifecycle controller logs an error and
// keeps the Node — and passes it on only when a second answer from the
// upstream, given at least confirmAfter after the first, says the same and
// the Node is older than gracePeriod. An instance the cloud describes as
// terminated (InstanceStatus.Deleted, from a batch or list answer) is
// definitive and passes at once.
//
// "A second upstream answer": a held answer stays cached (a negative
// entry, negativeTTL), so the lifecycle checks in between cost no upstream
// call — with batching on, each would wait for a batch, and the lifecycle
// controller checks its NotReady nodes one at a time. Once the first hold
// is confirmAfter old (and the Node older than gracePeriod), the next false
// is not taken as it is (it may be a cached answer given earlier): the
// guard drops the cached answer and asks again at once (reread), and
// passes the false only if that fresh answer — given at least confirmAfter
// after the first — agrees. So the Node of a removed instance goes at the
// first lifecycle check after confirmAfter, whatever the time between
// checks. A list refresh that omits an
// instance fills nothing (the read then goes upstream), and one that
// describes it fills one answer: either way one answer, not two.
type notFoundGuard struct {
	grace, confirmAfter time.Duration
	clock               clock.WithTickerAndDelayedExecution
	rec                 *recorder.Recorder

	// nodes finds the Node of a v1 call (which carries none) for the
	// grace period; nil until the CCM hands over its informers (nodes.go).
	nodes atomic.Pointer[nodeIndex]

	mu      sync.Mutex
	pending map[nodeKey]*heldNotFound
	deleted map[nodeKey]time.Time // described as terminated, when
	// seq counts the guard's events (holds begun, "exists" answers
	// recorded), see mark; lastExists is each key's latest "exists" answer
	// (its seq, and when), so that a "terminated" answer to a call sent
	// before it is not taken (markDeleted); forgotBelow: entries with a seq
	// below it may have been dropped (forget).
	seq         uint64
	lastExists  map[nodeKey]seenAt
	forgotBelow uint64
	// answerAge is how old a "does not exist" may be when it is answered
	// (negativeTTL: a cached one). One that begins a hold that soon after
	// an "exists" answer may have been given before it (by another
	// method's cache: InstanceID's, after a batch said the instance
	// exists), so it is no first answer since the instance last existed:
	// the hold is contested and asks again at once.
	answerAge time.Duration
}

type seenAt struct {
	seq uint64
	at  time.Time
}

// heldNotFound is one instance whose "does not exist" is being held.
type heldNotFound struct {
	first, last time.Time // first and latest hold
	seq         uint64    // the guard's seq when it began (mark)
	// contested: an "exists" answer to a call sent before the hold began
	// came in after it (markExists). Which of the two the cloud gave last
	// is unknown: if the "exists" was, first is no "does not exist" since
	// the instance last existed (a re-created one), and confirming on it
	// would pass the next "does not exist" on one answer. The next check
	// asks again and holds from that fresh answer (hold, check).
	contested bool
}

// mark returns the guard's moment now (0 without a guard): a batch or list
// call takes it before it is sent; its "exists" answers refute only the
// holds begun before it (markExists), and its "terminated" answers count
// only if no "exists" answer came after it (markDeleted).
func (n *notFoundGuard) mark() uint64 {
	if n == nil {
		return 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seq
}

// beginLocked starts holding key's "does not exist" at now. n.mu is held.
func (n *notFoundGuard) beginLocked(key nodeKey, now time.Time) *heldNotFound {
	n.seq++
	p := &heldNotFound{first: now, last: now, seq: n.seq}
	n.pending[key] = p
	return p
}

// guardPendingLimit bounds the guard's memory: beyond it, holds older than
// forgetAfter are dropped (their Nodes were deleted some other way).
const guardPendingLimit = 10000

// answerAge is cache.negativeTTL: how old a cached "does not exist" may be.
func newNotFoundGuard(cfg NotFoundGuardConfig, answerAge time.Duration, clk clock.WithTickerAndDelayedExecution, rec *recorder.Recorder) *notFoundGuard {
	if !*cfg.Enabled {
		return nil
	}
	return &notFoundGuard{
		grace: cfg.GracePeriod.Duration, confirmAfter: cfg.ConfirmAfter.Duration,
		answerAge: answerAge, clock: clk, rec: rec,
		pending: map[nodeKey]*heldNotFound{}, deleted: map[nodeKey]time.Time{},
		lastExists: map[nodeKey]seenAt{},
	}
}

// markDeleted records that the cloud described key's instance as
// terminated, in an answer to a call sent at mark since: its next "does not
// exist" is definitive — unless an "exists" answer for key came after since
// (a name-based provider ID re-created meanwhile, a list that ended long
// after its page was read), or may have and was forgotten: that stale
// "terminated" is dropped, and a "does not exist" is held as any other.
func (n *notFoundGuard) markDeleted(key nodeKey, since uint64) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if since < n.forgotBelow || n.lastExists[key].seq > since {
		return
	}
	n.deleted[key] = n.clock.Now()
	n.forget()
}

// existsLocked records an "exists" answer for key: a "terminated" answer
// to a call sent before it no longer counts (markDeleted). n.mu is held.
func (n *notFoundGuard) existsLocked(key nodeKey) {
	n.seq++
	n.lastExists[key] = seenAt{seq: n.seq, at: n.clock.Now()}
	delete(n.deleted, key)
}

// markExists records that the cloud described key's instance as existing,
// in a batch or list answer to a call sent at mark since: a held "does not
// exist" is refuted. A hold begun after the call was sent is not: that
// "does not exist" may be the newer answer (a list page read before the
// instance went and received after), and markExists reports false — the
// caller must not cache this answer over the held one; the guard's re-read
// decides. Nor may the hold confirm on its first answer, which may be the
// older one (the instance re-created in between): the hold is contested,
// and starts afresh from the next check's re-read.
func (n *notFoundGuard) markExists(key nodeKey, since uint64) bool {
	if n == nil {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.pending[key]; ok && p.seq > since {
		p.contested = true
		return false
	}
	n.existsLocked(key)
	if _, ok := n.pending[key]; ok {
		delete(n.pending, key)
		n.rec.NotFoundConfirmation("refuted")
	}
	return true
}

// contest records an "exists" answer for key that is neither cached nor
// served (a list's answer by node name that the list may yet overrule, or
// never fills: a tie, a later page failing). Whether it is newer than a
// held "does not exist" is unknown, so it refutes nothing; the hold is
// contested instead (it starts afresh from the next check's re-read), and
// a "terminated" answer to a call sent before it no longer counts. It can
// only make the guard hold longer.
func (n *notFoundGuard) contest(key nodeKey) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.existsLocked(key)
	if p, ok := n.pending[key]; ok {
		p.contested = true
	}
}

// check passes on an exists answer, or holds a false one (see
// notFoundGuard). created is the Node's creation time (zero: unknown; the
// v1 calls carry no Node, and find it in the node informer, see
// notFoundGuard.nodeCreated); reread drops the key's cached answer and asks again
// (upstream, or in a batch); it is called without the guard's lock.
func (n *notFoundGuard) check(key nodeKey, created time.Time, exists bool, err error, reread func() (bool, error)) (bool, error) {
	if n == nil || err != nil || key.id == "" {
		return exists, err
	}
	if exists {
		n.mu.Lock()
		n.refuteLocked(key)
		n.mu.Unlock()
		return true, nil
	}
	pass, due, held := n.hold(key, created)
	switch {
	case pass:
		return false, nil
	case due == nil:
		return false, held
	}
	exists, err = reread()
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case err != nil:
		return false, err // no answer: the hold stays
	case exists:
		n.refuteLocked(key)
		return true, nil
	}
	p, ok := n.pending[key]
	switch {
	case !ok || p.contested:
		// An "exists" answer came in meanwhile (a batch or list fill), or
		// one that may be newer than the hold's first answer: the two
		// answers disagree, so hold this one as a first.
		n.beginLocked(key, n.clock.Now())
		return false, cloudproviderapi.NewRetryError(fmt.Sprintf(
			"cloudgate: instance %q reported missing after it was described as existing; held (notFoundGuard)", key.id), max(n.confirmAfter, time.Second))
	case p != due:
		// Another check's re-read began a hold afresh while this one
		// asked (the due hold was contested, or refuted and held again):
		// this answer is no second one confirmAfter after that hold's
		// first, however old the hold this check found due.
		now := n.clock.Now()
		p.last = now
		return false, n.heldError(key, max(n.confirmAfter-now.Sub(p.first), time.Second))
	}
	delete(n.pending, key)
	delete(n.deleted, key)
	n.rec.NotFoundConfirmation("confirmed")
	return false, nil
}

// refute records an "exists" answer for key (InstanceExists*,
// InstanceID): a held "does not exist" is refuted.
func (n *notFoundGuard) refute(key nodeKey) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.refuteLocked(key)
	n.mu.Unlock()
}

// refuteLocked records an "exists" answer: a held "does not exist" is
// refuted. n.mu is held.
func (n *notFoundGuard) refuteLocked(key nodeKey) {
	n.existsLocked(key)
	if _, ok := n.pending[key]; ok {
		delete(n.pending, key)
		n.rec.NotFoundConfirmation("refuted")
	}
}

// hold decides about a "does not exist" answer: pass it on (the instance
// was described as terminated), confirm it with a fresh answer (due: the
// hold that the fresh answer may confirm, whose first is confirmAfter old
// and the Node past its grace period, or that was contested), or hold it
// (the *api.RetryError to return).
func (n *notFoundGuard) hold(key nodeKey, created time.Time) (pass bool, due *heldNotFound, held error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.deleted[key]; ok {
		delete(n.deleted, key)
		delete(n.pending, key)
		return true, nil, nil
	}
	now := n.clock.Now()
	// A hold is never restarted for age: however long ago the last check
	// was (the lifecycle controller revisits a Node every 45 s or 2 min
	// when hundreds are NotReady, as in a zone outage), the next check is
	// due and its fresh answer decides. Any "exists" answer in between
	// (InstanceExists*, InstanceID, a batch or list answer) refuted the
	// hold already, or contested it (markExists: the hold starts afresh),
	// so an old hold means every answer since said "does not exist", and a
	// confirmation still needs a fresh one that agrees.
	p, ok := n.pending[key]
	if !ok {
		p = n.beginLocked(key, now)
		n.forget()
		if e, seen := n.lastExists[key]; seen && now.Sub(e.at) < n.answerAge {
			p.contested = true
		}
	}
	if p.contested {
		// This answer may be a cached one older than the "exists" that
		// contested the hold: a fresh one is the hold's first (check).
		p.last = now
		return false, p, nil
	}
	young := !created.IsZero() && now.Sub(created) < n.grace
	if ok && !young && now.Sub(p.first) >= n.confirmAfter {
		p.last = now
		return false, p, nil
	}
	p.last = now
	wait := n.confirmAfter - now.Sub(p.first)
	if young {
		wait = max(wait, n.grace-now.Sub(created))
	}
	return false, nil, n.heldError(key, max(wait, time.Second))
}

// heldError is a held "does not exist": retry after wait.
func (n *notFoundGuard) heldError(key nodeKey, wait time.Duration) error {
	return cloudproviderapi.NewRetryError(fmt.Sprintf(
		"cloudgate: instance %q reported missing; held until a second answer at least %s later confirms it (notFoundGuard)",
		key.id, n.confirmAfter), wait)
}

// forget drops holds and terminations nobody asked about for long, once
// there are many. n.mu is held.
func (n *notFoundGuard) forget() {
	if len(n.pending)+len(n.deleted)+len(n.lastExists) <= guardPendingLimit {
		return
	}
	cut := n.clock.Now().Add(-10 * (n.confirmAfter + n.grace + time.Minute))
	for k, e := range n.lastExists {
		if e.at.Before(cut) {
			delete(n.lastExists, k)
			n.forgotBelow = max(n.forgotBelow, e.seq+1)
		}
	}
	for k, p := range n.pending {
		if p.last.Before(cut) {
			delete(n.pending, k)
		}
	}
	for k, t := range n.deleted {
		if t.Before(cut) {
			delete(n.deleted, k)
		}
	}
}
