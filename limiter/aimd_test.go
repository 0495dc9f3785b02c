package limiter

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

// TestAIMDPolicy drives the policy alone, with time as a parameter.
func TestAIMDPolicy(t *testing.T) {
	type op struct {
		at        time.Duration // advance the policy to t0+at first
		throttle  bool          // then call throttled(retry)
		retry     time.Duration
		wantRate  float64
		wantPause bool
		wantReset bool
		wantHonor time.Duration
	}
	tests := []struct {
		name string
		cfg  BucketConfig
		ops  []op
	}{
		{
			name: "decrease, then a step a second up to QPS",
			cfg:  BucketConfig{QPS: 10, Burst: 1, Adaptive: true, RecoveryQPSPerSecond: 2},
			ops: []op{
				{throttle: true, wantRate: 5, wantReset: true},
				{at: 999 * time.Millisecond, wantRate: 5},
				{at: time.Second, wantRate: 7},
				{at: 2 * time.Second, wantRate: 9},
				{at: 3 * time.Second, wantRate: 10},
				{at: time.Hour, wantRate: 10},
			},
		},
		{
			name: "RecoveryStep sets the step and the decrease cooldown",
			cfg:  BucketConfig{QPS: 10, Burst: 1, Adaptive: true, RecoveryQPSPerSecond: 20, RecoveryStep: 100 * time.Millisecond},
			ops: []op{
				{throttle: true, wantRate: 5, wantReset: true},
				{at: 99 * time.Millisecond, throttle: true, wantRate: 5},
				{at: 100 * time.Millisecond, wantRate: 7},
				{at: 200 * time.Millisecond, throttle: true, wantRate: 4.5, wantReset: true},
				{at: 500 * time.Millisecond, wantRate: 10},
			},
		},
		{
			name: "Retry-After capped and extended, never shortened",
			cfg:  BucketConfig{QPS: 10, Burst: 1, MaxRetryAfter: 10 * time.Second},
			ops: []op{
				{throttle: true, retry: time.Minute, wantRate: 10, wantPause: true, wantReset: true, wantHonor: 10 * time.Second},
				{at: 5 * time.Second, throttle: true, retry: time.Second, wantRate: 10, wantPause: true, wantHonor: time.Second},
				{at: 9 * time.Second, throttle: true, retry: 3 * time.Second, wantRate: 10, wantPause: true, wantHonor: 3 * time.Second},
				{at: 12*time.Second - 1, wantRate: 10, wantPause: true},
				{at: 12 * time.Second, wantRate: 10},
			},
		},
		{
			name: "no decrease while paused; recovery resumes a step after the pause",
			cfg:  BucketConfig{QPS: 64, Burst: 1, Adaptive: true, RecoveryQPSPerSecond: 2},
			ops: []op{
				{throttle: true, retry: 10 * time.Second, wantRate: 32, wantPause: true, wantReset: true, wantHonor: 10 * time.Second},
				{at: 5 * time.Second, throttle: true, wantRate: 32, wantPause: true},
				{at: 10 * time.Second, wantRate: 32},
				{at: 11*time.Second - 1, wantRate: 32},
				{at: 11 * time.Second, wantRate: 34},
				{at: 11 * time.Second, throttle: true, wantRate: 17, wantReset: true},
			},
		},
		{
			name: "negative Retry-After is none",
			cfg:  BucketConfig{QPS: 10, Burst: 1},
			ops:  []op{{throttle: true, retry: -time.Second, wantRate: 10}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAIMD(tt.cfg.withDefaults())
			for i, o := range tt.ops {
				now := t0.Add(o.at)
				for {
					if _, ok := a.advance(now); !ok {
						break
					}
				}
				if o.throttle {
					honoured, reset := a.throttled(now, o.retry)
					if honoured != o.wantHonor || reset != o.wantReset {
						t.Fatalf("op %d: throttled = %v, %v; want %v, %v", i, honoured, reset, o.wantHonor, o.wantReset)
					}
				}
				if math.Abs(a.rate-o.wantRate) > 1e-9 || a.paused != o.wantPause {
					t.Fatalf("op %d: rate %v paused %v; want %v, %v", i, a.rate, a.paused, o.wantRate, o.wantPause)
				}
			}
		})
	}
}

