package provider

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/limiter"
)

// Regression tests for issue 12 ("Found by reading"): each failed before its
// fix.

// regOpenReadBreaker trips the read family's breaker with four failing
// InstanceMetadata calls (cfg must have MinRequests 4), then restores the
// upstream.
func regOpenReadBreaker(t *testing.T, c cloudprovider.Interface, up *countingCloud) {
	t.Helper()
	outage := errors.New("HTTP 503 service unavailable")
	up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) { return nil, outage }
	for n := range 4 {
		_, _ = v2(t, c).InstanceMetadata(context.Background(), testNode(fmt.Sprint("trip", n), fmt.Sprint("fake://trip", n)))
	}
	up.metadataHook = nil
	if s := c.(*cloud).g.breakers[familyRead].State(); s != limiter.StateOpen {
		t.Fatalf("read breaker = %v, want open", s)
	}
}

func regTripConfig(cfg *Config) {
	cfg.Breaker = BreakerConfig{FailureRatio: 0.5, MinRequests: 4, Interval: dur(time.Hour), OpenTimeout: dur(time.Hour), MinOpenTimeout: dur(time.Hour), HalfOpenRequests: 1, WaitForProbe: boolp(false)}
}
