package provider

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/cloud-provider/fake"
)

// TestLifecyclePeersShareBatches (issue 32): the node lifecycle controller
// checks each NotReady Node every 5 s (InstanceExists, then
// InstanceShutdown, one Node after the other). Each check that misses
// carries the other checked Nodes whose answers are half a TTL old, so the
// NotReady Nodes cost one batch call per ~half-TTL together instead of one
// per Node; the callers get their own answers, and no answer is served
// older than its TTL.
func TestLifecyclePeersShareBatches(t *testing.T) {
	{
		{
			up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}}
			clk := newFakeClock()
			cfg := testConfig(clk)
			cfg.NotFoundGuard.Enabled = boolp(false)
			c := mustNew(t, up, cfg)
			i := v2(t, c)
			const n = 10
			ctx := context.Background()
			window := 10 * time.Minute
			for at := time.Duration(0); at < window; at += 5 * time.Second {
				for k := range n {
					node := testNode(fmt.Sprint("nr-", k), fmt.Sprint("fake://nr-", k))
					if ok, err := i.InstanceExists(ctx, node); err != nil || !ok {
						t.Fatalf("InstanceExists(%s) = %v, %v", node.Name, ok, err)
					}
					if down, err := i.InstanceShutdown(ctx, node); err != nil || down {
						t.Fatalf("InstanceShutdown(%s) = %v, %v", node.Name, down, err)
					}
				}
				clk.Step(5 * time.Second)
			}
			up.mu.Lock()
			calls, sizes := len(up.sizes), up.sizes
			up.mu.Unlock()
			// Per Node alone: a call every shutdown TTL (30 s) per Node =
			// n × 20 in 10 min. With peers: one call per 15-30 s for all.
			if max := int(window/(15*time.Second)) + n; calls > max {
				t.Fatalf("%d batch calls for %d NotReady Nodes in %v, want <= %d (per Node alone: %d); sizes %v",
					calls, n, window, max, n*int(window/(30*time.Second)), sizes)
			}
			t.Logf("%d batch calls for %d NotReady Nodes over %v (sizes %v)", calls, n, window, sizes)
		}
	}
}
