package gcebatch

import (
	"bytes"
	"context"
	"fmt"
	"path"

	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/meta"
	compute "google.golang.org/api/compute/v1"
	gcfg "gopkg.in/gcfg.v1"
	"k8s.io/cloud-provider-gcp/providers/gce"

	"github.com/cloudgate/cloudgate/providers/gce/gcerequests"
)

// settings are what the adapter reads from the GCE provider's cloud config: whether the
// provider manages every zone of its region (multizone, regional) or its local zone only.
type settings struct {
	allZones bool
}

// parseConfig reads the GCE provider's own cloud config (gcfg) as the provider does; an
// unreadable one fails here, before the provider is built.
func parseConfig(data []byte) (*settings, error) {
	var cf gce.ConfigFile
	if len(bytes.TrimSpace(data)) > 0 {
		if err := gcfg.FatalOnly(gcfg.ReadInto(&cf, bytes.NewReader(data))); err != nil {
			return nil, fmt.Errorf("%s: the GCE cloud config: %w (fix the [global] section; see docs/gce.md)", Name, err)
		}
	}
	return &settings{allZones: cf.Global.Multizone || cf.Global.Regional}, nil
}

// managedZones returns the zones the provider looks a Node without a provider ID up in, in
// its order: the local zone, or with multizone/regional every zone of the region as
// zones.list answers them (the call the provider made when it was built).
func (s *settings) managedZones(ctx context.Context, g *gce.Cloud) ([]string, error) {
	if !s.allZones {
		return []string{g.LocalZone()}, nil
	}
	// Sent with the provider's compute.Service, past its RateLimiter: ask
	// cloudgate's as the generated client would (once for all pages).
	rl, key := gcerequests.Limiter(), &cloud.RateLimitKey{ProjectID: g.ProjectID(), Operation: "List", Version: meta.VersionGA, Service: "Zones"}
	if err := rl.Accept(ctx, key); err != nil {
		return nil, fmt.Errorf("listing the zones of region %s: %w", g.Region(), err)
	}
	var zones []string
	err := g.ComputeServices().GA.Zones.List(g.ProjectID()).Pages(ctx, func(l *compute.ZoneList) error {
		for _, z := range l.Items {
			if path.Base(z.Region) == g.Region() {
				zones = append(zones, z.Name)
			}
		}
		return nil
	})
	rl.Observe(ctx, err, key)
	if err != nil {
		return nil, fmt.Errorf("listing the zones of region %s: %w", g.Region(), err)
	}
	return zones, nil
}
