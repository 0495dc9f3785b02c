package provider

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// Item 9: an empty provider ID is no identity: never cached or merged.
func TestRegression_EmptyProviderIDNeverCachedOrMerged(t *testing.T) {
	up := newCountingCloud()
	c := mustNew(t, up, testConfig(newFakeClock()))
	in, _ := c.Instances()
	for range 100 {
		_, _ = in.InstanceTypeByProviderID(context.Background(), "")
		_, _ = in.InstanceExistsByProviderID(context.Background(), "")
	}
	if got := up.Calls("InstanceTypeByProviderID"); got != 100 {
		t.Fatalf("InstanceTypeByProviderID(\"\") reached upstream %d times for 100 calls", got)
	}
	if got := up.Calls("InstanceExistsByProviderID"); got != 100 {
		t.Fatalf("InstanceExistsByProviderID(\"\") reached upstream %d times for 100 calls", got)
	}
}

// Item 9: identity answers keyed by a node name live at most negativeTTL.
func TestRegression_NameKeyedIdentityBoundedByNegativeTTL(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	c := mustNew(t, up, testConfig(clk))
	in, _ := c.Instances()
	ctx := context.Background()
	if id, _ := in.InstanceID(ctx, "node-1"); id != "i-1" {
		t.Fatalf("InstanceID = %q", id)
	}
	md, _ := v2(t, c).InstanceMetadata(ctx, testNode("node-1", ""))
	if md == nil {
		t.Fatal("no metadata")
	}
	// The VM is re-created under the same name.
	up.ExtID = map[types.NodeName]string{"node-1": "i-2"}
	up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) {
		return &cloudprovider.InstanceMetadata{ProviderID: "fake://i-2"}, nil
	}
	clk.Step(31 * time.Second)
	if id, _ := in.InstanceID(ctx, "node-1"); id != "i-2" {
		t.Fatalf("InstanceID(node-1) = %q after negativeTTL, want the new instance's i-2", id)
	}
	if md, _ := v2(t, c).InstanceMetadata(ctx, testNode("node-1", "")); md.ProviderID != "fake://i-2" {
		t.Fatalf("InstanceMetadata by name = %q after negativeTTL, want the new instance's", md.ProviderID)
	}
}
