package provider

import (
	"context"
	"errors"
	"fmt"
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

// nodeBatcher coalesces concurrent per-node lookups into BatchInstanceStatus
// calls (internal/batcher): with batch.sendAtOnce (the default) a lookup is
// sent at once when no batch call is in flight and the read bucket has a
// token; lookups arriving while a call is in flight, or while the batch
// waits for its token, go together when it returns or the token comes. A
// batch is sent at the latest when it holds batch.maxSize nodes or
// batch.maxWait after its first node joined, and costs one token. Every caller gets exactly its own node's
// answer; a caller whose context ends leaves the batch, which goes on for
// the others. Answers fill the InstanceMetadata, InstanceExists and
// InstanceShutdown caches of every node in the batch.
type nodeBatcher = batcher.Batcher[nodeRequest, InstanceStatus]

// nodeRequest is one node's lookup in a batch, at the priority its caller
// asked; the batch goes at the highest priority among them.
type nodeRequest struct {
	node *v1.Node
	prio limiter.Priority
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
		up := p.up
		b, err := batcher.New(batcher.Options[nodeRequest, InstanceStatus]{
			Name:          "BatchInstanceStatus",
			MaxTimeout:    g.cfg.Batch.MaxWait.Duration,
			MaxItems:      p.size,
			SendAtOnce:    *g.cfg.Batch.SendAtOnce,
			Admit:         g.admitBatch,
			Priority:      func(r nodeRequest) int { return int(r.prio) }, // see admitBatch
			RequestHasher: func(r nodeRequest) string { return keyOfNode(r.node).String() },
			// A caller joining another's lookup of the same node raises
			// its priority: a critical lookup never rides a background one.
			Merge: func(r, joining nodeRequest) nodeRequest { r.prio = min(r.prio, joining.prio); return r },
			BatchExecutor: func(_ context.Context, reqs []nodeRequest, f batcher.Flush, answer func(int, InstanceStatus)) []InstanceStatus {
				return g.sendBatch(up, reqs, f, answer)
			},
			Clock: g.clock,
		})
		if err != nil {
			// Not reached: Config.Validate checked maxSize and maxWait,
			// and MaxBatchSize is used only when positive.
			klog.ErrorS(err, "cloudgate: batching off")
		} else {
			g.batch, g.batchSize = b, p.size
		}
	}
	g.batchDecided.Store(true) // publishes g.batch and g.lister
}

// batcher returns the batcher, nil without batching.
func (g *enforcer) batcher() *nodeBatcher {
	if !g.batchDecided.Load() {
		g.buildBatcher(false)
		if !g.batchDecided.Load() {
			return nil
		}
	}
	return g.batch
}

// admitBatch takes the token of a batch's first call while the batch is
// still open (internal/batcher's Admit): lookups arriving during the wait
// join it, so one token answers every lookup that waited for it. The wait
// is at the batch's priority, bounded by the family's waitTimeout (an
// *api.RetryError), or with none by batchCallTimeout; the batcher ends it
// (ctx) when a more urgent batch takes it over. Only a closed breaker lets
// a batch take its token first: an open one would refuse the call, and a
// half-open one may (its probes in flight), so the batch goes on to
// sendBatch without a token, where the breaker is asked first, as for any
// other call.
func (g *enforcer) admitBatch(ctx context.Context, reqs []nodeRequest) (bool, error) {
	m := g.m.batchInstanceStatus
	opened := m.breaker.Opened() // before the check: an opening in between ends the wait at once
	if m.breaker.State() != limiter.StateClosed {
		return false, nil
	}
	cancel := func() {}
	if m.waitTimeout <= 0 {
		ctx, cancel = g.withCallTimeout(ctx, batchCallTimeout, errCallTimeout)
	}
	defer cancel()
	if err := g.wait(ctx, m, batchPriority(reqs), opened); err != nil {
		return false, err
	}
	return true, nil
}

