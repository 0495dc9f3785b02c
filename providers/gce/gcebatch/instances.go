package gcebatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/filter"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/meta"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider-gcp/providers/gce"

	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/gce/gcerequests"
)

const (
	// MaxBatchSize is the most nodes one BatchInstanceStatus call takes. Their names go in one
	// instances.list filter per zone ("name eq (a|b|...)"); Compute Engine documents no
	// length limit for a filter that this stays near (100 names of at most 63 characters).
	MaxBatchSize = 100
	// pageSize is the maxResults of the list calls: Compute Engine's maximum.
	pageSize = 500
)

// providerIDRE is the GCE provider's own provider-ID form: gce://PROJECT/ZONE/NAME.
var providerIDRE = regexp.MustCompile(`^` + gce.ProviderName + `://([^/]+)/([^/]+)/([^/]+)$`)

// Instances is the GCE provider's own InstancesV2 with two more methods:
// provider.BatchInstances and provider.InstanceLister. InstanceMetadata, InstanceExists and
// InstanceShutdown are the provider's, unchanged.
type Instances struct {
	cloudprovider.InstancesV2 // the unmodified provider's

	g     *gce.Cloud
	zones []string // managed zones, in the provider's order
}

var (
	_ provider.BatchInstances = (*Instances)(nil)
	_ provider.InstanceLister = (*Instances)(nil)
)

func newInstances(g *gce.Cloud, zones []string) *Instances {
	v2, _ := g.InstancesV2()
	return &Instances{InstancesV2: v2, g: g, zones: zones}
}

// MaxBatchSize implements provider.BatchInstances.
func (i *Instances) MaxBatchSize() int { return MaxBatchSize }

// lookup is one node of a batch being answered.
type lookup struct {
	name       string // the instance name (the provider's canonical form)
	providerID string // the node's own, or "" until found by name
	zone       string // the provider ID's zone; "" to search the managed zones
	inst       *compute.Instance
	err        error
}

// BatchInstanceStatus implements provider.BatchInstances: at most one filtered
// instances.list per zone, for the nodes whose provider ID names the zone and, in a managed
// zone, the nodes without one (searched in the provider's zone order until each is found).
func (i *Instances) BatchInstanceStatus(ctx context.Context, nodes []*v1.Node) ([]provider.InstanceStatus, error) {
	ls := make([]*lookup, len(nodes))
	byZone := map[string][]*lookup{}
	var unplaced []*lookup
	for k, n := range nodes {
		l := &lookup{}
		ls[k] = l
		if id := n.Spec.ProviderID; id != "" {
			m := providerIDRE.FindStringSubmatch(id)
			if m == nil {
				l.err = errors.New("error splitting providerID") // the provider's own error text
				continue
			}
			l.providerID, l.zone, l.name = id, m[2], canonical(m[3])
			byZone[l.zone] = append(byZone[l.zone], l)
			continue
		}
		l.name = canonical(n.Name)
		unplaced = append(unplaced, l)
	}
	// One list per zone: the managed zones in the provider's order, each for the nodes whose
	// provider ID names it and the nodes without one not found in an earlier zone; then the
	// other zones provider IDs name.
	managed := map[string]bool{}
	for _, z := range i.zones {
		managed[z] = true
	}
	var others []string
	for z := range byZone {
		if !managed[z] {
			others = append(others, z)
		}
	}
	sort.Strings(others)
	for _, z := range append(append([]string(nil), i.zones...), others...) {
		want := byZone[z]
		searching := managed[z] && len(unplaced) > 0
		if searching {
			want = append(append([]*lookup(nil), want...), unplaced...)
		}
		if len(want) == 0 {
			continue
		}
		if err := i.listZone(ctx, z, want); err != nil {
			return nil, err
		}
		if !searching {
			continue
		}
		var left []*lookup
		for _, l := range unplaced {
			if l.inst == nil {
				left = append(left, l)
				continue
			}
			l.zone = path.Base(l.inst.Zone)
			l.providerID = gce.ProviderName + "://" + i.g.ProjectID() + "/" + l.zone + "/" + l.inst.Name
		}
		unplaced = left
	}
	out := make([]provider.InstanceStatus, len(ls))
	for k, l := range ls {
		switch {
		case l.err != nil:
			out[k].Err = l.err
		case l.inst == nil:
			out[k].Err = cloudprovider.InstanceNotFound
		default:
			// An instance whose metadata the provider cannot answer (no network interface)
			// still exists for its InstanceExists.
			md, err := metadata(l.providerID, l.zone, l.inst)
			out[k] = provider.InstanceStatus{Metadata: md, MetadataErr: err}
		}
	}
	return out, nil
}

