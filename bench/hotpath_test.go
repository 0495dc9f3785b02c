package bench

// Provider-level benchmarks of cloudgate's hot paths, through exported APIs
// only (provider.New over an in-memory upstream). The cache- and
// limiter-level ones are in cache/bench_test.go and limiter/bench_test.go.
// `make bench-results` runs them all and writes bench/RESULTS.md.

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
)

// stubCloud is a free, in-memory upstream: InstancesV2 (optionally with
// BatchInstances) and LoadBalancer.
type stubCloud struct {
	batch bool
	calls atomic.Int64
}

func (s *stubCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (s *stubCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return stubLB{s}, true }
func (s *stubCloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (s *stubCloud) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (s *stubCloud) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (s *stubCloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }
func (s *stubCloud) ProviderName() string                                              { return "stub" }
func (s *stubCloud) HasClusterID() bool                                                { return true }
func (s *stubCloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	if s.batch {
		return stubBatchV2{stubV2{s}}, true
	}
	return stubV2{s}, true
}

type stubV2 struct{ s *stubCloud }

func (v stubV2) InstanceExists(context.Context, *v1.Node) (bool, error) {
	v.s.calls.Add(1)
	return true, nil
}
func (v stubV2) InstanceShutdown(context.Context, *v1.Node) (bool, error) {
	v.s.calls.Add(1)
	return false, nil
}
func (v stubV2) InstanceMetadata(_ context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	v.s.calls.Add(1)
	return stubMetadata(n), nil
}

func stubMetadata(n *v1.Node) *cloudprovider.InstanceMetadata {
	return &cloudprovider.InstanceMetadata{
		ProviderID: n.Spec.ProviderID, InstanceType: "sim-standard-2", Zone: "zone-a", Region: "region-1",
		NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: n.Name}},
	}
}

type stubBatchV2 struct{ stubV2 }

func (stubBatchV2) MaxBatchSize() int { return 500 }
func (v stubBatchV2) BatchInstanceStatus(_ context.Context, nodes []*v1.Node) ([]provider.InstanceStatus, error) {
	v.s.calls.Add(1)
	out := make([]provider.InstanceStatus, len(nodes))
	for i, n := range nodes {
		out[i].Metadata = stubMetadata(n)
	}
	return out, nil
}

type stubLB struct{ s *stubCloud }

func (l stubLB) GetLoadBalancer(context.Context, string, *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	return nil, false, nil
}
func (l stubLB) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}
func (l stubLB) EnsureLoadBalancer(context.Context, string, *v1.Service, []*v1.Node) (*v1.LoadBalancerStatus, error) {
	return &v1.LoadBalancerStatus{}, nil
}
func (l stubLB) UpdateLoadBalancer(context.Context, string, *v1.Service, []*v1.Node) error {
	l.s.calls.Add(1)
	return nil
}
func (l stubLB) EnsureLoadBalancerDeleted(context.Context, string, *v1.Service) error { return nil }

// benchConfig never makes a benchmark wait for tokens.
func benchConfig() *provider.Config {
	cfg := provider.DefaultConfig()
	cfg.Limits.Read = provider.BucketConfig{QPS: 1e9, Burst: 1 << 30}
	cfg.Limits.Write = provider.BucketConfig{QPS: 1e9, Burst: 1 << 30}
	cfg.Metrics = metrics.New()
	return cfg
}

func benchNode(i int) *v1.Node {
	name := "node-" + strconv.Itoa(i)
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: "stub://zone-a/i-" + name}}
}

func instancesV2(b *testing.B, up *stubCloud, cfg *provider.Config) cloudprovider.InstancesV2 {
	b.Helper()
	cloud, err := provider.New(up, cfg)
	if err != nil {
		b.Fatal(err)
	}
	v2, ok := cloud.InstancesV2()
	if !ok {
		b.Fatal("no InstancesV2")
	}
	return v2
}

