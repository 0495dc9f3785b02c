package provider

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cloudgate/cloudgate/internal/recorder"
	"github.com/cloudgate/cloudgate/limiter"
)

// scriptCloud is an upstream whose every answer is scripted by how many
// times the method was called for that key: values change, instances
// vanish and come back, the cloud throttles and fails. Two scriptClouds
// given the same calls in the same order give the same answers, so a bare
// one and one behind cloudgate in shadow mode can be compared answer by
// answer. Errors are package-level values, so they compare with ==.
type scriptCloud struct {
	batch bool // InstancesV2 implements BatchInstances
	mu    sync.Mutex
	n     map[string]int // calls by method+key
	calls map[string]int // calls by method
	gate  chan struct{}  // when set, InstanceMetadata waits for it
	// outage: the calls (all methods, in order) that fail; only where the
	// order of calls is deterministic (one caller).
	outage     [2]int
	totalCalls int
}

var (
	errScriptThrottle = errors.New("RequestLimitExceeded: slow down")
	errScriptFail     = errors.New("500 internal error")
)

func newScriptCloud(batch bool) *scriptCloud {
	return &scriptCloud{batch: batch, n: map[string]int{}, calls: map[string]int{}}
}

// next counts a call of method for key and returns its ordinal (0-based)
// and the scripted error of that ordinal, if any.
func (s *scriptCloud) next(method, key string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method]++
	k := s.n[method+"/"+key]
	s.n[method+"/"+key]++
	s.totalCalls++
	switch {
	case s.totalCalls >= s.outage[0] && s.totalCalls < s.outage[1]: // the breaker opens
		return k, errScriptFail
	case k%17 == 16:
		return k, errScriptThrottle
	case k%13 == 12:
		return k, errScriptFail
	case k%7 == 6:
		return k, cloudprovider.InstanceNotFound
	}
	return k, nil
}

func (s *scriptCloud) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

func (s *scriptCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (s *scriptCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return scriptLB{s}, true }
func (s *scriptCloud) Instances() (cloudprovider.Instances, bool)                        { return scriptV1{s}, true }
func (s *scriptCloud) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (s *scriptCloud) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (s *scriptCloud) Routes() (cloudprovider.Routes, bool)                              { return scriptRoutes{s}, true }
func (s *scriptCloud) ProviderName() string                                              { return "script" }
func (s *scriptCloud) HasClusterID() bool                                                { return true }
func (s *scriptCloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if s.batch {
		return scriptBatchV2{scriptV2{s}}, true
	}
	return scriptV2{s}, true
}

type scriptV2 struct{ s *scriptCloud }

// Values change every third call of a key: a cache holding the first
// would serve a stale one.
func (v scriptV2) InstanceMetadata(ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	if g := v.s.gate; g != nil {
		<-g
	}
	k, err := v.s.next("InstanceMetadata", n.Name)
	if err != nil {
		return nil, err
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID: n.Spec.ProviderID, InstanceType: "t" + fmt.Sprint(k/3), Zone: "zone-a",
		NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", k/3)}},
	}, nil
}

func (v scriptV2) InstanceExists(_ context.Context, n *v1.Node) (bool, error) {
	k, err := v.s.next("InstanceExists", n.Name)
	if err == cloudprovider.InstanceNotFound {
		return false, nil
	}
	return k%5 != 4, err
}

func (v scriptV2) InstanceShutdown(_ context.Context, n *v1.Node) (bool, error) {
	k, err := v.s.next("InstanceShutdown", n.Name)
	return k%4 == 3, err
}

type scriptBatchV2 struct{ scriptV2 }

func (scriptBatchV2) MaxBatchSize() int { return 50 }

// BatchInstanceStatus must never be called in shadow mode.
func (v scriptBatchV2) BatchInstanceStatus(context.Context, []*v1.Node) ([]InstanceStatus, error) {
	v.s.next("BatchInstanceStatus", "")
	return nil, errScriptFail
}

type scriptV1 struct{ s *scriptCloud }

func (v scriptV1) NodeAddresses(_ context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	k, err := v.s.next("NodeAddresses", string(name))
	if err != nil {
		return nil, err
	}
	if k%3 == 2 {
		return []v1.NodeAddress{}, nil // empty, not nil: must come back as is
	}
	return []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.1.0.%d", k/2)}}, nil
}
func (v scriptV1) NodeAddressesByProviderID(ctx context.Context, id string) ([]v1.NodeAddress, error) {
	return v.NodeAddresses(ctx, types.NodeName(id))
}
func (v scriptV1) InstanceID(_ context.Context, name types.NodeName) (string, error) {
	k, err := v.s.next("InstanceID", string(name))
	return fmt.Sprintf("i-%s-%d", name, k/4), err
}
func (v scriptV1) InstanceType(_ context.Context, name types.NodeName) (string, error) {
	_, err := v.s.next("InstanceType", string(name))
	return "t", err
}
func (v scriptV1) InstanceTypeByProviderID(_ context.Context, id string) (string, error) {
	_, err := v.s.next("InstanceTypeByProviderID", id)
	return "t", err
}
func (v scriptV1) AddSSHKeyToAllInstances(context.Context, string, []byte) error {
	return cloudprovider.NotImplemented
}
func (v scriptV1) CurrentNodeName(_ context.Context, h string) (types.NodeName, error) {
	return types.NodeName(h), nil
}
func (v scriptV1) InstanceExistsByProviderID(_ context.Context, id string) (bool, error) {
	k, err := v.s.next("InstanceExistsByProviderID", id)
	if err == cloudprovider.InstanceNotFound {
		return false, nil
	}
	return k%5 != 4, err
}
func (v scriptV1) InstanceShutdownByProviderID(_ context.Context, id string) (bool, error) {
	_, err := v.s.next("InstanceShutdownByProviderID", id)
	return false, err
}

type scriptLB struct{ s *scriptCloud }

func (l scriptLB) GetLoadBalancer(_ context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	k, err := l.s.next("GetLoadBalancer", svc.Name)
	if err == cloudprovider.InstanceNotFound || k%6 == 5 {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: fmt.Sprintf("192.0.2.%d", k/2)}}}, true, nil
}
func (l scriptLB) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return "lb-" + svc.Name
}
func (l scriptLB) EnsureLoadBalancer(_ context.Context, _ string, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	k, err := l.s.next("EnsureLoadBalancer", svc.Name)
	if err != nil {
		return nil, err
	}
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: fmt.Sprintf("198.51.100.%d", k)}}}, nil
}
func (l scriptLB) UpdateLoadBalancer(_ context.Context, _ string, svc *v1.Service, _ []*v1.Node) error {
	_, err := l.s.next("UpdateLoadBalancer", svc.Name)
	return err
}
func (l scriptLB) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *v1.Service) error {
	_, err := l.s.next("EnsureLoadBalancerDeleted", svc.Name)
	return err
}

