// Package command builds cloudgate's cloud-controller-manager command: the upstream
// k8s.io/cloud-provider/app command, with the "cloudgate" and "simcloud" providers linked
// in by import. A cloud vendor's own CCM main needs only the cloudgate import (see
// docs/ccm.md); this package exists so that tests can build the very command the binary
// runs and check flags against it.
package command

import (
	"github.com/spf13/cobra"

	_ "github.com/cloudgate/cloudgate/bench/simcloud" // registers provider "simcloud"
	"github.com/cloudgate/cloudgate/cmd/ccm"          // registers provider "cloudgate"
)

// New returns the cloud-controller-manager command; it runs until stopCh is closed.
func New(stopCh <-chan struct{}) (*cobra.Command, error) {
	return ccm.New(stopCh, ccm.Options{
		Linked:       `"cloudgate" (give it --cloud-config=cloudgate.yaml) and "simcloud"`,
		UntaggedHint: "tag the cluster",
	})
}
