package provider

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	fakecloud "k8s.io/cloud-provider/fake"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/utils/clock"

	"k8s.io/apimachinery/pkg/runtime"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
)

// TestControllersTreatMetadataAsReadOnly was the proof behind handing every
// caller the one cached *InstanceMetadata (cache.Config.Shared); callers now
// get a copy each (TestMetadataCopyPerCaller), and it
// still shows the cache is never changed through an answer: the real
// cloud-node and cloud-node-lifecycle controllers run over cloudgate through
// every path that reads InstanceMetadata — initialising tainted nodes,
// address updates with and without a hostname from the cloud, with a
// kubelet-provided node IP, provider-ID lookup for nodes without one — with
// concurrent workers, under -race. The cached answers must come out exactly
// as the upstream gave them, and the race detector must see no write to
// memory another caller reads (an append to the shared addresses
// reallocates: cloneMetadata leaves no spare capacity).
func TestControllersTreatMetadataAsReadOnly(t *testing.T) {
	up := newCountingCloud()
	want := func(node *v1.Node) *cloudprovider.InstanceMetadata {
		// No hostname address, so the controller appends the kubelet's.
		return &cloudprovider.InstanceMetadata{
			ProviderID: "fake://" + node.Name, InstanceType: "m5.large", Zone: "zone-a", Region: "region-1",
			NodeAddresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: "10.0.0.1"},
				{Type: v1.NodeExternalIP, Address: "203.0.113.1"},
			},
			AdditionalLabels: map[string]string{"cloud.example/pool": "a"},
		}
	}
	up.metadataHook = func(node *v1.Node) (*cloudprovider.InstanceMetadata, error) { return want(node), nil }
	cfg := testConfig(nil)
	cfg.Clock = clock.RealClock{}
	cfg.Batch.Enabled = boolp(false)
	cg := mustNew(t, up, cfg)

	var nodes []*v1.Node
	for i := range 12 {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("node-", i), Annotations: map[string]string{}}}
		n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeHostName, Address: n.Name}}
		switch i % 4 {
		case 0: // being initialised
			n.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
		case 1: // kubelet-provided node IP
			n.Spec.ProviderID = "fake://" + n.Name
			n.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr] = "10.0.0.1"
		case 2: // no provider ID: the lifecycle controller asks for metadata
		case 3:
			n.Spec.ProviderID = "fake://" + n.Name
		}
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
		nodes = append(nodes, n)
	}
	objs := make([]runtime.Object, len(nodes))
	for i, n := range nodes {
		objs[i] = n.DeepCopy()
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	nodeInformer := factory.Core().V1().Nodes()
	cnc, err := nodecontroller.NewCloudNodeController(nodeInformer, client, cg, time.Hour, 4, 4)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := nodelifecycle.NewCloudNodeLifecycleController(nodeInformer, client, cg, time.Hour, 4)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	wg.Go(func() { cnc.RunWithContext(ctx, controllersmetrics.NewControllerManagerMetrics("test")) })

	// The workers initialise the tainted nodes (bounded wait, no timing
	// assertion: the test only needs them to have run).
	for range 1000 {
		done := true
		for _, n := range nodes {
			got, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, tn := range got.Spec.Taints {
				if tn.Key == cloudproviderapi.TaintExternalCloudProvider {
					done = false
				}
			}
		}
		if done {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Address updates and lifecycle passes, concurrently.
	var passes sync.WaitGroup
	for range 4 {
		passes.Go(func() {
			if err := cnc.UpdateNodeStatus(ctx); err != nil {
				t.Error(err)
			}
		})
		passes.Go(func() { lc.MonitorNodes(ctx) })
	}
	passes.Wait()
	cancel()
	wg.Wait()

	g := cg.(*cloud).g
	for _, n := range nodes {
		for _, key := range []nodeKey{{byProviderID: true, id: "fake://" + n.Name}, {id: n.Name}} {
			got, _, ok := g.inst.metadata.Fresh(key)
			if ok && !reflect.DeepEqual(got, want(n)) {
				t.Errorf("%s: cached metadata changed by a controller:\n got %+v\nwant %+v", key, got, want(n))
			}
		}
	}
	if up.Calls("InstanceMetadata") == 0 {
		t.Fatal("the controllers never asked for InstanceMetadata: the test proves nothing")
	}
}

// TestCloneMetadataIsDeep checks the copy shares nothing a caller could
// write through and leaves no room to append in place, for address counts
// inside and beyond the inline room.
func TestCloneMetadataIsDeep(t *testing.T) {
	for _, n := range []int{-1, 0, 1, 2, 3, 4, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			m := &cloudprovider.InstanceMetadata{ProviderID: "p", Zone: "z", AdditionalLabels: map[string]string{"k": "v"}}
			if n >= 0 {
				m.NodeAddresses = make([]v1.NodeAddress, n)
				for i := range n {
					m.NodeAddresses[i] = v1.NodeAddress{Type: v1.NodeInternalIP, Address: fmt.Sprint("10.0.0.", i)}
				}
			}
			c := cloneMetadata(m)
			if !reflect.DeepEqual(c, m) {
				t.Fatalf("clone %+v differs from %+v", c, m)
			}
			if cap(c.NodeAddresses) != len(c.NodeAddresses) {
				t.Fatalf("clone has room to append in place: len %d cap %d", len(c.NodeAddresses), cap(c.NodeAddresses))
			}
			c.AdditionalLabels["k"] = "changed"
			for i := range c.NodeAddresses {
				c.NodeAddresses[i].Address = "changed"
			}
			c.NodeAddresses = append(c.NodeAddresses, v1.NodeAddress{Address: "appended"})
			if m.AdditionalLabels["k"] != "v" {
				t.Fatal("writing the clone's labels changed the original")
			}
			for _, a := range m.NodeAddresses {
				if a.Address == "changed" {
					t.Fatal("writing the clone's addresses changed the original")
				}
			}
		})
	}
	if cloneMetadata(nil) != nil {
		t.Fatal("clone of nil is not nil")
	}
}

