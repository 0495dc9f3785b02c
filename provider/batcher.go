package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/cloudgate/cloudgate/limiter"
)

// batchCallTimeout bounds one batch or list call, token wait included. A
// batch outlives the callers that left it, so it cannot use their contexts.
const batchCallTimeout = time.Minute

// batcher coalesces concurrent per-node lookups into BatchInstanceStatus
// calls: a batch is sent when it holds maxSize nodes or maxWait after its
// first node joined, whichever comes first, and costs one token. Every caller
// gets exactly its own node's answer; a caller whose context ends leaves the
// batch, which goes on for the others. Answers fill the InstanceMetadata,
// InstanceExists and InstanceShutdown caches of every node in the batch.
type batcher struct {
	g       *gate
	up      BatchInstances
	maxSize int
	maxWait time.Duration

	mu   sync.Mutex
	open *batch
	wg   sync.WaitGroup // batches in flight
}

// batch is one batch being filled or sent.
type batch struct {
	nodes   []*v1.Node
	index   map[nodeKey]int // nodes of the same key share one slot
	prio    limiter.Priority
	done    chan struct{}
	results []InstanceStatus // one per node, each with its own Err
}

// buildBatcher sets up batching (the upstream's InstancesV2 implements
// BatchInstances) and list prefetch (it implements InstanceLister), each
// independently, from the upstream's InstancesV2 as it is now. Until the
// upstream offers InstancesV2 the decision is left open: providers that
// build their clients in Initialize are looked at again then (final) and
// on first use.
func (g *gate) buildBatcher(final bool) {
	g.batchMu.Lock()
	defer g.batchMu.Unlock()
	if g.batchDecided.Load() {
		return
	}
	v2, ok := g.upstream.InstancesV2()
	if !ok || v2 == nil {
		if final {
			g.batchDecided.Store(true)
		}
		return
	}
	if l, ok := v2.(InstanceLister); ok && g.cfg.Batch.ListPrefetch {
		g.lister = l
	}
	if up, ok := v2.(BatchInstances); ok && (g.cfg.Batch.Enabled == nil || *g.cfg.Batch.Enabled) {
		size := g.cfg.Batch.MaxSize
		if max := up.MaxBatchSize(); max > 0 && max < size {
			size = max
		}
		g.batch = &batcher{g: g, up: up, maxSize: size, maxWait: g.cfg.Batch.MaxWait.Duration}
	}
	g.batchDecided.Store(true) // publishes g.batch and g.lister
}

// batcher returns the batcher, nil without batching.
func (g *gate) batcher() *batcher {
	if !g.batchDecided.Load() {
		g.buildBatcher(false)
		if !g.batchDecided.Load() {
			return nil
		}
	}
	return g.batch
}

// lookup adds node to the open batch and waits for its answer.
func (b *batcher) lookup(ctx context.Context, node *v1.Node, prio limiter.Priority) (InstanceStatus, error) {
	if err := ctx.Err(); err != nil {
		return InstanceStatus{}, err
	}
	key := keyOfNode(node)
	b.mu.Lock()
	bt := b.open
	if bt == nil {
		bt = &batch{index: map[nodeKey]int{}, prio: prio, done: make(chan struct{})}
		b.open = bt
		// The callback only starts a goroutine: a fake clock runs callbacks
		// under its own lock, which AfterFunc here takes under b.mu. The
		// timer is never stopped: firing for a batch already sent does
		// nothing.
		afterFunc(b.g.clock, b.maxWait, func() { go b.expire(bt) })
	}
	slot, ok := bt.index[key]
	if !ok {
		slot = len(bt.nodes)
		bt.index[key] = slot
		bt.nodes = append(bt.nodes, node)
	}
	if prio < bt.prio {
		bt.prio = prio
	}
	// A full batch leaves b.open under the same lock that filled it, so no
	// caller can join it past maxSize.
	full := len(bt.nodes) >= b.maxSize
	if full {
		b.open = nil
		b.wg.Add(1)
	}
	b.mu.Unlock()
	if full {
		go b.send(bt, "size")
	}

	select {
	case <-ctx.Done():
		return InstanceStatus{}, ctx.Err()
	case <-bt.done:
		return bt.results[slot], nil
	}
}

// afterFunc runs f after d on clk, when clk can (the real and fake clocks
// can), else on the real clock.
func afterFunc(clk clock.Clock, d time.Duration, f func()) {
	if c, ok := clk.(clock.WithDelayedExecution); ok {
		c.AfterFunc(d, f)
		return
	}
	time.AfterFunc(d, f)
}

// expire sends bt when its maxWait is over, unless it was sent full.
func (b *batcher) expire(bt *batch) {
	b.mu.Lock()
	if b.open != bt {
		b.mu.Unlock()
		return
	}
	b.open = nil
	b.wg.Add(1)
	b.mu.Unlock()
	go b.send(bt, "wait")
}

func (b *batcher) send(bt *batch, reason string) {
	defer b.wg.Done()
	defer close(bt.done)
	b.g.rec.Batch(len(bt.nodes), reason)
	ctx, cancel := context.WithTimeoutCause(context.Background(), batchCallTimeout, errCallTimeout)
	defer cancel()
	results, err := b.call(ctx, bt.nodes, bt.prio)
	if err != nil {
		results = b.isolate(ctx, bt.nodes, bt.prio, err)
	}
	bt.results = results
	for i, node := range bt.nodes {
		b.g.fill(keyOfNode(node), results[i])
	}
}

