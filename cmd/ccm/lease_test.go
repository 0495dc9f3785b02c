package ccm

import (
	"slices"
	"testing"

	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/fake"
)

// informerCloud is a fake cloud that is a cloudprovider.InformerUser.
type informerCloud struct {
	*fake.Cloud
	set bool
}

func (c *informerCloud) SetInformers(informers.SharedInformerFactory) { c.set = true }

// TestHandOver: with leader election on, the app's own election is switched off and the
// cloud is gated (Initialize waits for the Lease, then initialises the cloud); off, or with
// leader migration, the cloud and config are left as they are. The gated cloud forwards
// SetInformers only to a cloud that takes informers, and exposes the cloud as Upstream.
// The election itself (client-go's, with ReleaseOnCancel) is measured against a real
// kube-apiserver by bench/cmd/cloud-controller-manager's TestFailover (SIGTERM hand-over).
func TestHandOver(t *testing.T) {
	completed := func(elect, migrate bool) *config.CompletedConfig {
		c := (&config.Config{}).Complete()
		c.ComponentConfig.Generic.LeaderElection.LeaderElect = elect
		c.ComponentConfig.Generic.LeaderMigrationEnabled = migrate
		return c
	}
	cloud := &fake.Cloud{}
	for _, tc := range []struct{ elect, migrate bool }{{false, false}, {true, true}} {
		c := completed(tc.elect, tc.migrate)
		if got := handOver(c, cloud); got != cloudprovider.Interface(cloud) {
			t.Errorf("elect=%v migrate=%v: cloud wrapped as %T", tc.elect, tc.migrate, got)
		}
		if c.ComponentConfig.Generic.LeaderElection.LeaderElect != tc.elect {
			t.Errorf("elect=%v migrate=%v: the app's election changed", tc.elect, tc.migrate)
		}
	}

	c := completed(true, false)
	got := handOver(c, cloud)
	g, ok := got.(*gatedCloud)
	if !ok {
		t.Fatalf("leader election on: cloud %T, want the gated cloud", got)
	}
	if c.ComponentConfig.Generic.LeaderElection.LeaderElect {
		t.Error("leader election on: the app's own election is still on (two candidates per process)")
	}
	var order []string
	g.lead = func() { order = append(order, "lead") }
	g.Interface = &recordingCloud{Cloud: cloud, order: &order}
	g.Initialize(nil, nil)
	if !slices.Equal(order, []string{"lead", "initialize"}) {
		t.Errorf("Initialize: %v, want the Lease first, then the cloud's Initialize", order)
	}

	// SetInformers reaches an InformerUser, and only one; Upstream is the cloud.
	ic := &informerCloud{Cloud: cloud}
	gi := &gatedCloud{Interface: ic}
	gi.SetInformers(nil)
	if !ic.set {
		t.Error("SetInformers not forwarded to an InformerUser cloud")
	}
	(&gatedCloud{Interface: cloud}).SetInformers(nil) // fake.Cloud takes no informers: nothing to do
	if u := gi.Unwrap(); u != cloudprovider.Interface(ic) {
		t.Errorf("Unwrap() = %T, want the gated cloud", u)
	}
	if _, ok := gi.Instances(); !ok {
		t.Error("Instances not forwarded")
	}
}

type recordingCloud struct {
	*fake.Cloud
	order *[]string
}

func (r *recordingCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {
	*r.order = append(*r.order, "initialize")
}
