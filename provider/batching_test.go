package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/fake"
	"k8s.io/utils/clock"
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

func newBatchSetup(t *testing.T, maxSize int) (*batchCloud, cloudprovider.InstancesV2, *enforcer, func(time.Duration)) {
	t.Helper()
	up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{"missing": true}}
	clk := newFakeClock()
	cfg := testConfig(clk)
	cfg.Batch.MaxSize = maxSize
	cfg.Batch.MaxWait = dur(100 * time.Millisecond)
	cfg.NotFoundGuard.Enabled = boolp(false) // these tests count batch answers; notfound_guard_test.go covers the guard
	cfg.Batch.SendAtOnce = boolp(false)      // these tests form batches by size and wait; internal/batcher tests SendAtOnce
	c := mustNew(t, up, cfg)
	return up, v2(t, c), enf(c), clk.Step
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
	if enf(c).batch != nil {
		t.Fatal("batcher built for an upstream without BatchInstances")
	}
	if _, err := v2(t, c).InstanceMetadata(context.Background(), testNode("a", "fake://a")); err != nil {
		t.Fatal(err)
	}
	if up.Calls("InstanceMetadata") != 1 {
		t.Fatal("per-node call not made")
	}
}

// Item 3: never more than MaxBatchSize nodes in a batch; flush never
// deadlocks with a fake clock running timer callbacks.
func TestBatchNeverExceedsMaxBatchSize(t *testing.T) {
	up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}, maxBatch: 2}
	clk := newFakeClock()
	cfg := testConfig(clk)
	i := v2(t, mustNew(t, up, cfg))
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("node-", k)
			md, err := i.InstanceMetadata(context.Background(), testNode(name, ""))
			if err == nil && md.ProviderID != "fake://"+name {
				err = fmt.Errorf("%s got %s", name, md.ProviderID)
			}
			errs <- err
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	stepperDone := make(chan struct{})
	go func() {
		// Steps in its own goroutine: a deadlock inside Step must not hang
		// the test.
		defer close(stepperDone)
		for {
			select {
			case <-done:
				return
			default:
				clk.Step(time.Millisecond)
				time.Sleep(50 * time.Microsecond)
			}
		}
	}()
	select {
	case <-stepperDone:
	case <-time.After(20 * time.Second):
		t.Fatal("callers still waiting after 20s: flush deadlocked with the fake clock")
	}
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range up.batchSizes() {
		if s > 2 {
			t.Fatalf("batch sizes %v: a batch above MaxBatchSize 2", up.batchSizes())
		}
	}
}

// maxCloud's MaxBatchSize is read from a config its Initialize loads.
type maxCloud struct {
	*batchCloud
	max, afterInit atomic.Int64
}

func (r *maxCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return r, true }

func (r *maxCloud) MaxBatchSize() int { return int(r.max.Load()) }

func (r *maxCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {
	r.max.Store(r.afterInit.Load())
}

// lookups runs n concurrent InstanceMetadata lookups of distinct nodes and
// fails the test on a wrong answer.
func lookups(t *testing.T, i cloudprovider.InstancesV2, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprint("node-", k)
			md, err := i.InstanceMetadata(context.Background(), testNode(name, ""))
			if err != nil || md.ProviderID != "fake://"+name {
				t.Errorf("%s: %+v, %v", name, md, err)
			}
		}()
	}
	wg.Wait()
}

// Issue 24 item 5: MaxBatchSize is read at Initialize (a drop there caps
// the batches), and MaxBatchSize <= 0 means no batching.
func TestMaxBatchSizeReadAtInitialize(t *testing.T) {
	for _, tc := range []struct {
		name              string
		before, afterInit int64
		n                 int
	}{
		{"drop to 2", 1000, 2, 6},
		{"0 at Initialize", 1000, 0, 3},
		{"0 from the start", 0, 0, 3},
		{"negative", -1, -1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &maxCloud{batchCloud: &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}}}
			up.max.Store(tc.before)
			up.afterInit.Store(tc.afterInit)
			cfg := testConfig(newFakeClock()) // the clock never moves: batches go when full
			cfg.Batch.MaxSize = tc.n
			c := mustNew(t, up, cfg)
			stop := make(chan struct{})
			defer close(stop)
			c.Initialize(nil, stop)
			lookups(t, v2(t, c), tc.n)
			sizes := up.batchSizes()
			if tc.afterInit <= 0 {
				if len(sizes) != 0 || up.single != tc.n {
					t.Fatalf("MaxBatchSize %d: batch sizes %v, per-node calls %d; want no batching", tc.afterInit, sizes, up.single)
				}
				return
			}
			for _, s := range sizes {
				if s > int(tc.afterInit) {
					t.Fatalf("batch sizes %v with MaxBatchSize %d", sizes, tc.afterInit)
				}
			}
		})
	}
}

