package fleet_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
)

// windows checks every sliding one-second window of ts (starting at each
// admission and ending before end) against bound; it returns the number of
// windows checked and the largest count.
func windows(t *testing.T, ts []time.Time, end time.Time, bound float64, what string) (checks, worst int) {
	t.Helper()
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(x, y time.Time) int { return x.Compare(y) })
	j := 0
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
			t.Errorf("%s: %d admissions in the second from %v, over the bound %.1f", what, j-i, ts[i].Format("15:04:05.000"), bound)
			return checks, worst
		}
	}
	return checks, worst
}

// TestRedisOutageTenMinutes: Redis killed for 10
// minutes under load from 3 members, in time scaled by the heartbeat: the
// members run with heartbeat 20 ms instead of 1 s (every duration of the
// fleet is counted in heartbeats) and forgetAfter 120 heartbeats, shorter
// than the default, so the outage of 600 heartbeats (10 min at the
// default heartbeat, 12 s here) is five times forgetAfter. The limiter's
// rates are not scaled: the quota is per real second, so the sliding-second
// bound is the one docs/fleet.md states.
//
//   - failureMode open: every member keeps admitting in every second of the
//     outage, and the fleet's sliding-second admissions stay within
//     1.1 × (quota + 2 × burst + Σ members (claim × quota × 3 heartbeats +
//     local burst)): with Redis down for every member nobody frees a claim,
//     and the claims sum to at most 1 (a fresh burst when Redis restarts).
//   - failureMode closed (today's behaviour): every member admits nothing
//     from forgetAfter − 3 heartbeats after its last answered heartbeat
//     until Redis answers; its stop instant was reported (the metric behind
//     the critical alert) when it fell back, before it stopped; no caller
//     fails but by its own deadline.
//
// In both, the members rejoin once Redis is back.
func TestRedisOutageTenMinutes(t *testing.T) {
	for _, mode := range []string{fleet.FailureOpen, fleet.FailureClosed} {
		t.Run(mode, func(t *testing.T) { redisOutage(t, mode) })
	}
}

