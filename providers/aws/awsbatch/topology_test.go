package awsbatch_test

import (
	"context"
	"reflect"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/cloudgate/cloudgate/providers/aws/awsbatch"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

// The list describes every instance on every refresh; the network-node
// labels of an instance are asked of DescribeInstanceTopology once, as the
// provider asks once per Node (the Node then carries them), not once per
// listed GPU instance per refresh, outside cloudgate's token bucket. The
// second walk answers the same labels with no topology call.
func TestListAsksTopologyOncePerInstance(t *testing.T) {
	setAWSEnv(t)
	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Unthrottled: true, Topology: true,
		Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}, {Name: "us-east-1c", ID: "use1-az4"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.Put(fleet()...)
	c, err := awsbatch.New([]byte(CloudConfig(sim.URL, "")))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	c.Initialize(fakeBuilder{fake.NewClientset()}, stop)
	ad := c.BatchInstances()
	ctx := context.Background()
	walk := func() map[string]map[string]string {
		labels := map[string]map[string]string{}
		for tok := ""; ; {
			page, next, err := ad.ListInstances(ctx, tok)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page {
				labels[r.Metadata.ProviderID] = r.Metadata.AdditionalLabels
			}
			if next == "" {
				return labels
			}
			tok = next
		}
	}
	first := walk()
	if n := sim.Stats("DescribeInstanceTopology").Requests; n == 0 {
		t.Fatal("the first walk asked no topology: the fleet has no supported instance type")
	}
	sim.ResetStats()
	second := walk()
	if n := sim.Stats("DescribeInstanceTopology").Requests; n != 0 {
		t.Errorf("the second walk made %d DescribeInstanceTopology calls, want 0", n)
	}
	if !reflect.DeepEqual(first, second) {
		t.Errorf("labels differ between walks:\n%v\n%v", first, second)
	}
	if got := first["aws:///us-east-1b/"+iid(4)]["topology.k8s.aws/network-node-layer-3"]; got != "nn-3" {
		t.Errorf("instance 4's layer-3 label %q, want nn-3", got)
	}
}
