package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the tests kill Redis on purpose.
	redis.SetLogger(quietLogger{})
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// events is an Observer, its FamilyObserver and a log sink that records what a member reports.
type events struct {
	mu          sync.Mutex
	shared      int
	fallback    int
	transitions []bool
	logs        []string
	redisCalls  int
	redisErrors int
	usage       float64   // last FleetState usage
	stopAt      time.Time // last StopAt
}

func (e *events) StopAt(at time.Time) {
	e.mu.Lock()
	e.stopAt = at
	e.mu.Unlock()
}

func (e *events) lastStopAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopAt
}

func (e *events) Family(string) fleet.FamilyObserver { return e }

func (e *events) RedisAdmission(time.Duration) {
	e.mu.Lock()
	e.redisCalls++
	e.mu.Unlock()
}

func (e *events) Admitted(fb bool) {
	e.mu.Lock()
	if fb {
		e.fallback++
	} else {
		e.shared++
	}
	e.mu.Unlock()
}

func (e *events) FallbackChanged(fb bool) {
	e.mu.Lock()
	e.transitions = append(e.transitions, fb)
	e.mu.Unlock()
}

func (e *events) RedisError() {
	e.mu.Lock()
	e.redisErrors++
	e.mu.Unlock()
}

func (e *events) ShareChanged(float64, int) {}
func (e *events) FleetState(_, _, usage float64) {
	e.mu.Lock()
	e.usage = usage
	e.mu.Unlock()
}

func (e *events) lastUsage() float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.usage
}

func (e *events) logf(format string, args ...any) {
	e.mu.Lock()
	e.logs = append(e.logs, fmt.Sprintf(format, args...))
	e.mu.Unlock()
}

func (e *events) counts() (shared, fallback int, transitions []bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.shared, e.fallback, append([]bool(nil), e.transitions...)
}

// member is one cloudgate of the fleet: its own Fleet (own Redis client)
// and one "read" limiter.
type member struct {
	f  *fleet.Fleet
	l  *fleet.Limiter
	ev *events
}

const testTimeout = time.Second // generous: -race on 2 shared cores; the slow-Redis test sets its own

func newMember(t *testing.T, r *fleettest.Redis, account string, weight float64, quota float64, local limiter.BucketConfig, mod func(*fleet.Config)) *member {
	t.Helper()
	return newMemberID(t, r, account, weight, quota, local, mod, "")
}

// newMemberID is newMember with a fixed member id ("" for a random one).
func newMemberID(t *testing.T, r *fleettest.Redis, account string, weight float64, quota float64, local limiter.BucketConfig, mod func(*fleet.Config), id string) *member {
	t.Helper()
	return newMemberOpts(t, r, account, weight, quota, local, mod, fleet.Options{MemberID: id, ForgetAfter: 2 * time.Second})
}

// newMemberOpts is newMember with the given Options (Observer and Logf are set here).
func newMemberOpts(t *testing.T, r *fleettest.Redis, account string, weight float64, quota float64, local limiter.BucketConfig, mod func(*fleet.Config), opts fleet.Options) *member {
	t.Helper()
	cfg := r.Config(account)
	cfg.Weight = weight
	cfg.RedisTimeout = fleet.Duration{Duration: testTimeout}
	cfg.Heartbeat = fleet.Duration{Duration: 100 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	ev := &events{}
	opts.Observer, opts.Logf = ev, ev.logf
	f, err := fleet.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := f.Limiter("read", quota, local, nil)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return &member{f: f, l: l, ev: ev}
}

// eventually polls cond until it holds, failing after 10 s: a bounded loop
// for state changed by other goroutines, not a timing assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// load runs greedy callers and timestamps every admission.
type load struct {
	mu    sync.Mutex
	times map[string][]time.Time
}

// run has `callers` goroutines per (name, limiter, priority) call Wait in a
// loop until ctx ends.
func (ld *load) run(ctx context.Context, wg *sync.WaitGroup, name string, l limiter.Admitter, p limiter.Priority, callers int) {
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := l.Wait(ctx, p); err != nil {
					return
				}
				now := time.Now()
				ld.mu.Lock()
				ld.times[name] = append(ld.times[name], now)
				ld.mu.Unlock()
			}
		}()
	}
}

// drive runs the given loads for d and returns the admission times by name.
func drive(d time.Duration, loads func(ctx context.Context, wg *sync.WaitGroup, ld *load)) (time.Time, map[string][]time.Time) {
	ld := &load{times: map[string][]time.Time{}}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	loads(ctx, &wg, ld)
	wg.Wait()
	return start, ld.times
}

// perSecond counts times in each whole second after start.
func perSecond(start time.Time, secs int, times ...[]time.Time) []int {
	out := make([]int, secs)
	for _, ts := range times {
		for _, at := range ts {
			if i := int(at.Sub(start) / time.Second); i >= 0 && i < secs {
				out[i]++
			}
		}
	}
	return out
}

// slack is the allowance for admissions granted at the end of one second
// and timestamped (after the goroutine is scheduled) in the next.
const slack = 1.1

var local = limiter.BucketConfig{QPS: 100, Burst: 10, Adaptive: true}

// TestSharedQuotaNeverExceeded: three members sharing one account, each
// with greedy callers, stay under the quota in every second, and together
// use most of it.
func TestSharedQuotaNeverExceeded(t *testing.T) {
	r := fleettest.Start(t)
	const quota, secs = 100.0, 3
	ms := []*member{
		newMember(t, r, "acct-a", 1, quota, local, nil),
		newMember(t, r, "acct-a", 1, quota, local, nil),
		newMember(t, r, "acct-a", 1, quota, local, nil),
	}
	start, times := drive(secs*time.Second, func(ctx context.Context, wg *sync.WaitGroup, ld *load) {
		for i, m := range ms {
			ld.run(ctx, wg, fmt.Sprint(i), m.l, limiter.PriorityNormal, 6)
			ld.run(ctx, wg, fmt.Sprint(i), m.l, limiter.PriorityCritical, 2)
		}
	})
	counts := perSecond(start, secs, times["0"], times["1"], times["2"])
	total := len(times["0"]) + len(times["1"]) + len(times["2"])
	t.Logf("admissions per second %v, by member %d/%d/%d, total %d", counts,
		len(times["0"]), len(times["1"]), len(times["2"]), total)
	for i, c := range counts {
		if limit := slack * (quota + float64(local.Burst)); float64(c) > limit {
			t.Errorf("second %d: %d admissions, over the quota %v + burst %d (+10%%)", i, c, quota, local.Burst)
		}
	}
	if limit := quota*secs + float64(local.Burst) + quota*0.1; float64(total) > limit {
		t.Errorf("total %d admissions in %ds, over quota×time + burst = %v", total, secs, limit)
	}
	if min := 0.5 * quota * secs; float64(total) < min {
		t.Errorf("total %d admissions in %ds: the fleet used under half its quota (want >= %v)", total, secs, min)
	}
	for i, m := range ms {
		if m.f.Fallback() {
			t.Errorf("member %d fell back during the run: %v", i, m.ev.logs)
		}
		if _, fb, _ := m.ev.counts(); fb != 0 {
			t.Errorf("member %d admitted %d calls in fallback", i, fb)
		}
	}
	// Every member reads the fleet's usage from Redis: the calls of all
	// three over the time since its first heartbeat, against the quota.
	time.Sleep(300 * time.Millisecond) // a heartbeat or two after the load
	for i, m := range ms {
		if u := m.ev.lastUsage(); u < 0.3 || u > 1.2 {
			t.Errorf("member %d reports fleet usage %.2f, want the fleet's (about %.2f)", i, u, float64(total)/(quota*secs))
		}
	}
}

