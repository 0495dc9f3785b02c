package provider

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/metrics/metricstest"
)

// callSeeing records the Call in the context each upstream method is handed.
type callSeeing struct {
	*countingCloud
	mu    sync.Mutex
	calls map[string]Call
}

func (c *callSeeing) see(method string, ctx context.Context) {
	call, _ := CallFrom(ctx)
	c.mu.Lock()
	c.calls[method] = call
	c.mu.Unlock()
}
func (c *callSeeing) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c, true }
func (c *callSeeing) InstancesV2() (cloudprovider.InstancesV2, bool)   { return c, true }
func (c *callSeeing) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	c.see("EnsureLoadBalancer", ctx)
	return c.countingCloud.EnsureLoadBalancer(ctx, cluster, svc, nodes)
}
func (c *callSeeing) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	c.see("InstanceMetadata:"+node.Name, ctx)
	return c.countingCloud.InstanceMetadata(ctx, node)
}

// TestCallInUpstreamContext: cloudgate hands the upstream a context
// naming the method and the priority the call went through at: a write's
// (critical), a read's for an uninitialised node (raised to critical) and
// for an initialised one (its own, background). A request-level gate under
// the upstream reads them from there.
func TestCallInUpstreamContext(t *testing.T) {
	up := &callSeeing{countingCloud: newCountingCloud(), calls: map[string]Call{}}
	c := mustNew(t, up, testConfig(newFakeClock()))
	lb, _ := c.LoadBalancer()
	if _, err := lb.EnsureLoadBalancer(context.Background(), "k", testService("ns", "s", "u1"), nil); err != nil {
		t.Fatal(err)
	}
	joining := testNode("joining", "")
	joining.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Effect: v1.TaintEffectNoSchedule}}
	for _, n := range []*v1.Node{joining, testNode("node-1", "")} {
		if _, err := v2(t, c).InstanceMetadata(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}
	for method, want := range map[string]Call{
		"EnsureLoadBalancer":       {Method: "EnsureLoadBalancer", Priority: limiter.PriorityCritical},
		"InstanceMetadata:joining": {Method: "InstanceMetadata", Priority: limiter.PriorityCritical},
		"InstanceMetadata:node-1":  {Method: "InstanceMetadata", Priority: limiter.PriorityBackground},
	} {
		if got := up.calls[method]; got != want {
			t.Errorf("%s: upstream's context carries %+v, want %+v", method, got, want)
		}
	}
}

func counter(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	return metricstest.Of(t, m, name, labels)
}

