package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
)

// batchCloud answers per node and in batches from a fixed set of instances.
type batchCloud struct {
	*fake.Cloud
	mu       sync.Mutex
	missing  map[string]bool // node names without an instance
	deleted  map[string]bool // node names whose instance is terminated but still described
	poison   string          // a batch holding this node fails as a whole
	maxBatch int             // MaxBatchSize; 0 means 1000
	batchErr error
	sizes    []int
	single   int
}

func (b *batchCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return b, true }

func (b *batchCloud) MaxBatchSize() int {
	if b.maxBatch > 0 {
		return b.maxBatch
	}
	return 1000
}

func (b *batchCloud) answer(n *v1.Node) InstanceStatus {
	if b.missing[n.Name] {
		return InstanceStatus{Err: cloudprovider.InstanceNotFound}
	}
	return InstanceStatus{Metadata: &cloudprovider.InstanceMetadata{ProviderID: "fake://" + n.Name, Zone: "zone-a"}, Shutdown: n.Name == "stopped", Deleted: b.deleted[n.Name]}
}

func (b *batchCloud) BatchInstanceStatus(_ context.Context, nodes []*v1.Node) ([]InstanceStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, len(nodes))
	if b.batchErr != nil {
		return nil, b.batchErr
	}
	for _, n := range nodes {
		if b.poison != "" && n.Name == b.poison {
			return nil, errors.New("HTTP 400 InvalidInstanceID.Malformed: " + n.Name)
		}
	}
	out := make([]InstanceStatus, len(nodes))
	for i, n := range nodes {
		out[i] = b.answer(n)
	}
	return out, nil
}

func (b *batchCloud) InstanceMetadata(_ context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	b.mu.Lock()
	b.single++
	b.mu.Unlock()
	st := b.answer(n)
	return st.Metadata, st.Err
}

func (b *batchCloud) batchSizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.sizes...)
}

func newBatchSetup(t *testing.T, maxSize int) (*batchCloud, cloudprovider.InstancesV2, *gate, func(time.Duration)) {
	t.Helper()
	up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{"missing": true}}
	clk := newFakeClock()
	cfg := testConfig(clk)
	cfg.Batch.MaxSize = maxSize
	cfg.Batch.MaxWait = dur(100 * time.Millisecond)
	cfg.NotFoundGuard.Enabled = boolp(false) // these tests count batch answers; notfound_test.go covers the guard
	cfg.Batch.SendAtOnce = boolp(false)      // these tests form batches by size and wait; internal/batcher tests SendAtOnce
	c := mustNew(t, up, cfg)
	return up, v2(t, c), c.(*cloud).g, clk.Step
}

func TestBatchCoalescesBySizeAndTime(t *testing.T) {
	up, i, g, step := newBatchSetup(t, 10)
	const n = 25
	type answer struct {
		node string
		md   *cloudprovider.InstanceMetadata
		err  error
	}
	answers := make(chan answer, n)
	for k := range n {
		go func() {
			name := fmt.Sprint("node-", k)
			md, err := i.InstanceMetadata(context.Background(), testNode(name, ""))
			answers <- answer{name, md, err}
		}()
	}
	// Two full batches go at once; the last five wait for maxWait.
	waitUntil(t, "two full batches", func() bool { return len(up.batchSizes()) == 2 })
	waitUntil(t, "five queued", func() bool {
		return g.batcher().Pending() == 5
	})
	step(100 * time.Millisecond)
	seen := map[string]bool{}
	for range n {
		a := <-answers
		if a.err != nil || a.md.ProviderID != "fake://"+a.node {
			t.Fatalf("%s got %+v, %v: not its own answer", a.node, a.md, a.err)
		}
		if seen[a.node] {
			t.Fatalf("%s answered twice", a.node)
		}
		seen[a.node] = true
	}
	if got := up.batchSizes(); len(got) != 3 || got[0] != 10 || got[1] != 10 || got[2] != 5 {
		t.Fatalf("batch sizes = %v, want [10 10 5]", got)
	}
	if up.single != 0 {
		t.Fatalf("%d per-node calls with batching on", up.single)
	}
}

