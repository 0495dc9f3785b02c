package provider

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/utils/clock"
)

// TestControllersTreatMetadataAsReadOnly was the proof behind handing every
// caller the one cached *InstanceMetadata (cache.Config.Shared); callers now
// get a copy each (issue 30, TestIssue30_MetadataCopyPerCaller), and it
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
