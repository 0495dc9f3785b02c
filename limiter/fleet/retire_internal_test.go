package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
)

// TestRetiredBucketNotClosedUnderACaller: in fallback, a caller handed the local bucket and about to
// wait on it must not have it closed under it when the share changes and
// the bucket is retired (a spurious ErrClosed). Callers wait in a loop
// while the share flips; no Wait may fail but by its own deadline.
func TestRetiredBucketNotClosedUnderACaller(t *testing.T) {
	// No Redis at that address: New returns a member in fallback.
	f, err := New(Config{Redis: RedisConfig{Address: "127.0.0.1:1"}, Account: "acct-retire",
		RedisTimeout: Duration{Duration: 10 * time.Millisecond}, Heartbeat: Duration{Duration: time.Minute}},
		Options{Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := f.Limiter("read", 1e6, limiter.BucketConfig{QPS: 1e6, Burst: 1000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Fallback() {
		t.Fatal("not in fallback without Redis")
	}
	var stop atomic.Bool
	var closedErrs, waits atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				err := l.Wait(ctx, limiter.PriorityNormal)
				cancel()
				waits.Add(1)
				if errors.Is(err, limiter.ErrClosed) {
					closedErrs.Add(1)
				}
			}
		}()
	}
	// Each flip makes a new local bucket and retires the old one.
	for i := range 3000 {
		l.enterFallback([]float64{0.5, 0.6}[i%2], 2)
		if i%100 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d waits across 3000 share changes, %d ErrClosed", waits.Load(), closedErrs.Load())
	if n := closedErrs.Load(); n > 0 {
		t.Fatalf("%d waits failed with ErrClosed though the limiter is open: a retired bucket was closed under its caller", n)
	}
}