func TestAIMDCatchUp(t *testing.T) {
	cfg := BucketConfig{QPS: 1000, Burst: 1, Adaptive: true, RecoveryQPSPerSecond: 1}.withDefaults()
	for _, tc := range []struct {
		idle     time.Duration
		wantRate float64
		wantNext time.Duration // 0: none
	}{
		{500 * time.Millisecond, 500, time.Second},
		{100500 * time.Millisecond, 600, 101 * time.Second},
		{time.Hour, 1000, 0},
	} {
		a := newAIMD(cfg)
		a.throttled(t0, 0)
		a.catchUp(t0.Add(tc.idle))
		var wantNext time.Time
		if tc.wantNext > 0 {
			wantNext = t0.Add(tc.wantNext)
		}
		if a.rate != tc.wantRate || !a.nextStep.Equal(wantNext) {
			t.Errorf("after %v: rate %v, next step %v; want %v, %v", tc.idle, a.rate, a.nextStep, tc.wantRate, wantNext)
		}
	}
}

func TestAIMDDecrease(t *testing.T) {
	type op struct {
		step     time.Duration // advance the clock first
		throttle bool          // then call OnThrottled(retryAfter)
		retry    time.Duration
		want     float64 // EffectiveQPS afterwards
	}
	tests := []struct {
		name string
		cfg  BucketConfig
		ops  []op
	}{
		{
			name: "halves",
			cfg:  BucketConfig{QPS: 100, Burst: 10, Adaptive: true},
			ops:  []op{{throttle: true, want: 50}},
		},
		{
			name: "custom factor",
			cfg:  BucketConfig{QPS: 100, Burst: 10, Adaptive: true, DecreaseFactor: 0.75},
			ops:  []op{{throttle: true, want: 75}},
		},
		{
			// 64 -> 32; the second throttle of the same wave is ignored; a
			// second later the rate has recovered by 2 and is halved again.
			name: "one decrease per second",
			cfg:  BucketConfig{QPS: 64, Burst: 10, Adaptive: true, RecoveryQPSPerSecond: 2},
			ops: []op{
				{throttle: true, want: 32},
				{step: 500 * time.Millisecond, throttle: true, want: 32},
				{step: 500 * time.Millisecond, throttle: true, want: 17},
			},
		},
		{
			// At 0.5 QPS the cool-down is 1/rate = 2 s, longer than 1 s.
			name: "cool-down of one token interval at low rates",
			cfg:  BucketConfig{QPS: 1, Burst: 1, Adaptive: true, RecoveryQPSPerSecond: 0.125},
			ops: []op{
				{throttle: true, want: 0.5},
				{step: 1500 * time.Millisecond, throttle: true, want: 0.625},
				{step: 500 * time.Millisecond, throttle: true, want: 0.375},
			},
		},
		{
			name: "MinQPS floor",
			cfg:  BucketConfig{QPS: 100, Burst: 10, Adaptive: true, MinQPS: 40, RecoveryQPSPerSecond: 1},
			ops: []op{
				{throttle: true, want: 50},
				{step: time.Second, throttle: true, want: 40},
				{step: 0, want: 40},
			},
		},
		{
			name: "default MinQPS is QPS/100",
			cfg:  BucketConfig{QPS: 100, Burst: 10, Adaptive: true, DecreaseFactor: 0.001},
			ops:  []op{{throttle: true, want: 1}},
		},
		{
			// No second decrease and no recovery while paused; recovery
			// resumes a step after the pause.
			name: "pause defers further decreases and recovery",
			cfg:  BucketConfig{QPS: 64, Burst: 10, Adaptive: true, RecoveryQPSPerSecond: 2},
			ops: []op{
				{throttle: true, retry: 10 * time.Second, want: 32},
				{step: 5 * time.Second, throttle: true, want: 32},
				{step: 5 * time.Second, want: 32},
				{step: 2 * time.Second, want: 36},
				{throttle: true, want: 18},
			},
		},
		{
			name: "not adaptive",
			cfg:  BucketConfig{QPS: 100, Burst: 10},
			ops: []op{
				{throttle: true, want: 100},
				{step: time.Second, throttle: true, retry: time.Second, want: 100},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk := newTestBucket(t, tt.cfg, nil)
			for i, o := range tt.ops {
				clk.Step(o.step)
				if o.throttle {
					b.OnThrottled(o.retry)
				}
				if got := b.EffectiveQPS(); math.Abs(got-o.want) > 1e-9 {
					t.Fatalf("op %d: EffectiveQPS() = %v, want %v", i, got, o.want)
				}
			}
		})
	}
}