type scriptRoutes struct{ s *scriptCloud }

func (r scriptRoutes) ListRoutes(_ context.Context, cluster string) ([]*cloudprovider.Route, error) {
	k, err := r.s.next("ListRoutes", cluster)
	if err != nil {
		return nil, err
	}
	out := []*cloudprovider.Route{}
	for i := 0; i < k%4; i++ {
		out = append(out, &cloudprovider.Route{Name: fmt.Sprint(i), TargetNode: types.NodeName(fmt.Sprint("node-", i)), DestinationCIDR: fmt.Sprintf("10.244.%d.0/24", i)})
	}
	return out, nil
}
func (r scriptRoutes) CreateRoute(_ context.Context, cluster, _ string, _ *cloudprovider.Route) error {
	_, err := r.s.next("CreateRoute", cluster)
	return err
}
func (r scriptRoutes) DeleteRoute(_ context.Context, cluster string, _ *cloudprovider.Route) error {
	_, err := r.s.next("DeleteRoute", cluster)
	return err
}

// shadowConfig is a shadow-mode config whose enforcing twin would wait,
// reject and batch: a bucket of one token per 100 s with no wait bound,
// a breaker that opens after two failures and stays open for minutes.
func shadowConfig(clk *clocktesting.FakeClock) *Config {
	cfg := testConfig(clk)
	cfg.Mode = ModeShadow
	cfg.Limits.Read = BucketConfig{QPS: 0.01, Burst: 1}
	cfg.Limits.Write = BucketConfig{QPS: 0.01, Burst: 1}
	cfg.Breaker.MinRequests, cfg.Breaker.FailureRatio = 2, 0.5
	// Open for minutes: the workload steps the clock by up to 40 s a call.
	cfg.Breaker.MinOpenTimeout, cfg.Breaker.OpenTimeout = dur(5*time.Minute), dur(10*time.Minute)
	return cfg
}

// shadowOp is one call of the workload, on one provider; it returns the
// answer and error as a comparable record.
type shadowOp func(ctx context.Context, c cloudprovider.Interface, node *v1.Node, svc *v1.Service, cluster string) (any, error)

