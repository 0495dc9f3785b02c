package limiter

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// eventually polls cond until it holds, failing the test after 5 s. It is a
// bounded loop for state changes made by other goroutines, not a timing
// assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// recorder is a BucketObserver and BreakerObserver that records every event.
type recorder struct {
	mu          sync.Mutex
	waits       []waitEvent
	throttles   []time.Duration
	rates       []float64
	transitions [][2]State
}

type waitEvent struct {
	p      Priority
	waited time.Duration
	err    error
}

func (r *recorder) WaitDone(p Priority, waited time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, waitEvent{p, waited, err})
}

func (r *recorder) Throttled(retryAfter time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.throttles = append(r.throttles, retryAfter)
}

func (r *recorder) RateChanged(qps float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rates = append(r.rates, qps)
}

func (r *recorder) StateChanged(from, to State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.transitions = append(r.transitions, [2]State{from, to})
}

func (r *recorder) snapshot() recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return recorder{
		waits:       append([]waitEvent(nil), r.waits...),
		throttles:   append([]time.Duration(nil), r.throttles...),
		rates:       append([]float64(nil), r.rates...),
		transitions: append([][2]State(nil), r.transitions...),
	}
}

// startWait runs b.Wait in a goroutine and returns a channel with its result.
func startWait(ctx context.Context, b *Bucket, p Priority) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- b.Wait(ctx, p) }()
	return ch
}

// result returns the error from ch, failing the test if none arrives in 5 s.
func result(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return")
		return nil
	}
}