// TestIdleShareServesBusy: the idle members' shares serve the busy one.
func TestIdleShareServesBusy(t *testing.T) {
	r := fleettest.Start(t)
	const quota, secs = 100.0, 2
	busy := newMember(t, r, "acct-b", 1, quota, local, nil)
	newMember(t, r, "acct-b", 1, quota, local, nil)
	newMember(t, r, "acct-b", 1, quota, local, nil)
	eventually(t, "three members registered", func() bool { return math.Abs(busy.l.ShareQPS()-quota/3) < 1e-9 })
	_, times := drive(secs*time.Second, func(ctx context.Context, wg *sync.WaitGroup, ld *load) {
		ld.run(ctx, wg, "busy", busy.l, limiter.PriorityNormal, 8)
	})
	n := len(times["busy"])
	t.Logf("busy member: %d admissions in %ds (static share %.1f/s, quota %v/s)", n, secs, busy.l.ShareQPS(), quota)
	// Non-critical calls may use 1 - criticalShare of the quota.
	usable := quota * (1 - fleet.DefaultCriticalShare)
	if float64(n) < 0.7*usable*secs {
		t.Errorf("busy member got %d admissions, want >= %v: the idle members' shares did not serve it", n, 0.7*usable*secs)
	}
	if float64(n) > slack*(usable*secs+float64(local.Burst)) {
		t.Errorf("busy member got %d admissions, over %v/s × %ds + burst", n, usable, secs)
	}
}

// TestCriticalReservedSlice: however many normal calls the fleet has,
// critical calls get the reserved slice, and normal calls never more than
// the rest.
func TestCriticalReservedSlice(t *testing.T) {
	r := fleettest.Start(t)
	const quota, secs = 100.0, 3
	a := newMember(t, r, "acct-c", 1, quota, local, nil)
	b := newMember(t, r, "acct-c", 1, quota, local, nil)
	c := newMember(t, r, "acct-c", 1, quota, local, nil)
	start, times := drive(secs*time.Second, func(ctx context.Context, wg *sync.WaitGroup, ld *load) {
		ld.run(ctx, wg, "normal", a.l, limiter.PriorityNormal, 8)
		ld.run(ctx, wg, "normal", b.l, limiter.PriorityBackground, 8)
		ld.run(ctx, wg, "critical", c.l, limiter.PriorityCritical, 2)
	})
	normal, critical := len(times["normal"]), len(times["critical"])
	t.Logf("normal+background %d, critical %d in %ds (quota %v/s, reserved %v)", normal, critical, secs, quota, fleet.DefaultCriticalShare)
	reserved := quota * fleet.DefaultCriticalShare
	if float64(critical) < 0.75*reserved*secs {
		t.Errorf("critical calls got %d admissions, want >= %v (75%% of the reserved slice)", critical, 0.75*reserved*secs)
	}
	burstOther := float64(local.Burst) * (1 - fleet.DefaultCriticalShare)
	if lim := slack * ((quota-reserved)*secs + burstOther); float64(normal) > lim {
		t.Errorf("non-critical calls got %d admissions, over the unreserved %v/s × %ds + burst (%v)", normal, quota-reserved, secs, lim)
	}
	for i, n := range perSecond(start, secs, times["normal"], times["critical"]) {
		if float64(n) > slack*(quota+float64(local.Burst)) {
			t.Errorf("second %d: %d admissions, over the quota", i, n)
		}
	}
}

// TestFleetAIMD: a throttle seen by one member cuts the rate of all, a
// Retry-After pauses all, and the recovery is shared.
func TestFleetAIMD(t *testing.T) {
	r := fleettest.Start(t)
	const quota = 100.0
	slow := local
	slow.RecoveryQPSPerSecond = 0.001 // no recovery during the measurement
	a := newMember(t, r, "acct-d", 1, quota, slow, nil)
	b := newMember(t, r, "acct-d", 1, quota, slow, nil)

	a.l.OnThrottled(0)
	eventually(t, "member b sees the halved rate", func() bool {
		return b.l.EffectiveQPS() > 0.49*quota && b.l.EffectiveQPS() < 0.51*quota
	})
	_, times := drive(2*time.Second, func(ctx context.Context, wg *sync.WaitGroup, ld *load) {
		ld.run(ctx, wg, "b", b.l, limiter.PriorityCritical, 6)
	})
	if n := len(times["b"]); float64(n) > slack*(0.5*quota*2+float64(local.Burst)) {
		t.Errorf("after a's throttle, b admitted %d in 2s, over the halved rate %v/s", n, 0.5*quota)
	} else if float64(n) < 0.5*0.5*quota*2 {
		t.Errorf("after a's throttle, b admitted only %d in 2s", n)
	} else {
		t.Logf("after a's throttle, b admitted %d in 2s at %v/s", n, 0.5*quota)
	}

	// A Retry-After seen by b pauses a.
	b.l.OnThrottled(5 * time.Second)
	_, times = drive(300*time.Millisecond, func(ctx context.Context, wg *sync.WaitGroup, ld *load) {
		ld.run(ctx, wg, "a", a.l, limiter.PriorityCritical, 4)
	})
	if n := len(times["a"]); n != 0 {
		t.Errorf("a admitted %d calls during b's 5s Retry-After pause", n)
	}

	// Shared recovery: c joins with a fast recovery; both see the full rate
	// again, computed from Redis' clock.
	fast := local
	fast.RecoveryQPSPerSecond = 1000
	c := newMember(t, r, "acct-e", 1, quota, fast, nil)
	d := newMember(t, r, "acct-e", 1, quota, fast, nil)
	c.l.OnThrottled(0)
	if got := c.l.EffectiveQPS(); got > 0.51*quota {
		t.Errorf("after its throttle c's rate is %v, want about %v", got, 0.5*quota)
	}
	eventually(t, "d sees the rate recovered", func() bool {
		return d.l.Wait(context.Background(), limiter.PriorityCritical) == nil && d.l.EffectiveQPS() == quota
	})
	for i, m := range []*member{a, b, c, d} {
		if m.f.Fallback() {
			t.Errorf("member %d fell back: %v", i, m.ev.logs)
		}
	}
}

