package provider

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
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
