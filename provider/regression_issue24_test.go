package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// regRecreatedCloud lists one VM re-created under the same name: the live
// record first, the Deleted one (the old VM) last.
type regRecreatedCloud struct {
	*fake.Cloud
	lists atomic.Int64
}

func (l *regRecreatedCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }

func (l *regRecreatedCloud) ListInstances(context.Context, string) ([]InstanceRecord, string, error) {
	l.lists.Add(1)
	return []InstanceRecord{
		{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a-new"}},
		{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a-old"}, Deleted: true},
	}, "", nil
}

// Issue 24 item 6: a Deleted list record does not answer by-name reads.
func TestRegression24_PrefetchDeletedRecordNotByName(t *testing.T) {
	up := &regRecreatedCloud{Cloud: &fake.Cloud{Provider: "fake"}}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	g := c.(*cloud).g
	waitUntil(t, "the cache filled", func() bool {
		_, _, ok := g.inst.exists.Fresh(nodeKey{byProviderID: true, id: "fake://a-old"})
		return ok
	})
	ok, err := v2(t, c).InstanceExists(context.Background(), testNode("a", ""))
	if err != nil || !ok {
		t.Fatalf("InstanceExists(node a without provider ID) = %v, %v; want true (a live VM has that name)", ok, err)
	}
	_ = c.(interface{ Close() error }).Close()
}

// regSpareCloud answers InstanceMetadata with one object of its own whose
// addresses have spare capacity (a provider keeping its answers).
type regSpareCloud struct {
	*fake.Cloud
	md    *cloudprovider.InstanceMetadata
	calls atomic.Int64
}

func (s *regSpareCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return s, true }

func (s *regSpareCloud) InstanceMetadata(context.Context, *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	s.calls.Add(1)
	return s.md, nil
}

// Issue 24 item 3: on a miss every caller (leader and joiners) gets the
// stored copy, whose addresses have no spare capacity, never the upstream's
// object: two callers appending a hostname each keep their own, and the
// upstream's object is untouched.
func TestRegression24_MissCallersGetStoredCopy(t *testing.T) {
	addrs := make([]v1.NodeAddress, 1, 4)
	addrs[0] = v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.0.0.1"}
	up := &regSpareCloud{Cloud: &fake.Cloud{Provider: "fake"}, md: &cloudprovider.InstanceMetadata{ProviderID: "fake://a", NodeAddresses: addrs}}
	i := v2(t, mustNew(t, up, testConfig(newFakeClock())))
	const n = 2
	var wg sync.WaitGroup
	got := make([][]v1.NodeAddress, n)
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			md, err := i.InstanceMetadata(context.Background(), testNode("a", "fake://a"))
			if err != nil {
				t.Error(err)
				return
			}
			if md == up.md {
				t.Error("a caller got the upstream's own InstanceMetadata object")
			}
			if cap(md.NodeAddresses) != len(md.NodeAddresses) {
				t.Errorf("a caller's addresses have spare capacity (len %d, cap %d)", len(md.NodeAddresses), cap(md.NodeAddresses))
			}
			got[k] = append(md.NodeAddresses, v1.NodeAddress{Type: v1.NodeHostName, Address: fmt.Sprint("host-", k)})
		}()
	}
	wg.Wait()
	for k, a := range got {
		if len(a) != 2 || a[1].Address != fmt.Sprint("host-", k) {
			t.Fatalf("caller %d's addresses = %v; another caller's append overwrote its own", k, a)
		}
	}
	if spare := up.md.NodeAddresses[:2]; spare[1].Address != "" {
		t.Fatalf("a caller's append wrote into the upstream's own array: %v", spare)
	}
}

// regMaxCloud's MaxBatchSize is read from a config its Initialize loads.
type regMaxCloud struct {
	*batchCloud
	max, afterInit atomic.Int64
}

func (r *regMaxCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return r, true }
func (r *regMaxCloud) MaxBatchSize() int                              { return int(r.max.Load()) }
func (r *regMaxCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {
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
func TestRegression24_MaxBatchSizeReadAtInitialize(t *testing.T) {
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
			up := &regMaxCloud{batchCloud: &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}}}
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
func TestRegression24_BatchWaitTimeoutIsRetryError(t *testing.T) {
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

// Issue 24 suspected items: GetLoadBalancer answering exists=false and v1
// NodeAddresses(name) are held at most negativeTTL (then asked again), like
// the other "does not exist" and name-keyed answers.
func TestRegression24_NegativeLBAndNodeAddressesByNameShortLived(t *testing.T) {
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

// Issue 24 suspected item: throttle.patterns are checked by Validate
// (LoadConfig): an invalid regexp, or one matching every message.
func TestRegression24_ThrottlePatternsValidated(t *testing.T) {
	for _, tc := range []struct {
		pattern, want string
	}{
		{"(unclosed", "throttle.patterns[0]"},
		{".*", "matches the empty string"},
		{"x?", "matches the empty string"},
	} {
		cfg := DefaultConfig()
		cfg.Throttle.Patterns = []string{tc.pattern}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pattern %q: Validate() = %v; want an error naming %q", tc.pattern, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Throttle.Patterns = []string{"QuotaExceeded"}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a valid pattern: %v", err)
	}
}

// Issue 24 suspected item: the bisection bound is 2*ceil(log2 n), which
// 2*log2 n understates when n is not a power of two: isolating the last
// of 5 nodes takes 6 more calls (2*log2 5 is 4.6).
func TestRegression24_BisectionBound(t *testing.T) {
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