func TestBatchPerNodeErrorsAndCacheFill(t *testing.T) {
	up, i, g, step := newBatchSetup(t, 3)
	ctx := context.Background()
	var wg sync.WaitGroup
	var existsMissing, shutdownStopped bool
	var errMissing, errExists error
	wg.Add(2)
	go func() { defer wg.Done(); _, errMissing = i.InstanceMetadata(ctx, testNode("missing", "")) }()
	go func() { defer wg.Done(); shutdownStopped, _ = i.InstanceShutdown(ctx, testNode("stopped", "")) }()
	// Two nodes, below maxSize: sent at maxWait.
	waitUntil(t, "two nodes queued", func() bool {
		return g.batcher().Pending() == 2
	})
	step(100 * time.Millisecond)
	wg.Wait()
	calls := len(up.batchSizes())
	// The batch answer filled the other caches: no further upstream calls.
	existsMissing, errExists = i.InstanceExists(ctx, testNode("missing", ""))
	if errMissing != cloudprovider.InstanceNotFound {
		t.Fatalf("metadata err = %v, want the exact InstanceNotFound", errMissing)
	}
	if existsMissing || errExists != nil {
		t.Fatalf("InstanceExists(missing) = %v, %v; want false, nil", existsMissing, errExists)
	}
	if !shutdownStopped {
		t.Fatal("InstanceShutdown(stopped) = false")
	}
	if _, err := i.InstanceMetadata(ctx, testNode("stopped", "")); err != nil {
		t.Fatal(err)
	}
	if ok, _ := i.InstanceExists(ctx, testNode("stopped", "")); !ok {
		t.Fatal("InstanceExists(stopped) = false")
	}
	if got := len(up.batchSizes()); got != calls {
		t.Fatalf("batch calls went from %d to %d for answers the batch already gave", calls, got)
	}
}

func TestBatchCallerCancellationLeavesBatchForOthers(t *testing.T) {
	up, i, g, step := newBatchSetup(t, 100)
	ctx, cancel := context.WithCancel(context.Background())
	leaver := make(chan error, 1)
	go func() {
		_, err := i.InstanceMetadata(ctx, testNode("leaver", ""))
		leaver <- err
	}()
	stayer := make(chan error, 1)
	go func() {
		md, err := i.InstanceMetadata(context.Background(), testNode("stayer", ""))
		if err == nil && md.ProviderID != "fake://stayer" {
			err = fmt.Errorf("got %+v", md)
		}
		stayer <- err
	}()
	waitUntil(t, "both queued", func() bool {
		return g.batcher().Pending() == 2
	})
	cancel()
	if err := <-leaver; !errors.Is(err, context.Canceled) {
		t.Fatalf("leaver err = %v", err)
	}
	step(100 * time.Millisecond)
	if err := <-stayer; err != nil {
		t.Fatalf("the remaining caller lost its answer: %v", err)
	}
	if got := up.batchSizes(); len(got) != 1 {
		t.Fatalf("batch calls = %v, want one", got)
	}
}

func TestBatchErrorReachesEveryCaller(t *testing.T) {
	// maxSize 2: the two callers fill one batch, sent by size. (No clock
	// step: a step before the second caller joined would send the first
	// alone and leave the second waiting for a timer never stepped.)
	up, i, _, _ := newBatchSetup(t, 2)
	up.batchErr = &throttleErr{}
	errs := make(chan error, 2)
	for _, n := range []string{"a", "b"} {
		go func() {
			exists, err := i.InstanceExists(context.Background(), testNode(n, ""))
			if exists {
				err = errors.New("exists = true with a failed batch")
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err == nil || errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Fatalf("err = %v, want the batch's throttling error", err)
		}
	}
}

func TestNoBatchInterfaceFallsBackToPerNodeCalls(t *testing.T) {
	up := newCountingCloud()
	c := mustNew(t, up, testConfig(newFakeClock()))
	if c.(*cloud).g.batch != nil {
		t.Fatal("batcher built for an upstream without BatchInstances")
	}
	if _, err := v2(t, c).InstanceMetadata(context.Background(), testNode("a", "fake://a")); err != nil {
		t.Fatal(err)
	}
	if up.Calls("InstanceMetadata") != 1 {
		t.Fatal("per-node call not made")
	}
}