var shadowOps = []struct {
	name string
	op   shadowOp
}{
	{"InstanceMetadata", func(ctx context.Context, c cloudprovider.Interface, n *v1.Node, _ *v1.Service, _ string) (any, error) {
		i, _ := c.InstancesV2()
		return i.InstanceMetadata(ctx, n)
	}},
	{"InstanceExists", func(ctx context.Context, c cloudprovider.Interface, n *v1.Node, _ *v1.Service, _ string) (any, error) {
		i, _ := c.InstancesV2()
		return i.InstanceExists(ctx, n)
	}},
	{"InstanceShutdown", func(ctx context.Context, c cloudprovider.Interface, n *v1.Node, _ *v1.Service, _ string) (any, error) {
		i, _ := c.InstancesV2()
		return i.InstanceShutdown(ctx, n)
	}},
	{"NodeAddresses", func(ctx context.Context, c cloudprovider.Interface, n *v1.Node, _ *v1.Service, _ string) (any, error) {
		i, _ := c.Instances()
		return i.NodeAddresses(ctx, types.NodeName(n.Name))
	}},
	{"InstanceID", func(ctx context.Context, c cloudprovider.Interface, n *v1.Node, _ *v1.Service, _ string) (any, error) {
		i, _ := c.Instances()
		return i.InstanceID(ctx, types.NodeName(n.Name))
	}},
	{"InstanceExistsByProviderID", func(ctx context.Context, c cloudprovider.Interface, n *v1.Node, _ *v1.Service, _ string) (any, error) {
		i, _ := c.Instances()
		return i.InstanceExistsByProviderID(ctx, n.Spec.ProviderID)
	}},
	{"GetLoadBalancer", func(ctx context.Context, c cloudprovider.Interface, _ *v1.Node, s *v1.Service, cl string) (any, error) {
		l, _ := c.LoadBalancer()
		st, exists, err := l.GetLoadBalancer(ctx, cl, s)
		return [2]any{st, exists}, err
	}},
	{"EnsureLoadBalancer", func(ctx context.Context, c cloudprovider.Interface, n *v1.Node, s *v1.Service, cl string) (any, error) {
		l, _ := c.LoadBalancer()
		return l.EnsureLoadBalancer(ctx, cl, s, []*v1.Node{n})
	}},
	{"ListRoutes", func(ctx context.Context, c cloudprovider.Interface, _ *v1.Node, _ *v1.Service, cl string) (any, error) {
		r, _ := c.Routes()
		return r.ListRoutes(ctx, cl)
	}},
	{"CreateRoute", func(ctx context.Context, c cloudprovider.Interface, n *v1.Node, _ *v1.Service, cl string) (any, error) {
		r, _ := c.Routes()
		return nil, r.CreateRoute(ctx, cl, "hint", &cloudprovider.Route{TargetNode: types.NodeName(n.Name), DestinationCIDR: "10.244.9.0/24"})
	}},
}

// TestShadowAnswersAsBare runs one seeded workload (every wrapped method
// family, answers that change, vanish, throttle and fail) against a bare
// scripted upstream and against the same script behind cloudgate in shadow
// mode, whose enforcing twin would wait ~100 s per call, open its breaker
// and batch. Every answer and error must be identical (values
// reflect.DeepEqual, nil and empty slices told apart; errors ==), no call
// may wait (the fake clock only moves when the test steps it, so a wait
// would hang until the 10 s guard), and the upstream must see the same
// calls. Sequential and with 4 goroutines on disjoint nodes; with and
// without a batching upstream.
func TestShadowAnswersAsBare(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batch   bool
		workers int
	}{{"plain", false, 1}, {"batch", true, 1}, {"batch-concurrent", true, 4}, {"plain-concurrent", false, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			bare, up := newScriptCloud(tc.batch), newScriptCloud(tc.batch)
			if tc.workers == 1 {
				// Long enough to trip the breaker over the calls before it
				// within its counting interval.
				bare.outage, up.outage = [2]int{1200, 2600}, [2]int{1200, 2600}
			}
			clk := newFakeClock()
			cfg := shadowConfig(clk)
			sh := mustNew(t, up, cfg)
			defer sh.(interface{ Close() error }).Close()
			var checked int
			var mu sync.Mutex
			var wg sync.WaitGroup
			for w := 0; w < tc.workers; w++ {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 7))
					cluster := fmt.Sprint("cluster-", w)
					svc := testService("default", fmt.Sprint("svc-", w), fmt.Sprint("uid-", w))
					for k := 0; k < 6000/max(2, tc.workers); k++ {
						n := rng.IntN(5)
						node := testNode(fmt.Sprintf("node-%d-%d", w, n), fmt.Sprintf("fake://i-%d-%d", w, n))
						op := shadowOps[rng.IntN(len(shadowOps))]
						wantV, wantErr := op.op(context.Background(), bare, node, svc, cluster)
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						gotV, gotErr := op.op(ctx, sh, node, svc, cluster)
						cancel()
						if gotErr != wantErr || !reflect.DeepEqual(gotV, wantV) {
							t.Errorf("worker %d call %d %s(%s): shadow answered (%#v, %v), bare (%#v, %v)", w, k, op.name, node.Name, gotV, gotErr, wantV, wantErr)
							return
						}
						mu.Lock()
						checked++
						mu.Unlock()
						if w == 0 {
							clk.Step(time.Duration(rng.IntN(40)) * time.Second)
						}
					}
				})
			}
			wg.Wait()
			if got, want := up.Calls(), bare.Calls(); !reflect.DeepEqual(got, want) {
				t.Errorf("upstream calls in shadow mode %v, bare %v", got, want)
			}
			tot := cfg.Metrics.Recorders().ShadowTotals("script")
			reads := 0.0
			for _, r := range tot.Reads {
				reads += r[recorder.ShadowHit]
			}
			if tot.TotalCalls() == 0 || reads == 0 || len(tot.Divergences) == 0 || (tc.workers == 1 && tot.Rejections["read"] == 0) {
				t.Errorf("the shadow model did not run: %+v", tot)
			}
			if tc.batch && tot.Calls["BatchInstanceStatus"] == 0 {
				t.Errorf("no would-be batch calls: %v", tot.Calls)
			}
			t.Logf("%d answers identical; predicted %v calls, %v divergences, rejections %v, would-be waits %.0f s (read)",
				checked, tot.TotalCalls(), sum(tot.Divergences), tot.Rejections, tot.WaitSeconds["read"])
		})
	}
}