// call sends one BatchInstanceStatus call.
func (b *batcher) call(ctx context.Context, nodes []*v1.Node, prio limiter.Priority) ([]InstanceStatus, error) {
	results, err := invoke(ctx, b.g, b.g.methods["BatchInstanceStatus"], prio, func(ctx context.Context) ([]InstanceStatus, error) {
		return b.up.BatchInstanceStatus(ctx, nodes)
	})
	if err == nil && len(results) != len(nodes) {
		err = fmt.Errorf("cloudgate: upstream BatchInstanceStatus returned %d results for %d nodes", len(results), len(nodes))
	}
	return results, err
}

// isolate answers nodes after their batch failed as a whole with err: a
// node the cloud rejects (a malformed ID) must not fail the others. It
// bisects — two calls per level — and stops as soon as both halves fail
// (the cloud is failing, not a node), so at most 2*log2(len(nodes)) more
// calls. It does not split at all when err says the cloud is throttling,
// the breaker is open, a wait ran out or the call hung: more calls would
// not help.
func (b *batcher) isolate(ctx context.Context, nodes []*v1.Node, prio limiter.Priority, err error) []InstanceStatus {
	if len(nodes) == 1 || !b.isolatable(ctx, err) {
		return failAll(len(nodes), err)
	}
	h := len(nodes) / 2
	left, lerr := b.call(ctx, nodes[:h], prio)
	right, rerr := b.call(ctx, nodes[h:], prio)
	switch {
	case lerr != nil && rerr != nil:
		return append(failAll(h, lerr), failAll(len(nodes)-h, rerr)...)
	case lerr != nil:
		left = b.isolate(ctx, nodes[:h], prio, lerr)
	case rerr != nil:
		right = b.isolate(ctx, nodes[h:], prio, rerr)
	}
	return append(left, right...)
}

func (b *batcher) isolatable(ctx context.Context, err error) bool {
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

// fill stores one node's batch or list answer in the instance caches.
// "Does not exist" in any form — InstanceNotFound, or an instance the cloud
// still describes as terminated (Deleted) — is a negative answer: it lives
// negativeTTL and is never served stale.
func (g *gate) fill(key nodeKey, st InstanceStatus) {
	switch {
	case st.Err == cloudprovider.InstanceNotFound:
		putNegative(g.inst.metadata, key, st.Err)
		putNegative(g.inst.shutdown, key, st.Err)
		put(g.inst.exists, key, false) // a negative value
	case st.Err != nil:
		// A per-node failure is not an answer: nothing to remember.
	default:
		if st.Metadata != nil {
			put(g.inst.metadata, key, st.Metadata)
		}
		put(g.inst.shutdown, key, st.Shutdown)
		put(g.inst.exists, key, !st.Deleted)
	}
}

// start runs the list prefetch until stop closes or the gate is closed.
// A second Initialize (leader migration) replaces the loop: one at a time.
func (g *gate) start(stop <-chan struct{}) {
	if g.batcher(); !g.batchDecided.Load() || g.lister == nil {
		return
	}
	interval := g.cfg.Batch.ListInterval.Duration
	if interval <= 0 {
		interval = g.methods["InstanceMetadata"].ttl / 2
	}
	if interval <= 0 {
		interval = time.Minute
	}
	g.loopMu.Lock()
	defer g.loopMu.Unlock()
	if g.closed {
		return
	}
	if g.loopQuit != nil {
		close(g.loopQuit)
	}
	quit := make(chan struct{})
	g.loopQuit = quit
	g.loopWG.Add(1)
	g.prefetchLoops.Add(1)
	go func() {
		defer g.loopWG.Done()
		defer g.prefetchLoops.Add(-1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-stop:
			case <-quit:
			case <-ctx.Done():
			}
			cancel()
		}()
		for {
			if err := g.prefetch(ctx); err != nil && ctx.Err() == nil {
				klog.Warningf("cloudgate: instance list prefetch failed (per-node lookups go on): %v", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-g.clock.After(interval):
			}
		}
	}()
}

// close ends the prefetch loop and waits for it and for batches in flight.
func (g *gate) close() {
	g.loopMu.Lock()
	g.closed = true
	if g.loopQuit != nil {
		close(g.loopQuit)
		g.loopQuit = nil
	}
	g.loopMu.Unlock()
	g.loopWG.Wait()
	if b := g.batcher(); b != nil {
		b.wg.Wait()
	}
	if g.fleet != nil {
		g.fleet.Close() // deregisters this member; its limiters then fall back to local buckets
	}
}

// prefetch pages through the upstream's instance list once and fills the
// instance caches, by provider ID and by node name.
func (g *gate) prefetch(ctx context.Context) error {
	m := g.methods["ListInstances"]
	token := ""
	for {
		callCtx, cancelCall := context.WithTimeoutCause(ctx, batchCallTimeout, errCallTimeout)
		type pageAnswer struct {
			page []InstanceRecord
			next string
		}
		p, err := invoke(callCtx, g, m, m.priority, func(ctx context.Context) (pageAnswer, error) {
			page, next, err := g.lister.ListInstances(ctx, token)
			return pageAnswer{page, next}, err
		})
		cancelCall()
		if err != nil {
			return err
		}
		for i := range p.page {
			rec := &p.page[i]
			st := InstanceStatus{Metadata: &rec.Metadata, Shutdown: rec.Shutdown, Deleted: rec.Deleted}
			if rec.Metadata.ProviderID != "" {
				g.fill(nodeKey{byProviderID: true, id: rec.Metadata.ProviderID}, st)
			}
			if rec.NodeName != "" {
				g.fill(nodeKey{id: rec.NodeName}, st)
			}
		}
		if p.next == "" {
			return nil
		}
		token = p.next
	}
}
