package virtual

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestClockIsVirtual: ten hours pass inside the bubble, exactly, without
// waiting for them.
func TestClockIsVirtual(t *testing.T) {
	var slept time.Duration
	err := Test(t, context.Background(), Options{}, func(ctx context.Context) error {
		start := time.Now()
		time.Sleep(10 * time.Hour)
		slept = time.Since(start)
		return nil
	})
	if err != nil || slept != 10*time.Hour {
		t.Fatalf("slept %v (err %v), want exactly 10h of virtual time", slept, err)
	}
}

// TestOuterCancelReachesBubble: a caller's context that has ended ends the
// bubble's at the first heartbeat, within a virtual second (a channel from
// outside cannot be waited on durably), and Test reports it. (One that ends
// later is seen at the next beat after it ends in real time, however far
// the virtual clock got meanwhile.)
func TestOuterCancelReachesBubble(t *testing.T) {
	outer, cancel := context.WithCancel(context.Background())
	cancel()
	var waited time.Duration
	err := Test(t, outer, Options{}, func(ctx context.Context) error {
		start := time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(24 * time.Hour):
		}
		waited = time.Since(start)
		return nil
	})
	if !errors.Is(err, context.Canceled) || waited > time.Second {
		t.Fatalf("err %v after %v of virtual time; want context.Canceled within a second", err, waited)
	}
}

// TestFuncError: fn's error is Test's.
func TestFuncError(t *testing.T) {
	want := errors.New("boom")
	if err := Test(t, context.Background(), Options{}, func(context.Context) error { return want }); err != want {
		t.Fatalf("err %v, want %v", err, want)
	}
}
