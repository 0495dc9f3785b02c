package main

import (
	"strings"
	"testing"

	"github.com/cloudgate/cloudgate/cmd/ccm/upstreams"
)

// cloudgate-config checks upstream.name against the providers of cloudgate's CCM binaries
// (upstreams.Known): each provider this binary registers must be among them, or the tool
// would refuse a file this CCM runs.
func TestKnownUpstreamsRegistered(t *testing.T) {
	if err := upstreams.Check("gce", "gce-batch"); err != nil {
		t.Error(err)
	}
}

// TestControllersAsGCP: this CCM's --controllers are cloud-provider-gcp's CCM's, less its
// GKE-only ones (gkenetworkparamset, gke-service-lb-controller, gke-tenant-controller-manager,
// disabled by default there): the standard four and nodeipam, none disabled by default, so
// "*" runs all five; nodeipam has that CCM's flags.
func TestControllersAsGCP(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	cmd, err := newCommand(stop)
	if err != nil {
		t.Fatal(err)
	}
	usage := cmd.Flags().Lookup("controllers").Usage
	all, disabled, _ := strings.Cut(usage, "Disabled-by-default controllers:")
	for _, c := range []string{"cloud-node-controller", "cloud-node-lifecycle-controller", "service-lb-controller", "node-route-controller", "node-ipam-controller"} {
		if !strings.Contains(all, c) || strings.Contains(disabled, c) {
			t.Errorf("--controllers: %s missing, or disabled by default: %q", c, usage)
		}
	}
	for _, f := range []string{"allocate-node-cidrs", "cluster-cidr", "cidr-allocator-type", "node-cidr-mask-size", "node-cidr-mask-size-ipv4", "node-cidr-mask-size-ipv6", "service-cluster-ip-range"} {
		if cmd.Flags().Lookup(f) == nil {
			t.Errorf("no --%s", f)
		}
	}
}
