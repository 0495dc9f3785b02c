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

type regHTTPStatusErr int

func (e regHTTPStatusErr) Error() string       { return fmt.Sprintf("HTTP %d", int(e)) }
func (e regHTTPStatusErr) HTTPStatusCode() int { return int(e) }

// Item 7: "LB still provisioning" and per-request 4xx answers are not cloud
// failures.
func TestRegression_RetryErrorAndClientErrorsDoNotTripBreaker(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"RetryError", api.NewRetryError("LB still provisioning", time.Second)},
		{"wrapped RetryError", fmt.Errorf("ensure: %w", api.NewRetryError("LB still provisioning", time.Second))},
		{"HTTP 400", fmt.Errorf("ensure: %w", regHTTPStatusErr(400))},
		{"HTTP 409", regHTTPStatusErr(409)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newCountingCloud()
			up.ensureLBHook = func() error { return tc.err }
			cfg := testConfig(newFakeClock())
			regTripConfig(cfg)
			c := mustNew(t, up, cfg)
			lb, _ := c.LoadBalancer()
			for n := range 10 {
				_, err := lb.EnsureLoadBalancer(context.Background(), "c", testService("ns", fmt.Sprint("s", n), "u"), nil)
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want the upstream's", err)
				}
			}
			if s := c.(*cloud).g.breakers[familyWrite].State(); s != limiter.StateClosed {
				t.Fatalf("write breaker = %v after %s answers, want closed", s, tc.name)
			}
		})
	}
	// A server error still counts.
	up := newCountingCloud()
	up.ensureLBHook = func() error { return regHTTPStatusErr(503) }
	cfg := testConfig(newFakeClock())
	regTripConfig(cfg)
	c := mustNew(t, up, cfg)
	lb, _ := c.LoadBalancer()
	for n := range 10 {
		_, _ = lb.EnsureLoadBalancer(context.Background(), "c", testService("ns", fmt.Sprint("s", n), "u"), nil)
	}
	if s := c.(*cloud).g.breakers[familyWrite].State(); s != limiter.StateOpen {
		t.Fatalf("write breaker = %v after HTTP 503 answers, want open", s)
	}
}
