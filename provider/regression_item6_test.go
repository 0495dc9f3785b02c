package provider

import (
	"context"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
)

// Item 6: an open breaker answers before the token wait: no token spent, no
// queueing, the stale value instead of a limiter error.
func TestRegression_BreakerOpenFailsFastWithoutToken(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	cfg := testConfig(clk)
	regTripConfig(cfg)
	cfg.Limits.Read = BucketConfig{QPS: 0.001, Burst: 5} // the fake clock never refills it
	c := mustNew(t, up, cfg)
	node := testNode("cached", "fake://cached")
	if _, err := v2(t, c).InstanceMetadata(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	clk.Step(11 * time.Minute)
	regOpenReadBreaker(t, c, up) // spends the last 4 tokens
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	md, err := v2(t, c).InstanceMetadata(ctx, node)
	if err != nil || md == nil {
		t.Fatalf("breaker-open read = %+v, %v; want the stale value at once", md, err)
	}
	if _, err := v2(t, c).InstanceMetadata(ctx, testNode("new", "fake://new")); !limiter.IsOpen(err) {
		t.Fatalf("err = %v, want the breaker's error", err)
	}
}
