package provider_test

import (
	"context"
	"fmt"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	fakecloud "k8s.io/cloud-provider/fake"

	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
)

// listingCloud is a provider whose InstancesV2 also lists its instances in
// pages (provider.InstanceLister).
type listingCloud struct {
	fakecloud.Cloud
	perNode atomic.Int64 // per-node InstanceMetadata calls
}

func (c *listingCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c, true }

func (c *listingCloud) InstanceMetadata(_ context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	c.perNode.Add(1)
	return &cloudprovider.InstanceMetadata{ProviderID: node.Spec.ProviderID, InstanceType: "m5.large"}, nil
}

// ListInstances returns two pages of one instance each.
func (c *listingCloud) ListInstances(_ context.Context, pageToken string) ([]provider.InstanceRecord, string, error) {
	page := map[string]struct{ name, next string }{"": {"node-a", "page-2"}, "page-2": {"node-b", ""}}[pageToken]
	rec := provider.InstanceRecord{NodeName: page.name, Metadata: cloudprovider.InstanceMetadata{
		ProviderID: "example://" + page.name, InstanceType: "m5.large", Zone: "zone-1"}}
	return []provider.InstanceRecord{rec}, page.next, nil
}

var _ provider.InstanceLister = (*listingCloud)(nil)

// A provider that implements provider.InstanceLister on its InstancesV2
// gets list prefetch: cloudgate lists every instance at Initialize and on a
// schedule, and per-node reads are answered from that list.
func Example_instanceLister() {
	up := &listingCloud{Cloud: fakecloud.Cloud{Provider: "example"}}
	cfg := provider.DefaultConfig()     // batch.listPrefetch is on by default
	cfg.Metrics = metrics.New()         // the example's own registry
	cloud, err := provider.New(up, cfg) // a provider.Cloud
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cloud.Close()
	stop := make(chan struct{})
	defer close(stop)
	cloud.Initialize(nil, stop) // starts the list prefetch

	v2, _ := cloud.InstancesV2()
	for _, name := range []string{"node-a", "node-b"} {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: "example://" + name}}
		md, err := v2.InstanceMetadata(context.Background(), node)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(name, md.InstanceType, md.Zone)
	}
	fmt.Println("per-node calls:", up.perNode.Load())
	fmt.Println("unwraps to the provider:", cloud.Unwrap() == cloudprovider.Interface(up))
	// Output:
	// node-a m5.large zone-1
	// node-b m5.large zone-1
	// per-node calls: 0
	// unwraps to the provider: true
}