func TestShadowConfig(t *testing.T) {
	for _, tc := range []struct {
		yaml, err string
	}{
		{"upstream: {name: x}\nmode: shadow\n", ""},
		{"upstream: {name: x}\nmode: enforce\n", ""},
		{"upstream: {name: x}\n", ""},
		{"upstream: {name: x}\nmode: dry-run\n", `mode: "dry-run" is not a mode; want "enforce"`},
		{"upstream: {name: x}\nmode: shadow\nlimits: {shared: {account: a, redis: {address: 127.0.0.1:1}}}\n", "mode: shadow does not take limits.shared"},
	} {
		cfg, err := LoadConfig(strings.NewReader(tc.yaml))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.yaml, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one containing %q", tc.yaml, err, tc.err)
		case tc.err == "" && tc.yaml == "upstream: {name: x}\n" && cfg.Mode != ModeEnforce:
			t.Errorf("default mode %q, want %q", cfg.Mode, ModeEnforce)
		}
	}
}

// batchCounting is countingCloud whose InstancesV2 also takes batches
// (which shadow mode must never send).
type batchCounting struct{ *countingCloud }

type batchCountingV2 struct{ *countingCloud }

func (b batchCounting) InstancesV2() (cloudprovider.InstancesV2, bool) {
	return batchCountingV2{b.countingCloud}, true
}
func (batchCountingV2) MaxBatchSize() int { return 2 }
func (b batchCountingV2) BatchInstanceStatus(context.Context, []*v1.Node) ([]InstanceStatus, error) {
	b.count("BatchInstanceStatus")
	return nil, errScriptFail
}

