package provider

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
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
	lister  InstanceLister // nil: no list prefetch
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
	results []InstanceStatus
	err     error
}

// buildBatcher sets up batching when it is enabled and the upstream's
// InstancesV2 can answer batches.
func (g *gate) buildBatcher() error {
	if g.cfg.Batch.Enabled != nil && !*g.cfg.Batch.Enabled {
		return nil
	}
	v2, ok := g.upstream.InstancesV2()
	if !ok || v2 == nil {
		return nil
	}
	up, ok := v2.(BatchInstances)
	if !ok {
		return nil
	}
	size := g.cfg.Batch.MaxSize
	if max := up.MaxBatchSize(); max > 0 && max < size {
		size = max
	}
	b := &batcher{g: g, up: up, maxSize: size, maxWait: g.cfg.Batch.MaxWait.Duration}
	if g.cfg.Batch.ListPrefetch {
		if l, ok := v2.(InstanceLister); ok {
			b.lister = l
		}
	}
	g.batch = b
	return nil
}

// lookup adds node to the open batch and waits for its answer.
func (b *batcher) lookup(ctx context.Context, node *v1.Node, prio limiter.Priority) (InstanceStatus, error) {
	if err := ctx.Err(); err != nil {
		return InstanceStatus{}, err
	}
	key := keyOfNode(node)
	b.mu.Lock()
	bt := b.open
	created := bt == nil
	if created {
		bt = &batch{index: map[nodeKey]int{}, prio: prio, done: make(chan struct{})}
		b.open = bt
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
	switch {
	case full:
		go b.send(bt, "size")
	case created:
		// Armed outside b.mu: a fake clock runs callbacks under its own
		// lock, and the callback takes b.mu. The timer is never stopped:
		// firing for a batch already sent does nothing.
		afterFunc(b.g.clock, b.maxWait, func() { b.expire(bt) })
	}

	select {
	case <-ctx.Done():
		return InstanceStatus{}, ctx.Err()
	case <-bt.done:
		if bt.err != nil {
			return InstanceStatus{}, bt.err
		}
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
	results, err := invoke(ctx, b.g, b.g.methods["BatchInstanceStatus"], bt.prio, func(ctx context.Context) ([]InstanceStatus, error) {
		return b.up.BatchInstanceStatus(ctx, bt.nodes)
	})
	if err == nil && len(results) != len(bt.nodes) {
		err = fmt.Errorf("cloudgate: upstream BatchInstanceStatus returned %d results for %d nodes", len(results), len(bt.nodes))
	}
	if err != nil {
		bt.err = err
		return
	}
	bt.results = results
	for i, node := range bt.nodes {
		b.g.fill(keyOfNode(node), results[i])
	}
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

// start runs the list prefetch until stop closes.
func (g *gate) start(stop <-chan struct{}) {
	if g.batch == nil || g.batch.lister == nil {
		return
	}
	interval := g.cfg.Batch.ListInterval.Duration
	if interval <= 0 {
		interval = g.methods["InstanceMetadata"].ttl / 2
	}
	if interval <= 0 {
		interval = time.Minute
	}
	go func() {
		for {
			if err := g.prefetch(stop); err != nil {
				klog.Warningf("cloudgate: instance list prefetch failed (per-node lookups go on): %v", err)
			}
			select {
			case <-stop:
				return
			case <-g.clock.After(interval):
			}
		}
	}()
}

// prefetch pages through the upstream's instance list once and fills the
// instance caches, by provider ID and by node name.
func (g *gate) prefetch(stop <-chan struct{}) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	m := g.methods["ListInstances"]
	token := ""
	for {
		callCtx, cancelCall := context.WithTimeoutCause(ctx, batchCallTimeout, errCallTimeout)
		type pageAnswer struct {
			page []InstanceRecord
			next string
		}
		p, err := invoke(callCtx, g, m, m.priority, func(ctx context.Context) (pageAnswer, error) {
			page, next, err := g.batch.lister.ListInstances(ctx, token)
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