func TestAIMDRetryAfterPause(t *testing.T) {
	rec := &recorder{}
	b, clk := newTestBucket(t, BucketConfig{QPS: 10, Burst: 5, Adaptive: true}, rec)
	b.OnThrottled(2 * time.Second)
	if got := b.Tokens(); got != 1 {
		t.Fatalf("Tokens() = %v after throttle, want 1 (capped)", got)
	}
	// Admissions are paused even though a token is held.
	first := queue(t, context.Background(), b, PriorityCritical)
	clk.Step(2*time.Second - time.Millisecond)
	if clk.Waiters() != 1 || b.Waiting() != 1 {
		t.Fatalf("during pause: clock waiters %d, Waiting() %d; want 1, 1", clk.Waiters(), b.Waiting())
	}
	clk.Step(time.Millisecond)
	if err := result(t, first); err != nil {
		t.Fatal(err)
	}
	// Now at 5 QPS until the first recovery step a second after the pause:
	// the next token is due 200ms after the pause.
	second := queue(t, context.Background(), b, PriorityNormal)
	clk.Step(199 * time.Millisecond)
	if clk.Waiters() != 1 || b.Waiting() != 1 {
		t.Fatalf("before the next token: clock waiters %d, Waiting() %d; want 1, 1", clk.Waiters(), b.Waiting())
	}
	clk.Step(time.Millisecond)
	if err := result(t, second); err != nil {
		t.Fatal(err)
	}
	s := rec.snapshot()
	if len(s.throttles) != 1 || s.throttles[0] != 2*time.Second {
		t.Fatalf("Throttled events = %v, want [2s]", s.throttles)
	}
	if len(s.rates) == 0 || s.rates[0] != 5 {
		t.Fatalf("RateChanged events = %v, want first 5", s.rates)
	}
}

func TestAIMDPauseExtendedWhileWaiting(t *testing.T) {
	b, clk := newTestBucket(t, BucketConfig{QPS: 10, Burst: 1}, nil)
	b.OnThrottled(time.Second)
	w := queue(t, context.Background(), b, PriorityNormal)
	clk.Step(500 * time.Millisecond)
	b.OnThrottled(time.Second) // now paused until 1.5s
	b.OnThrottled(100 * time.Millisecond)
	clk.Step(999 * time.Millisecond)
	if clk.Waiters() != 1 || b.Waiting() != 1 {
		t.Fatalf("during pause: clock waiters %d, Waiting() %d; want 1, 1", clk.Waiters(), b.Waiting())
	}
	clk.Step(time.Millisecond)
	if err := result(t, w); err != nil {
		t.Fatal(err)
	}
}

func TestAIMDNotAdaptiveHonoursRetryAfter(t *testing.T) {
	rec := &recorder{}
	b, clk := newTestBucket(t, BucketConfig{QPS: 100, Burst: 3}, rec)
	b.OnThrottled(0)
	if got := b.Tokens(); got != 3 {
		t.Fatalf("Tokens() = %v after OnThrottled(0), want 3 (unchanged)", got)
	}
	b.OnThrottled(time.Second)
	w := queue(t, context.Background(), b, PriorityNormal)
	clk.Step(999 * time.Millisecond)
	if b.Waiting() != 1 || clk.Waiters() != 1 {
		t.Fatalf("during pause: Waiting() %d, clock waiters %d", b.Waiting(), clk.Waiters())
	}
	clk.Step(time.Millisecond)
	if err := result(t, w); err != nil {
		t.Fatal(err)
	}
	if got := b.EffectiveQPS(); got != 100 {
		t.Fatalf("EffectiveQPS() = %v, want 100", got)
	}
	s := rec.snapshot()
	if len(s.rates) != 0 {
		t.Fatalf("RateChanged events %v, want none", s.rates)
	}
	if want := []time.Duration{0, time.Second}; len(s.throttles) != 2 || s.throttles[0] != want[0] || s.throttles[1] != want[1] {
		t.Fatalf("Throttled events %v, want %v", s.throttles, want)
	}
}

