// Command cloud-controller-manager is the Kubernetes cloud-controller-manager for GCE with
// cloudgate in front of the unmodified GCE cloud provider (k8s.io/cloud-provider-gcp/providers,
// registered as "gce") and the gcebatch adapter ("gce-batch"), which adds batched and listed
// instance lookups to it. Run it with
//
//	--cloud-provider=cloudgate --cloud-config=cloudgate.yaml
//
// where cloudgate.yaml names the upstream "gce-batch" or "gce" and points at the GCE
// provider's own cloud config. Its controllers, and which of them --controllers=* runs, are
// cloud-provider-gcp's cloud-controller-manager's: cloud-node, cloud-node-lifecycle, service,
// route and nodeipam (internal/nodeipam; its GKE-only controllers are not in this binary).
// See docs/gce.md.
//
// Every Compute Engine call the provider and the adapter send through the provider's
// generated client passes cloudgate's request gate (package gcerequests): a token bucket per
// quota group, a breaker, and cloudgate_cloud_requests_total by method and by the provider
// method that sent it.
package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/cmd/ccm"                  // registers "cloudgate"
	_ "github.com/cloudgate/cloudgate/providers/gce/gcebatch" // registers "gce-batch" (and "gce")
	"github.com/cloudgate/cloudgate/providers/gce/gcerequests"
	"github.com/cloudgate/cloudgate/providers/gce/internal/nodeipam"
)

func main() {
	// Before the GCE provider is built: every provider "gce" builds (for the upstream
	// "gce" or "gce-batch") then governs its calls with cloudgate's request gate. A CCM
	// that cannot have it does not start (no silent bypass).
	if _, err := gcerequests.Install(); err != nil {
		klog.Fatalf("unable to start: %v", err)
	}
	cmd, err := newCommand(wait.NeverStop)
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	os.Exit(cli.Run(cmd))
}

func newCommand(stopCh <-chan struct{}) (*cobra.Command, error) {
	ipam := &nodeipam.Controller{}
	flags := cliflag.NamedFlagSets{}
	ipam.AddFlags(flags.FlagSet(nodeipam.FlagSetName))
	return ccm.New(stopCh, ccm.Options{
		Linked:       `"cloudgate" (give it --cloud-config=cloudgate.yaml), "gce-batch" and "gce"`,
		UntaggedHint: "the GCE provider always reports one",
		Controllers: []ccm.Controller{{
			Name:        nodeipam.Name,
			Alias:       nodeipam.Alias,
			ClientName:  nodeipam.ClientName,
			Constructor: ipam.Constructor,
		}},
		Flags: flags,
	})
}