// batchPriority is the highest priority among a batch's lookups.
func batchPriority(reqs []nodeRequest) limiter.Priority {
	prio := reqs[0].prio
	for _, r := range reqs {
		prio = min(prio, r.prio)
	}
	return prio
}

// sendBatch answers one batch of nodes with a BatchInstanceStatus call
// (bisected on failure, see isolate); each call that answers fills the
// instance caches. f.Admitted: the first call's token is taken already.
func (g *enforcer) sendBatch(up BatchInstances, reqs []nodeRequest, f batcher.Flush, answer func(int, InstanceStatus)) (results []InstanceStatus) {
	nodes := make([]*v1.Node, len(reqs))
	for i, r := range reqs {
		nodes[i] = r.node
	}
	prio := batchPriority(reqs)
	g.rec.Batch(len(nodes), f.Reason)
	if f.Err != nil { // no token within the wait: nothing was sent
		return failAll(len(nodes), f.Err)
	}
	// The lifecycle controller's other NotReady Nodes ride along (peers.go);
	// their answers fill the caches, no caller waits on them.
	if nodes = g.withPeers(nodes, g.batchSize); len(nodes) > len(reqs) {
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
	// (with no waitTimeout: the first token's wait by itself, see
	// admitBatch, then the calls with the bisection's waits).
	ctx, cancel := g.withCallTimeout(context.Background(), batchCallTimeout, errCallTimeout)
	if g.m.batchInstanceStatus.waitTimeout > 0 {
		cancel()
		ctx, cancel = context.WithCancel(context.Background())
	}
	defer cancel()
	b := batchCall{g: g, up: up, answer: answer}
	var err error
	results, err = b.call(ctx, nodes, prio, 0, admissionOf(f.Admitted))
	if err != nil {
		results = b.isolate(ctx, nodes, prio, err, 0)
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
// token is taken already (admitBatch).
func (b batchCall) call(ctx context.Context, nodes []*v1.Node, prio limiter.Priority, off int, a admission) ([]InstanceStatus, error) {
	marks := b.g.fillMarks() // before the call: see fill
	results, err := invokeAs(ctx, b.g, b.g.m.batchInstanceStatus, prio, a, func(ctx context.Context) ([]InstanceStatus, error) {
		ctx, cancel := b.g.withCallTimeout(ctx, batchCallTimeout, errCallTimeout)
		defer cancel()
		return b.up.BatchInstanceStatus(ctx, nodes)
	})
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
			b.g.fill(keyOfNode(node), results[i], marks)
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

func putSince[K comparable, V any](c *cache.Cache[K, V], key K, v V, m cache.Mark, maxFresh time.Duration) {
	if c != nil {
		c.PutSinceFor(key, v, m, maxFresh)
	}
}

func putNegativeSince[K comparable, V any](c *cache.Cache[K, V], key K, err error, m cache.Mark) {
	if c != nil {
		c.PutNegativeSince(key, err, m)
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
		putNegativeSince(g.inst.metadata.c, key, cloudprovider.InstanceNotFound, marks.metadata)
		putNegativeSince(g.inst.shutdown.c, key, cloudprovider.InstanceNotFound, marks.shutdown)
		putSince(g.inst.exists.c, key, false, marks.exists, 0) // a negative value
	case st.Err != nil:
		// A per-node failure is not an answer: nothing to remember.
	default:
		if st.Metadata != nil {
			putSince(g.inst.metadata.c, key, st.Metadata, marks.metadata, marks.maxFresh)
		}
		putSince(g.inst.shutdown.c, key, st.Shutdown, marks.shutdown, marks.maxFresh)
		switch {
		case st.Deleted:
			putSince(g.inst.exists.c, key, false, marks.exists, 0)
			if !marks.listed {
				g.nf.markDeleted(key)
			}
		case g.nf.markExists(key, marks.guard):
			putSince(g.inst.exists.c, key, true, marks.exists, marks.maxFresh)
		}
	}
}