func TestAIMDRecovery(t *testing.T) {
	tests := []struct {
		name     string
		cfg      BucketConfig
		decrease float64       // rate after one OnThrottled(0)
		full     time.Duration // time to recover to QPS
	}{
		{"exact binary", BucketConfig{QPS: 64, Burst: 1, Adaptive: true, RecoveryQPSPerSecond: 2}, 32, 16 * time.Second},
		{"defaults", BucketConfig{QPS: 100, Burst: 1, Adaptive: true}, 50, 15 * time.Second},
		{"to floor and back", BucketConfig{QPS: 30, Burst: 1, Adaptive: true, DecreaseFactor: 0.01, MinQPS: 3, RecoveryQPSPerSecond: 3}, 3, 9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			b, clk := newTestBucket(t, tt.cfg, rec)
			b.OnThrottled(0)
			if got := b.EffectiveQPS(); got != tt.decrease {
				t.Fatalf("after throttle: EffectiveQPS() = %v, want %v", got, tt.decrease)
			}
			perStep := tt.cfg.withDefaults().RecoveryQPSPerSecond
			// Query every 100ms, as traffic would: the rate grows once a
			// second, by RecoveryQPSPerSecond.
			for elapsed := 100 * time.Millisecond; elapsed < tt.full; elapsed += 100 * time.Millisecond {
				clk.Step(100 * time.Millisecond)
				want := tt.decrease + perStep*float64(elapsed/time.Second)
				if got := b.EffectiveQPS(); math.Abs(got-want) > 1e-9 {
					t.Fatalf("at %v: EffectiveQPS() = %v, want %v", elapsed, got, want)
				}
			}
			clk.Step(100 * time.Millisecond)
			if got := b.EffectiveQPS(); got != tt.cfg.QPS {
				t.Fatalf("after %v: EffectiveQPS() = %v, want exactly %v", tt.full, got, tt.cfg.QPS)
			}
			clk.Step(time.Hour)
			if got := b.EffectiveQPS(); got != tt.cfg.QPS {
				t.Fatalf("later: EffectiveQPS() = %v, want exactly %v", got, tt.cfg.QPS)
			}
			rates := rec.snapshot().rates
			if len(rates) != int(tt.full/time.Second)+1 || rates[0] != tt.decrease || rates[len(rates)-1] != tt.cfg.QPS {
				t.Fatalf("RateChanged events %v, want %v, one per step, then %v", rates, tt.decrease, tt.cfg.QPS)
			}
			for i := 1; i < len(rates); i++ {
				if rates[i] <= rates[i-1] {
					t.Fatalf("RateChanged events %v: not increasing at %d", rates, i)
				}
			}
		})
	}
}

// TestAIMDTokensFollowTheSteps checks that tokens accrue at the rate in force
// at each moment, however often the bucket is looked at.
func TestAIMDTokensFollowTheSteps(t *testing.T) {
	cfg := BucketConfig{QPS: 64, Burst: 2000, Adaptive: true, RecoveryQPSPerSecond: 2}
	for _, lookEvery := range []time.Duration{0, time.Second, 300 * time.Millisecond} {
		b, clk := newTestBucket(t, cfg, nil)
		b.OnThrottled(0) // rate 32, tokens capped at 1
		// After 2s: 1 + 32 + 34 = 67. After 20s: full recovery at 16s:
		// 1 + sum(32+2k, k=0..15) + 64*4 = 1 + 752 + 256 = 1009.
		for _, c := range []struct {
			at   time.Duration
			want float64
		}{{2 * time.Second, 67}, {20 * time.Second, 1009}} {
			for elapsed := clk.Since(t0); elapsed < c.at; {
				d := c.at - elapsed
				if lookEvery > 0 {
					d = min(d, lookEvery)
					_ = b.EffectiveQPS()
				}
				clk.Step(d)
				elapsed += d
			}
			if got := b.Tokens(); math.Abs(got-c.want) > 1e-6 {
				t.Fatalf("looking every %v: Tokens() at %v = %v, want %v", lookEvery, c.at, got, c.want)
			}
		}
	}
}

// TestAIMDFullBucketCatchesUp checks a long idle period: the bucket is full
// and the rate fully recovered, whatever the number of steps missed.
func TestAIMDFullBucketCatchesUp(t *testing.T) {
	b, clk := newTestBucket(t, BucketConfig{QPS: 1000, Burst: 10, Adaptive: true, RecoveryQPSPerSecond: 1}, nil)
	b.OnThrottled(0) // 500 QPS, 500 steps to full recovery
	clk.Step(100500 * time.Millisecond)
	if got, tokens := b.EffectiveQPS(), b.Tokens(); got != 600 || tokens != 10 {
		t.Fatalf("after 100.5s: EffectiveQPS() %v, Tokens() %v; want 600, 10", got, tokens)
	}
	clk.Step(time.Hour)
	if got := b.EffectiveQPS(); got != 1000 {
		t.Fatalf("after an hour: EffectiveQPS() %v, want 1000", got)
	}
}

