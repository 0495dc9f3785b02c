package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestBucket(t *testing.T, cfg BucketConfig, obs BucketObserver) (*Bucket, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	cfg.Clock = clk
	b, err := NewBucket("read", cfg, obs)
	if err != nil {
		t.Fatalf("NewBucket: %v", err)
	}
	t.Cleanup(b.Close)
	return b, clk
}

// drain takes every available token without queueing.
func drain(t *testing.T, b *Bucket) {
	t.Helper()
	for b.Tokens() >= 1 {
		if err := b.Wait(context.Background(), PriorityNormal); err != nil {
			t.Fatalf("Wait: %v", err)
		}
	}
}

// queue starts a waiter and waits until it is queued.
func queue(t *testing.T, ctx context.Context, b *Bucket, p Priority) <-chan error {
	t.Helper()
	n := b.Waiting()
	ch := startWait(ctx, b, p)
	eventually(t, fmt.Sprintf("%d waiters", n+1), func() bool { return b.Waiting() == n+1 })
	return ch
}

func TestBucketConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     BucketConfig
		wantErr string // substring; "" means valid
	}{
		{"minimal", BucketConfig{QPS: 10, Burst: 1}, ""},
		{"adaptive defaults", BucketConfig{QPS: 10, Burst: 5, Adaptive: true}, ""},
		{"adaptive explicit", BucketConfig{QPS: 10, Burst: 5, Adaptive: true, MinQPS: 10, DecreaseFactor: 0.7, RecoveryQPSPerSecond: 1}, ""},
		{"zero qps", BucketConfig{Burst: 1}, "qps must be > 0 (got 0)"},
		{"negative qps", BucketConfig{QPS: -1, Burst: 1}, "qps must be > 0 (got -1)"},
		{"infinite qps", BucketConfig{QPS: math.Inf(1), Burst: 1}, "qps must be a finite number > 0"},
		{"NaN qps", BucketConfig{QPS: math.NaN(), Burst: 1}, "qps must be a finite number > 0"},
		{"zero burst", BucketConfig{QPS: 1}, "burst must be >= 1 (got 0)"},
		{"negative minQPS", BucketConfig{QPS: 1, Burst: 1, MinQPS: -1}, "minQPS must be >= 0"},
		{"minQPS above qps", BucketConfig{QPS: 1, Burst: 1, MinQPS: 2}, "minQPS must be <= qps"},
		{"decreaseFactor 1", BucketConfig{QPS: 1, Burst: 1, DecreaseFactor: 1}, "decreaseFactor must be in (0, 1)"},
		{"negative decreaseFactor", BucketConfig{QPS: 1, Burst: 1, DecreaseFactor: -0.5}, "decreaseFactor must be in (0, 1)"},
		{"negative recovery", BucketConfig{QPS: 1, Burst: 1, RecoveryQPSPerSecond: -1}, "recoveryQPSPerSecond must be >= 0"},
		{"maxRetryAfter", BucketConfig{QPS: 1, Burst: 1, MaxRetryAfter: time.Minute}, ""},
		{"negative maxRetryAfter", BucketConfig{QPS: 1, Burst: 1, MaxRetryAfter: -time.Second}, "maxRetryAfter must be >= 0 (got -1s; 0 means 5m0s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
			_, err = NewBucket("b", tt.cfg, nil)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("NewBucket error = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || err.Error() != `limiter: bucket "b": `+tt.cfg.Validate().Error()):
				t.Fatalf("NewBucket error = %v, want the Validate error prefixed with the bucket", err)
			}
		})
	}
}

func TestBucketBurstThenWait(t *testing.T) {
	rec := &recorder{}
	b, clk := newTestBucket(t, BucketConfig{QPS: 10, Burst: 3}, rec) // a token every 100ms
	ctx := context.Background()
	for i := range 3 {
		if err := b.Wait(ctx, PriorityNormal); err != nil {
			t.Fatalf("Wait %d: %v", i, err)
		}
	}
	if got := b.Tokens(); got != 0 {
		t.Fatalf("Tokens() = %v after burst, want 0", got)
	}
	done := queue(t, ctx, b, PriorityNormal)

	clk.Step(99 * time.Millisecond)
	// The bucket's timer has not fired, so nothing can have woken the waiter.
	if clk.Waiters() != 1 || b.Waiting() != 1 {
		t.Fatalf("after 99ms: clock waiters %d, Waiting() %d; want 1, 1", clk.Waiters(), b.Waiting())
	}
	clk.Step(time.Millisecond)
	if err := result(t, done); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if b.Waiting() != 0 || clk.Waiters() != 0 {
		t.Fatalf("after grant: Waiting() %d, clock waiters %d; want 0, 0", b.Waiting(), clk.Waiters())
	}
	waits := rec.snapshot().waits
	if len(waits) != 4 {
		t.Fatalf("WaitDone called %d times, want 4", len(waits))
	}
	for i, w := range waits {
		wantWaited := time.Duration(0)
		if i == 3 {
			wantWaited = 100 * time.Millisecond
		}
		if w.p != PriorityNormal || w.err != nil || w.waited != wantWaited {
			t.Errorf("WaitDone #%d = %+v, want normal/nil/%v", i, w, wantWaited)
		}
	}
}