// TestRequestGate: requests are counted by service, action, the method
// in their context (unattributed without) and code; a throttled answer
// slows its action's bucket; the service's breaker opens on failures and
// refuses, unsent; a request with no token left and an ended context is
// refused; a shadow call's request is neither delayed nor refused.
func TestRequestGate(t *testing.T) {
	m := metrics.New()
	clk := newFakeClock()
	g, err := NewRequestGate(RequestGateConfig{
		Provider: "test", Metrics: m, Clock: clk,
		Bucket: func(service, action string) limiter.BucketConfig {
			return limiter.BucketConfig{QPS: 1, Burst: 2, Adaptive: true}
		},
		Breaker: limiter.BreakerConfig{FailureRatio: 0.5, MinRequests: 2, Interval: 1e12, OpenTimeout: 1e12, HalfOpenRequests: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithCall(context.Background(), Call{Method: "EnsureLoadBalancer", Priority: limiter.PriorityCritical})
	done, err := g.Begin(ctx, "ec2", "DescribeSubnets")
	if err != nil {
		t.Fatal(err)
	}
	done(Answer{Code: 200})
	done(Answer{Code: 200}) // once only
	done, err = g.Begin(context.Background(), "ec2", "DescribeSubnets")
	if err != nil {
		t.Fatal(err)
	}
	before := g.buckets[[2]string{"ec2", "DescribeSubnets"}].EffectiveQPS()
	done(Answer{Code: 503, Throttled: true})
	if after := g.buckets[[2]string{"ec2", "DescribeSubnets"}].EffectiveQPS(); after >= before {
		t.Errorf("a throttled answer left the action's rate at %v (was %v)", after, before)
	}
	// The bucket is empty: a caller that has given up is refused, unsent;
	// a shadow call's request goes at once.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.Begin(gone, "ec2", "DescribeSubnets"); !errors.Is(err, context.Canceled) {
		t.Errorf("no token, caller gone: %v", err)
	}
	shadow := WithCall(context.Background(), Call{Method: "GetLoadBalancer", Shadow: true})
	done, err = g.Begin(shadow, "ec2", "DescribeSubnets")
	if err != nil {
		t.Fatalf("shadow request refused: %v", err)
	}
	done(Answer{Code: 200})

	for labels, want := range map[[3]string]float64{
		{"DescribeSubnets", "EnsureLoadBalancer", "200"}: 1,
		{"DescribeSubnets", Unattributed, "503"}:         1,
		{"DescribeSubnets", "GetLoadBalancer", "200"}:    1,
	} {
		if got := counter(t, m, "cloudgate_cloud_requests_total", map[string]string{"provider": "test", "service": "ec2", "action": labels[0], "method": labels[1], "code": labels[2]}); got != want {
			t.Errorf("cloud_requests_total%v = %v, want %v", labels, got, want)
		}
	}
	if got := counter(t, m, "cloudgate_cloud_request_throttles_total", map[string]string{"action": "DescribeSubnets", "method": Unattributed}); got != 1 {
		t.Errorf("throttles = %v, want 1", got)
	}
	if got := counter(t, m, "cloudgate_cloud_requests_refused_total", map[string]string{"reason": "no_token", "method": "EnsureLoadBalancer"}); got != 1 {
		t.Errorf("refused (no_token) = %v, want 1", got)
	}

	// The service's one success and one failure (the throttled and the
	// unsent requests are no verdict) are half of two: its breaker opens.
	done, err = g.Begin(ctx, "ec2", "CreateSecurityGroup")
	if err != nil {
		t.Fatal(err)
	}
	done(Answer{Code: 500, Failure: true})
	if _, err := g.Begin(ctx, "ec2", "AuthorizeSecurityGroupIngress"); !limiter.IsOpen(err) {
		t.Errorf("after a failure: %v, want the breaker's refusal", err)
	}
	if got := counter(t, m, "cloudgate_cloud_requests_refused_total", map[string]string{"reason": "breaker_open", "action": "AuthorizeSecurityGroupIngress"}); got != 1 {
		t.Errorf("refused (breaker_open) = %v, want 1", got)
	}
	if _, err := g.Begin(ctx, "elb", "DescribeLoadBalancers"); err != nil {
		t.Errorf("another service's breaker: %v", err)
	}
}

func TestRequestGateConfigErrors(t *testing.T) {
	br := limiter.BreakerConfig{FailureRatio: 0.5, MinRequests: 1, Interval: 1, OpenTimeout: 1, HalfOpenRequests: 1}
	bucket := func(string, string) limiter.BucketConfig { return limiter.BucketConfig{QPS: 1, Burst: 1} }
	for _, c := range []struct {
		cfg  RequestGateConfig
		want string
	}{
		{RequestGateConfig{Bucket: bucket, Breaker: br}, "Provider"},
		{RequestGateConfig{Provider: "p", Breaker: br}, "Bucket"},
		{RequestGateConfig{Provider: "p", Bucket: bucket}, "Breaker"},
		{RequestGateConfig{Provider: "p", Bucket: bucket, Breaker: br, WaitTimeout: -1}, "WaitTimeout"},
	} {
		if _, err := NewRequestGate(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
}

// TestRequestGateWaitTimeout: a request whose token does not come within
// WaitTimeout fails, unsent, naming the bound, instead of holding the
// provider's call.
func TestRequestGateWaitTimeout(t *testing.T) {
	m := metrics.New()
	clk := newFakeClock()
	g, err := NewRequestGate(RequestGateConfig{
		Provider: "test", Metrics: m, Clock: clk, WaitTimeout: time.Second,
		Bucket:  func(string, string) limiter.BucketConfig { return limiter.BucketConfig{QPS: 0.001, Burst: 1} },
		Breaker: limiter.BreakerConfig{FailureRatio: 0.5, MinRequests: 2, Interval: time.Minute, OpenTimeout: time.Minute, HalfOpenRequests: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	done, err := g.Begin(context.Background(), "elb", "CreateLoadBalancer")
	if err != nil {
		t.Fatal(err)
	}
	done(Answer{Code: 200})
	errc := make(chan error, 1)
	go func() {
		_, err := g.Begin(context.Background(), "elb", "CreateLoadBalancer")
		errc <- err
	}()
	waitUntil(t, "the request waiting for its token", func() bool { return g.buckets[[2]string{"elb", "CreateLoadBalancer"}].Waiting() == 1 })
	clk.Step(time.Second)
	if err := <-errc; !errors.Is(err, errRequestWait) || !strings.Contains(err.Error(), "1s") {
		t.Errorf("after WaitTimeout: %v, want the wait timeout named", err)
	}
	if got := counter(t, m, "cloudgate_cloud_requests_refused_total", map[string]string{"reason": "no_token", "method": Unattributed}); got != 1 {
		t.Errorf("refused (no_token) = %v, want 1", got)
	}
}
