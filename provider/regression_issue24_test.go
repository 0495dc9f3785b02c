package provider

import (
	"context"
	"sync/atomic"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
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