func TestBucketTokensRefill(t *testing.T) {
	b, clk := newTestBucket(t, BucketConfig{QPS: 4, Burst: 2}, nil)
	drain(t, b)
	clk.Step(250 * time.Millisecond)
	if got := b.Tokens(); got != 1 {
		t.Fatalf("Tokens() = %v, want 1", got)
	}
	clk.Step(time.Hour)
	if got := b.Tokens(); got != 2 {
		t.Fatalf("Tokens() = %v, want Burst 2", got)
	}
	if got, want := b.EffectiveQPS(), 4.0; got != want || b.ConfiguredQPS() != want {
		t.Fatalf("EffectiveQPS() = %v, ConfiguredQPS() = %v, want %v", got, b.ConfiguredQPS(), want)
	}
	if b.Name() != "read" {
		t.Fatalf("Name() = %q", b.Name())
	}
}

func TestBucketCancelTakesNoToken(t *testing.T) {
	b, clk := newTestBucket(t, BucketConfig{QPS: 1, Burst: 1}, nil)
	drain(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := queue(t, ctx, b, PriorityNormal)
	second := queue(t, context.Background(), b, PriorityNormal)

	cancel()
	err := result(t, first)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Wait = %v, want context.Canceled", err)
	}
	if want := `limiter: waiting for a "read" token: context canceled`; err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
	if b.Waiting() != 1 {
		t.Fatalf("Waiting() = %d after cancel, want 1", b.Waiting())
	}
	// The token due at 1s goes to the second waiter, not to the one that left.
	clk.Step(time.Second)
	if err := result(t, second); err != nil {
		t.Fatalf("second Wait: %v", err)
	}
	if got := b.Tokens(); got != 0 {
		t.Fatalf("Tokens() = %v, want 0", got)
	}
}

func TestBucketAlreadyCancelled(t *testing.T) {
	rec := &recorder{}
	b, _ := newTestBucket(t, BucketConfig{QPS: 1, Burst: 2}, rec)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := b.Wait(ctx, PriorityCritical)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if got := b.Tokens(); got != 2 {
		t.Fatalf("Tokens() = %v, want 2 (no token taken)", got)
	}
	if w := rec.snapshot().waits; len(w) != 1 || w[0].err != err || w[0].waited != 0 {
		t.Fatalf("WaitDone events = %+v", w)
	}
}

func TestBucketDeadline(t *testing.T) {
	b, _ := newTestBucket(t, BucketConfig{QPS: 1, Burst: 1}, nil)
	drain(t, b)
	// The fake clock never moves, so only the (real-time) deadline ends the wait.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := b.Wait(ctx, PriorityNormal)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want context.DeadlineExceeded", err)
	}
	if want := `limiter: waiting for a "read" token: context deadline exceeded`; err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
	if b.Waiting() != 0 {
		t.Fatalf("Waiting() = %d, want 0", b.Waiting())
	}
}

func TestBucketCancelCause(t *testing.T) {
	b, _ := newTestBucket(t, BucketConfig{QPS: 1, Burst: 1}, nil)
	drain(t, b)
	cause := errors.New("node deleted")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := queue(t, ctx, b, PriorityNormal)
	cancel(cause)
	err := result(t, done)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Fatalf("Wait = %v, want context.Canceled and the cause", err)
	}
}

func TestBucketClose(t *testing.T) {
	b, clk := newTestBucket(t, BucketConfig{QPS: 1, Burst: 1}, nil)
	drain(t, b)
	w1 := queue(t, context.Background(), b, PriorityNormal)
	w2 := queue(t, context.Background(), b, PriorityCritical)
	b.Close()
	for i, ch := range []<-chan error{w1, w2} {
		if err := result(t, ch); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), `"read"`) {
			t.Fatalf("waiter %d: %v, want ErrClosed naming the bucket", i, err)
		}
	}
	if b.Waiting() != 0 || clk.Waiters() != 0 {
		t.Fatalf("after Close: Waiting() %d, clock waiters %d; want 0, 0", b.Waiting(), clk.Waiters())
	}
	clk.Step(time.Hour)
	if err := b.Wait(context.Background(), PriorityNormal); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close = %v, want ErrClosed", err)
	}
	b.Close() // idempotent
	b.OnThrottled(time.Second)
}