// TestAIMDWaiterFollowsTheRate checks that a queued waiter's token comes at
// the decreased rate, and sooner once a recovery step raises it.
func TestAIMDWaiterFollowsTheRate(t *testing.T) {
	b, clk := newTestBucket(t, BucketConfig{QPS: 2, Burst: 1, Adaptive: true, DecreaseFactor: 0.25, RecoveryQPSPerSecond: 1.5}, nil)
	drain(t, b)
	w := queue(t, context.Background(), b, PriorityNormal) // due at 500ms at 2 QPS
	b.OnThrottled(0)                                       // 0.5 QPS: due at 2s
	clk.Step(999 * time.Millisecond)
	if b.Waiting() != 1 {
		t.Fatalf("Waiting() = %d at 999ms, want 1", b.Waiting())
	}
	// At 1s the rate steps to 2 QPS: half a token has accrued, the other
	// half comes in 250ms.
	clk.Step(time.Millisecond)
	eventually(t, "re-planned timer", func() bool { return clk.HasWaiters() && b.Waiting() == 1 })
	clk.Step(249 * time.Millisecond)
	if b.Waiting() != 1 {
		t.Fatalf("Waiting() = %d at 1.249s, want 1", b.Waiting())
	}
	clk.Step(time.Millisecond)
	if err := result(t, w); err != nil {
		t.Fatal(err)
	}
}

func TestBucketRetryAfterCapped(t *testing.T) {
	tests := []struct {
		name  string
		max   time.Duration
		retry time.Duration
		want  time.Duration
	}{
		{"default 5m", 0, time.Duration(math.MaxInt64), 5 * time.Minute},
		{"configured", 10 * time.Second, time.Minute, 10 * time.Second},
		{"below the cap", 10 * time.Second, 3 * time.Second, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			b, clk := newTestBucket(t, BucketConfig{QPS: 10, Burst: 1, Adaptive: true, MaxRetryAfter: tt.max}, rec)
			clk.Step(time.Hour)
			b.OnThrottled(tt.retry)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := queue(t, ctx, b, PriorityCritical)
			clk.Step(tt.want - time.Millisecond)
			if b.Waiting() != 1 {
				t.Fatalf("Waiting() = %d, want 1 (still paused)", b.Waiting())
			}
			clk.Step(time.Millisecond)
			if err := result(t, w); err != nil {
				t.Fatalf("Wait = %v", err)
			}
			if got := b.EffectiveQPS(); got != 5 {
				t.Fatalf("EffectiveQPS() = %v, want 5", got)
			}
			if s := rec.snapshot(); len(s.throttles) != 1 || s.throttles[0] != tt.want {
				t.Fatalf("Throttled events %v, want [%v]", s.throttles, tt.want)
			}
		})
	}
}

func TestBucketCancelDuringPause(t *testing.T) {
	b, clk := newTestBucket(t, BucketConfig{QPS: 10, Burst: 1}, nil)
	b.OnThrottled(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	w := queue(t, ctx, b, PriorityCritical)
	clk.Step(30 * time.Second)
	cancel()
	if err := result(t, w); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	// The token held through the pause is still there when it ends.
	clk.Step(30 * time.Second)
	if got := b.Tokens(); got != 1 {
		t.Fatalf("Tokens() = %v after the pause, want 1", got)
	}
}

// TestAIMDNoAccrualDuringPause checks that tokens do not accrue during a
// pause: with none held when it begins, the first token comes a token
// interval after it ends.
func TestAIMDNoAccrualDuringPause(t *testing.T) {
	b, clk := newTestBucket(t, BucketConfig{QPS: 10, Burst: 3}, nil)
	drain(t, b)
	b.OnThrottled(time.Second)
	w := queue(t, context.Background(), b, PriorityNormal)
	clk.Step(time.Second) // the pause ends with no token
	eventually(t, "grant or timer after the pause", func() bool { return clk.Waiters() == 1 || b.Waiting() == 0 })
	if b.Waiting() != 1 {
		t.Fatal("granted when the pause ended: a token accrued during the pause")
	}
	clk.Step(99 * time.Millisecond)
	if b.Waiting() != 1 {
		t.Fatalf("Waiting() = %d 99ms after the pause, want 1", b.Waiting())
	}
	clk.Step(time.Millisecond)
	if err := result(t, w); err != nil {
		t.Fatal(err)
	}
}
