package provider

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/limiter"
)

// Item 11: a breaker-open answer is an *api.RetryError retrying when the
// breaker next probes, so the service controller comes back then rather
// than after its exponential backoff grew through the outage.
func TestRegression_BreakerOpenIsRetryErrorAtProbeTime(t *testing.T) {
	up := newCountingCloud()
	up.ensureLBHook = func() error { return errors.New("HTTP 503") }
	cfg := testConfig(newFakeClock())
	cfg.Breaker = BreakerConfig{FailureRatio: 0.5, MinRequests: 4, Interval: dur(time.Hour), OpenTimeout: dur(5 * time.Second), HalfOpenRequests: 1, WaitForProbe: boolp(false)}
	c := mustNew(t, up, cfg)
	lb, _ := c.LoadBalancer()
	for n := range 4 {
		_, _ = lb.EnsureLoadBalancer(context.Background(), "c", testService("ns", fmt.Sprint("s", n), "u"), nil)
	}
	_, err := lb.EnsureLoadBalancer(context.Background(), "c", testService("ns", "x", "u"), nil)
	var re *api.RetryError
	if !limiter.IsOpen(err) || !errors.As(err, &re) {
		t.Fatalf("err = %v, want a breaker-open *api.RetryError", err)
	}
	if d := re.RetryAfter(); d <= 0 || d > 5*time.Second {
		t.Fatalf("RetryAfter = %v, want when the breaker probes (at most openTimeout)", d)
	}
}