// listZone lists the instances of zone named by ls (through the provider's own compute
// client and rate limiter) and sets each one's inst.
func (i *Instances) listZone(ctx context.Context, zone string, ls []*lookup) error {
	names := make([]string, 0, len(ls))
	want := map[string][]*lookup{}
	for _, l := range ls {
		if want[l.name] == nil {
			names = append(names, regexp.QuoteMeta(l.name))
		}
		want[l.name] = append(want[l.name], l)
	}
	sort.Strings(names)
	found, err := i.g.Compute().Instances().List(ctx, zone, filter.Regexp("name", "("+strings.Join(names, "|")+")"))
	if isNotFound(err) {
		// A zone that does not exist (a provider ID naming it): the provider's instances.get
		// in it is a 404 too, which it answers as "does not exist" (and its search by name
		// goes on to the next zone).
		return nil
	}
	if err != nil {
		return fmt.Errorf("instances.list in zone %s for %d nodes: %w", zone, len(ls), err)
	}
	for _, in := range found {
		for _, l := range want[in.Name] {
			l.inst = in
		}
	}
	return nil
}

// isNotFound is the provider's isHTTPErrorCode(err, http.StatusNotFound).
func isNotFound(err error) bool {
	var e *googleapi.Error
	return errors.As(err, &e) && e.Code == http.StatusNotFound
}

// ListInstances implements provider.InstanceLister: one page of instances.aggregatedList.
// Instances of the managed zones carry their name as NodeName (a Node named so without a
// provider ID is that instance, as the provider finds it) and their zone's place in the
// provider's order as NameRank: names are unique per zone only, and the provider answers a
// name with the instance of the first managed zone that has one, wherever the pages put it.
// The others answer by provider ID only.
func (i *Instances) ListInstances(ctx context.Context, pageToken string) ([]provider.InstanceRecord, string, error) {
	call := i.g.ComputeServices().GA.Instances.AggregatedList(i.g.ProjectID()).MaxResults(pageSize).Context(ctx)
	if pageToken != "" {
		call = call.PageToken(pageToken)
	}
	// Sent with the provider's compute.Service, past its RateLimiter: ask
	// cloudgate's as the generated client would.
	rl, key := gcerequests.Limiter(), &cloud.RateLimitKey{ProjectID: i.g.ProjectID(), Operation: "AggregatedList", Version: meta.VersionGA, Service: "Instances"}
	if err := rl.Accept(ctx, key); err != nil {
		return nil, "", fmt.Errorf("instances.aggregatedList: %w", err)
	}
	res, err := call.Do()
	rl.Observe(ctx, err, key)
	if err != nil {
		return nil, "", fmt.Errorf("instances.aggregatedList: %w", err)
	}
	rank := make(map[string]int, len(i.zones))
	for k, z := range i.zones {
		if _, ok := rank[z]; !ok {
			rank[z] = k
		}
	}
	scopes := make([]string, 0, len(res.Items))
	for s := range res.Items {
		scopes = append(scopes, s)
	}
	sort.Strings(scopes)
	var page []provider.InstanceRecord
	for _, s := range scopes {
		for _, in := range res.Items[s].Instances {
			zone := path.Base(in.Zone)
			md, err := metadata(gce.ProviderName+"://"+i.g.ProjectID()+"/"+zone+"/"+in.Name, zone, in)
			if err != nil {
				// No network interface: the provider's InstanceMetadata fails for it while its
				// InstanceExists answers, which a record cannot say; a batch answers it.
				continue
			}
			rec := provider.InstanceRecord{Metadata: *md}
			if r, ok := rank[zone]; ok {
				rec.NodeName, rec.NameRank = in.Name, r
			}
			page = append(page, rec)
		}
	}
	return page, res.NextPageToken, nil
}

// metadata is the provider's InstanceMetadata answer for an instance it got by providerID.
func metadata(providerID, zone string, in *compute.Instance) (*cloudprovider.InstanceMetadata, error) {
	region, err := gce.GetGCERegion(zone)
	if err != nil {
		return nil, err
	}
	addrs, err := nodeAddresses(in)
	if err != nil {
		return nil, err
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID: providerID, InstanceType: path.Base(in.MachineType),
		NodeAddresses: addrs, Zone: zone, Region: region,
	}, nil
}

// nodeAddresses follows the provider's nodeAddressesFromInstance.
func nodeAddresses(in *compute.Instance) ([]v1.NodeAddress, error) {
	if len(in.NetworkInterfaces) < 1 {
		// %q of the ID as a rune: the text the provider's own %q of a uint64 prints.
		return nil, fmt.Errorf("could not find network interfaces for instanceID %q", rune(in.Id))
	}
	addrs := []v1.NodeAddress{}
	for _, nic := range in.NetworkInterfaces {
		addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalIP, Address: nic.NetworkIP})
		for _, ac := range nic.AccessConfigs {
			addrs = append(addrs, v1.NodeAddress{Type: v1.NodeExternalIP, Address: ac.NatIP})
		}
		ipv6 := nic.Ipv6Address
		if ipv6 == "" && nic.Ipv6AccessType == "EXTERNAL" {
			for _, r := range nic.Ipv6AccessConfigs {
				ipv6 = r.ExternalIpv6
			}
		}
		if ipv6 != "" {
			addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ipv6})
		}
	}
	return addrs, nil
}

// canonical is the provider's canonicalizeInstanceName: the name up to the first '.'.
func canonical(name string) string {
	if i := strings.IndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return name
}
