// Package upstreams names the cloud providers cloudgate's own CCM binaries register: the ones
// cloudgate-config accepts as upstream.name unless told a binary's own list (-upstreams).
// Each CCM binary's tests call Check with the providers it registers, so a binary that gains
// a provider fails its tests until the list names it.
package upstreams

import (
	"fmt"
	"slices"

	cloudprovider "k8s.io/cloud-provider"
)

// Known are the providers registered in cloudgate's CCM binaries: aws and aws-batch
// (providers/aws/cmd/cloud-controller-manager), gce and gce-batch
// (providers/gce/cmd/cloud-controller-manager), simcloud (bench/cmd/cloud-controller-manager).
var Known = []string{"aws", "aws-batch", "gce", "gce-batch", "simcloud"}

// Check returns an error naming each of names that this binary does not register or that
// Known lacks.
func Check(names ...string) error {
	var errs []error
	for _, name := range names {
		if !cloudprovider.IsCloudProvider(name) {
			errs = append(errs, fmt.Errorf("this CCM binary does not register %q: update the list its test passes", name))
		}
		if !slices.Contains(Known, name) {
			errs = append(errs, fmt.Errorf("upstreams.Known %q lacks %q, which this CCM registers: add it", Known, name))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%v", errs)
}