// TestShadowPredicts checks each part of the model against a hand-counted
// script on a fake clock: would-be hits, misses and divergences (values
// and not-found), token waits and wait timeouts, breaker rejections,
// invalidation by writes, and would-be batches with the sibling caches
// they fill. Every live call still reaches the upstream.
func TestShadowPredicts(t *testing.T) {
	node := func(i int) *v1.Node { return testNode(fmt.Sprint("node-", i), fmt.Sprint("fake://i-", i)) }
	meta := func(t *testing.T, c cloudprovider.Interface, n *v1.Node) error {
		_, err := v2(t, c).InstanceMetadata(context.Background(), n)
		return err
	}
	type want struct {
		calls       map[string]float64
		reads       map[string]float64 // of InstanceMetadata
		divergences float64
		waitSeconds float64
		rejections  float64
		upstream    map[string]int
	}
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		run  func(t *testing.T, up *countingCloud, c cloudprovider.Interface, clk *clocktesting.FakeClock)
		want want
	}{{
		name: "hits, misses and a changed value",
		run: func(t *testing.T, up *countingCloud, c cloudprovider.Interface, clk *clocktesting.FakeClock) {
			addr := "10.0.0.1"
			up.metadataHook = func(n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
				return &cloudprovider.InstanceMetadata{ProviderID: n.Spec.ProviderID, NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: addr}}}, nil
			}
			meta(t, c, node(1)) // miss
			meta(t, c, node(1)) // hit
			addr = "10.0.0.2"
			meta(t, c, node(1)) // hit, diverges
			clk.Step(11 * time.Minute)
			meta(t, c, node(1)) // miss (TTL 10 m)
			meta(t, c, node(1)) // hit, the new value
		},
		want: want{calls: map[string]float64{"InstanceMetadata": 2}, reads: map[string]float64{"hit": 3, "miss": 2}, divergences: 1,
			upstream: map[string]int{"InstanceMetadata": 5}},
	}, {
		name: "a cached not-found that is found now",
		run: func(t *testing.T, up *countingCloud, c cloudprovider.Interface, clk *clocktesting.FakeClock) {
			var err error = cloudprovider.InstanceNotFound
			up.metadataHook = func(n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
				if err != nil {
					return nil, err
				}
				return &cloudprovider.InstanceMetadata{ProviderID: n.Spec.ProviderID}, nil
			}
			if got := meta(t, c, node(1)); got != cloudprovider.InstanceNotFound {
				t.Errorf("got %v, want the sentinel itself", got)
			}
			err = nil
			clk.Step(10 * time.Second)
			meta(t, c, node(1)) // hit (negativeTTL 30 s), diverges
			clk.Step(25 * time.Second)
			meta(t, c, node(1)) // miss
		},
		want: want{calls: map[string]float64{"InstanceMetadata": 2}, reads: map[string]float64{"hit": 1, "miss": 2}, divergences: 1,
			upstream: map[string]int{"InstanceMetadata": 3}},
	}, {
		name: "token waits and a wait timeout",
		cfg: func(c *Config) {
			c.Limits.Read = BucketConfig{QPS: 1, Burst: 1, WaitTimeout: dur(1500 * time.Millisecond)}
		},
		run: func(t *testing.T, up *countingCloud, c cloudprovider.Interface, clk *clocktesting.FakeClock) {
			for i := range 3 { // at one instant: waits 0, 1 s, then 2 s > 1.5 s
				if err := meta(t, c, node(i)); err != nil {
					t.Errorf("node %d: %v, want the upstream's answer", i, err)
				}
			}
		},
		want: want{calls: map[string]float64{"InstanceMetadata": 2}, reads: map[string]float64{"miss": 2, "wait_timeout": 1}, waitSeconds: 1,
			upstream: map[string]int{"InstanceMetadata": 3}},
	}, {
		name: "the breaker opens on live failures",
		cfg:  func(c *Config) { c.Breaker.MinRequests, c.Breaker.FailureRatio = 2, 0.5 },
		run: func(t *testing.T, up *countingCloud, c cloudprovider.Interface, clk *clocktesting.FakeClock) {
			up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) { return nil, errScriptFail }
			for i := range 3 { // two failures open it; the third would be rejected
				if err := meta(t, c, node(i)); err != errScriptFail {
					t.Errorf("node %d: %v, want the upstream's own error", i, err)
				}
			}
		},
		want: want{calls: map[string]float64{"InstanceMetadata": 2}, reads: map[string]float64{"miss": 2, "rejected": 1}, rejections: 1,
			upstream: map[string]int{"InstanceMetadata": 3}},
	}, {
		name: "writes invalidate",
		run: func(t *testing.T, up *countingCloud, c cloudprovider.Interface, clk *clocktesting.FakeClock) {
			lb, _ := c.LoadBalancer()
			svc := testService("default", "web", "uid-1")
			lb.GetLoadBalancer(context.Background(), "k", svc) // miss
			lb.GetLoadBalancer(context.Background(), "k", svc) // hit
			if _, err := lb.EnsureLoadBalancer(context.Background(), "k", svc, nil); err != nil {
				t.Fatal(err)
			}
			lb.GetLoadBalancer(context.Background(), "k", svc) // miss
		},
		want: want{calls: map[string]float64{"GetLoadBalancer": 2, "EnsureLoadBalancer": 1}, reads: map[string]float64{},
			upstream: map[string]int{"GetLoadBalancer": 3, "EnsureLoadBalancer": 1}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			cfg := testConfig(clk)
			cfg.Mode = ModeShadow
			if tc.cfg != nil {
				tc.cfg(cfg)
			}
			up := newCountingCloud()
			c := mustNew(t, up, cfg)
			tc.run(t, up, c, clk)
			tot := cfg.Metrics.Recorders().ShadowTotals("fake")
			for k, v := range tot.Calls {
				if v == 0 {
					delete(tot.Calls, k)
				}
			}
			reads := map[string]float64{}
			for k, v := range tot.Reads["InstanceMetadata"] {
				if v != 0 {
					reads[k] = v
				}
			}
			if !reflect.DeepEqual(tot.Calls, tc.want.calls) || !reflect.DeepEqual(reads, tc.want.reads) ||
				tot.Divergences["InstanceMetadata"] != tc.want.divergences || tot.WaitSeconds["read"] != tc.want.waitSeconds ||
				tot.Rejections["read"] != tc.want.rejections {
				t.Errorf("predicted calls %v, InstanceMetadata reads %v, divergences %v, waits %v s, rejections %v;\nwant %+v",
					tot.Calls, reads, tot.Divergences["InstanceMetadata"], tot.WaitSeconds["read"], tot.Rejections["read"], tc.want)
			}
			if tc.want.rejections > 0 && tot.BreakerState["read"] != 2 {
				t.Errorf("shadow breaker state %v, want 2 (open)", tot.BreakerState["read"])
			}
			for m, n := range tc.want.upstream {
				if got := up.Calls(m); got != n {
					t.Errorf("upstream %s calls %d, want %d (every call goes through)", m, got, n)
				}
			}
		})
	}
}

