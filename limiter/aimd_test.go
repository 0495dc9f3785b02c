package limiter

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"
)

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
				{step: 500 * time.Millisecond, throttle: true, want: 33},
				{step: 500 * time.Millisecond, throttle: true, want: 17},
			},
		},
		{
			// At 0.5 QPS the cool-down is 1/rate = 2 s, longer than 1 s.
			name: "cool-down of one token interval at low rates",
			cfg:  BucketConfig{QPS: 1, Burst: 1, Adaptive: true, RecoveryQPSPerSecond: 0.25},
			ops: []op{
				{throttle: true, want: 0.5},
				{step: 1500 * time.Millisecond, throttle: true, want: 0.875},
				{step: 500 * time.Millisecond, throttle: true, want: 0.5},
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
			// starts when the pause ends.
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
	// Now at 5 QPS recovering by 1/3 QPS per second from the end of the
	// pause: the next token is due after t with 5t + t²/6 = 1, t ≈ 198.8ms.
	second := queue(t, context.Background(), b, PriorityNormal)
	clk.Step(198 * time.Millisecond)
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
			// Query every 100ms, as traffic would.
			for elapsed := time.Duration(0); elapsed < tt.full-time.Millisecond; elapsed += 100 * time.Millisecond {
				clk.Step(100 * time.Millisecond)
				want := tt.decrease + tt.cfg.withDefaults().RecoveryQPSPerSecond*(elapsed+100*time.Millisecond).Seconds()
				if got := b.EffectiveQPS(); math.Abs(got-math.Min(want, tt.cfg.QPS)) > 1e-9 {
					t.Fatalf("at %v: EffectiveQPS() = %v, want %v", elapsed+100*time.Millisecond, got, want)
				}
			}
			if got := b.EffectiveQPS(); got != tt.cfg.QPS {
				t.Fatalf("after %v: EffectiveQPS() = %v, want exactly %v", tt.full, got, tt.cfg.QPS)
			}
			clk.Step(time.Hour)
			if got := b.EffectiveQPS(); got != tt.cfg.QPS {
				t.Fatalf("later: EffectiveQPS() = %v, want exactly %v", got, tt.cfg.QPS)
			}
			rates := rec.snapshot().rates
			if len(rates) < 2 || rates[0] != tt.decrease || rates[len(rates)-1] != tt.cfg.QPS {
				t.Fatalf("RateChanged events %v, want %v first and %v last", rates, tt.decrease, tt.cfg.QPS)
			}
			for i := 1; i < len(rates); i++ {
				step := rates[i] - rates[i-1]
				if step <= 0 || (i < len(rates)-1 && step < tt.cfg.QPS/100) {
					t.Fatalf("RateChanged events %v: step %d is %v, want increasing by >= 1%% of QPS", rates, i, step)
				}
			}
		})
	}
}

func TestAIMDRecoveryIsLinearAtTheBoundary(t *testing.T) {
	b, clk := newTestBucket(t, BucketConfig{QPS: 64, Burst: 1, Adaptive: true, RecoveryQPSPerSecond: 2}, nil)
	b.OnThrottled(0)
	clk.Step(16*time.Second - time.Millisecond)
	if got := b.EffectiveQPS(); got >= 64 || math.Abs(got-(64-0.002)) > 1e-9 {
		t.Fatalf("just before full recovery: EffectiveQPS() = %v, want 63.998", got)
	}
	clk.Step(time.Millisecond)
	if got := b.EffectiveQPS(); got != 64 {
		t.Fatalf("at full recovery: EffectiveQPS() = %v, want 64", got)
	}
}

// TestAIMDTokensIntegrateTheRate checks that tokens accrue as the integral of
// the recovering rate, however often the bucket is looked at.
func TestAIMDTokensIntegrateTheRate(t *testing.T) {
	cfg := BucketConfig{QPS: 64, Burst: 2000, Adaptive: true, RecoveryQPSPerSecond: 2}
	for _, lookEvery := range []time.Duration{0, time.Second, 300 * time.Millisecond} {
		b, clk := newTestBucket(t, cfg, nil)
		b.OnThrottled(0) // rate 32, tokens capped at 1
		// After 2s: 1 + 32*2 + 2*2²/2 = 69. After 20s: full recovery at 16s:
		// 1 + 32*16 + 2*16²/2 + 64*4 = 1025.
		for _, c := range []struct {
			at   time.Duration
			want float64
		}{{2 * time.Second, 69}, {20 * time.Second, 1025}} {
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

// TestReadyAtInvertsAccrued checks the due-time computation against the
// accrual for rates in and out of recovery.
func TestReadyAtInvertsAccrued(t *testing.T) {
	for _, tc := range []struct {
		rateBase float64
		tokens   float64
	}{{32, 0}, {32, 0.5}, {63.9, 0}, {63.99, 0}, {0.64, 0}, {64, 0.25}} {
		b, _ := newTestBucket(t, BucketConfig{QPS: 64, Burst: 1, Adaptive: true, RecoveryQPSPerSecond: 2}, nil)
		b.mu.Lock()
		b.rateBase, b.recStart, b.recovering, b.tokens = tc.rateBase, 0, tc.rateBase < 64, tc.tokens
		at := b.readyAtLocked(0)
		got := b.tokens + b.accruedLocked(0, at)
		before := b.tokens + b.accruedLocked(0, at-time.Microsecond)
		b.mu.Unlock()
		if got < 1-tokenEpsilon || got > 1+1e-6 || before >= 1 {
			t.Errorf("rate %v tokens %v: ready at %v with %v tokens (%v a µs earlier)", tc.rateBase, tc.tokens, at, got, before)
		}
	}
}

func TestBucketHugeRetryAfter(t *testing.T) {
	// No cap (MaxRetryAfter at its largest): the pause saturates instead of
	// overflowing.
	b, clk := newTestBucket(t, BucketConfig{QPS: 10, Burst: 1, Adaptive: true, MaxRetryAfter: time.Duration(math.MaxInt64)}, nil)
	clk.Step(time.Hour)
	b.OnThrottled(time.Duration(math.MaxInt64))
	ctx, cancel := context.WithCancel(context.Background())
	w := queue(t, ctx, b, PriorityCritical)
	clk.Step(24 * time.Hour)
	if b.Waiting() != 1 {
		t.Fatalf("Waiting() = %d, want 1 (still paused)", b.Waiting())
	}
	cancel()
	if err := result(t, w); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if got := b.EffectiveQPS(); got != 5 {
		t.Fatalf("EffectiveQPS() = %v, want 5", got)
	}
}
