package provider

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// Item 4: a read that starts after a write returned never sees pre-write
// state, even when a read that started before the write is in flight.
func TestReadAfterWriteStartsFreshFlight(t *testing.T) {
	up := newCountingCloud()
	var mu sync.Mutex
	written := false
	firstIn, releaseFirst := make(chan struct{}), make(chan struct{})
	var first sync.Once
	up.getLBHook = func(ctx context.Context) (*v1.LoadBalancerStatus, bool, error) {
		mu.Lock()
		exists := written
		mu.Unlock()
		isFirst := false
		first.Do(func() { isFirst = true })
		if isFirst {
			close(firstIn)
			<-releaseFirst
		}
		return &v1.LoadBalancerStatus{}, exists, nil
	}
	up.ensureLBHook = func() error {
		mu.Lock()
		written = true
		mu.Unlock()
		return nil
	}
	c := mustNew(t, up, testConfig(newFakeClock()))
	lb, _ := c.LoadBalancer()
	svc := testService("ns", "s", "u")
	ctx := context.Background()
	before := make(chan bool, 1)
	go func() {
		_, exists, _ := lb.GetLoadBalancer(ctx, "c", svc)
		before <- exists
	}()
	<-firstIn
	if _, err := lb.EnsureLoadBalancer(ctx, "c", svc, nil); err != nil {
		t.Fatal(err)
	}
	after := make(chan bool, 1)
	go func() {
		_, exists, _ := lb.GetLoadBalancer(ctx, "c", svc)
		after <- exists
	}()
	var got bool
	select {
	case got = <-after:
	case <-time.After(100 * time.Millisecond):
		// Joined the pre-write flight: release it to see what it gets.
		close(releaseFirst)
		got = <-after
		<-before
		if !got {
			t.Fatal("a read started after the write returned got the pre-write answer")
		}
		return
	}
	close(releaseFirst)
	<-before
	if !got {
		t.Fatal("a read started after the write returned got the pre-write answer")
	}
	// The pre-write read finished after the write: it must not be cached.
	if _, exists, _ := lb.GetLoadBalancer(ctx, "c", svc); !exists {
		t.Fatal("the cache kept an answer read before the write")
	}
}

// Item 9: an empty provider ID is no identity: never cached or merged.
func TestEmptyProviderIDNeverCachedOrMerged(t *testing.T) {
	up := newCountingCloud()
	c := mustNew(t, up, testConfig(newFakeClock()))
	in, _ := c.Instances()
	for range 100 {
		_, _ = in.InstanceTypeByProviderID(context.Background(), "")
		_, _ = in.InstanceExistsByProviderID(context.Background(), "")
	}
	if got := up.Calls("InstanceTypeByProviderID"); got != 100 {
		t.Fatalf("InstanceTypeByProviderID(\"\") reached upstream %d times for 100 calls", got)
	}
	if got := up.Calls("InstanceExistsByProviderID"); got != 100 {
		t.Fatalf("InstanceExistsByProviderID(\"\") reached upstream %d times for 100 calls", got)
	}
}

// Item 9: identity answers keyed by a node name live at most negativeTTL.
func TestNameKeyedIdentityBoundedByNegativeTTL(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	c := mustNew(t, up, testConfig(clk))
	in, _ := c.Instances()
	ctx := context.Background()
	if id, _ := in.InstanceID(ctx, "node-1"); id != "i-1" {
		t.Fatalf("InstanceID = %q", id)
	}
	md, _ := v2(t, c).InstanceMetadata(ctx, testNode("node-1", ""))
	if md == nil {
		t.Fatal("no metadata")
	}
	// The VM is re-created under the same name.
	up.ExtID = map[types.NodeName]string{"node-1": "i-2"}
	up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) {
		return &cloudprovider.InstanceMetadata{ProviderID: "fake://i-2"}, nil
	}
	clk.Step(31 * time.Second)
	if id, _ := in.InstanceID(ctx, "node-1"); id != "i-2" {
		t.Fatalf("InstanceID(node-1) = %q after negativeTTL, want the new instance's i-2", id)
	}
	if md, _ := v2(t, c).InstanceMetadata(ctx, testNode("node-1", "")); md.ProviderID != "fake://i-2" {
		t.Fatalf("InstanceMetadata by name = %q after negativeTTL, want the new instance's", md.ProviderID)
	}
}

// noGuard turns the not-found guard off: these tests are about how a
// "does not exist" is cached, which the guard would hold back (notfound_guard_test.go).
func noGuard(cfg *Config) *Config {
	cfg.NotFoundGuard.Enabled = boolp(false)
	return cfg
}

// Item 1: "does not exist" in any form is negative: negativeTTL, never stale.
func TestExistsFalseIsNegative(t *testing.T) {
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
		tripConfig(cfg)
		c := mustNew(t, up, cfg)
		node := testNode("a", "fake://a")
		_, _ = v2(t, c).InstanceExists(ctx, node)
		clk.Step(31 * time.Second)
		openReadBreaker(t, c, up)
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

// Issue 24 suspected items: GetLoadBalancer answering exists=false and v1
// NodeAddresses(name) are held at most negativeTTL (then asked again), like
// the other "does not exist" and name-keyed answers.
func TestNegativeLBAndNodeAddressesByNameShortLived(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	up.getLBHook = func(context.Context) (*v1.LoadBalancerStatus, bool, error) { return nil, false, nil }
	cfg := testConfig(clk)
	cfg.Cache.NegativeTTL = dur(30 * time.Second)
	c := mustNew(t, up, cfg)
	lb, _ := c.LoadBalancer()
	in, _ := c.Instances()
	ctx := context.Background()
	svc := testService("ns", "svc", "uid-1")
	for range 2 {
		if _, exists, err := lb.GetLoadBalancer(ctx, "cluster", svc); err != nil || exists {
			t.Fatalf("GetLoadBalancer = %v, %v", exists, err)
		}
		if _, err := in.NodeAddresses(ctx, "node-1"); err != nil {
			t.Fatal(err)
		}
		clk.Step(31 * time.Second) // past negativeTTL, within both methods' TTL
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.calls["GetLoadBalancer"] != 2 || up.calls["NodeAddresses"] != 2 {
		t.Fatalf("upstream calls %v after negativeTTL; want GetLoadBalancer and NodeAddresses asked again", up.calls)
	}
}
