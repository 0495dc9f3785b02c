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
// A live record's answer by provider ID is filled as its page arrives: no
// other record can overrule it. The answers a later page may still overrule
// wait for the list's end (listPass): a Deleted record's, which a live
// record of its provider ID on any page overrules (an instance re-created
// under a name-based ID), and every answer by node name, which a record of
// a lower NameRank on any page overrules (a name unique per zone only). So
// no answer is ever served that the whole list contradicts, whatever the
// records' order. A list that fails drops them: the lookups they would have
// answered go to the upstream. The not-found guard still hears each live
// record's "exists" by name as its page arrives (notFoundGuard.contest).
func (g *enforcer) prefetch(ctx context.Context, maxFresh time.Duration) (quotaShort bool, err error) {
	m := g.m.listInstances
	token := ""
	var pass listPass
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
		arrived := g.clock.Now()
		for i := range p.page {
			rec := &p.page[i]
			st := InstanceStatus{Metadata: &rec.Metadata, Shutdown: rec.Shutdown, Deleted: rec.Deleted}
			pid := rec.Metadata.ProviderID
			switch {
			case rec.Deleted:
				// A Deleted record does not answer by name: its name may
				// already belong to a re-created instance (see InstanceRecord).
				if pid != "" {
					pass.deleted = append(pass.deleted, listedFill{nodeKey{byProviderID: true, id: pid}, st, marks, arrived})
				}
			default:
				if pid != "" {
					g.fill(nodeKey{byProviderID: true, id: pid}, st, marks)
					pass.live(pid)
				}
				if rec.NodeName != "" {
					// Until the list ends, this answer by name is not
					// filled (a record of a lower rank may overrule it),
					// and a failed list or a tie never fills it; but the
					// cloud did say the instance exists: a hold of the
					// name's "does not exist" must not confirm on answers
					// older than it.
					g.nf.contest(nodeKey{id: rec.NodeName})
					pass.named(rec.NodeName, rec.NameRank, listedFill{nodeKey{id: rec.NodeName}, st, marks, arrived})
				}
			}
		}
		if p.next == "" {
			pass.end(g)
			return false, nil
		}
		token = p.next
	}
}

// listPass keeps, through one list, the answers a later page may overrule.
type listPass struct {
	listedLive map[string]bool // provider IDs listed live
	deleted    []listedFill    // Deleted records' answers by provider ID
	names      []*namedFill    // the best answer for each node name, in order first listed
	byName     map[string]*namedFill
}

// listedFill is an answer held until the list ends, with its page's marks
// and arrival.
type listedFill struct {
	key     nodeKey
	st      InstanceStatus
	marks   fillMarks
	arrived time.Time
}

type namedFill struct {
	listedFill
	rank int
	tied bool // another live record has that name and rank: no answer by name
}

func (p *listPass) live(pid string) {
	if p.listedLive == nil {
		p.listedLive = map[string]bool{}
	}
	p.listedLive[pid] = true
}

func (p *listPass) named(name string, rank int, f listedFill) {
	n := p.byName[name]
	switch {
	case n == nil:
		if p.byName == nil {
			p.byName = map[string]*namedFill{}
		}
		n = &namedFill{listedFill: f, rank: rank}
		p.byName[name] = n
		p.names = append(p.names, n)
	case rank < n.rank:
		*n = namedFill{listedFill: f, rank: rank}
	case rank == n.rank && f.st.Metadata.ProviderID != n.st.Metadata.ProviderID:
		// One instance listed twice (a page boundary that moved) is no tie.
		n.tied = true
	}
}

// end fills what the whole list confirms: each Deleted record of a provider
// ID no live record had (and the guard learns that it is terminated, which
// lets its "does not exist" pass at once), and each node name's best-ranked
// live record unless tied.
func (p *listPass) end(g *enforcer) {
	for _, f := range p.deleted {
		if p.listedLive[f.key.id] {
			continue
		}
		f.fillLate(g)
		g.nf.markDeleted(f.key, f.marks.guard)
	}
	for _, n := range p.names {
		if !n.tied {
			n.fillLate(g)
		}
	}
}

// fillLate fills an answer held since its page arrived, its age and
// freshness (TTL, maxFresh) still counted from then.
func (f *listedFill) fillLate(g *enforcer) {
	f.marks.at = f.arrived
	g.fill(f.key, f.st, f.marks)
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
