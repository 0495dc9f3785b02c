package provider

import (
	"context"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
)

// Item 5: stale-if-error works for methods whose TTL >= staleIfError.
func TestRegression_StaleIfErrorForLongTTL(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	cfg := testConfig(clk)
	regTripConfig(cfg)
	c := mustNew(t, up, cfg) // InstanceMetadata TTL 10m, staleIfError 10m
	node := testNode("cached", "fake://cached")
	if _, err := v2(t, c).InstanceMetadata(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	clk.Step(11 * time.Minute) // expired, within TTL+staleIfError
	regOpenReadBreaker(t, c, up)
	md, err := v2(t, c).InstanceMetadata(context.Background(), node)
	if err != nil || md.Zone != "zone-a" {
		t.Fatalf("breaker-open read of an 11m-old answer = %+v, %v; want it served stale", md, err)
	}
	clk.Step(10 * time.Minute) // 21m: beyond TTL+staleIfError
	if _, err := v2(t, c).InstanceMetadata(context.Background(), node); !limiter.IsOpen(err) {
		t.Fatalf("err = %v; an answer older than TTL+staleIfError must not be served", err)
	}
}
