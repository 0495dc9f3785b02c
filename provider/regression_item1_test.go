package provider

import (
	"context"
	"testing"
	"time"

	cloudprovider "k8s.io/cloud-provider"
)

// noGuard turns the not-found guard off: these tests are about how a
// "does not exist" is cached, which the guard would hold back (notfound_test.go).
func noGuard(cfg *Config) *Config {
	cfg.NotFoundGuard.Enabled = boolp(false)
	return cfg
}

// Item 1: "does not exist" in any form is negative: negativeTTL, never stale.
func TestRegression_ExistsFalseIsNegative(t *testing.T) {
	ctx := context.Background()
	t.Run("per-node false lives negativeTTL", func(t *testing.T) {
		clk := newFakeClock()
		up := newCountingCloud()
		up.ExistsByProviderID = false
		c := mustNew(t, up, noGuard(testConfig(clk)))
		node := testNode("a", "fake://a")
		if ok, err := v2(t, c).InstanceExists(ctx, node); ok || err != nil {
			t.Fatalf("InstanceExists = %v, %v", ok, err)
		}
		up.ExistsByProviderID = true // re-created under the same provider ID
		clk.Step(31 * time.Second)   // past negativeTTL (30s), within the 1m TTL
		if ok, err := v2(t, c).InstanceExists(ctx, node); !ok || err != nil {
			t.Fatalf("InstanceExists after negativeTTL = %v, %v; want true", ok, err)
		}
	})
	t.Run("v1 ByProviderID false lives negativeTTL", func(t *testing.T) {
		clk := newFakeClock()
		up := newCountingCloud()
		up.ExistsByProviderID = false
		c := mustNew(t, up, noGuard(testConfig(clk)))
		in, _ := c.Instances()
		if ok, _ := in.InstanceExistsByProviderID(ctx, "fake://a"); ok {
			t.Fatal("want false")
		}
		up.ExistsByProviderID = true
		clk.Step(31 * time.Second)
		if ok, err := in.InstanceExistsByProviderID(ctx, "fake://a"); !ok || err != nil {
			t.Fatalf("InstanceExistsByProviderID after negativeTTL = %v, %v; want true", ok, err)
		}
	})
	t.Run("false never served stale", func(t *testing.T) {
		clk := newFakeClock()
		up := newCountingCloud()
		up.ExistsByProviderID = false
		cfg := testConfig(clk)
		regTripConfig(cfg)
		c := mustNew(t, up, cfg)
		node := testNode("a", "fake://a")
		_, _ = v2(t, c).InstanceExists(ctx, node)
		clk.Step(31 * time.Second)
		regOpenReadBreaker(t, c, up)
		ok, err := v2(t, c).InstanceExists(ctx, node)
		if err == nil || ok {
			t.Fatalf("breaker-open InstanceExists = %v, %v; want the breaker's error, never a stale false", ok, err)
		}
	})
	t.Run("batch not-found and deleted", func(t *testing.T) {
		up, i, _, step := newBatchSetup(t, 1)
		up.deleted = map[string]bool{"terminated": true}
		if _, err := i.InstanceMetadata(ctx, testNode("missing", "")); err != cloudprovider.InstanceNotFound {
			t.Fatalf("err = %v", err)
		}
		if ok, err := i.InstanceExists(ctx, testNode("terminated", "")); ok || err != nil {
			t.Fatalf("InstanceExists(terminated) = %v, %v; want false, nil", ok, err)
		}
		md, err := i.InstanceMetadata(ctx, testNode("terminated", ""))
		if err != nil || md.ProviderID != "fake://terminated" {
			t.Fatalf("InstanceMetadata(terminated) = %+v, %v; want its metadata", md, err)
		}
		up.mu.Lock()
		delete(up.missing, "missing")
		delete(up.deleted, "terminated")
		up.mu.Unlock()
		step(31 * time.Second)
		for _, n := range []string{"missing", "terminated"} {
			if ok, err := i.InstanceExists(ctx, testNode(n, "")); !ok || err != nil {
				t.Fatalf("InstanceExists(%s) after negativeTTL = %v, %v; want true", n, ok, err)
			}
		}
	})
}
