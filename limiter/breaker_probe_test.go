package limiter

import (
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A half-open probe that hangs (a caller's context with no deadline) no
// longer holds the breaker shut once it has been out OpenTimeout, or the
// last open interval after the cloud answered another call since it was
// sent; its outcome still counts when it comes. Before, CloudAnswered only
// shortened an open interval: a hung probe kept every call rejected as
// "half-open, probes in flight" for as long as it hung.
func TestHungProbeLapses(t *testing.T) {
	const openTimeout = 2 * time.Second
	newHalfOpen := func(t *testing.T) (*Breaker, *clocktesting.FakeClock) {
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		b := newTestBreaker(t, BreakerConfig{FailureRatio: 1, MinRequests: 1, Interval: time.Hour, OpenTimeout: openTimeout, HalfOpenRequests: 1, Clock: clk}, nil)
		call(t, b, errBoom)
		// The first open interval is openTimeout/30.
		clk.SetTime(clk.Now().Add(openTimeout / 30))
		if got := b.State(); got != StateHalfOpen {
			t.Fatalf("State() = %v, want half-open", got)
		}
		return b, clk
	}
	step := func(clk *clocktesting.FakeClock, d time.Duration) { clk.SetTime(clk.Now().Add(d)) }

	t.Run("the cloud answers another call", func(t *testing.T) {
		b, clk := newHalfOpen(t)
		hung, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		step(clk, 10*time.Millisecond)
		b.CloudAnswered() // a write-family call succeeded
		// The probe has been out less than the last open interval (67 ms):
		// it may just be slow.
		if _, err := b.Allow(); !IsOpen(err) {
			t.Fatalf("Allow 10 ms after the probe = %v, want the half-open rejection", err)
		}
		step(clk, openTimeout/30)
		done, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow once the hung probe has been out the open interval after the cloud answered: %v; want a probe", err)
		}
		done(nil)
		if got := b.State(); got != StateClosed {
			t.Fatalf("State() after the new probe succeeded = %v, want closed", got)
		}
		hung(errBoom) // the old generation's outcome: ignored
		if got := b.State(); got != StateClosed {
			t.Fatalf("State() after the hung probe failed late = %v, want closed", got)
		}
	})

	t.Run("the issue's case: a read 30 s later", func(t *testing.T) {
		b, clk := newHalfOpen(t)
		if _, err := b.Allow(); err != nil {
			t.Fatal(err)
		}
		b.CloudAnswered()
		step(clk, 30*time.Second)
		if _, err := b.Allow(); err != nil {
			t.Fatalf("a read 30 s after the cloud answered, behind a hung probe: %v; want a probe", err)
		}
	})

	t.Run("no answer: openTimeout", func(t *testing.T) {
		b, clk := newHalfOpen(t)
		hung, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		step(clk, openTimeout-time.Millisecond)
		_, err = b.Allow()
		var oe *OpenError
		if !errors.As(err, &oe) || oe.RetryIn != time.Millisecond {
			t.Fatalf("Allow 1 ms before the probe lapses = %v, want the rejection with RetryIn 1ms", err)
		}
		step(clk, time.Millisecond)
		second, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow openTimeout after the probe: %v; want a probe", err)
		}
		// The lapsed probe answers after all: it counts.
		hung(nil)
		if got := b.State(); got != StateClosed {
			t.Fatalf("State() after the lapsed probe succeeded = %v, want closed", got)
		}
		second(nil)
	})

	t.Run("a lapsed probe's excluded outcome frees no second slot", func(t *testing.T) {
		b, clk := newHalfOpen(t)
		hung, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		step(clk, openTimeout)
		if _, err := b.Allow(); err != nil { // takes the freed slot
			t.Fatal(err)
		}
		hung(errNotFound)
		if _, err := b.Allow(); !IsOpen(err) {
			t.Fatalf("Allow with the one slot taken = %v, want the half-open rejection", err)
		}
	})
}
