package provider

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// listJitter is the refresh jitter: each wait between two list refreshes is
// listInterval × (1 + U[0, listJitter)), drawn anew every time (as
// wait.JitterUntil does, but on the gate's clock), so clusters that start
// together drift apart instead of listing one account in lockstep.
const listJitter = 0.1

// nextListRefresh is the wait before the next list refresh.
func nextListRefresh(interval time.Duration) time.Duration {
	return wait.Jitter(interval, listJitter)
}

// List prefetch: with batch.listPrefetch and an upstream InstancesV2 that
// implements InstanceLister, a loop lists every instance once per
// listInterval (plus up to 10 % jitter, listJitter) and fills the instance caches, so that the periodic resync
// of every node is answered from the cache.

// start runs the list prefetch until stop closes or the gate is closed.
// A second Initialize (leader migration) replaces the loop: one at a time.
func (g *gate) start(stop <-chan struct{}) {
	if g.shadow != nil {
		return // a shadow adds no calls
	}
	if g.batcher(); !g.batchDecided.Load() || g.lister == nil {
		return
	}
	interval := g.cfg.Batch.ListInterval.Duration
	if interval <= 0 {
		interval = g.m.instanceMetadata.ttl / 2
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
				klog.ErrorS(err, "cloudgate: instance list prefetch failed (per-node lookups go on)")
			}
			select {
			case <-ctx.Done():
				return
			case <-g.clock.After(nextListRefresh(interval)):
			}
		}
	}()
}

// prefetch pages through the upstream's instance list once and fills the
// instance caches, by provider ID and by node name.
func (g *gate) prefetch(ctx context.Context) error {
	m := g.m.listInstances
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
			// A Deleted record does not answer by name: its name may
			// already belong to a re-created instance (see InstanceRecord).
			if rec.NodeName != "" && !rec.Deleted {
				g.fill(nodeKey{id: rec.NodeName}, st)
			}
		}
		if p.next == "" {
			return nil
		}
		token = p.next
	}
}