func TestBucketRealClock(t *testing.T) {
	b, err := NewBucket("real", BucketConfig{QPS: 1000, Burst: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for range 5 {
		if err := b.Wait(context.Background(), PriorityNormal); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBucketConservesTokens races cancellations against grants and checks
// that every token accrued is either taken by a successful Wait or still in
// the bucket.
func TestBucketConservesTokens(t *testing.T) {
	const (
		waiters = 40
		steps   = 25
	)
	b, clk := newTestBucket(t, BucketConfig{QPS: 1, Burst: 1000}, nil)
	drain(t, b)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
	)
	cancels := make([]context.CancelFunc, waiters)
	for i := range waiters {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b.Wait(ctx, Priority(i%3)) == nil {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		}()
	}
	eventually(t, "all queued", func() bool { return b.Waiting() == waiters })
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() {
		defer cwg.Done()
		for i := 0; i < waiters; i += 2 {
			cancels[i]()
		}
	}()
	for range steps {
		clk.Step(time.Second)
	}
	cwg.Wait()
	for _, cancel := range cancels {
		cancel()
	}
	wg.Wait()
	if got := float64(granted) + b.Tokens(); math.Abs(got-steps) > 1e-6 {
		t.Fatalf("granted %d + Tokens() %v = %v, want %d", granted, b.Tokens(), got, steps)
	}
}

// TestBucketTokenDueWhenCtxEnds cancels a waiter and makes its token due
// before it can run (one P: it runs when the test blocks). Either it sees
// the token due and uses it (Wait returns nil), or, if it ran before the
// clock moved, it leaves and the token goes to the next waiter at once. Either
// way the token is neither lost nor handed out twice.
func TestBucketTokenDueWhenCtxEnds(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for i := range 20 {
		b, clk := newTestBucket(t, BucketConfig{QPS: 1, Burst: 1}, nil)
		drain(t, b)
		ctx, cancel := context.WithCancel(context.Background())
		w := queue(t, ctx, b, PriorityNormal)
		other := queue(t, context.Background(), b, PriorityBackground)
		cancel()
		clk.Step(time.Second)
		switch err := result(t, w); {
		case err == nil:
			if b.Waiting() != 1 {
				t.Fatalf("run %d: Waiting() = %d, want 1", i, b.Waiting())
			}
			clk.Step(time.Second)
		case !errors.Is(err, context.Canceled):
			t.Fatalf("run %d: Wait = %v, want nil or context.Canceled", i, err)
		}
		if err := result(t, other); err != nil {
			t.Fatalf("run %d: second Wait = %v", i, err)
		}
		if got, n := b.Tokens(), b.Waiting(); got != 0 || n != 0 {
			t.Fatalf("run %d: Tokens() = %v, Waiting() = %d; want 0, 0", i, got, n)
		}
	}
}

// TestBucketNeverAboveQuota runs waiters of every priority against random
// clock steps and throttles, and checks after every step, once every grant
// due has been made, that the grants so far stay within what the configured
// rate allows: Burst plus QPS times the time elapsed, and that none is made
// during a Retry-After pause (the token held through it goes out when it
// ends).
func TestBucketNeverAboveQuota(t *testing.T) {
	for seed := range int64(3) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			cfg := BucketConfig{QPS: 20, Burst: 5, Adaptive: seed != 2, MaxRetryAfter: 300 * time.Millisecond}
			b, clk := newTestBucket(t, cfg, nil)
			ctx, stop := context.WithCancel(context.Background())
			var granted atomic.Int64
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for b.Wait(ctx, Priority(i%3)) == nil {
						granted.Add(1)
					}
				}()
			}
			var (
				checks, pauseChecks int
				pauseEnd            time.Time // of the last Retry-After pause
				atPause             int64     // grants when it began
			)
			for range 400 {
				if rng.IntN(10) == 0 {
					ra := time.Duration(rng.IntN(500)) * time.Millisecond
					b.OnThrottled(ra)
					if now := clk.Now(); ra > 0 {
						if !now.Before(pauseEnd) {
							atPause = granted.Load()
						}
						pauseEnd = laterOf(pauseEnd, now.Add(min(ra, cfg.MaxRetryAfter)))
					}
				}
				clk.Step(time.Duration(rng.IntN(100)) * time.Millisecond)
				// Let every grant due by now happen: all waiters are queued
				// again and the bucket's timer is armed for a later grant.
				eventually(t, "quiescence", func() bool { return b.Waiting() == 8 && clk.Waiters() == 1 })
				elapsed := clk.Since(t0).Seconds()
				if g := float64(granted.Load()); g > float64(cfg.Burst)+cfg.QPS*elapsed+1e-9 {
					t.Fatalf("after %.3fs: %v grants, more than %v + %v/s allow", elapsed, g, cfg.Burst, cfg.QPS)
				}
				checks++
				if clk.Now().Before(pauseEnd) {
					if g := granted.Load(); g != atPause {
						t.Fatalf("after %.3fs: %d grants during a Retry-After pause", elapsed, g-atPause)
					}
					pauseChecks++
				}
			}
			stop()
			wg.Wait()
			if granted.Load() == 0 || checks == 0 || pauseChecks == 0 {
				t.Fatalf("%d grants, %d checks, %d during pauses: nothing was tested", granted.Load(), checks, pauseChecks)
			}
			t.Logf("%d grants over %v, %d checks, %d during pauses", granted.Load(), clk.Since(t0), checks, pauseChecks)
		})
	}
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