// warmMetadataHit returns InstancesV2 through provider.New with node's
// metadata already cached (one upstream call).
func warmMetadataHit(b *testing.B) (*stubCloud, cloudprovider.InstancesV2, context.Context, *v1.Node) {
	b.Helper()
	up := &stubCloud{}
	v2 := instancesV2(b, up, benchConfig())
	ctx, node := context.Background(), benchNode(1)
	if _, err := v2.InstanceMetadata(ctx, node); err != nil {
		b.Fatal(err)
	}
	return up, v2, ctx, node
}

// BenchmarkProviderInstanceMetadataHit is a cached InstanceMetadata through
// provider.New: cache hit plus the deep copy handed to the caller (so it
// allocates; the cache layer's own hit, BenchmarkCacheHit, does not).
func BenchmarkProviderInstanceMetadataHit(b *testing.B) {
	up, v2, ctx, node := warmMetadataHit(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v2.InstanceMetadata(ctx, node); err != nil {
			b.Fatal(err)
		}
	}
	if up.calls.Load() != 1 {
		b.Fatalf("upstream called %d times, want 1", up.calls.Load())
	}
}

// BenchmarkProviderInstanceMetadataHitParallel is the same from all Ps.
func BenchmarkProviderInstanceMetadataHitParallel(b *testing.B) {
	_, v2, ctx, node := warmMetadataHit(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v2.InstanceMetadata(ctx, node); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkProviderInstanceMetadataMiss is a miss on a new node each time:
// singleflight, token bucket, breaker, upstream call, cache fill, copy.
func BenchmarkProviderInstanceMetadataMiss(b *testing.B) {
	up := &stubCloud{}
	cfg := benchConfig()
	cfg.Cache.Size = 1 << 20
	v2 := instancesV2(b, up, cfg)
	ctx := context.Background()
	nodes := make([]*v1.Node, 1<<16)
	for i := range nodes {
		nodes[i] = benchNode(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == len(nodes) { // start over on fresh keys
			b.StopTimer()
			v2 = instancesV2(b, up, cfg)
			i = 0
			b.StartTimer()
		}
		if _, err := v2.InstanceMetadata(ctx, nodes[i]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkProviderInstanceMetadataMissShared is 8 concurrent callers of
// each new node: one upstream call, the rest answered by the singleflight.
func BenchmarkProviderInstanceMetadataMissShared(b *testing.B) {
	up := &stubCloud{}
	cfg := benchConfig()
	cfg.Cache.Size = 1 << 20
	v2 := instancesV2(b, up, cfg)
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(next.Add(1) / 8)
			if _, err := v2.InstanceMetadata(ctx, benchNode(i)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(up.calls.Load())/float64(b.N), "upstream/op")
}

// BenchmarkProviderWritePassThrough is an uncached write: token bucket and
// closed circuit breaker around the upstream call.
func BenchmarkProviderWritePassThrough(b *testing.B) {
	up := &stubCloud{}
	cloud, err := provider.New(up, benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	lb, _ := cloud.LoadBalancer()
	ctx := context.Background()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default", UID: "u"}}
	b.ReportAllocs()
	for b.Loop() {
		if err := lb.UpdateLoadBalancer(ctx, "kubernetes", svc, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProviderBatcher is uncached InstanceMetadata lookups from 64
// goroutines per P coalesced into BatchInstanceStatus calls (batches of
// up to 64, flushed when full or after 1 ms). ns/op is per node.
func BenchmarkProviderBatcher(b *testing.B) {
	up := &stubCloud{batch: true}
	cfg := benchConfig()
	zero := provider.Duration{}
	cfg.Methods = map[string]provider.MethodConfig{"InstanceMetadata": {TTL: &zero}}
	cfg.Batch.MaxSize = 64
	cfg.Batch.MaxWait = provider.Duration{Duration: time.Millisecond}
	v2 := instancesV2(b, up, cfg)
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v2.InstanceMetadata(ctx, benchNode(int(next.Add(1)))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/float64(max(1, up.calls.Load())), "nodes/batch")
}