func redisOutage(t *testing.T, mode string) {
	r := fleettest.Start(t)
	const (
		quota     = 60.0
		heartbeat = 20 * time.Millisecond
		outage    = 600 * heartbeat // 10 minutes at the default heartbeat
		forget    = 120 * heartbeat
	)
	account := "acct-outage-" + mode
	mod := func(c *fleet.Config) {
		c.Heartbeat = fleet.Duration{Duration: heartbeat}
		c.FailureMode = mode
	}
	var ms []*member
	for i := range 3 {
		ms = append(ms, newMemberOpts(t, r, account, 1, quota, local, mod,
			fleet.Options{MemberID: "member-" + string(rune('a'+i)), ForgetAfter: forget}))
	}
	for _, m := range ms {
		eventually(t, "three members", func() bool { return math.Abs(m.l.ShareQPS()-quota/3) < 1e-9 })
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	recs := []*recorder{{}, {}, {}}
	for i, m := range ms {
		recs[i].greedy(ctx, m.l, 3)
	}
	time.Sleep(time.Second)
	killed := time.Now()
	r.Kill()
	for _, m := range ms {
		eventually(t, "every member falls back", m.f.Fallback)
	}
	// Each member's stop instant as reported when it fell back (reported
	// just after the switch: wait for it in closed).
	stops := make([]time.Time, len(ms))
	for i, m := range ms {
		if mode == fleet.FailureClosed {
			eventually(t, "the stop reported", func() bool { return !m.ev.lastStopAt().IsZero() })
			stops[i] = m.ev.lastStopAt()
		}
	}
	time.Sleep(outage - time.Since(killed))
	if mode == fleet.FailureOpen {
		for i, m := range ms {
			stops[i] = m.ev.lastStopAt()
		}
	}
	restarted := time.Now()
	r.Restart()
	for _, m := range ms {
		eventually(t, "every member rejoins", func() bool { return !m.f.Fallback() })
	}
	time.Sleep(time.Second)
	end := time.Now()
	cancel()
	var all []time.Time
	for _, rc := range recs {
		rc.wg.Wait()
		all = append(all, rc.times...)
	}

	burst := float64(local.Burst)
	fallen := 3 * (quota/3*3*heartbeat.Seconds() + math.Round(burst/3))
	bound := slack * (quota + 2*burst + fallen)
	checks, worst := windows(t, all, end, bound, mode)
	t.Logf("%s: %d admissions, %d sliding-second checks, worst window %d against the bound %.1f (quota %v/s); outage %v = 600 heartbeats",
		mode, len(all), checks, worst, bound, quota, restarted.Sub(killed).Round(time.Millisecond))
	if checks == 0 {
		t.Fatal("no window checked")
	}

	// From forgetAfter + 1 s after the kill (every member is past its
	// awayLimit with a margin of 50 heartbeats) to the restart.
	late := killed.Add(forget + time.Second)
	for i, m := range ms {
		rc := recs[i]
		switch mode {
		case fleet.FailureOpen:
			if !stops[i].IsZero() {
				t.Errorf("member %d reported a stop at %v in failureMode open", i, stops[i])
			}
			for s := killed.Add(time.Second); s.Add(time.Second).Before(restarted); s = s.Add(time.Second) {
				if n := rc.count(s, s.Add(time.Second)); n == 0 {
					t.Errorf("member %d admitted nothing in the second from +%v of the outage", i, s.Sub(killed))
				}
			}
			if !logged(m, "failureMode open: serving its floor") {
				t.Errorf("member %d: no log line for serving its floor", i)
			}
		case fleet.FailureClosed:
			if stops[i].IsZero() || !stops[i].After(killed) || stops[i].After(killed.Add(forget)) {
				t.Errorf("member %d reported its stop at %v, want within forgetAfter (%v) of the kill at %v", i, stops[i], forget, killed)
			}
			if n := rc.count(late, restarted); n != 0 {
				t.Errorf("member %d admitted %d calls between forgetAfter + 1s after the kill and the restart, want none (failureMode closed)", i, n)
			}
			if !logged(m, "failureMode closed: admitting no call until Redis answers") {
				t.Errorf("member %d: no log line for stopping", i)
			}
		}
		if n := rc.count(restarted.Add(500*time.Millisecond), end); n == 0 {
			t.Errorf("member %d admitted nothing after Redis came back", i)
		}
	}
	// No caller failed: a closed member's waiters time out on their own
	// deadline (the recorder's 200 ms), which the recorder does not count.
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	for i, m := range ms {
		if err := m.l.Wait(ctx2, limiter.PriorityCritical); err != nil {
			t.Errorf("member %d after the outage: %v", i, err)
		}
	}
}

func logged(m *member, s string) bool {
	m.ev.mu.Lock()
	defer m.ev.mu.Unlock()
	return slices.ContainsFunc(m.ev.logs, func(l string) bool { return strings.Contains(l, s) })
}

// TestCutLongerThanForgetAfterOpen: in failureMode open a member cut from
// Redis for longer than forgetAfter never stops on its own: it serves its
// floor (its claim here, a third: the smaller of its claim and its fair
// share) once the others may have forgotten it, takes the cloud's
// throttling on its local bucket (AIMD, the backstop), and rejoins. The
// others free its claim at forgetAfter, so from then the fleet may exceed
// the quota by the floor: the bound docs/fleet.md states; c must not
// admit nothing once away.
func TestCutLongerThanForgetAfterOpen(t *testing.T) {
	r := fleettest.Start(t)
	const quota = 90.0
	px := newProxy(t, r.Addr)
	a := newMember(t, r, "acct-open", 1, quota, local, nil)
	b := newMember(t, r, "acct-open", 1, quota, local, nil)
	c := newMember(t, r, "acct-open", 1, quota, local, func(c *fleet.Config) { c.Redis.Address = px.ln.Addr().String() })
	for _, m := range []*member{a, b, c} {
		eventually(t, "three members", func() bool { return math.Abs(m.l.ShareQPS()-quota/3) < 1e-9 })
	}
	px.cut()
	eventually(t, "c falls back", c.f.Fallback)
	eventually(t, "c serves its floor", func() bool { return logged(c, "serving its floor") })
	eventually(t, "a forgets c", func() bool { h, n := a.f.Held(); return h == 0 && n == 0 })
	if got := c.l.ShareQPS(); math.Abs(got-quota/3) > 1e-6 {
		t.Errorf("c's share once away %v/s, want its floor %v/s", got, quota/3)
	}
	if got := c.l.EffectiveQPS(); got <= 0 {
		t.Errorf("c's effective rate once away %v, want > 0", got)
	}
	if !c.ev.lastStopAt().IsZero() {
		t.Errorf("c reported a stop at %v in failureMode open", c.ev.lastStopAt())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 5 {
		if err := c.l.Wait(ctx, limiter.PriorityNormal); err != nil {
			t.Fatalf("c's call %d once away: %v", i, err)
		}
	}
	// The cloud throttles: c's local bucket at the floor takes the cut.
	before := c.l.EffectiveQPS()
	c.l.OnThrottled(0)
	if after := c.l.EffectiveQPS(); !(after < before) {
		t.Errorf("c's rate after a throttling answer %v, want below %v (AIMD on the floor)", after, before)
	}
	px.restore()
	eventually(t, "c rejoins", func() bool { return !c.f.Fallback() })
	eventually(t, "three members again", func() bool { return math.Abs(a.l.ShareQPS()-quota/3) < 1e-9 })
}

// TestNeverReachedRedisAccounted: a member that has never
// reached Redis (here: a wrong address) serves minShare from its local
// bucket, unseen. With limits.shared.maxMembers the live members hold back
// minShare for each member of the fleet not registered, so the fleet stays
// within the quota: alone, a holds 2 × minShare (b not registered yet, c
// never); when b joins, while c is still in fallback, b holds c's minShare
// too, and a and b together with c stay within the quota in every sliding
// second. Without maxMembers nothing would be held
// and the fleet runs at the quota plus c's minShare.
func TestNeverReachedRedisAccounted(t *testing.T) {
	r := fleettest.Start(t)
	const quota, minShare, secs = 100.0, 0.3, 3
	mod := func(c *fleet.Config) {
		c.MaxMembers = 3
		c.MinShare = minShare
	}
	// c's way to Redis is cut from the start (a NetworkPolicy, a wrong
	// password, an address typo): it never reaches Redis.
	px := newProxy(t, r.Addr)
	px.cut()
	c := newMember(t, r, "acct-never", 1, quota, local, func(c *fleet.Config) {
		mod(c)
		c.Redis.Address = px.ln.Addr().String()
	})
	if !c.f.Fallback() {
		t.Fatal("c reached Redis through a cut proxy")
	}
	if got := c.l.ShareQPS(); math.Abs(got-minShare*quota) > 1e-6 {
		t.Fatalf("c's share %v/s, want minShare × quota %v/s", got, minShare*quota)
	}
	a := newMember(t, r, "acct-never", 1, quota, local, mod)
	eventually(t, "a holds two unregistered members' minShare", func() bool {
		h, _ := a.f.Held()
		return math.Abs(h-2*minShare) < 1e-6
	})
	b := newMember(t, r, "acct-never", 1, quota, local, mod)
	for _, m := range []*member{a, b} {
		eventually(t, "a and b hold c's minShare", func() bool {
			h, n := m.f.Held()
			return n == 0 && math.Abs(h-minShare) < 1e-6
		})
		eventually(t, "a's and b's claims", func() bool { return math.Abs(m.l.ShareQPS()-quota*(1-minShare)/2) < 1e-6 })
	}
	if got := a.l.EffectiveQPS(); math.Abs(got-quota*(1-minShare)) > 1e-6 {
		t.Errorf("the live members' budget %v/s, want the quota less c's minShare %v/s", got, quota*(1-minShare))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc := &recorder{}
	for _, m := range []*member{a, b, c} {
		rc.greedy(ctx, m.l, 3)
	}
	time.Sleep(secs * time.Second)
	end := time.Now()
	cancel()
	rc.wg.Wait()
	// Bound: the quota, the fleet's burst, c's local burst.
	bound := slack * (quota + float64(local.Burst) + math.Round(float64(local.Burst)*minShare))
	checks, worst := windows(t, rc.times, end, bound, "never reached")
	t.Logf("%d admissions in %ds, %d sliding-second checks, worst window %d against the bound %.1f (quota %v/s, c serves %v/s unseen)",
		len(rc.times), secs, checks, worst, bound, quota, minShare*quota)
	if checks == 0 {
		t.Fatal("no window checked")
	}
}

// TestMaxMembersCapsMinShare: with maxMembers, a member that never reached
// Redis serves at most its fair share at that count (minShare capped at
// 1 / maxMembers), so what the others hold for unregistered members (one
// minShare each) never takes the whole quota: 20 members at the default
// minShare 0.1 would hold 1.9 of it.
func TestMaxMembersCapsMinShare(t *testing.T) {
	r := fleettest.Start(t)
	const quota = 100.0
	px := newProxy(t, r.Addr)
	px.cut()
	c := newMember(t, r, "acct-cap", 1, quota, local, func(c *fleet.Config) {
		c.MaxMembers = 20
		c.Redis.Address = px.ln.Addr().String()
	})
	if got := c.l.ShareQPS(); math.Abs(got-quota/20) > 1e-9 {
		t.Errorf("never-reached member's share %v/s, want quota / maxMembers %v/s", got, quota/20)
	}
	a := newMember(t, r, "acct-cap", 1, quota, local, func(c *fleet.Config) { c.MaxMembers = 20 })
	eventually(t, "a holds 19 unregistered members' share", func() bool {
		h, _ := a.f.Held()
		return math.Abs(h-19.0/20) < 1e-6
	})
	if got := a.l.ShareQPS(); math.Abs(got-quota/20) > 1e-6 {
		t.Errorf("a's claim %v/s, want %v/s", got, quota/20)
	}
}