// TestFallbackAndRejoin: Redis killed mid-run → every member serves at once
// from its local share, the shares (by weight) sum to the quota and bound
// what the fleet sends; Redis back → they rejoin.
func TestFallbackAndRejoin(t *testing.T) {
	r := fleettest.Start(t)
	const quota, secs = 100.0, 2
	ms := []*member{
		newMember(t, r, "acct-f", 1, quota, local, nil),
		newMember(t, r, "acct-f", 2, quota, local, nil),
		newMember(t, r, "acct-f", 1, quota, local, nil),
	}
	want := []float64{25, 50, 25}
	for i, m := range ms {
		eventually(t, "shares by weight", func() bool { return math.Abs(m.l.ShareQPS()-want[i]) < 1e-9 })
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := ms[0].l.Wait(ctx, limiter.PriorityNormal); err != nil {
		t.Fatal(err)
	}

	r.Kill()
	// The very next admission succeeds, from the local share; the member
	// falls back after fallbackAfter failed calls (admissions, heartbeats).
	for i, m := range ms {
		if err := m.l.Wait(ctx, limiter.PriorityNormal); err != nil {
			t.Fatalf("member %d: Wait with Redis down: %v", i, err)
		}
		if _, fb, _ := m.ev.counts(); fb < 1 {
			t.Errorf("member %d: admission not served by the local bucket", i)
		}
		eventually(t, fmt.Sprintf("member %d falls back", i), m.f.Fallback)
	}
	var sum float64
	for _, m := range ms {
		sum += m.l.EffectiveQPS()
	}
	if sum > quota {
		t.Errorf("fallback shares sum to %v > quota %v", sum, quota)
	}
	start, times := drive(secs*time.Second, func(ctx context.Context, wg *sync.WaitGroup, ld *load) {
		for i, m := range ms {
			ld.run(ctx, wg, fmt.Sprint(i), m.l, limiter.PriorityNormal, 4)
		}
	})
	total := 0
	for i, m := range ms {
		n := len(times[fmt.Sprint(i)])
		total += n
		// Each member within its share (+ its scaled burst).
		if lim := slack * (want[i]*secs + float64(local.Burst)); float64(n) > lim {
			t.Errorf("member %d admitted %d in fallback, over its share %v/s", i, n, want[i])
		}
		if float64(n) < 0.5*want[i]*secs {
			t.Errorf("member %d admitted only %d in fallback (share %v/s)", i, n, want[i])
		}
		_ = m
	}
	t.Logf("fallback: %d admissions in %ds, per second %v (shares %v sum %v)", total, secs,
		perSecond(start, secs, times["0"], times["1"], times["2"]), want, sum)
	if lim := slack * (quota*secs + float64(local.Burst)); float64(total) > lim {
		t.Errorf("fleet admitted %d in fallback, over the quota", total)
	}

	r.Restart()
	for i, m := range ms {
		eventually(t, fmt.Sprintf("member %d rejoins", i), func() bool { return !m.f.Fallback() })
		shared0, _, _ := m.ev.counts()
		if err := m.l.Wait(ctx, limiter.PriorityNormal); err != nil {
			t.Fatal(err)
		}
		if shared1, _, tr := m.ev.counts(); shared1 != shared0+1 {
			t.Errorf("member %d: admission after rejoin not from the shared budget", i)
		} else if len(tr) != 2 || !tr[0] || tr[1] {
			t.Errorf("member %d: transitions %v, want [true false]", i, tr)
		}
	}
	// The admissions after the rejoin went through Redis.
	if n, err := r.Admin().Get(ctx, "cloudgate:{acct-f}:read:admitted").Int(); err != nil || n != len(ms) {
		t.Errorf("fleet counter after rejoin = %d, %v; want %d", n, err, len(ms))
	}
	for i, m := range ms {
		m.ev.mu.Lock()
		for _, line := range m.ev.logs {
			if strings.Contains(line, r.Password) {
				t.Errorf("member %d logged the password: %s", i, line)
			}
		}
		if len(m.ev.logs) < 2 {
			t.Errorf("member %d: want a fallback and a rejoin log line, got %q", i, m.ev.logs)
		}
		m.ev.mu.Unlock()
	}
}

// TestSlowRedis: one admission that Redis does not answer within
// redisTimeout is served at once from the local share without switching
// modes; the call served locally is charged to the shared budget (a debt)
// by the next admission; fallbackAfter failures in a row switch to fallback.
func TestSlowRedis(t *testing.T) {
	r := fleettest.Start(t)
	const quota = 1.0
	m := newMemberOpts(t, r, "acct-g", 1, quota, limiter.BucketConfig{QPS: quota, Burst: 1}, func(c *fleet.Config) {
		c.RedisTimeout = fleet.Duration{Duration: 50 * time.Millisecond}
		c.FallbackAfter = 2
		c.Heartbeat = fleet.Duration{Duration: time.Minute} // no heartbeat failure in between
	}, fleet.Options{}) // ForgetAfter: the default, 600 heartbeats
	ctx := context.Background()
	if err := m.l.Wait(ctx, limiter.PriorityNormal); err != nil {
		t.Fatal(err)
	}
	tat := func() float64 {
		v, err := r.Admin().Get(ctx, "cloudgate:{acct-g}:read:tat").Float64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tat1 := tat()
	r.Pause(3 * time.Second)
	if err := m.l.Wait(ctx, limiter.PriorityNormal); err != nil {
		t.Fatal(err)
	}
	shared, fb, tr := m.ev.counts()
	if fb != 1 || shared != 1 || len(tr) != 0 || m.f.Fallback() {
		t.Errorf("one slow call: shared %d, local %d, transitions %v, fallback %v; want 1, 1, [], false", shared, fb, tr, m.f.Fallback())
	}
	r.Unpause()
	if err := m.l.Wait(ctx, limiter.PriorityNormal); err != nil {
		t.Fatal(err)
	}
	// Two calls admitted by Redis and one served locally: the budget's TAT
	// advanced by at least three intervals (more if Redis ran the timed-out
	// admission after the pause: those tokens are lost, never reused).
	if d := tat() - tat1; d < 2/quota-1e-3 {
		t.Errorf("TAT advanced %.3fs after one more admission and one local call; want >= %.3fs (the local call charged)", d, 2/quota)
	}
	if shared, _, tr := m.ev.counts(); shared != 2 || len(tr) != 0 {
		t.Errorf("after the pause: shared %d, transitions %v; want 2, []", shared, tr)
	}

	// fallbackAfter (2) failures in a row: fallback, then rejoin.
	m2 := newMember(t, r, "acct-g2", 1, 100, local, func(c *fleet.Config) {
		c.RedisTimeout = fleet.Duration{Duration: 50 * time.Millisecond}
		c.FallbackAfter = 2
		c.Heartbeat = fleet.Duration{Duration: 200 * time.Millisecond}
	})
	r.Pause(3 * time.Second)
	for range 2 {
		if err := m2.l.Wait(ctx, limiter.PriorityNormal); err != nil {
			t.Fatal(err)
		}
	}
	if !m2.f.Fallback() {
		t.Error("not in fallback after 2 failed calls with fallbackAfter 2")
	}
	r.Unpause()
	eventually(t, "rejoin", func() bool { return !m2.f.Fallback() })
}

// TestRedisDownAtStart: a member that never reached Redis serves at
// minShare of the quota, and joins when Redis comes up.
func TestRedisDownAtStart(t *testing.T) {
	r := fleettest.Start(t)
	r.Kill()
	m := newMember(t, r, "acct-h", 1, 100, local, func(c *fleet.Config) { c.MinShare = 0.25 })
	if !m.f.Fallback() {
		t.Fatal("not in fallback with Redis down")
	}
	if got := m.l.EffectiveQPS(); got != 25 {
		t.Errorf("fallback rate %v, want minShare 0.25 × 100", got)
	}
	if err := m.l.Wait(context.Background(), limiter.PriorityCritical); err != nil {
		t.Fatal(err)
	}
	r.Restart()
	eventually(t, "join", func() bool { return !m.f.Fallback() && m.l.ShareQPS() == 100 })
}

// TestWaitCancelAndClose: a waiter whose ctx ends returns its error; Close
// releases waiters with ErrClosed.
func TestWaitCancelAndClose(t *testing.T) {
	r := fleettest.Start(t)
	m := newMember(t, r, "acct-i", 1, 1, limiter.BucketConfig{QPS: 1, Burst: 1}, nil)
	ctx := context.Background()
	if err := m.l.Wait(ctx, limiter.PriorityCritical); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.l.Wait(cctx, limiter.PriorityNormal); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `"read"`) {
		t.Errorf("Wait with a cancelled ctx = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- m.l.Wait(ctx, limiter.PriorityNormal) }()
	eventually(t, "a queued waiter", func() bool { return m.l.Waiting() == 1 })
	m.f.Close()
	select {
	case err := <-done:
		if !errors.Is(err, limiter.ErrClosed) {
			t.Errorf("Wait after Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait not released by Close")
	}
}

func TestConfigValidate(t *testing.T) {
	bad, zero := -0.5, 0.0
	tests := []struct {
		name string
		cfg  fleet.Config
		want string // "" means valid
	}{
		{"minimal", fleet.Config{Redis: fleet.RedisConfig{Address: "redis:6379"}, Account: "acct"}, ""},
		{"no address", fleet.Config{Account: "acct"}, "limits.shared.redis.address is required"},
		{"bad address", fleet.Config{Redis: fleet.RedisConfig{Address: "redis"}, Account: "acct"}, "limits.shared.redis.address must be host:port"},
		{"bad port", fleet.Config{Redis: fleet.RedisConfig{Address: "redis:99999"}, Account: "acct"}, "limits.shared.redis.address: port"},
		{"no account", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}}, "limits.shared.account is required"},
		{"bad account", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a b"}, "limits.shared.account"},
		{"weight", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", Weight: -1}, "limits.shared.weight"},
		{"minShare", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", MinShare: 2}, "limits.shared.minShare"},
		{"criticalShare", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", CriticalShare: &bad}, "limits.shared.criticalShare"},
		{"redisTimeout", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", RedisTimeout: fleet.Duration{Duration: time.Minute}}, "limits.shared.redisTimeout"},
		{"tls fields without tls", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1", TLS: fleet.TLSConfig{CAFile: "/ca"}}, Account: "a"}, "limits.shared.redis.tls"},
		{"sentinel", fleet.Config{Redis: fleet.RedisConfig{Addresses: []string{"s1:26379", "s2:26379"}, MasterName: "m"}, Account: "a"}, ""},
		{"cluster", fleet.Config{Redis: fleet.RedisConfig{Addresses: []string{"r1:6379", "r2:6379"}}, Account: "a"}, ""},
		{"address and addresses", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1", Addresses: []string{"r:2"}}, Account: "a"}, "exclude each other"},
		{"bad addresses entry", fleet.Config{Redis: fleet.RedisConfig{Addresses: []string{"r:1", "r2"}}, Account: "a"}, "limits.shared.redis.addresses[1] must be host:port"},
		{"masterName with address", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1", MasterName: "m"}, Account: "a"}, "limits.shared.redis.masterName needs redis.addresses"},
		{"sentinel password without masterName", fleet.Config{Redis: fleet.RedisConfig{Addresses: []string{"r:1"}, SentinelPasswordFile: "/p"}, Account: "a"}, "limits.shared.redis.sentinelPasswordFile needs redis.masterName"},
		{"backgroundShare", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", BackgroundShare: &zero}, "limits.shared.backgroundShare"},
		{"fallbackAfter", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", FallbackAfter: 500}, "limits.shared.fallbackAfter"},
		{"heartbeat", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", Heartbeat: fleet.Duration{Duration: time.Millisecond}}, "limits.shared.heartbeat"},
		{"recovery", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", Recovery: fleet.Duration{Duration: 2 * time.Hour}}, "limits.shared.recovery"},
		{"forgetAfter below 10 heartbeats", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", ForgetAfter: fleet.Duration{Duration: 5 * time.Second}}, "limits.shared.forgetAfter must be between 10 heartbeats (10s)"},
		{"forgetAfter above 24h", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", ForgetAfter: fleet.Duration{Duration: 25 * time.Hour}}, "limits.shared.forgetAfter"},
		{"failureMode", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", FailureMode: "deny"}, `limits.shared.failureMode must be "open" or "closed" (got "deny"`},
		{"failureMode closed", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", FailureMode: "closed"}, ""},
		{"maxMembers", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", MaxMembers: -1}, "limits.shared.maxMembers must be between 1 and 10000"},
		{"forgetAfter", fleet.Config{Redis: fleet.RedisConfig{Address: "r:1"}, Account: "a", Heartbeat: fleet.Duration{Duration: 100 * time.Millisecond}, ForgetAfter: fleet.Duration{Duration: 10 * time.Minute}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestPasswordFileErrors(t *testing.T) {
	dir := t.TempDir()
	const secret = "s3cret-never-shown"
	twoLines := filepath.Join(dir, "two")
	if err := os.WriteFile(twoLines, []byte(secret+"\nmore\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ file, want string }{
		{filepath.Join(dir, "missing"), "limits.shared.redis.passwordFile: cannot read"},
		{twoLines, "more than one line"},
		{empty, "is empty"},
	} {
		cfg := fleet.Config{Redis: fleet.RedisConfig{Address: "127.0.0.1:1", PasswordFile: tt.file}, Account: "a"}
		_, err := fleet.New(cfg, fleet.Options{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New with passwordFile %s = %v, want %q", tt.file, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// TestWrongPassword: a rejected password is "Redis unavailable": the member
// serves from its fallback share, and the log line does not show it.
func TestWrongPassword(t *testing.T) {
	r := fleettest.Start(t)
	wrong := filepath.Join(t.TempDir(), "pw")
	const secret = "wrong-password-never-shown"
	if err := os.WriteFile(wrong, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	m := newMember(t, r, "acct-j", 1, 100, local, func(c *fleet.Config) { c.Redis.PasswordFile = wrong })
	if !m.f.Fallback() {
		t.Fatal("not in fallback with a wrong password")
	}
	if err := m.l.Wait(context.Background(), limiter.PriorityNormal); err != nil {
		t.Fatal(err)
	}
	m.ev.mu.Lock()
	defer m.ev.mu.Unlock()
	if len(m.ev.logs) == 0 {
		t.Fatal("no log line for the fallback")
	}
	for _, line := range m.ev.logs {
		if strings.Contains(line, secret) || strings.Contains(line, r.Password) {
			t.Errorf("log line shows a password: %s", line)
		}
	}
	t.Logf("log: %s", m.ev.logs[0])
}

var _ fleet.Observer = (*events)(nil)

// TestConfigYAML: the YAML field names of limits.shared, strictly.
func TestConfigYAML(t *testing.T) {
	doc := `
limits:
  shared:
    redis:
      address: redis.example:6380
      username: cloudgate
      passwordFile: /etc/cloudgate/redis-password
      tls: {enabled: true, caFile: /etc/cloudgate/ca.pem, serverName: redis.internal}
    account: aws-123456789012-eu-west-1
    weight: 2
    minShare: 0.25
    criticalShare: 0
    redisTimeout: 8ms
`
	var got struct {
		Limits struct {
			Shared fleet.Config `json:"shared"`
		} `json:"limits"`
	}
	if err := yaml.UnmarshalStrict([]byte(doc), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Limits.Shared
	if c.Redis.Address != "redis.example:6380" || c.Redis.Username != "cloudgate" ||
		c.Redis.PasswordFile != "/etc/cloudgate/redis-password" || !c.Redis.TLS.Enabled ||
		c.Redis.TLS.CAFile != "/etc/cloudgate/ca.pem" || c.Redis.TLS.ServerName != "redis.internal" ||
		c.Account != "aws-123456789012-eu-west-1" || c.Weight != 2 || c.MinShare != 0.25 ||
		c.CriticalShare == nil || *c.CriticalShare != 0 || c.RedisTimeout.Duration != 8*time.Millisecond {
		t.Errorf("parsed %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for _, bad := range []string{
		"limits: {shared: {account: a, redis: {address: 'r:1', password: x}}}",
		"limits: {shared: {account: a, redis: {address: 'r:1'}, redisTimeout: 5}}",
	} {
		if err := yaml.UnmarshalStrict([]byte(bad), &got); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestTLSCAFileErrors(t *testing.T) {
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ file, want string }{
		{filepath.Join(t.TempDir(), "missing.pem"), "limits.shared.redis.tls.caFile"},
		{notPEM, "holds no PEM certificate"},
	} {
		cfg := fleet.Config{Redis: fleet.RedisConfig{Address: "127.0.0.1:1", TLS: fleet.TLSConfig{Enabled: true, CAFile: tt.file}}, Account: "a"}
		if _, err := fleet.New(cfg, fleet.Options{}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("caFile %s: New = %v, want %q", tt.file, err, tt.want)
		}
	}
}

// TestRedisKilledUnderLoad: Redis killed and restarted while three members
// admit greedily: no caller gets an error, and the fleet stays within the
// quota plus the bursts the restart allows (Redis' state is lost with it).
func TestRedisKilledUnderLoad(t *testing.T) {
	r := fleettest.Start(t)
	const quota, secs = 100.0, 4
	ms := []*member{
		newMember(t, r, "acct-k", 1, quota, local, nil),
		newMember(t, r, "acct-k", 1, quota, local, nil),
		newMember(t, r, "acct-k", 1, quota, local, nil),
	}
	for _, m := range ms {
		eventually(t, "three members registered", func() bool { return math.Abs(m.l.ShareQPS()-quota/3) < 1e-9 })
	}
	var errMu sync.Mutex
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), secs*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var timesMu sync.Mutex
	var times []time.Time
	start := time.Now()
	for _, m := range ms {
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					err := m.l.Wait(ctx, limiter.PriorityNormal)
					if ctx.Err() != nil {
						return
					}
					if err != nil {
						errMu.Lock()
						errs = append(errs, err)
						errMu.Unlock()
						return
					}
					timesMu.Lock()
					times = append(times, time.Now())
					timesMu.Unlock()
				}
			}()
		}
	}
	time.Sleep(time.Second)
	r.Kill()
	time.Sleep(time.Second)
	r.Restart()
	wg.Wait()
	if len(errs) > 0 {
		t.Errorf("%d callers got errors while Redis was killed and restarted, e.g. %v", len(errs), errs[0])
	}
	counts := perSecond(start, secs, times)
	t.Logf("admissions per second %v (quota %v/s; Redis down in second 1, restarted in second 2)", counts, quota)
	// Burst before the kill, the fallback buckets' bursts, a fresh burst
	// after the restart.
	bursts := 3 * float64(local.Burst)
	for i, c := range counts {
		if float64(c) > slack*(quota+bursts) {
			t.Errorf("second %d: %d admissions, over the quota + bursts", i, c)
		}
	}
	if total := len(times); float64(total) > slack*(quota*secs+bursts) {
		t.Errorf("%d admissions in %ds, over the quota × time + bursts", total, secs)
	}
	for i, m := range ms {
		shared, fb, tr := m.ev.counts()
		if fb == 0 || shared == 0 || len(tr) < 2 {
			t.Errorf("member %d: %d shared, %d fallback admissions, transitions %v: want both modes and a rejoin", i, shared, fb, tr)
		}
	}
}

// TestMembership: a member counts while its heartbeat is recent; one that
// stops heartbeating stops counting after the member TTL, and one that
// closes deregisters at once, so the others' static shares grow.
func TestMembership(t *testing.T) {
	r := fleettest.Start(t)
	const quota = 90.0
	a := newMember(t, r, "acct-l", 1, quota, local, nil)
	b := newMember(t, r, "acct-l", 2, quota, local, nil)
	near := func(m *member, want float64) func() bool {
		return func() bool { return math.Abs(m.l.ShareQPS()-want) < 1e-9 }
	}
	eventually(t, "a at weight 1 of 3", near(a, 30))
	eventually(t, "b at weight 2 of 3", near(b, 60))

	// A member that heartbeated once (now, on Redis' clock) and then went
	// silent: it counts, then expires after the TTL (3 heartbeats).
	ctx := context.Background()
	tm, err := r.Admin().Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Admin().HSet(ctx, "cloudgate:{acct-l}:weights", "ghost", "3").Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Admin().ZAdd(ctx, "cloudgate:{acct-l}:heartbeats", redis.Z{Score: float64(tm.UnixMilli()), Member: "ghost"}).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a at weight 1 of 6 with the ghost", near(a, 15))
	// Silent for more than the TTL, the ghost has fallen: it still counts
	// in the shares and the live members hold its share of the budget.
	eventually(t, "the ghost's share held", func() bool {
		h, n := a.f.Held()
		return n == 1 && math.Abs(h-0.5) < 1e-6
	})
	if !near(a, 15)() {
		t.Errorf("a's share %v while the ghost has fallen; want 15", a.l.ShareQPS())
	}
	eventually(t, "the ghost is forgotten: a at weight 1 of 3 again", near(a, 30))
	if h, n := a.f.Held(); h != 0 || n != 0 {
		t.Errorf("held %v for %d fallen members after the ghost was forgotten", h, n)
	}
	if n, err := r.Admin().HExists(ctx, "cloudgate:{acct-l}:weights", "ghost").Result(); err != nil || n {
		t.Errorf("expired member still registered: %v %v", n, err)
	}

	b.f.Close()
	if n, err := r.Admin().HExists(ctx, "cloudgate:{acct-l}:weights", b.f.Member()).Result(); err != nil || n {
		t.Errorf("closed member still registered: %v %v", n, err)
	}
	eventually(t, "a alone after b closed", near(a, 90))
}

// proxy forwards TCP connections to addr until cut: a network partition
// between one member and Redis, which restore heals.
type proxy struct {
	ln      net.Listener
	mu      sync.Mutex
	conns   []net.Conn
	blocked bool
}

func newProxy(t *testing.T, addr string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			blocked := p.blocked
			p.mu.Unlock()
			if blocked {
				c.Close()
				continue
			}
			u, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { p.cut(); ln.Close() })
	return p
}

// cut closes every connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// restore forwards new connections again.
func (p *proxy) restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blocked = false
}

// TestFallenShareHeld: one member loses Redis alone and serves from its
// local share; the members still in Redis hold that share back, so the
// fleet as a whole stays within the quota.
func TestFallenShareHeld(t *testing.T) {
	r := fleettest.Start(t)
	const quota, secs = 90.0, 2
	px := newProxy(t, r.Addr)
	a := newMember(t, r, "acct-m", 1, quota, local, nil)
	b := newMember(t, r, "acct-m", 1, quota, local, nil)
	c := newMember(t, r, "acct-m", 1, quota, local, func(c *fleet.Config) { c.Redis.Address = px.ln.Addr().String() })
	for _, m := range []*member{a, b, c} {
		eventually(t, "three members", func() bool { return math.Abs(m.l.ShareQPS()-quota/3) < 1e-9 })
	}
	px.cut()
	eventually(t, "c falls back", c.f.Fallback)
	eventually(t, "a holds c's share", func() bool { h, n := a.f.Held(); return n == 1 && math.Abs(h-1.0/3) < 1e-6 })
	if a.f.Fallback() || b.f.Fallback() {
		t.Fatal("a or b fell back too")
	}
	start, times := drive(secs*time.Second, func(ctx context.Context, wg *sync.WaitGroup, ld *load) {
		ld.run(ctx, wg, "a", a.l, limiter.PriorityCritical, 4)
		ld.run(ctx, wg, "b", b.l, limiter.PriorityCritical, 4)
		ld.run(ctx, wg, "c", c.l, limiter.PriorityCritical, 4)
	})
	ab, nc := len(times["a"])+len(times["b"]), len(times["c"])
	t.Logf("a+b %d, c %d in %ds, per second %v (quota %v/s, c's share %v/s)", ab, nc, secs,
		perSecond(start, secs, times["a"], times["b"], times["c"]), quota, quota/3)
	if lim := slack * (quota*2/3*secs + float64(local.Burst)); float64(ab) > lim {
		t.Errorf("a+b admitted %d, over the quota minus c's held share (%v)", ab, lim)
	}
	if lim := slack * (quota*secs + 2*float64(local.Burst)); float64(ab+nc) > lim {
		t.Errorf("the fleet admitted %d in %ds, over the quota (%v)", ab+nc, secs, lim)
	}
	if float64(ab) < 0.5*quota*2/3*secs || float64(nc) < 0.5*quota/3*secs {
		t.Errorf("a+b %d, c %d: far below their shares", ab, nc)
	}
}

// TestBackgroundShare: with backgroundShare, background calls of every
// member together stay within that fraction of the quota, while normal
// calls use the rest.
func TestBackgroundShare(t *testing.T) {
	r := fleettest.Start(t)
	const quota, secs, bg = 100.0, 2, 0.25
	mod := func(c *fleet.Config) { v := bg; c.BackgroundShare = &v }
	a := newMember(t, r, "acct-n", 1, quota, local, mod)
	b := newMember(t, r, "acct-n", 1, quota, local, mod)
	start, times := drive(secs*time.Second, func(ctx context.Context, wg *sync.WaitGroup, ld *load) {
		ld.run(ctx, wg, "bg", a.l, limiter.PriorityBackground, 4)
		ld.run(ctx, wg, "bg", b.l, limiter.PriorityBackground, 4)
		ld.run(ctx, wg, "normal", b.l, limiter.PriorityNormal, 4)
	})
	nb, nn := len(times["bg"]), len(times["normal"])
	t.Logf("background %d, normal %d in %ds, per second %v (quota %v/s, backgroundShare %v)", nb, nn, secs,
		perSecond(start, secs, times["bg"], times["normal"]), quota, bg)
	if lim := slack * (bg*quota*secs + float64(local.Burst)); float64(nb) > lim {
		t.Errorf("background admitted %d, over backgroundShare × quota (%v)", nb, lim)
	}
	if float64(nn) < 0.5*(1-fleet.DefaultCriticalShare-bg)*quota*secs {
		t.Errorf("normal admitted only %d next to greedy background calls", nn)
	}
	if float64(nb) < 0.5*bg*quota*secs {
		t.Errorf("background admitted only %d", nb)
	}
}

// TestSentinelFailover: a member configured with masterName and the
// Sentinels' addresses shares the budget on the master; when the master is
// killed, the member keeps serving (locally), and once the Sentinel has
// promoted the replica it rejoins the shared budget there.
func TestSentinelFailover(t *testing.T) {
	master := fleettest.Start(t)
	replica, err := fleettest.StartServer(fleettest.ServerOptions{Bin: fleettest.Bin(t), Dir: t.TempDir(), Password: master.Password, ReplicaOf: master.Addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Close() })
	sentinel, err := fleettest.StartServer(fleettest.ServerOptions{Bin: fleettest.Bin(t), Dir: t.TempDir(), Password: master.Password, Sentinel: master.Addr, MasterName: "cg"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sentinel.Close() })
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr, Password: sentinel.Password, DisableIdentity: true})
	defer sc.Close()
	ctx := context.Background()
	eventually(t, "the Sentinel sees the replica", func() bool {
		rs, err := sc.Replicas(ctx, "cg").Result()
		return err == nil && len(rs) == 1
	})

	m := newMember(t, master, "acct-s", 1, 100, local, func(c *fleet.Config) {
		c.Redis = fleet.RedisConfig{Addresses: []string{sentinel.Addr}, MasterName: "cg",
			PasswordFile: master.PasswordFile, SentinelPasswordFile: sentinel.PasswordFile}
	})
	if m.f.Fallback() {
		t.Fatal("in fallback with the master up")
	}
	if err := m.l.Wait(ctx, limiter.PriorityNormal); err != nil {
		t.Fatal(err)
	}
	if shared, _, _ := m.ev.counts(); shared != 1 {
		t.Fatalf("admission through the Sentinel's master not shared (%d)", shared)
	}

	master.Kill()
	if err := m.l.Wait(ctx, limiter.PriorityNormal); err != nil {
		t.Fatalf("Wait with the master down: %v", err)
	}
	eventually(t, "the Sentinel promotes the replica", func() bool {
		a, err := sc.GetMasterAddrByName(ctx, "cg").Result()
		return err == nil && len(a) == 2 && net.JoinHostPort(a[0], a[1]) == replica.Addr
	})
	eventually(t, "the member on the new master", func() bool {
		shared0, _, _ := m.ev.counts()
		if m.f.Fallback() || m.l.Wait(ctx, limiter.PriorityNormal) != nil {
			return false
		}
		shared1, _, _ := m.ev.counts()
		return shared1 == shared0+1
	})
	rc := replica.Client()
	defer rc.Close()
	if n, err := rc.Get(ctx, "cloudgate:{acct-s}:read:admitted").Int(); err != nil || n < 1 {
		t.Errorf("the promoted replica's admission counter = %d, %v; want >= 1", n, err)
	}
}

// TestRedisCluster: with addresses and no masterName the member uses a
// Redis Cluster client; every key of the account carries the hash tag, so
// the scripts run in one slot.
func TestRedisCluster(t *testing.T) {
	node, err := fleettest.StartServer(fleettest.ServerOptions{Bin: fleettest.Bin(t), Dir: t.TempDir(), Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	c := node.Client()
	defer c.Close()
	ctx := context.Background()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "cluster state ok", func() bool {
		info, err := c.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	cfg := fleet.Config{Redis: fleet.RedisConfig{Addresses: []string{node.Addr}, PasswordFile: node.PasswordFile},
		Account: "acct-c", RedisTimeout: fleet.Duration{Duration: testTimeout}}
	ev := &events{}
	f, err := fleet.New(cfg, fleet.Options{Heartbeat: 100 * time.Millisecond, Observer: ev, Logf: ev.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := f.Limiter("read", 100, local, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := l.Wait(ctx, limiter.PriorityNormal); err != nil {
			t.Fatal(err)
		}
	}
	if shared, fb, tr := ev.counts(); shared != 3 || fb != 0 || len(tr) != 0 {
		t.Errorf("on a Redis Cluster: shared %d, local %d, transitions %v; want 3, 0, []", shared, fb, tr)
	}
}

// TestFleetRetryAfterCapped: a Retry-After far above throttle.maxRetryAfter
// pauses the fleet only for maxRetryAfter, as it would a local bucket (issue
// 24, item 1: the cap reached only the fallback bucket, and one member's
// Retry-After: 3600 paused every member for an hour).
func TestFleetRetryAfterCapped(t *testing.T) {
	r := fleettest.Start(t)
	capped := local
	capped.MaxRetryAfter = 300 * time.Millisecond
	a := newMember(t, r, "acct-ra", 1, 100, capped, nil)
	b := newMember(t, r, "acct-ra", 1, 100, capped, nil)
	a.l.OnThrottled(time.Hour)
	if a.f.Fallback() {
		t.Fatalf("a fell back: %v", a.ev.logs)
	}
	// Well past the cap (the admissions use Redis' clock), b is admitted
	// from the shared budget; with the uncapped pause it waits an hour.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.l.Wait(ctx, limiter.PriorityCritical); err != nil {
		t.Fatalf("b still paused after maxRetryAfter (%v): %v", capped.MaxRetryAfter, err)
	}
	if b.f.Fallback() {
		t.Fatalf("b fell back: %v", b.ev.logs)
	}
}

// TestAddressPasswordNotQuoted: an address in the URL form with a password
// (redis://default:PASSWORD@host:6379) is rejected by an error that names
// the field and the fix but not the password, in Validate and in New, nor
// in any log line.
func TestAddressPasswordNotQuoted(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	for _, tt := range []struct {
		name  string
		redis fleet.RedisConfig
		field string
	}{
		{"url", fleet.RedisConfig{Address: "redis://default:" + secret + "@redis.example:6379"}, "limits.shared.redis.address"},
		{"url without port", fleet.RedisConfig{Address: "redis://default:" + secret + "@redis.example"}, "limits.shared.redis.address"},
		{"userinfo without scheme", fleet.RedisConfig{Address: "default:" + secret + "@redis.example:6379"}, "limits.shared.redis.address"},
		{"tls url", fleet.RedisConfig{Address: "rediss://:" + secret + "@redis.example:6380"}, "limits.shared.redis.address"},
		{"addresses entry", fleet.RedisConfig{Addresses: []string{"r:1", "redis://u:" + secret + "@r2:6379"}}, "limits.shared.redis.addresses[1]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fleet.Config{Redis: tt.redis, Account: "acct"}
			err := cfg.Validate()
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Validate() quotes the password: %v", err)
			}
			if !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), "passwordFile") {
				t.Errorf("Validate() = %v, want it to name %s and redis.passwordFile", err, tt.field)
			}
			ev := &events{}
			f, err := fleet.New(cfg, fleet.Options{Observer: ev, Logf: ev.logf})
			if err == nil {
				f.Close()
				t.Fatal("New() = nil error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("New() quotes the password: %v", err)
			}
			for _, line := range ev.logs {
				if strings.Contains(line, secret) {
					t.Errorf("a log line quotes the password: %s", line)
				}
			}
		})
	}
}

// TestJoinWhileFallen: a member that fell back keeps the claim it recorded
// with its last heartbeat (a third of the quota here); a member that joins
// with weight 3 meanwhile must not shrink what the others hold for it
// (recomputing held from the new weights while the fallen member kept
// serving its old share would let the fleet exceed its budget).
func TestJoinWhileFallen(t *testing.T) {
	r := fleettest.Start(t)
	const quota, secs = 90.0, 2
	px := newProxy(t, r.Addr)
	a := newMember(t, r, "acct-j", 1, quota, local, nil)
	b := newMember(t, r, "acct-j", 1, quota, local, nil)
	c := newMember(t, r, "acct-j", 1, quota, local, func(c *fleet.Config) { c.Redis.Address = px.ln.Addr().String() })
	for _, m := range []*member{a, b, c} {
		eventually(t, "three members", func() bool { return math.Abs(m.l.ShareQPS()-quota/3) < 1e-9 })
	}
	px.cut()
	eventually(t, "c falls back", c.f.Fallback)
	eventually(t, "a holds c's claim", func() bool { h, n := a.f.Held(); return n == 1 && math.Abs(h-1.0/3) < 1e-6 })
	d := newMember(t, r, "acct-j", 3, quota, local, nil)
	// d's claim is its weight's part of what c's claim leaves: 2/3 × 3/5.
	eventually(t, "d's share", func() bool { return math.Abs(d.l.ShareQPS()-quota*2/3*3/5) < 1e-6 })
	for _, m := range []*member{a, b} {
		eventually(t, "a's and b's shares", func() bool { return math.Abs(m.l.ShareQPS()-quota*2/3*1/5) < 1e-6 })
	}
	if got := c.l.ShareQPS(); math.Abs(got-quota/3) > 1e-6 {
		t.Fatalf("c serves %v/s in fallback, want its claim %v/s", got, quota/3)
	}
	for _, m := range []*member{a, b, d} {
		if h, n := m.f.Held(); n != 1 || math.Abs(h-1.0/3) > 1e-6 {
			t.Errorf("held %v for %d fallen members, want c's claim 1/3: live budget %v/s + c's %v/s > quota %v/s",
				h, n, quota*(1-h), quota/3, quota)
		}
	}
	// Every claim (the live members' and the held one) sums to at most 1.
	var sum float64
	for _, m := range []*member{a, b, c, d} {
		sum += m.l.ShareQPS() / quota
	}
	if sum > 1+1e-6 {
		t.Errorf("claims sum to %v of the quota, over 1", sum)
	}
	start, times := drive(secs*time.Second, func(ctx context.Context, wg *sync.WaitGroup, ld *load) {
		for _, x := range []struct {
			n string
			m *member
		}{{"a", a}, {"b", b}, {"c", c}, {"d", d}} {
			ld.run(ctx, wg, x.n, x.m.l, limiter.PriorityCritical, 3)
		}
	})
	total := len(times["a"]) + len(times["b"]) + len(times["c"]) + len(times["d"])
	t.Logf("fleet admitted %d in %ds, per second %v (quota %v/s)", total, secs,
		perSecond(start, secs, times["a"], times["b"], times["c"], times["d"]), quota)
	if lim := slack * (quota*secs + 2*float64(local.Burst)); float64(total) > lim {
		t.Errorf("the fleet admitted %d in %ds, over the quota (%v)", total, secs, lim)
	}
}

// TestCutLongerThanForgetAfter: a member cut from Redis
// for longer than ForgetAfter is forgotten by the others, who free its
// claim; it must have stopped admitting by then. It serves its claim until
// ForgetAfter − MemberTTL after the last heartbeat it sent that was answered,
// then admits nothing (its waiters park, none fails) until Redis answers,
// and rejoins with a new claim. Before the fix c kept admitting its third
// while a and b used the whole quota.
//
// failureMode closed; TestCutLongerThanForgetAfterOpen checks open.
func TestCutLongerThanForgetAfter(t *testing.T) {
	r := fleettest.Start(t)
	const quota = 90.0
	px := newProxy(t, r.Addr)
	a := newMember(t, r, "acct-away", 1, quota, local, nil)
	b := newMember(t, r, "acct-away", 1, quota, local, nil)
	c := newMember(t, r, "acct-away", 1, quota, local, func(c *fleet.Config) {
		c.Redis.Address = px.ln.Addr().String()
		c.FailureMode = fleet.FailureClosed
	})
	for _, m := range []*member{a, b, c} {
		eventually(t, "three members", func() bool { return math.Abs(m.l.ShareQPS()-quota/3) < 1e-9 })
	}
	px.cut()
	eventually(t, "c falls back", c.f.Fallback)
	eventually(t, "a holds c's claim", func() bool { _, n := a.f.Held(); return n == 1 })
	// newMember: ForgetAfter 2 s, heartbeat 100 ms, so MemberTTL 300 ms: c
	// goes away 1.7 s after it sent its last answered heartbeat; a may forget
	// it 2 s after Redis recorded that heartbeat. Never the other way round.
	eventually(t, "c goes away", func() bool {
		if _, n := a.f.Held(); n == 0 && c.l.ShareQPS() > 0 {
			t.Fatalf("a forgot c (freed its claim) while c still serves %v/s", c.l.ShareQPS())
		}
		return c.l.ShareQPS() == 0
	})
	eventually(t, "a forgets c", func() bool { h, n := a.f.Held(); return h == 0 && n == 0 })
	// Greedy callers on c while it is away: none is admitted, none fails
	// other than by its own deadline; a waiter parked across the rejoin is
	// admitted.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err := c.l.Wait(ctx, limiter.PriorityCritical)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("c admitted (or failed otherwise) while away: %v", err)
	}
	if c.l.EffectiveQPS() != 0 {
		t.Errorf("c's effective rate while away %v, want 0", c.l.EffectiveQPS())
	}
	parked := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		parked <- c.l.Wait(ctx, limiter.PriorityNormal)
	}()
	eventually(t, "a waiter parks on c", func() bool { return c.l.Waiting() == 1 })
	px.restore()
	if err := <-parked; err != nil {
		t.Errorf("the waiter parked while c was away: %v after the rejoin, want nil", err)
	}
	eventually(t, "c rejoins", func() bool { return !c.f.Fallback() && c.l.ShareQPS() > 0 })
	eventually(t, "three members again", func() bool { return math.Abs(a.l.ShareQPS()-quota/3) < 1e-9 })
	if err := c.l.Wait(context.Background(), limiter.PriorityCritical); err != nil {
		t.Errorf("c after the rejoin: %v", err)
	}
	var lines []string
	c.ev.mu.Lock()
	lines = append(lines, c.ev.logs...)
	c.ev.mu.Unlock()
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "admitting no call until Redis answers") }) {
		t.Errorf("no log line for going away: %q", lines)
	}
}

// TestOwnForgetAfterDecides: a silent member is forgotten after its own
// forgetAfter (recorded with its heartbeats), not the one of the member
// whose heartbeat looks: c (forgetAfter 3 s) cut from Redis keeps its claim
// held by a (forgetAfter 1 s) past 1 s, as long as c itself serves it.
func TestOwnForgetAfterDecides(t *testing.T) {
	r := fleettest.Start(t)
	const quota = 90.0
	px := newProxy(t, r.Addr)
	a := newMemberOpts(t, r, "acct-own", 1, quota, local, nil, fleet.Options{ForgetAfter: time.Second})
	c := newMemberOpts(t, r, "acct-own", 1, quota, local, func(c *fleet.Config) {
		c.Redis.Address = px.ln.Addr().String()
		c.ForgetAfter = fleet.Duration{Duration: 3 * time.Second}
		c.FailureMode = fleet.FailureClosed
	}, fleet.Options{})
	for _, m := range []*member{a, c} {
		eventually(t, "two members", func() bool { return math.Abs(m.l.ShareQPS()-quota/2) < 1e-9 })
	}
	px.cut()
	cut := time.Now()
	eventually(t, "a holds c's claim", func() bool { _, n := a.f.Held(); return n == 1 })
	for time.Since(cut) < 2*time.Second {
		if _, n := a.f.Held(); n != 1 && c.l.ShareQPS() > 0 {
			t.Fatalf("a forgot c %v after the cut while c still serves %v/s (c's forgetAfter 3s)", time.Since(cut), c.l.ShareQPS())
		}
		time.Sleep(10 * time.Millisecond)
	}
	eventually(t, "c goes away", func() bool { return c.l.ShareQPS() == 0 })
	eventually(t, "a forgets c", func() bool { h, n := a.f.Held(); return h == 0 && n == 0 })
}
