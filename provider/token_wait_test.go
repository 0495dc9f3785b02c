package provider

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/limiter"
)

// Item 8: a token wait without a deadline ends with a retryable error; a
// Retry-After is capped.
func TestWaitsAreBoundedWithRetryError(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	cfg := testConfig(clk)
	cfg.Limits.Write.QPS, cfg.Limits.Write.Burst = 0.001, 1 // the default 2m waitTimeout
	c := mustNew(t, up, cfg)
	lb, _ := c.LoadBalancer()
	if _, err := lb.EnsureLoadBalancer(context.TODO(), "c", testService("ns", "a", "u"), nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- lb.UpdateLoadBalancer(context.TODO(), "c", testService("ns", "b", "u"), nil) }()
	g := enf(c)
	waitUntil(t, "queued", func() bool { return g.methods["UpdateLoadBalancer"].bucket.(*limiter.Bucket).Waiting() == 1 })
	var err error
	for steps := 0; ; steps++ {
		if steps == 18 { // 3 simulated minutes: the 2m default bound and then some
			t.Fatal("a write without a deadline is still waiting after 3 simulated minutes")
		}
		clk.Step(10 * time.Second)
		select {
		case err = <-done:
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	var re *api.RetryError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want an *api.RetryError", err)
	}
	if up.Calls("UpdateLoadBalancer") != 0 {
		t.Fatal("a timed-out wait called upstream")
	}
}

type longRetryAfter struct{}

func (longRetryAfter) Error() string                     { return "HTTP 429" }
func (longRetryAfter) RetryAfter() (time.Duration, bool) { return 24 * time.Hour, true }

func TestRetryAfterIsCapped(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	cfg := testConfig(clk)
	fail := true
	up.ensureLBHook = func() error {
		if fail {
			return longRetryAfter{}
		}
		return nil
	}
	c := mustNew(t, up, cfg)
	lb, _ := c.LoadBalancer()
	_, _ = lb.EnsureLoadBalancer(context.Background(), "c", testService("ns", "a", "u"), nil)
	fail = false
	clk.Step(5*time.Minute + time.Second) // the default cap
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := lb.EnsureLoadBalancer(ctx, "c", testService("ns", "a", "u"), nil); err != nil {
		t.Fatalf("write still paused by a 24h Retry-After after the 5m cap: %v", err)
	}
}

func TestWaitConfigValidated(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"upstream: {name: x}\nlimits: {read: {qps: 1, burst: 1, waitTimeout: -1s}}", "limits.read.waitTimeout"},
		{"upstream: {name: x}\nlimits: {write: {qps: 1, burst: 1, waitTimeout: -1s}}", "limits.write.waitTimeout"},
		{"upstream: {name: x}\nthrottle: {maxRetryAfter: -1s}", "throttle.maxRetryAfter"},
	} {
		_, err := LoadConfig(strings.NewReader(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadConfig(%q) err = %v, want one naming %s", tc.yaml, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	if cfg.Limits.Read.WaitTimeout.Duration != 2*time.Minute || cfg.Limits.Write.WaitTimeout.Duration != 2*time.Minute ||
		cfg.Throttle.MaxRetryAfter.Duration != 5*time.Minute {
		t.Fatalf("defaults: %+v %+v", cfg.Limits, cfg.Throttle)
	}
}

func TestBreakerConfigValidated(t *testing.T) {
	_, err := LoadConfig(strings.NewReader("upstream: {name: x}\nbreaker: {minOpenTimeout: 1h}"))
	if err == nil || !strings.Contains(err.Error(), "breaker.minOpenTimeout") {
		t.Fatalf("err = %v, want one naming breaker.minOpenTimeout", err)
	}
}
