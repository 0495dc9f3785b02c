package provider

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/limiter"
)

// listJitter is the refresh jitter: each wait between two list refreshes is
// listInterval × (1 + U[0, listJitter)), drawn anew every time (as
// wait.JitterUntil does, but on the gate's clock), so clusters that start
// together drift apart instead of listing one account in lockstep.
const listJitter = 0.1

// jitterSource draws the list refreshes' jitter. It is seeded from the
// gate's clock when the gate is made: CCMs started apart draw apart, while
// a simulation on a virtual clock draws the same waits in every run of one
// seed, which the process-wide random source would not.
type jitterSource struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newJitterSource(now time.Time) *jitterSource {
	return &jitterSource{r: rand.New(rand.NewPCG(uint64(now.UnixNano()), uint64(now.Unix())))}
}

// next is the wait before the next list refresh.
func (j *jitterSource) next(interval time.Duration) time.Duration {
	j.mu.Lock()
	defer j.mu.Unlock()
	return interval + time.Duration(listJitter*j.r.Float64()*float64(interval))
}

// List prefetch: with batch.listPrefetch and an upstream InstancesV2 that
// implements InstanceLister, a loop lists every instance once per
// listInterval (plus up to 10 % jitter, listJitter) and fills the instance
// caches, so that the periodic resync of every node is answered from the
// cache. A refresh starts listInterval × (1 + jitter) after the previous one
// started, and a page's answers are fresh for at most listInterval × 1.1 from
// the page's own fetch (listMaxFresh), however long the list takes: a page
// fetched early in a slow list (its pages are background reads, each waiting
// for its token) is not served older than that.

