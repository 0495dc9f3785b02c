package provider

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
)

// noNICCloud's batch answers node "nonic" as an instance that exists but whose metadata
// fails (the GCE provider's answers for an instance without a network interface).
type noNICCloud struct{ *batchCloud }

var errNoNIC = errors.New("could not find network interfaces")

func (b *noNICCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return b, true }

func (b *noNICCloud) BatchInstanceStatus(ctx context.Context, nodes []*v1.Node) ([]InstanceStatus, error) {
	out, err := b.batchCloud.BatchInstanceStatus(ctx, nodes)
	for i, n := range nodes {
		if err == nil && n.Name == "nonic" {
			out[i] = InstanceStatus{MetadataErr: errNoNIC}
		}
	}
	return out, err
}

// A batch answer with MetadataErr: InstanceMetadata fails with it, while InstanceExists
// answers true and InstanceShutdown false, as the upstream's own methods do (a per-node Err
// failed all three, and a nil Metadata without Err answered InstanceMetadata nil, nil).
func TestBatchMetadataErrExists(t *testing.T) {
	for _, first := range []string{"metadata", "exists"} {
		t.Run(first+" first", func(t *testing.T) {
			up := &noNICCloud{&batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}}}
			c := mustNew(t, up, testConfig(newFakeClock()))
			defer func() { _ = c.(interface{ Close() error }).Close() }()
			ctx := context.Background()
			n := testNode("nonic", "fake://nonic")
			if first == "exists" {
				if ok, err := v2(t, c).InstanceExists(ctx, n); err != nil || !ok {
					t.Fatalf("InstanceExists = %v, %v; want true", ok, err)
				}
			}
			if md, err := v2(t, c).InstanceMetadata(ctx, n); !errors.Is(err, errNoNIC) {
				t.Fatalf("InstanceMetadata = %+v, %v; want the metadata error", md, err)
			}
			if ok, err := v2(t, c).InstanceExists(ctx, n); err != nil || !ok {
				t.Fatalf("InstanceExists = %v, %v; want true", ok, err)
			}
			if sh, err := v2(t, c).InstanceShutdown(ctx, n); err != nil || sh {
				t.Fatalf("InstanceShutdown = %v, %v; want false", sh, err)
			}
		})
	}
}