// TestShadowBatches: misses of different callers within batch.maxWait form
// one would-be batch (up to the batch size, 2 here); a batch fills the
// node's other InstancesV2 caches; one caller (one context) is never twice
// in one batch. BatchInstanceStatus is never sent.
func TestShadowBatches(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig(clk)
	cfg.Mode = ModeShadow
	up := &batchCounting{newCountingCloud()}
	up.block = make(chan struct{})
	c := mustNew(t, up, cfg)
	i := v2(t, c)
	var wg sync.WaitGroup
	for k := range 3 { // three callers overlapping: a batch of 2 and one of 1
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background()) // a caller of its own
			defer cancel()
			if _, err := i.InstanceMetadata(ctx, testNode(fmt.Sprint("node-", k), fmt.Sprint("fake://i-", k))); err != nil {
				t.Error(err)
			}
		})
	}
	waitUntil(t, "three live calls in flight", func() bool { return up.Calls("InstanceMetadata") == 3 })
	close(up.block)
	wg.Wait()
	for k := range 3 { // filled by the batches: hits
		if _, err := i.InstanceExists(context.Background(), testNode(fmt.Sprint("node-", k), fmt.Sprint("fake://i-", k))); err != nil {
			t.Error(err)
		}
	}
	clk.Step(time.Second)    // the open batch has been sent
	for k := 3; k < 5; k++ { // one caller, one after the other: a batch each
		if _, err := i.InstanceMetadata(context.Background(), testNode(fmt.Sprint("node-", k), fmt.Sprint("fake://i-", k))); err != nil {
			t.Error(err)
		}
	}
	tot := cfg.Metrics.Recorders().ShadowTotals("fake")
	if got := tot.Calls["BatchInstanceStatus"]; got != 4 {
		t.Errorf("would-be batch calls %v, want 4 (2+1 overlapping, then 1 and 1)", got)
	}
	if got := tot.Reads["InstanceMetadata"]["batched"]; got != 5 {
		t.Errorf("batched reads %v, want 5", got)
	}
	if got := tot.Reads["InstanceExists"]["hit"]; got != 3 {
		t.Errorf("InstanceExists would-be hits %v, want 3 (filled by the batches)", got)
	}
	if up.Calls("BatchInstanceStatus") != 0 || up.Calls("InstanceMetadata") != 5 || up.Calls("InstanceExists") != 3 {
		t.Errorf("upstream calls %v, want 5 InstanceMetadata, 3 InstanceExists, no batch", up.calls)
	}
}

func sum(m map[string]float64) float64 {
	var n float64
	for _, v := range m {
		n += v
	}
	return n
}

// TestShadowHitAllocatesNothing: in shadow mode a would-be hit of
// InstanceMetadata (the hot path: a live call, a lookup, a comparison)
// allocates nothing beyond what the upstream does (here nothing) and one
// copy of the cached answer, as in enforce mode, where the one allocation
// is the caller's own copy (metadata and up to 4 addresses in one block).
// Shadow mode's live call also carries the context that attributes the
// upstream's requests to the method (WithCall), and nothing more.
func TestShadowHitAllocatesNothing(t *testing.T) {
	call := Call{Method: string([]byte("InstanceMetadata")), Shadow: true} // not a constant: boxed per use
	attribution := testing.AllocsPerRun(200, func() { _ = WithCall(context.Background(), call) })
	for _, mode := range []string{ModeEnforce, ModeShadow} {
		up := newCountingCloud()
		md := &cloudprovider.InstanceMetadata{ProviderID: "fake://i-1", NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}}
		up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) { return md, nil }
		cfg := testConfig(nil)
		cfg.Mode = mode
		i := v2(t, mustNew(t, up, cfg))
		n := testNode("node-1", "fake://i-1")
		if _, err := i.InstanceMetadata(context.Background(), n); err != nil {
			t.Fatal(err)
		}
		want := 1.0 // the copy
		if mode == ModeShadow {
			want += attribution
		}
		if a := testing.AllocsPerRun(200, func() { _, _ = i.InstanceMetadata(context.Background(), n) }); a > want {
			t.Errorf("%s: %.1f allocations per hit, want at most %.0f (the copy, and in shadow mode the attribution context)", mode, a, want)
		}
	}
}

// TestSameMetadata: sameMetadata agrees with equality.Semantic on every
// field, and fails if InstanceMetadata grows a field it does not compare.
func TestSameMetadata(t *testing.T) {
	if n := reflect.TypeFor[cloudprovider.InstanceMetadata]().NumField(); n != 6 {
		t.Fatalf("InstanceMetadata has %d fields, sameMetadata compares 6: compare the new one", n)
	}
	base := func() *cloudprovider.InstanceMetadata {
		return &cloudprovider.InstanceMetadata{ProviderID: "p", InstanceType: "t", Zone: "z", Region: "r",
			NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}, AdditionalLabels: map[string]string{"a": "b"}}
	}
	for name, change := range map[string]func(*cloudprovider.InstanceMetadata){
		"same":        func(*cloudprovider.InstanceMetadata) {},
		"providerID":  func(m *cloudprovider.InstanceMetadata) { m.ProviderID = "q" },
		"type":        func(m *cloudprovider.InstanceMetadata) { m.InstanceType = "u" },
		"zone":        func(m *cloudprovider.InstanceMetadata) { m.Zone = "y" },
		"region":      func(m *cloudprovider.InstanceMetadata) { m.Region = "s" },
		"address":     func(m *cloudprovider.InstanceMetadata) { m.NodeAddresses[0].Address = "10.0.0.2" },
		"addresses":   func(m *cloudprovider.InstanceMetadata) { m.NodeAddresses = nil },
		"label value": func(m *cloudprovider.InstanceMetadata) { m.AdditionalLabels["a"] = "c" },
		"label key":   func(m *cloudprovider.InstanceMetadata) { m.AdditionalLabels = map[string]string{"x": "b"} },
	} {
		a, b := base(), base()
		change(b)
		if got, want := sameMetadata(a, b), equality.Semantic.DeepEqual(a, b); got != want {
			t.Errorf("%s: sameMetadata %v, equality.Semantic %v", name, got, want)
		}
	}
	empty, none := base(), base()
	empty.NodeAddresses, empty.AdditionalLabels = []v1.NodeAddress{}, map[string]string{}
	none.NodeAddresses, none.AdditionalLabels = nil, nil
	if !sameMetadata(empty, none) || !sameMetadata(nil, nil) || sameMetadata(nil, empty) {
		t.Errorf("nil and empty must compare alike, nil and a value not")
	}
}

