package main

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	fakecloud "k8s.io/cloud-provider/fake"

	"github.com/cloudgate/cloudgate/provider"
)

// deletedSupported reports whether cloudgate, as built in this tree, answers
// InstanceExists=false for a node whose batch answer has Deleted set (the
// contract of provider.InstanceStatus.Deleted). It asks cloudgate itself,
// around an upstream whose one instance is deleted.
func deletedSupported(t *testing.T) bool {
	t.Helper()
	cfg := provider.DefaultConfig()
	cfg.ProviderName = "deleted-probe"
	c, err := provider.New(probeCloud{&fakecloud.Cloud{}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	v2, ok := c.InstancesV2()
	if !ok {
		t.Fatal("cloudgate hides the probe's InstancesV2")
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: v1.NodeSpec{ProviderID: "probe://1"}}
	exists, err := v2.InstanceExists(context.Background(), node)
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	return !exists
}

type probeCloud struct{ *fakecloud.Cloud }

func (probeCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return probeInstances{}, true }

// probeInstances answers every node: metadata, and Deleted.
type probeInstances struct{ cloudprovider.InstancesV2 }

func (probeInstances) MaxBatchSize() int { return 10 }

func (probeInstances) BatchInstanceStatus(_ context.Context, nodes []*v1.Node) ([]provider.InstanceStatus, error) {
	out := make([]provider.InstanceStatus, len(nodes))
	for i := range out {
		out[i] = provider.InstanceStatus{Metadata: &cloudprovider.InstanceMetadata{ProviderID: "probe://1"}, Deleted: true}
	}
	return out, nil
}
