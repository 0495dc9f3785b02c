package provider

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// realisticMetadata answers like a real cloud: provider ID, type, zone,
// region, two addresses.
func realisticMetadata(node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return &cloudprovider.InstanceMetadata{
		ProviderID:   node.Spec.ProviderID,
		InstanceType: "m5.2xlarge",
		Zone:         "eu-west-1a",
		Region:       "eu-west-1",
		NodeAddresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "10.12.34.56"},
			{Type: v1.NodeHostName, Address: node.Name + ".eu-west-1.compute.internal"},
		},
	}, nil
}

func TestCacheStaysBounded(t *testing.T) {
	up := newCountingCloud()
	up.metadataHook = realisticMetadata
	cfg := testConfig(newFakeClock())
	cfg.Cache.Size = 1000
	c := mustNew(t, up, cfg)
	i := v2(t, c)
	for n := range 3000 {
		if _, err := i.InstanceMetadata(context.Background(), testNode(fmt.Sprint("node-", n), fmt.Sprint("aws:///eu-west-1a/i-", n))); err != nil {
			t.Fatal(err)
		}
	}
	if got := enf(c).inst.metadata.c.Len(); got != 1000 {
		t.Fatalf("InstanceMetadata cache holds %d entries, want its size 1000", got)
	}
}

// BenchmarkInstanceMetadataCacheMemory reports the heap held per cached
// node with 100,000 nodes' InstanceMetadata in the cache (B/entry).
func BenchmarkInstanceMetadataCacheMemory(b *testing.B) {
	const nodes = 100000
	nodeList := make([]*v1.Node, nodes)
	for n := range nodeList {
		nodeList[n] = testNode(fmt.Sprintf("ip-10-12-%d-%d", n/256, n%256), fmt.Sprintf("aws:///eu-west-1a/i-%017x", n))
	}
	var perEntry float64
	for range b.N {
		up := newCountingCloud()
		up.metadataHook = realisticMetadata
		cfg := testConfig(newFakeClock())
		cfg.Batch.Enabled = boolp(false)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c, err := New(up, cfg)
		if err != nil {
			b.Fatal(err)
		}
		i, _ := c.InstancesV2()
		for _, n := range nodeList {
			if _, err := i.InstanceMetadata(context.Background(), n); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if got := enf(c).inst.metadata.c.Len(); got != nodes {
			b.Fatalf("cached %d entries, want %d", got, nodes)
		}
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / nodes
		runtime.KeepAlive(c)
	}
	b.ReportMetric(perEntry, "B/entry")
}