// TestSameCaller: contexts are told apart by identity, without reflection;
// two contexts of a type that cannot be compared are two callers (== on
// them would panic).
func TestSameCaller(t *testing.T) {
	bg := context.Background()
	a, cancelA := context.WithCancel(bg)
	defer cancelA()
	b, cancelB := context.WithCancel(bg)
	defer cancelB()
	if !sameCaller(bg)(context.Background()) || !sameCaller(a)(a) || sameCaller(a)(b) || sameCaller(a)(bg) {
		t.Error("want the background context one caller, and each derived context its own")
	}
	x, y := uncomparableCtx{Context: bg, tags: map[string]string{}}, uncomparableCtx{Context: bg, tags: map[string]string{}}
	if sameCaller(x)(y) || sameCaller(x)(x) || sameCaller(x)(bg) {
		t.Error("contexts of a type that cannot be compared must count as callers of their own")
	}
}

// uncomparableCtx is a context whose type cannot be compared.
type uncomparableCtx struct {
	context.Context
	tags map[string]string
}

// TestShadowBuildsNoBatcher: shadow mode predicts batches (TestShadowBatches)
// but builds no batcher and starts no list prefetch: its wrappers, chosen
// in New, call the upstream's own methods.
func TestShadowBuildsNoBatcher(t *testing.T) {
	cfg := testConfig(newFakeClock())
	cfg.Mode = ModeShadow
	up := &batchCounting{newCountingCloud()}
	c := mustNew(t, up, cfg)
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	if _, err := v2(t, c).InstanceMetadata(context.Background(), testNode("node-1", "fake://i-1")); err != nil {
		t.Fatal(err)
	}
	cl := c.(*cloud)
	if _, ok := cl.r.(*shadow); !ok {
		t.Fatalf("wrappers %T, want the shadow's", cl.r)
	}
	if got := cl.r.(*shadow).batchSize(); got <= 0 {
		t.Errorf("would-be batch size %d, want the upstream's (batching predicted)", got)
	}
}

