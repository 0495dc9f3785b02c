package limiter

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// Recovery must not be slower than without the
// breaker. The first open interval is short and grows on repeated failure;
// any sign that the cloud answers ends it at once.
func TestRegression_BreakerProbesEarly(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	b := newTestBreaker(t, BreakerConfig{
		FailureRatio: 0.5, MinRequests: 2, Interval: time.Hour, OpenTimeout: 30 * time.Second,
		HalfOpenRequests: 1, Clock: clk,
	}, nil)
	mustBe := func(want State) {
		t.Helper()
		if got := b.State(); got != want {
			t.Fatalf("state = %v, want %v", got, want)
		}
	}
	trip := func() {
		t.Helper()
		call(t, b, errBoom)
		call(t, b, errBoom)
		mustBe(StateOpen)
	}
	trip()
	// Default first interval: OpenTimeout/30 = 1s, not the full 30s.
	clk.Step(999 * time.Millisecond)
	if _, err := b.Allow(); err == nil {
		t.Fatal("a probe before the first open interval")
	}
	clk.Step(time.Millisecond)
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("no probe 1s after opening: %v", err)
	}
	done(errBoom) // the probe fails: open again, for 2s
	mustBe(StateOpen)
	clk.Step(time.Second)
	mustBe(StateOpen)
	clk.Step(time.Second)
	done, err = b.Allow()
	if err != nil {
		t.Fatalf("no probe 2s after the failed probe: %v", err)
	}
	done(errBoom) // open for 4s
	oe := func() *OpenError {
		_, err := b.Allow()
		o, ok := err.(*OpenError)
		if !ok {
			t.Fatalf("Allow err = %v, want *OpenError", err)
		}
		return o
	}
	if got := oe().RetryIn; got != 4*time.Second {
		t.Fatalf("RetryIn = %v, want 4s", got)
	}
	// The cloud answers (another family's call, a call admitted before the
	// trip): probe now.
	b.CloudAnswered()
	done, err = b.Allow()
	if err != nil {
		t.Fatalf("no probe after CloudAnswered: %v", err)
	}
	done(nil)
	mustBe(StateClosed)
	// Closed resets the growth: the next trip opens for 1s again.
	trip()
	if got := oe().RetryIn; got != time.Second {
		t.Fatalf("RetryIn after a recovery = %v, want 1s", got)
	}
	// The growth is capped at OpenTimeout.
	for range 10 {
		clk.Step(30 * time.Second)
		done, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(errBoom)
	}
	if got := oe().RetryIn; got != 30*time.Second {
		t.Fatalf("RetryIn after many failed probes = %v, want the 30s cap", got)
	}
}

func TestRegression_BreakerMinOpenTimeoutValidated(t *testing.T) {
	cfg := BreakerConfig{FailureRatio: 0.5, MinRequests: 2, Interval: time.Hour, OpenTimeout: time.Second, HalfOpenRequests: 1}
	cfg.MinOpenTimeout = 2 * time.Second
	if err := cfg.Validate(); err == nil {
		t.Fatal("minOpenTimeout > openTimeout accepted")
	}
	cfg.MinOpenTimeout = -time.Second
	if err := cfg.Validate(); err == nil {
		t.Fatal("negative minOpenTimeout accepted")
	}
}
