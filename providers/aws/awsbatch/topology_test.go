package awsbatch_test

import (
	"context"
	"reflect"
	"testing"
)

// The list describes every instance on every refresh; the network-node
// labels of an instance are asked of DescribeInstanceTopology once, as the
// provider asks once per Node (the Node then carries them), not once per
// listed GPU instance per refresh, outside cloudgate's token bucket. The
// second walk answers the same labels with no topology call.
func TestListAsksTopologyOncePerInstance(t *testing.T) {
	sim, c := startFleet(t, "")
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