// TestShadowFillAgesFromBatch: a would-be batch fills a node's sibling
// caches; the first live answer of a sibling then stands for the batch's
// answer, aged from the batch (not from the read): later reads are hits
// compared with it until the sibling's TTL after the batch, then misses.
func TestShadowFillAgesFromBatch(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig(clk)
	cfg.Mode = ModeShadow
	up := &batchCounting{newCountingCloud()}
	exists := true
	up.existsHook = func(*v1.Node) (bool, error) { return exists, nil }
	c := mustNew(t, up, cfg)
	i := v2(t, c)
	n := testNode("node-1", "fake://i-1")
	ask := func() {
		t.Helper()
		if _, err := i.InstanceExists(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := i.InstanceMetadata(context.Background(), n); err != nil { // a would-be batch at t0
		t.Fatal(err)
	}
	clk.Step(50 * time.Second)
	ask() // filled: a hit, whose live answer now stands for the batch's
	clk.Step(5 * time.Second)
	exists = false
	ask() // t0+55 s: a hit (InstanceExists TTL 1 m from the batch), diverging
	clk.Step(10 * time.Second)
	exists = true
	ask() // t0+65 s: expired with the batch's age: a would-be batch of its own
	tot := cfg.Metrics.Recorders().ShadowTotals("fake")
	reads := tot.Reads["InstanceExists"]
	if reads["hit"] != 2 || reads["batched"] != 1 || tot.Divergences["InstanceExists"] != 1 {
		t.Errorf("InstanceExists reads %v, divergences %v; want 2 hits (one diverging), then 1 batched",
			reads, tot.Divergences["InstanceExists"])
	}
}

// TestShadowPredictsLifecyclePeers: the node lifecycle
// controller checks n NotReady Nodes every 5 s (InstanceExists, then
// InstanceShutdown, one after the other) while the status loop looks up a
// few Ready Nodes each minute. Enforce mode's batch calls carry the
// NotReady Nodes due for a refresh (batching.go: lifecyclePeers); shadow mode must predict
// those calls within 10 %, not one call per NotReady Node per TTL (the
// shadow before it modelled the peers predicted 203 calls to 32, 6.3x).
func TestShadowPredictsLifecyclePeers(t *testing.T) {
	const n, ready = 10, 3
	window := 10 * time.Minute
	run := func(mode string) (calls float64, lifecycle int) {
		up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake", ExistsByProviderID: true}, missing: map[string]bool{}}
		clk := newFakeClock()
		cfg := testConfig(clk)
		cfg.Mode = mode
		cfg.NotFoundGuard.Enabled = boolp(false) // enforce mode's guard may ask again; the shadow has none
		c := mustNew(t, up, cfg)
		i := v2(t, c)
		ctx := context.Background()
		for at := time.Duration(0); at < window; at += 5 * time.Second {
			for k := range n {
				node := testNode(fmt.Sprint("nr-", k), fmt.Sprint("fake://nr-", k))
				if ok, err := i.InstanceExists(ctx, node); err != nil || !ok {
					t.Fatalf("%s: InstanceExists(%s) = %v, %v", mode, node.Name, ok, err)
				}
				if _, err := i.InstanceShutdown(ctx, node); err != nil {
					t.Fatalf("%s: InstanceShutdown(%s): %v", mode, node.Name, err)
				}
				lifecycle += 2
			}
			if at%time.Minute == 0 {
				for k := range ready {
					if _, err := i.InstanceMetadata(ctx, testNode(fmt.Sprint("ready-", k), fmt.Sprint("fake://ready-", k))); err != nil {
						t.Fatalf("%s: InstanceMetadata: %v", mode, err)
					}
				}
			}
			clk.Step(5 * time.Second)
		}
		if mode == ModeShadow {
			if len(up.batchSizes()) != 0 {
				t.Errorf("shadow mode sent %d batch calls, want none", len(up.batchSizes()))
			}
			return cfg.Metrics.Recorders().ShadowTotals("fake").Calls["BatchInstanceStatus"], lifecycle
		}
		return float64(len(up.batchSizes())), lifecycle
	}
	enf, checks := run(ModeEnforce)
	pred, _ := run(ModeShadow)
	t.Logf("%d lifecycle checks of %d NotReady Nodes over %v: enforce mode sent %.0f batch calls, shadow mode predicted %.0f (%.2fx)",
		checks, n, window, enf, pred, pred/enf)
	if perNode := float64(n) * window.Seconds() / 30; enf >= perNode/2 {
		t.Fatalf("enforce mode sent %.0f batch calls: the peers should make far fewer than one per Node per 30 s (%.0f)", enf, perNode)
	}
	if pred < 0.9*enf || pred > 1.1*enf {
		t.Errorf("shadow mode predicted %.0f batch calls, enforce mode sent %.0f: want within 10 %%", pred, enf)
	}
}

// TestShadowGaugesReportTheModel: in shadow mode the bucket and breaker
// gauges (cloudgate_limiter_*, cloudgate_breaker_state) are the model's:
// its read bucket spent the tokens of the would-be calls and its read
// breaker opened on the live outage, where enforce mode's objects, had
// they been built, would sit idle (full, closed).
func TestShadowGaugesReportTheModel(t *testing.T) {
	cfg := testConfig(newFakeClock())
	cfg.Mode = ModeShadow
	cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = 1, 10
	cfg.Breaker = BreakerConfig{FailureRatio: 0.5, MinRequests: 4, Interval: dur(time.Hour), OpenTimeout: dur(time.Hour), MinOpenTimeout: dur(time.Hour), HalfOpenRequests: 1, WaitForProbe: boolp(false)}
	reg := prometheus.NewRegistry()
	if err := cfg.Metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	up := newCountingCloud()
	c := mustNew(t, up, cfg)
	outage := errors.New("HTTP 503 service unavailable")
	up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) { return nil, outage }
	for n := range 4 {
		_, _ = v2(t, c).InstanceMetadata(context.Background(), testNode(fmt.Sprint("n", n), fmt.Sprint("fake://n", n)))
	}
	gauge := func(name, label, value string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == label && l.GetValue() == value {
						return m.GetGauge().GetValue()
					}
				}
			}
		}
		t.Fatalf("no %s{%s=%q}", name, label, value)
		return 0
	}
	if got := gauge("cloudgate_breaker_state", "family", familyRead); got != float64(limiter.StateOpen) {
		t.Errorf("cloudgate_breaker_state{family=read} = %v, want %v (the shadow breaker opened)", got, float64(limiter.StateOpen))
	}
	if got := gauge("cloudgate_limiter_tokens", "bucket", familyRead); got != 10-4 {
		t.Errorf("cloudgate_limiter_tokens{bucket=read} = %v, want 6 (10 less the 4 would-be calls)", got)
	}
	if got := gauge("cloudgate_limiter_configured_rate", "bucket", familyRead); got != 1 {
		t.Errorf("cloudgate_limiter_configured_rate{bucket=read} = %v, want 1", got)
	}
}
