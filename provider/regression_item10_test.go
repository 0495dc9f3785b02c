package provider

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"

	"github.com/cloudgate/cloudgate/limiter"
)

// regListOnlyCloud's InstancesV2 lists instances but cannot answer batches.
type regListOnlyCloud struct {
	*fake.Cloud
	lists atomic.Int64
}

func (l *regListOnlyCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }

func (l *regListOnlyCloud) ListInstances(context.Context, string) ([]InstanceRecord, string, error) {
	l.lists.Add(1)
	return []InstanceRecord{{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a", Zone: "listed"}}}, "", nil
}

// Item 10: list prefetch needs only InstanceLister, not BatchInstances.
func TestRegression_ListPrefetchWithoutBatching(t *testing.T) {
	up := &regListOnlyCloud{Cloud: &fake.Cloud{Provider: "fake"}}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	waitUntil(t, "a list call", func() bool { return up.lists.Load() >= 1 })
	waitUntil(t, "the cache filled", func() bool {
		_, _, ok := c.(*cloud).g.inst.metadata.Peek(nodeKey{byProviderID: true, id: "fake://a"})
		return ok
	})
	md, err := v2(t, c).InstanceMetadata(context.Background(), testNode("a", "fake://a"))
	if err != nil || md.Zone != "listed" {
		t.Fatalf("InstanceMetadata = %+v, %v; want the listed answer", md, err)
	}
	_ = c.(interface{ Close() error }).Close()
}

// regLateCloud's InstancesV2 exists only after Initialize (providers that
// build their clients there).
type regLateCloud struct {
	*batchCloud
	ready atomic.Bool
}

func (l *regLateCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {
	l.ready.Store(true)
}

func (l *regLateCloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if !l.ready.Load() {
		return nil, false
	}
	return l.batchCloud, true
}

// Item 10: the batcher is built from the upstream's InstancesV2 as it is
// after Initialize.
func TestRegression_BatcherBuiltAfterInitialize(t *testing.T) {
	up := &regLateCloud{batchCloud: &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}, maxBatch: 1}}
	c := mustNew(t, up, testConfig(newFakeClock()))
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	if _, err := v2(t, c).InstanceMetadata(context.Background(), testNode("a", "fake://a")); err != nil {
		t.Fatal(err)
	}
	if n := len(up.batchSizes()); n != 1 || up.single != 0 {
		t.Fatalf("batch calls %d, per-node calls %d; want the lookup batched", n, up.single)
	}
}

// Item 10: Initialize twice (leader migration) runs one prefetch loop.
func TestRegression_InitializeTwiceOneLoop(t *testing.T) {
	up := &regListOnlyCloud{Cloud: &fake.Cloud{Provider: "fake"}}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	c.Initialize(nil, stop)
	g := c.(*cloud).g
	waitUntil(t, "one loop", func() bool { return g.prefetchLoops.Load() == 1 })
	time.Sleep(20 * time.Millisecond)
	if n := g.prefetchLoops.Load(); n != 1 {
		t.Fatalf("%d prefetch loops after Initialize twice, want 1", n)
	}
	if err := c.(interface{ Close() error }).Close(); err != nil {
		t.Fatal(err)
	}
	if n := g.prefetchLoops.Load(); n != 0 {
		t.Fatalf("%d prefetch loops after Close", n)
	}
}

// Item 10: a batch failing as a whole because of one node fails only that
// node; the others get their answers.
func TestRegression_BatchFailureIsolatesBadNode(t *testing.T) {
	up, i, _, _ := newBatchSetup(t, 8) // 8 nodes: sent when full
	up.poison = "n5"
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[k] = i.InstanceMetadata(context.Background(), testNode(fmt.Sprint("n", k), ""))
		}()
	}
	wg.Wait()
	for k, err := range errs {
		if (err != nil) != (k == 5) {
			t.Fatalf("node n%d: err = %v; only n5 should fail", k, err)
		}
	}
	if n := len(up.batchSizes()); n > 1+2*3 {
		t.Fatalf("%d batch calls to isolate one node of 8, want at most 7", n)
	}
	// A throttled batch is not split: one call.
	up2, i2, _, _ := newBatchSetup(t, 8)
	up2.batchErr = &throttleErr{}
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = i2.InstanceMetadata(context.Background(), testNode(fmt.Sprint("n", k), ""))
		}()
	}
	wg.Wait()
	if n := len(up2.batchSizes()); n != 1 {
		t.Fatalf("a throttled batch was split into %d calls", n)
	}
}

// Item 10: v1 NodeAddresses for a node never seen (being initialised) is
// not queued behind background resyncs.
func TestRegression_NodeAddressesForNewNodeAreNotBackground(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	cfg := testConfig(clk)
	cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = 1, 1
	c := mustNew(t, up, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _ = v2(t, c).InstanceExists(ctx, testNode("warm", "fake://warm")) // takes the token
	bucket := c.(*cloud).g.methods["NodeAddresses"].bucket.(*limiter.Bucket)
	background := make(chan error, 1)
	go func() {
		_, err := v2(t, c).InstanceExists(ctx, testNode("resync", "fake://resync"))
		background <- err
	}()
	waitUntil(t, "background read queued", func() bool { return bucket.Waiting() == 1 })
	in, _ := c.Instances()
	init := make(chan error, 1)
	go func() {
		_, err := in.NodeAddresses(ctx, "new-node")
		init <- err
	}()
	waitUntil(t, "both queued", func() bool { return bucket.Waiting() == 2 })
	clk.Step(time.Second) // one token
	select {
	case err := <-init:
		if err != nil {
			t.Fatal(err)
		}
	case <-background:
		t.Fatal("the background resync got the token before the new node's NodeAddresses")
	case <-time.After(5 * time.Second):
		t.Fatal("no caller got the token")
	}
	cancel()
	<-background
}

// Item 10: Close stops cloudgate's goroutines.
func TestRegression_CloseStopsGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	up := &regListOnlyCloud{Cloud: &fake.Cloud{Provider: "fake"}}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	c.Initialize(nil, make(chan struct{})) // never closed
	waitUntil(t, "a list call", func() bool { return up.lists.Load() >= 1 })
	if err := c.(interface{ Close() error }).Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}
