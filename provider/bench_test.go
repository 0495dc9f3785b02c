package provider

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/cloudgate/cloudgate/metrics"
)

// benchMetadataHit returns InstancesV2 through New, never waiting for
// tokens, with the metadata of nodes already cached.
func benchMetadataHit(b *testing.B, nodes []*v1.Node) (*countingCloud, *instancesV2) {
	b.Helper()
	up := newCountingCloud()
	up.metadataHook = realisticMetadata
	cfg := DefaultConfig()
	cfg.Limits.Read = BucketConfig{QPS: 1e9, Burst: 1 << 30}
	cfg.Limits.Write = BucketConfig{QPS: 1e9, Burst: 1 << 30}
	cfg.Metrics = metrics.New()
	cfg.Clock = clock.RealClock{}
	c, err := New(up, cfg)
	if err != nil {
		b.Fatal(err)
	}
	v2, _ := c.InstancesV2()
	for _, n := range nodes {
		if _, err := v2.InstanceMetadata(context.Background(), n); err != nil {
			b.Fatal(err)
		}
	}
	return up, v2.(*instancesV2)
}

// hitBound is the sanity bound of a cache hit through the provider, with
// -race off: a CCM makes at most a few hundred lookups a second, so what
// matters is upstream calls, not nanoseconds; the bound only catches a hit
// that stopped being a hit (a lock held across a call, a copy of the cache).
const hitBound = 2 * time.Microsecond

// BenchmarkProviderCacheHit is a cached InstanceMetadata through New: the
// cache hit plus what the gate adds (key, metrics, the caller's copy). It
// fails above hitBound per call (not under -race).
func BenchmarkProviderCacheHit(b *testing.B) {
	node := testNode("node-1", "aws:///eu-west-1a/i-1")
	up, v2 := benchMetadataHit(b, []*v1.Node{node})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v2.InstanceMetadata(ctx, node); err != nil {
			b.Fatal(err)
		}
	}
	if n := up.Calls("InstanceMetadata"); n != 1 {
		b.Fatalf("upstream called %d times, want 1", n)
	}
	if per := b.Elapsed() / time.Duration(max(b.N, 1)); !raceEnabled && b.N >= 1000 && per > hitBound {
		b.Errorf("a cache hit through the provider took %v, above the %v sanity bound", per, hitBound)
	}
}

// BenchmarkProviderCacheHitParallel is cached InstanceMetadata reads of
// 1,024 nodes from all Ps, each goroutine walking the nodes from its own
// start; run with -cpu 1,2 to see how it scales, next to
// BenchmarkControlParallel.
func BenchmarkProviderCacheHitParallel(b *testing.B) {
	nodes := make([]*v1.Node, 1024)
	for i := range nodes {
		nodes[i] = testNode("node-"+strconv.Itoa(i), "aws:///eu-west-1a/i-"+strconv.Itoa(i))
	}
	_, v2 := benchMetadataHit(b, nodes)
	ctx := context.Background()
	var start atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(start.Add(1)) * 509
		for pb.Next() {
			i = (i + 7) % len(nodes)
			if _, err := v2.InstanceMetadata(ctx, nodes[i]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkControlParallel is the control for the parallel benchmarks: the
// same walk over 1,024 provider IDs, each goroutine looking them up in a
// map of its own, so nothing is shared. Its -cpu 1,2 scaling is what the
// machine allows in the same run.
func BenchmarkControlParallel(b *testing.B) {
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "aws:///eu-west-1a/i-" + strconv.Itoa(i)
	}
	var start, sink atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		own := make(map[string]int, len(ids))
		for j, id := range ids {
			own[id] = j
		}
		i, sum := int(start.Add(1))*509, 0
		for pb.Next() {
			i = (i + 7) % len(ids)
			sum += own[ids[i]]
		}
		sink.Add(int64(sum))
	})
}