// spareCloud answers InstanceMetadata with one object of its own whose
// addresses have spare capacity (a provider keeping its answers).
type spareCloud struct {
	*fakecloud.Cloud
	md    *cloudprovider.InstanceMetadata
	calls atomic.Int64
}

func (s *spareCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return s, true }

func (s *spareCloud) InstanceMetadata(context.Context, *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	s.calls.Add(1)
	return s.md, nil
}

// Issue 24 item 3: on a miss every caller (leader and joiners) gets the
// stored copy, whose addresses have no spare capacity, never the upstream's
// object: two callers appending a hostname each keep their own, and the
// upstream's object is untouched.
func TestMissCallersGetStoredCopy(t *testing.T) {
	addrs := make([]v1.NodeAddress, 1, 4)
	addrs[0] = v1.NodeAddress{Type: v1.NodeInternalIP, Address: "10.0.0.1"}
	up := &spareCloud{Cloud: &fakecloud.Cloud{Provider: "fake"}, md: &cloudprovider.InstanceMetadata{ProviderID: "fake://a", NodeAddresses: addrs}}
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

// TestMetadataCopyPerCaller: a caller that changes its InstanceMetadata
// (InstanceType, an address, the zone, a label, or appends an address —
// the cloud node controller itself writes ProviderID into it when the cloud
// left it empty) changes nothing another caller gets, on every path that
// answers from cloudgate's state: a miss and later cache hits, a batch
// answer, and the list prefetch: a caller that changes its answer must not
// change the cached object the next caller gets.
func TestMetadataCopyPerCaller(t *testing.T) {
	want := func(providerID string) *cloudprovider.InstanceMetadata {
		return &cloudprovider.InstanceMetadata{ProviderID: providerID, InstanceType: "m5.large", Zone: "zone-a", Region: "region-1",
			NodeAddresses:    []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}},
			AdditionalLabels: map[string]string{"pool": "a"}}
	}
	mutate := func(md *cloudprovider.InstanceMetadata) {
		md.InstanceType = "changed"
		md.Zone = "changed"
		md.NodeAddresses[0].Address = "192.0.2.66"
		md.NodeAddresses = append(md.NodeAddresses, v1.NodeAddress{Type: v1.NodeHostName, Address: "added"})
		md.AdditionalLabels["pool"] = "changed"
	}
	// check reads node three times, each caller changing what it got.
	check := func(t *testing.T, c cloudprovider.Interface, node *v1.Node) {
		t.Helper()
		for k := range 3 {
			md, err := v2(t, c).InstanceMetadata(context.Background(), node)
			if err != nil {
				t.Fatal(err)
			}
			if w := want(node.Spec.ProviderID); !reflect.DeepEqual(md, w) {
				t.Fatalf("caller %d got %+v, want %+v: an earlier caller's change reached it", k, md, w)
			}
			mutate(md)
		}
	}
	node := testNode("node-1", "fake://i-1")
	t.Run("miss then hits", func(t *testing.T) {
		up := newCountingCloud()
		up.metadataHook = func(n *v1.Node) (*cloudprovider.InstanceMetadata, error) { return want(n.Spec.ProviderID), nil }
		c := mustNew(t, up, testConfig(newFakeClock()))
		check(t, c, node)
		if n := up.Calls("InstanceMetadata"); n != 1 {
			t.Fatalf("%d upstream calls, want 1 (then hits)", n)
		}
	})
	t.Run("batch", func(t *testing.T) {
		up := &copyBatchCloud{Cloud: &fakecloud.Cloud{Provider: "fake"}, md: want}
		c := mustNew(t, up, testConfig(newFakeClock()))
		check(t, c, node)
		if n := up.batches.Load(); n != 1 {
			t.Fatalf("%d batch calls, want 1 (then hits)", n)
		}
	})
	t.Run("list", func(t *testing.T) {
		up := &copyListCloud{Cloud: &fakecloud.Cloud{Provider: "fake"}, md: want}
		cfg := testConfig(newFakeClock())
		cfg.Batch.ListPrefetch = true
		c := mustNew(t, up, cfg)
		stop := make(chan struct{})
		defer close(stop)
		c.Initialize(nil, stop)
		check(t, c, node)
		if up.lists.Load() == 0 {
			t.Fatal("no list call: the reads did not come from the list")
		}
	})
}

// copyBatchCloud answers every node of a batch with md (one fresh object
// per node, as a provider decoding a response does).
type copyBatchCloud struct {
	*fakecloud.Cloud
	md      func(providerID string) *cloudprovider.InstanceMetadata
	batches atomic.Int64
}

func (b *copyBatchCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return b, true }
func (b *copyBatchCloud) MaxBatchSize() int                              { return 10 }
func (b *copyBatchCloud) BatchInstanceStatus(_ context.Context, nodes []*v1.Node) ([]InstanceStatus, error) {
	b.batches.Add(1)
	out := make([]InstanceStatus, len(nodes))
	for i, n := range nodes {
		out[i].Metadata = b.md(n.Spec.ProviderID)
	}
	return out, nil
}

// copyListCloud lists one instance, fake://i-1 (node-1), with md.
type copyListCloud struct {
	*fakecloud.Cloud
	md    func(providerID string) *cloudprovider.InstanceMetadata
	lists atomic.Int64
}

func (l *copyListCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }
func (l *copyListCloud) ListInstances(context.Context, string) ([]InstanceRecord, string, error) {
	l.lists.Add(1)
	return []InstanceRecord{{NodeName: "node-1", Metadata: *l.md("fake://i-1")}}, "", nil
}