// start runs the list prefetch until stop closes or the gate is closed.
// A second Initialize (leader migration) replaces the loop: one at a time.
func (g *enforcer) start(stop <-chan struct{}) {
	if g.batcher(); !g.batchDecided.Load() || g.lister == nil {
		return
	}
	interval := g.cfg.Batch.ListInterval.Duration // > 0 (Config.Resolve)
	g.loopMu.Lock()
	defer g.loopMu.Unlock()
	if g.closed {
		return
	}
	if g.loopCancel != nil {
		g.loopCancel()
	}
	ctx, cancel := context.WithCancel(wait.ContextForChannel(stop))
	g.loopCancel = cancel
	first := g.firstList.Load()
	if first == nil {
		first = &firstList{done: make(chan struct{})}
		g.firstList.Store(first)
	}
	g.loopWG.Add(1)
	g.prefetchLoops.Add(1)
	go func() {
		defer g.loopWG.Done()
		defer g.prefetchLoops.Add(-1)
		defer first.end() // a loop stopped before its first refresh ended
		defer cancel()
		gap := interval / 30 // after a failure, the shortest wait before the next try
		for {
			var answered <-chan struct{}
			var earliest <-chan time.Time
			started := g.clock.Now()
			quotaShort, err := g.prefetch(ctx, listMaxFresh(interval))
			first.end() // lookups waiting for the first refresh go on, answered or not
			next := g.listJitter.next(interval)
			switch {
			case err != nil && ctx.Err() == nil && quotaShort:
				// A retry would start again from page 1 and spend the pages
				// again when tokens are scarcest: the next list is at the
				// interval, as after a success.
				klog.ErrorS(err, "cloudgate: instance list prefetch failed for want of quota (per-node lookups go on; the next list at the interval)")
				g.listFailed.Store(false)
				gap = interval / 30
			case err != nil && ctx.Err() == nil:
				klog.ErrorS(err, "cloudgate: instance list prefetch failed (per-node lookups go on; retrying once the cloud answers)")
				// Refresh as soon as the cloud answers again (an outage
				// ended), not a whole interval later, but no sooner than
				// gap (doubling while the list itself keeps failing).
				select {
				case <-g.listAnswered: // a signal from before the failure
				default:
				}
				g.listFailed.Store(true)
				answered, earliest = g.listAnswered, g.clock.After(gap)
				gap = min(2*gap, interval)
			default:
				g.listFailed.Store(false)
				gap = interval / 30
				// From the start of this list, so that each page is fetched
				// again about listInterval after it was (its answers expire
				// at listMaxFresh).
				next = max(0, started.Add(next).Sub(g.clock.Now()))
			}
			if earliest != nil {
				select {
				case <-ctx.Done():
					return
				case <-earliest:
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-answered:
			case <-g.clock.After(next):
			}
		}
	}()
}

// listMaxFresh is how long a listed answer is fresh: listInterval × (1 +
// listJitter), the longest a successful list waits before the next.
func listMaxFresh(interval time.Duration) time.Duration {
	return interval + time.Duration(listJitter*float64(interval))
}

// prefetch pages through the upstream's instance list once and fills the
// instance caches, by provider ID and by node name, each page's answers
// fresh for at most maxFresh from its own fetch. quotaShort: it failed
// because the cloud throttled a page, or a page's token did not come in
// time (not because the breaker was open).
//
// A live record and a Deleted one under one provider ID (an instance
// re-created under a name-based ID) answer as the live one, whatever their
// order: a Deleted record listed after a live one of its ID is skipped, and
// the guard learns that an instance is terminated (which lets its "does not
// exist" pass at once) only once the list has ended without a live record of
// that ID. Until then a Deleted record's "does not exist" is held as any
// other.
func (g *enforcer) prefetch(ctx context.Context, maxFresh time.Duration) (quotaShort bool, err error) {
	m := g.m.listInstances
	token := ""
	live := map[string]bool{} // provider IDs listed live in this pass
	type deletedAt struct {
		key   nodeKey
		since uint64 // its page's guard mark
	}
	var terminated []deletedAt // Deleted records, marked for the guard at the end
	for {
		marks := g.fillMarks() // before the call: see fill
		marks.maxFresh, marks.listed = maxFresh, true
		callCtx, cancelCall := g.withCallTimeout(ctx, batchCallTimeout, errCallTimeout)
		type pageAnswer struct {
			page []InstanceRecord
			next string
		}
		called := false
		p, err := invoke(callCtx, g, m, m.priority, func(ctx context.Context) (pageAnswer, error) {
			called = true
			page, next, err := g.lister.ListInstances(ctx, token)
			return pageAnswer{page, next}, err
		})
		cancelCall()
		if err != nil {
			throttled, _ := g.throttle.Classify(err)
			return throttled || (!called && !limiter.IsOpen(err)), err
		}
		for _, deleted := range []bool{false, true} { // live records first
			for i := range p.page {
				rec := &p.page[i]
				if rec.Deleted != deleted {
					continue
				}
				st := InstanceStatus{Metadata: &rec.Metadata, Shutdown: rec.Shutdown, Deleted: rec.Deleted}
				if pid := rec.Metadata.ProviderID; pid != "" && !(deleted && live[pid]) {
					key := nodeKey{byProviderID: true, id: pid}
					g.fill(key, st, marks)
					if deleted {
						terminated = append(terminated, deletedAt{key, marks.guard})
					} else {
						live[pid] = true
					}
				}
				// A Deleted record does not answer by name: its name may
				// already belong to a re-created instance (see InstanceRecord).
				if rec.NodeName != "" && !deleted {
					g.fill(nodeKey{id: rec.NodeName}, st, marks)
				}
			}
		}
		if p.next == "" {
			for _, d := range terminated {
				if !live[d.key.id] {
					g.nf.markDeleted(d.key, d.since)
				}
			}
			return false, nil
		}
		token = p.next
	}
}

// firstList is the first list refresh, which lookups that miss wait for.
type firstList struct {
	done chan struct{}
	once sync.Once
}

func (f *firstList) end() { f.once.Do(func() { close(f.done) }) }

// await waits for the first list refresh while it is in flight
// and reports whether it did (the caller then looks in the cache again).
// At start-up the controllers' first round of lookups races it: every
// instance is being listed, so a per-node call sent meanwhile would be
// spent on an answer about to arrive (behind the AWS adapter, the status
// loop's first round then cost more DescribeInstances than the AWS provider
// alone). Later refreshes are not waited for: a miss then is a new node.
func (f *firstList) await(ctx context.Context) bool {
	select {
	case <-f.done:
		return false
	default:
	}
	select {
	case <-f.done:
		return true
	case <-ctx.Done():
		return false
	}
}
