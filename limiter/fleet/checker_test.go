package fleet_test

import (
	"context"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
)

// recorder timestamps every admission of every member of a fleet run.
type recorder struct {
	mu    sync.Mutex
	times []time.Time
	wg    sync.WaitGroup
}

// greedy has callers goroutines call l.Wait in a loop until ctx ends or the
// limiter is closed.
func (rc *recorder) greedy(ctx context.Context, l limiter.Admitter, callers int) {
	for range callers {
		rc.wg.Add(1)
		go func() {
			defer rc.wg.Done()
			for ctx.Err() == nil {
				wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				err := l.Wait(wctx, limiter.PriorityCritical)
				cancel()
				if err == nil {
					rc.mu.Lock()
					rc.times = append(rc.times, time.Now())
					rc.mu.Unlock()
				}
			}
		}()
	}
}

// count returns the admissions in [from, to).
func (rc *recorder) count(from, to time.Time) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, at := range rc.times {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// TestFleetChecker is the fleet's second checker: members on a
// real redis-server, with greedy callers throughout, go through a
// Retry-After storm, partitions by a TCP proxy, a join of a heavy member
// while two are in fallback, and a weight change (a member leaves and comes
// back under its id with another weight). Every sliding one-second window
// of admissions across all members is checked against
//
//	1.1 × (quota × 1 s + burst + Σ over fallen members (claim × quota × 3
//	heartbeats + local burst)), the 1.1 a slack for the scheduling of 2
//	loaded cores,
//
// the bound docs/fleet.md states (for partitions of any length: c and d
// stay cut past ForgetAfter),
// and after the Retry-After storm (capped by maxRetryAfter) the fleet must
// admit again. It logs its number of checks.
func TestFleetChecker(t *testing.T) {
	r := fleettest.Start(t)
	const quota = 100.0
	cfg := local
	cfg.MaxRetryAfter = 300 * time.Millisecond
	cfg.RecoveryQPSPerSecond = 1000 // the AIMD cut recovers at once: the bound, not the rate, is checked
	const account = "acct-check"
	pxc, pxd := newProxy(t, r.Addr), newProxy(t, r.Addr)
	// failureMode closed: c and d cut past ForgetAfter stop, so the bound
	// holds for partitions of any length (TestRedisOutageTenMinutes checks
	// open).
	via := func(p *proxy) func(*fleet.Config) {
		return func(c *fleet.Config) {
			c.Redis.Address = p.ln.Addr().String()
			c.FailureMode = fleet.FailureClosed
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc := &recorder{}
	// ForgetAfter 2 s, shorter than the partition (about 4 s): the live
	// members forget c and d and free their claims, so c and d must have
	// stopped admitting by then (else two members serve one claim).
	const forgetAfter = 2 * time.Second
	opts := func(id string) fleet.Options { return fleet.Options{MemberID: id, ForgetAfter: forgetAfter} }
	a := newMemberOpts(t, r, account, 1, quota, cfg, nil, opts("member-a"))
	b := newMemberOpts(t, r, account, 1, quota, cfg, nil, opts("member-b"))
	c := newMemberOpts(t, r, account, 1, quota, cfg, via(pxc), opts("member-c"))
	d := newMemberOpts(t, r, account, 1, quota, cfg, via(pxd), opts("member-d"))
	for _, m := range []*member{a, b, c, d} {
		eventually(t, "four members", func() bool { return math.Abs(m.l.ShareQPS()-quota/4) < 1e-9 })
		rc.greedy(ctx, m.l, 3)
	}
	start := time.Now()
	time.Sleep(time.Second)

	// A Retry-After storm: every member reports Retry-After: 1h, again and again.
	storm := time.Now()
	for range 20 {
		for _, m := range []*member{a, b, c, d} {
			m.l.OnThrottled(time.Hour)
		}
	}
	time.Sleep(cfg.MaxRetryAfter + time.Second)
	if n := rc.count(storm.Add(cfg.MaxRetryAfter+500*time.Millisecond), time.Now()); n == 0 {
		t.Errorf("no admission from %v after the Retry-After storm on: the pause was not capped by maxRetryAfter (%v)",
			cfg.MaxRetryAfter+500*time.Millisecond, cfg.MaxRetryAfter)
	}

	// Partitions: c and d lose Redis; a heavy member joins while they are away.
	pxc.cut()
	pxd.cut()
	partitioned := time.Now()
	eventually(t, "c and d fall back", func() bool { return c.f.Fallback() && d.f.Fallback() })
	eventually(t, "a holds c's and d's claims", func() bool { _, n := a.f.Held(); return n == 2 })
	e := newMemberOpts(t, r, account, 100, quota, cfg, nil, opts("member-e"))
	joined := time.Now()
	rc.greedy(ctx, e.l, 3)
	time.Sleep(2 * time.Second)

	// A weight change: b leaves and comes back under its id with weight 5.
	b.f.Close()
	b2 := newMemberOpts(t, r, account, 5, quota, cfg, nil, opts("member-b"))
	rc.greedy(ctx, b2.l, 3)
	time.Sleep(2 * time.Second)

	// Past ForgetAfter: the live members have forgotten c and d (nothing
	// held) while c and d, still cut, admit nothing.
	eventually(t, "a forgets c and d", func() bool { h, n := a.f.Held(); return h == 0 && n == 0 })
	if c.l.ShareQPS() != 0 || d.l.ShareQPS() != 0 {
		t.Errorf("c and d cut for more than ForgetAfter still have shares %v and %v", c.l.ShareQPS(), d.l.ShareQPS())
	}
	time.Sleep(time.Second)
	end := time.Now()
	if cut := time.Since(partitioned); cut < forgetAfter+time.Second {
		t.Fatalf("partition lasted %v, not longer than ForgetAfter %v", cut, forgetAfter)
	}
	cancel()
	rc.wg.Wait()

	// Every sliding one-second window, starting at each admission.
	// Two members fall back, each with a claim of a quarter: each may send
	// its claim for up to three heartbeats before the others hold it, and its
	// local burst at the switch.
	heartbeat := 100 * time.Millisecond // newMember's
	fallen := 2 * (quota/4*3*heartbeat.Seconds() + math.Round(float64(cfg.Burst)/4))
	bound := 1.1 * (quota + float64(cfg.Burst) + fallen)
	rc.mu.Lock()
	ts := slices.Clone(rc.times)
	rc.mu.Unlock()
	slices.SortFunc(ts, func(x, y time.Time) int { return x.Compare(y) })
	checks, worst, j := 0, 0, 0
	for i := range ts {
		for j < len(ts) && ts[j].Before(ts[i].Add(time.Second)) {
			j++
		}
		if ts[i].Add(time.Second).After(end) {
			break
		}
		checks++
		worst = max(worst, j-i)
		if float64(j-i) > bound {
			t.Errorf("window at +%v: %d admissions in 1s, over the bound %.1f (quota %v/s)",
				ts[i].Sub(start).Round(time.Millisecond), j-i, bound, quota)
			break
		}
	}
	if t.Failed() {
		bins := make([]int, int(end.Sub(start)/(250*time.Millisecond))+1)
		for _, at := range ts {
			if i := int(at.Sub(start) / (250 * time.Millisecond)); i >= 0 && i < len(bins) {
				bins[i]++
			}
		}
		t.Logf("admissions per 250 ms from the start: %v (storm at +%v, join at +%v)", bins,
			storm.Sub(start).Round(time.Millisecond), joined.Sub(start).Round(time.Millisecond))
	}
	t.Logf("fleet checker: %d admissions, %d sliding-second checks, worst window %d against the bound %.1f (quota %v/s)",
		len(ts), checks, worst, bound, quota)
	if checks == 0 {
		t.Fatal("no window checked")
	}
}
