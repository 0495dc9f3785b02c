package provider

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cloudgate/cloudgate/metrics"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// klog's flush daemon; the breaker has no goroutines;
		// the HTTP keep-alive of other packages is not used here.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	)
}

// countingCloud is fake.Cloud with every call counted: this version of the
// fake no longer records Calls.
type countingCloud struct {
	*fake.Cloud
	mu    sync.Mutex
	calls map[string]int
	// hooks let a test script an answer per call.
	metadataHook func(node *v1.Node) (*cloudprovider.InstanceMetadata, error)
	block        chan struct{} // when set, InstanceMetadata waits for it
	existsHook   func(node *v1.Node) (bool, error)
	getLBHook    func(ctx context.Context) (*v1.LoadBalancerStatus, bool, error)
	ensureLBHook func() error
}

func newCountingCloud() *countingCloud {
	return &countingCloud{
		Cloud: &fake.Cloud{
			EnableInstancesV2:  true,
			ExistsByProviderID: true,
			Provider:           "fake",
			Zone:               cloudprovider.Zone{FailureDomain: "zone-a", Region: "region-1"},
			Addresses:          []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}},
			ProviderID:         map[types.NodeName]string{},
			Balancers:          map[string]fake.Balancer{},
			RouteMap:           map[string]*fake.Route{},
			ExtID:              map[types.NodeName]string{"node-1": "i-1"},
		},
		calls: map[string]int{},
	}
}

func (c *countingCloud) count(name string) {
	c.mu.Lock()
	c.calls[name]++
	c.mu.Unlock()
}

func (c *countingCloud) Calls(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[name]
}

func (c *countingCloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if _, ok := c.Cloud.InstancesV2(); !ok {
		return nil, false
	}
	return c, true
}

func (c *countingCloud) Instances() (cloudprovider.Instances, bool) {
	if _, ok := c.Cloud.Instances(); !ok {
		return nil, false
	}
	return c, true
}

func (c *countingCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	if _, ok := c.Cloud.LoadBalancer(); !ok {
		return nil, false
	}
	return c, true
}

func (c *countingCloud) Routes() (cloudprovider.Routes, bool) {
	if _, ok := c.Cloud.Routes(); !ok {
		return nil, false
	}
	return c, true
}

func (c *countingCloud) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	c.count("InstanceMetadata")
	if c.block != nil {
		select {
		case <-c.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if c.metadataHook != nil {
		return c.metadataHook(node)
	}
	return c.Cloud.InstanceMetadata(ctx, node)
}

func (c *countingCloud) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	c.count("InstanceExists")
	if c.existsHook != nil {
		return c.existsHook(node)
	}
	return c.Cloud.InstanceExists(ctx, node)
}

func (c *countingCloud) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	c.count("InstanceExistsByProviderID")
	return c.Cloud.InstanceExistsByProviderID(ctx, providerID)
}

func (c *countingCloud) InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error) {
	c.count("InstanceTypeByProviderID")
	return c.Cloud.InstanceTypeByProviderID(ctx, providerID)
}

func (c *countingCloud) NodeAddresses(ctx context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	c.count("NodeAddresses")
	return c.Cloud.NodeAddresses(ctx, name)
}

func (c *countingCloud) InstanceID(ctx context.Context, name types.NodeName) (string, error) {
	c.count("InstanceID")
	return c.Cloud.InstanceID(ctx, name)
}

func (c *countingCloud) GetLoadBalancer(ctx context.Context, cluster string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	c.count("GetLoadBalancer")
	if c.getLBHook != nil {
		return c.getLBHook(ctx)
	}
	return c.Cloud.GetLoadBalancer(ctx, cluster, svc)
}

func (c *countingCloud) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	c.count("EnsureLoadBalancer")
	if c.ensureLBHook != nil {
		if err := c.ensureLBHook(); err != nil {
			return nil, err
		}
	}
	return c.Cloud.EnsureLoadBalancer(ctx, cluster, svc, nodes)
}

func (c *countingCloud) UpdateLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) error {
	c.count("UpdateLoadBalancer")
	return c.Cloud.UpdateLoadBalancer(ctx, cluster, svc, nodes)
}

func (c *countingCloud) ListRoutes(ctx context.Context, cluster string) ([]*cloudprovider.Route, error) {
	c.count("ListRoutes")
	return c.Cloud.ListRoutes(ctx, cluster)
}

func (c *countingCloud) CreateRoute(ctx context.Context, cluster, hint string, r *cloudprovider.Route) error {
	c.count("CreateRoute")
	return c.Cloud.CreateRoute(ctx, cluster, hint, r)
}

// testConfig is DefaultConfig with generous limits, a fake clock and a
// private metrics set.
func testConfig(clk *clocktesting.FakeClock) *Config {
	cfg := DefaultConfig()
	cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = 1e6, 1e6
	cfg.Limits.Write.QPS, cfg.Limits.Write.Burst = 1e6, 1e6
	cfg.Metrics = metrics.New()
	// A rejected call waits for the breaker's probe on cfg.Clock, which a
	// fake clock only moves when the test steps it: tests of the breaker's
	// answers fail fast; waitforprobe_test.go opts in.
	cfg.Breaker.WaitForProbe = boolp(false)
	if clk != nil {
		cfg.Clock = clk
	}
	return cfg
}

func newFakeClock() *clocktesting.FakeClock { return clocktesting.NewFakeClock(time.Unix(10000, 0)) }

func mustNew(t *testing.T, up cloudprovider.Interface, cfg *Config) cloudprovider.Interface {
	t.Helper()
	c, err := New(up, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func v2(t *testing.T, c cloudprovider.Interface) cloudprovider.InstancesV2 {
	t.Helper()
	i, ok := c.InstancesV2()
	if !ok {
		t.Fatal("InstancesV2 not supported")
	}
	return i
}

func testNode(name, providerID string) *v1.Node {
	n := &v1.Node{}
	n.Name = name
	n.Spec.ProviderID = providerID
	return n
}

func testService(ns, name, uid string) *v1.Service {
	s := &v1.Service{}
	s.Namespace, s.Name, s.UID = ns, name, types.UID(uid)
	return s
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// enf is the enforce mode of a cloud New built: its gate, limiters,
// breakers, batching, prefetch and guard.
func enf(c cloudprovider.Interface) *enforcer { return c.(*cloud).r.(*enforcer) }