// Issue 24 item 4: a batched read whose token wait outlasts the batch's
// call timeout gets the *api.RetryError of limits.read.waitTimeout, as an
// unbatched read does, not the call timeout's context error. Real clock:
// both timeouts are cloudgate's own.
func TestBatchWaitTimeoutIsRetryError(t *testing.T) {
	old := batchCallTimeout
	batchCallTimeout = 50 * time.Millisecond
	defer func() { batchCallTimeout = old }()
	up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}}
	cfg := testConfig(nil)
	cfg.Clock = clock.RealClock{}
	cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = 0.001, 1
	cfg.Limits.Read.WaitTimeout = dur(300 * time.Millisecond) // > batchCallTimeout
	cfg.Batch.MaxSize = 1
	c := mustNew(t, up, cfg)
	i := v2(t, c)
	if _, err := i.InstanceMetadata(context.Background(), testNode("a", "")); err != nil {
		t.Fatal(err) // takes the one token
	}
	_, err := i.InstanceMetadata(context.Background(), testNode("b", ""))
	var retry *cloudproviderapi.RetryError
	if !errors.As(err, &retry) {
		t.Fatalf("batched read with no token: err = %v; want *api.RetryError", err)
	}
	if n := len(up.batchSizes()); n != 1 {
		t.Fatalf("%d batch calls; want 1 (the second read had no token)", n)
	}
}

// Issue 24 suspected item: the bisection bound is 2*ceil(log2 n), which
// 2*log2 n understates when n is not a power of two: isolating the last
// of 5 nodes takes 6 more calls (2*log2 5 is 4.6).
func TestBisectionBound(t *testing.T) {
	up, i, g, _ := newBatchSetup(t, 5) // 5 nodes: sent when full
	up.poison = "n4"
	var wg sync.WaitGroup
	for k := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = i.InstanceMetadata(context.Background(), testNode(fmt.Sprint("n", k), ""))
		}()
		if k < 4 { // in order: n4 last
			waitUntil(t, "the node queued", func() bool { return g.batcher().Pending() == k+1 })
		}
	}
	wg.Wait()
	if n := len(up.batchSizes()) - 1; n != 6 {
		t.Fatalf("%d more calls to isolate n4 of 5 (sizes %v); want 6 = 2*ceil(log2 5)", n, up.batchSizes())
	}
}

// lateCloud's InstancesV2 exists only after Initialize (providers that
// build their clients there).
type lateCloud struct {
	*batchCloud
	ready atomic.Bool
}

func (l *lateCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {
	l.ready.Store(true)
}

func (l *lateCloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if !l.ready.Load() {
		return nil, false
	}
	return l.batchCloud, true
}

// Item 10: the batcher is built from the upstream's InstancesV2 as it is
// after Initialize.
func TestBatcherBuiltAfterInitialize(t *testing.T) {
	up := &lateCloud{batchCloud: &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}, maxBatch: 1}}
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

// Item 10: a batch failing as a whole because of one node fails only that
// node; the others get their answers.
func TestBatchFailureIsolatesBadNode(t *testing.T) {
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

// TestBatchTokenEmptyAccumulates: with batch.sendAtOnce (the default) a
// lone lookup goes at once with the bucket's token; lookups that arrive
// while the bucket is empty join one batch, sent when the next token comes.
func TestBatchTokenEmptyAccumulates(t *testing.T) {
	up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}}
	clk := newFakeClock()
	cfg := testConfig(clk)
	cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = 1, 1
	cfg.Limits.Read.WaitTimeout = dur(time.Minute)
	cfg.NotFoundGuard.Enabled = boolp(false)
	c := mustNew(t, up, cfg)
	i, g := v2(t, c), enf(c)

	if _, err := i.InstanceMetadata(context.Background(), testNode("a", "")); err != nil {
		t.Fatal(err) // no clock step: sent at once
	}
	errs := make(chan error, 3)
	for _, name := range []string{"b", "c", "d"} {
		go func() {
			md, err := i.InstanceMetadata(context.Background(), testNode(name, ""))
			if err == nil && md.ProviderID != "fake://"+name {
				err = fmt.Errorf("%s got %s", name, md.ProviderID)
			}
			errs <- err
		}()
	}
	waitUntil(t, "b, c, d in one batch waiting for the token", func() bool { return g.batcher().Pending() == 3 })
	if got := up.batchSizes(); len(got) != 1 {
		t.Fatalf("batch sizes %v before the token came, want [1]", got)
	}
	clk.Step(time.Second) // the next token
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := up.batchSizes(); fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("batch sizes %v, want [1 3]: one token for the three that waited", got)
	}
}
