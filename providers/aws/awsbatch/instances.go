package awsbatch

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	lru "github.com/hashicorp/golang-lru/v2"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	awsv1 "k8s.io/cloud-provider-aws/pkg/providers/v1"
	"k8s.io/cloud-provider-aws/pkg/providers/v1/iface"
	"k8s.io/cloud-provider-aws/pkg/providers/v1/variant"
	netutils "k8s.io/utils/net"

	"github.com/cloudgate/cloudgate/provider"
)

const (
	// MaxBatchSize is the most nodes one BatchInstanceStatus call takes. The
	// adapter looks instances up with the instance-id filter rather than the
	// InstanceId list: EC2 fails a whole InstanceId request when one ID does
	// not exist (InvalidInstanceID.NotFound), while a filter just leaves it
	// out. EC2 allows 200 filter values per request (the provider's own
	// filterNodeLimit comment cites the same limit), so a batch is at most
	// 200 nodes: one DescribeInstances call. (The provider's own batcher
	// sends up to 500 IDs in the InstanceId list and, when one is missing,
	// retries every ID alone.)
	MaxBatchSize = 200
	// nameChunk is how many node names one private-dns-name lookup carries:
	// the provider's filterNodeLimit (150), leaving room under the 200-value
	// limit for the five instance-state-name values.
	nameChunk = 150
	// pageSize is the MaxResults of list and filter calls (EC2's maximum).
	pageSize = 1000
	// rbnPrefix marks resource-based node names (i-0123...): the provider
	// takes the instance ID from the name itself.
	rbnPrefix = "i-"
)

// ec2InstanceID is the form EC2 accepts in an InstanceId list: i- and 8 or 17
// hex digits.
var ec2InstanceID = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)

// aliveStates are the states the provider's node-name lookups accept (all
// but terminated).
var aliveStates = []string{
	string(ec2types.InstanceStateNamePending), string(ec2types.InstanceStateNameRunning),
	string(ec2types.InstanceStateNameShuttingDown), string(ec2types.InstanceStateNameStopping),
	string(ec2types.InstanceStateNameStopped),
}

// ec2API is the part of the EC2 client the adapter calls.
type ec2API interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeAvailabilityZones(context.Context, *ec2.DescribeAvailabilityZonesInput, ...func(*ec2.Options)) (*ec2.DescribeAvailabilityZonesOutput, error)
	DescribeInstanceTopology(context.Context, *ec2.DescribeInstanceTopologyInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTopologyOutput, error)
}

// Instances is the AWS provider's own InstancesV2 with two more methods:
// provider.BatchInstances and provider.InstanceLister. InstanceMetadata,
// InstanceExists and InstanceShutdown are the provider's, unchanged; the
// batch and list answers are built from the same EC2 fields by the same
// rules (see the package comment), which the differential test checks.
type Instances struct {
	cloudprovider.InstancesV2 // the unmodified provider's

	up       cloudprovider.InstancesV2
	ec2      ec2API
	region   string
	set      *settings
	topology awsv1.InstanceTopologyManager

	zonesMu sync.Mutex
	zoneIDs map[string]string // zone name -> zone ID, filled once (zones do not change)

	// networkNodes holds each instance's network-node labels from its
	// topology answer: the list describes every instance on every refresh,
	// and without it would send a DescribeInstanceTopology per listed
	// instance of a supported type each time, where the provider asks once
	// per Node (at initialisation: the Node then carries the labels).
	networkNodes *lru.Cache[string, []string]

	// legacyMu guards the list's legacy-tag phase: how many more walks
	// skip it (0: the next one reads it), and whether the phase being read
	// has listed an instance so far.
	legacyMu    sync.Mutex
	legacySkips int
	legacyFound bool
}

// LegacyRecheck: while the last legacy-tag phase found no instance, a list
// walk reads that phase only every LegacyRecheck-th time (every 30 minutes
// at the default batch.listInterval of 5 minutes). The list is a prefetch:
// a legacy-tagged instance launched in between is looked up by its own
// node's call, as any instance the list has not (yet) seen, so no answer is
// older or missing; it costs one request for such an instance instead of a
// page on every walk of a cluster that has none (the common case).
const LegacyRecheck = 6

// networkNodesSize bounds networkNodes: an instance's entry is a few
// strings, and a cluster this large is beyond any measured here.
const networkNodesSize = 100_000

var (
	_ cloudprovider.InstancesV2 = (*Instances)(nil)
	_ provider.BatchInstances   = (*Instances)(nil)
	_ provider.InstanceLister   = (*Instances)(nil)
)

func newInstances(up cloudprovider.InstancesV2, client ec2API, region string, s *settings) *Instances {
	return &Instances{
		InstancesV2: up,
		up:          up,
		ec2:         client,
		region:      region,
		set:         s,
		topology:    awsv1.NewInstanceTopologyManager(topologyEC2{api: client}, &s.cfg),
		networkNodes: func() *lru.Cache[string, []string] {
			c, _ := lru.New[string, []string](networkNodesSize) // errs only on a size <= 0
			return c
		}(),
	}
}

// MaxBatchSize implements provider.BatchInstances.
func (a *Instances) MaxBatchSize() int { return MaxBatchSize }

// BatchInstanceStatus implements provider.BatchInstances: one
// DescribeInstances call (instance-id filter) for the nodes with a provider
// ID or a resource-based name, one more (private-dns-name filter, live
// states, cluster tag) per 150 other node names. Per-node answers follow the
// provider's: a missing instance is InstanceNotFound; a terminated one
// answers its metadata and Deleted; a stopped one is Shutdown. A failed EC2
// call fails the batch.
func (a *Instances) BatchInstanceStatus(ctx context.Context, nodes []*v1.Node) ([]provider.InstanceStatus, error) {
	if len(nodes) > MaxBatchSize {
		return nil, fmt.Errorf("%s: batch of %d nodes exceeds MaxBatchSize %d", Name, len(nodes), MaxBatchSize)
	}
	out := make([]provider.InstanceStatus, len(nodes))
	var ids, names []string
	idOf := make([]string, len(nodes)) // "" : looked up by name
	for i, n := range nodes {
		switch {
		case n.Spec.ProviderID != "":
			id, err := awsv1.KubernetesInstanceID(n.Spec.ProviderID).MapToAWSInstanceID()
			if err != nil {
				out[i].Err = fmt.Errorf("failed to map provider ID to AWS instance ID for node %s: %w", n.Name, err)
				continue
			}
			if variant.GetVariant(string(id)) != nil {
				out[i] = a.viaUpstream(ctx, n)
				continue
			}
			idOf[i] = string(id)
		case strings.HasPrefix(n.Name, rbnPrefix):
			idOf[i], _, _ = strings.Cut(n.Name, ".")
		default:
			names = append(names, n.Name)
			continue
		}
		// The provider asks EC2 by InstanceId, which refuses a malformed ID
		// (InvalidInstanceID.Malformed: an error, not "not found"); the
		// instance-id filter would just not match it.
		if !ec2InstanceID.MatchString(idOf[i]) {
			out[i].Err = fmt.Errorf("%s: node %s: %q is not an EC2 instance ID (EC2 answers InvalidInstanceID.Malformed)", Name, n.Name, idOf[i])
			idOf[i] = ""
			continue
		}
		ids = append(ids, idOf[i])
	}

	byID, err := a.describe(ctx, []ec2types.Filter{{Name: aws.String("instance-id"), Values: dedupe(ids)}}, len(ids) == 0)
	if err != nil {
		return nil, err
	}
	byName, err := a.lookupNames(ctx, dedupe(names))
	if err != nil {
		return nil, err
	}

	for i, n := range nodes {
		if out[i].Err != nil || out[i].Metadata != nil {
			continue
		}
		var inst *ec2types.Instance
		if id := idOf[i]; id != "" {
			inst = byID[id]
		} else {
			found := byName[n.Name]
			if len(found) > 1 {
				out[i].Err = fmt.Errorf("getInstanceByNodeName failed for %q with %q", n.Name, fmt.Sprintf("multiple instances found for name: %s", n.Name))
				continue
			}
			if len(found) == 1 {
				inst = found[0]
			}
		}
		if inst == nil {
			out[i].Err = cloudprovider.InstanceNotFound
			continue
		}
		md, err := a.metadata(ctx, n.Spec.ProviderID, inst, n.Labels)
		if err != nil {
			return nil, err
		}
		out[i] = provider.InstanceStatus{Metadata: md}
		if inst.State == nil || inst.State.Name == ec2types.InstanceStateNameTerminated {
			out[i].Deleted = true
		} else {
			out[i].Shutdown = inst.State.Name == ec2types.InstanceStateNameStopped
		}
	}
	return out, nil
}

// viaUpstream answers a node the adapter does not batch (a variant such as a
// Fargate pod "node") with the provider's own three calls.
func (a *Instances) viaUpstream(ctx context.Context, n *v1.Node) provider.InstanceStatus {
	exists, err := a.up.InstanceExists(ctx, n)
	if err != nil {
		return provider.InstanceStatus{Err: err}
	}
	if !exists {
		return provider.InstanceStatus{Err: cloudprovider.InstanceNotFound}
	}
	shutdown, err := a.up.InstanceShutdown(ctx, n)
	if err != nil {
		return provider.InstanceStatus{Err: err}
	}
	md, err := a.up.InstanceMetadata(ctx, n)
	if err != nil {
		return provider.InstanceStatus{Err: err}
	}
	return provider.InstanceStatus{Metadata: md, Shutdown: shutdown}
}

// lookupNames finds instances by private DNS name as the provider's
// findInstanceByNodeName does: live states only, the cluster's instances only.
func (a *Instances) lookupNames(ctx context.Context, names []string) (map[string][]*ec2types.Instance, error) {
	out := map[string][]*ec2types.Instance{}
	for start := 0; start < len(names); start += nameChunk {
		chunk := names[start:min(start+nameChunk, len(names))]
		found, err := a.describe(ctx, []ec2types.Filter{
			{Name: aws.String("private-dns-name"), Values: chunk},
			{Name: aws.String("instance-state-name"), Values: aliveStates},
		}, false)
		if err != nil {
			return nil, err
		}
		for _, inst := range found {
			if a.hasClusterTag(inst.Tags) {
				name := aws.ToString(inst.PrivateDnsName)
				out[name] = append(out[name], inst)
			}
		}
	}
	return out, nil
}

// describe pages through DescribeInstances with the given filters and
// returns the instances by ID.
func (a *Instances) describe(ctx context.Context, filters []ec2types.Filter, skip bool) (map[string]*ec2types.Instance, error) {
	out := map[string]*ec2types.Instance{}
	if skip {
		return out, nil
	}
	in := &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(pageSize)}
	for {
		resp, err := a.ec2.DescribeInstances(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("%s: DescribeInstances: %w", Name, err)
		}
		for r := range resp.Reservations {
			for i := range resp.Reservations[r].Instances {
				inst := &resp.Reservations[r].Instances[i]
				if id := aws.ToString(inst.InstanceId); id != "" {
					out[id] = inst
				}
			}
		}
		if aws.ToString(resp.NextToken) == "" {
			return out, nil
		}
		in.NextToken = resp.NextToken
	}
}

// hasClusterTag is the provider's awsTagging.hasClusterTag.
func (a *Instances) hasClusterTag(tags []ec2types.Tag) bool {
	key := awsv1.TagNameKubernetesClusterPrefix + a.set.clusterID
	for _, t := range tags {
		k := aws.ToString(t.Key)
		if (k == awsv1.TagNameKubernetesClusterLegacy && aws.ToString(t.Value) == a.set.clusterID) || k == key {
			return true
		}
	}
	return false
}

// metadata is the provider's InstanceMetadata for an EC2 instance already
// described: the node's provider ID (or aws:///zone/id), the instance type,
// the addresses, the zone and Region, and the zone-ID and network-topology
// labels the node does not carry yet.
func (a *Instances) metadata(ctx context.Context, providerID string, inst *ec2types.Instance, existing map[string]string) (*cloudprovider.InstanceMetadata, error) {
	id := aws.ToString(inst.InstanceId)
	zone := ""
	if inst.Placement != nil {
		zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	if providerID == "" {
		providerID = ProviderIDPrefix + "/" + zone + "/" + id
	}
	addrs, err := nodeAddresses(inst, a.set.families)
	if err != nil {
		return nil, fmt.Errorf("failed to get node addresses for instance %s: %w", id, err)
	}
	labels, err := a.additionalLabels(ctx, zone, id, string(inst.InstanceType), existing)
	if err != nil {
		return nil, err
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:       providerID,
		InstanceType:     string(inst.InstanceType),
		NodeAddresses:    addrs,
		Zone:             zone,
		Region:           a.region,
		AdditionalLabels: labels,
	}, nil
}

// additionalLabels is the provider's getAdditionalLabels, with the
// provider's own topology manager.
func (a *Instances) additionalLabels(ctx context.Context, zone, id, instanceType string, existing map[string]string) (map[string]string, error) {
	labels := map[string]string{}
	if _, ok := existing[awsv1.LabelZoneID]; !ok {
		zoneID, err := a.zoneID(ctx, zone)
		if err != nil {
			return nil, err
		}
		labels[awsv1.LabelZoneID] = zoneID
	}
	if _, ok := existing[awsv1.LabelNetworkNodePrefix+"1"]; !ok {
		nodes, known := a.networkNodes.Get(id)
		if !known {
			topo, err := a.topology.GetNodeTopology(ctx, instanceType, a.region, id)
			switch {
			case err != nil && a.topology.DoesInstanceTypeRequireResponse(instanceType):
				return nil, fmt.Errorf("%s: instance topology of %s: %w", Name, id, err)
			case err == nil && topo != nil:
				nodes = slices.Clone(topo.NetworkNodes)
				a.networkNodes.Add(id, nodes)
			}
		}
		for i, node := range nodes {
			labels[awsv1.LabelNetworkNodePrefix+strconv.Itoa(i+1)] = node
		}
	}
	return labels, nil
}

// zoneID maps a zone name to its ID from one DescribeAvailabilityZones
// answer, asked again only for a zone it does not know (as the provider's
// zoneCache).
func (a *Instances) zoneID(ctx context.Context, zone string) (string, error) {
	a.zonesMu.Lock()
	defer a.zonesMu.Unlock()
	if id, ok := a.zoneIDs[zone]; ok {
		return id, nil
	}
	resp, err := a.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		return "", fmt.Errorf("error describe availability zones: %q", err)
	}
	if a.zoneIDs == nil {
		a.zoneIDs = map[string]string{}
	}
	for _, z := range resp.AvailabilityZones {
		a.zoneIDs[aws.ToString(z.ZoneName)] = aws.ToString(z.ZoneId)
	}
	id, ok := a.zoneIDs[zone]
	if !ok {
		return "", fmt.Errorf("Could not get zone ID from zone name %s", zone)
	}
	return id, nil
}

// ListInstances implements provider.InstanceLister: one page of the
// cluster's instances (DescribeInstances filtered by the cluster tag, 1,000
// per page). Instances tagged the legacy way (KubernetesCluster=<id>) are
// listed after the others, as the provider recognises both. NodeName is the
// private DNS name, the name the provider looks nodes up by, and is left
// empty for a terminated instance, which the provider's name lookups skip.
// Every record's NameRank is 0: a name two live instances share answers
// nothing from the list, and the provider's own lookup fails it ("multiple
// instances found").
// The additional labels are those of a node that has none yet.
func (a *Instances) ListInstances(ctx context.Context, pageToken string) ([]provider.InstanceRecord, string, error) {
	phase, token, err := decodeToken(pageToken)
	if err != nil {
		return nil, "", err
	}
	f := ec2types.Filter{Name: aws.String("tag-key"), Values: []string{awsv1.TagNameKubernetesClusterPrefix + a.set.clusterID}}
	if phase == 1 {
		f = ec2types.Filter{Name: aws.String("tag:" + awsv1.TagNameKubernetesClusterLegacy), Values: []string{a.set.clusterID}}
	}
	// Terminated instances are not listed: EC2 describes one for about an
	// hour after it is gone, a page's worth of a large cluster's churn, and
	// the list would hold each. A lookup of one misses the list and goes to
	// a batch call, which answers it Deleted as before.
	alive := ec2types.Filter{Name: aws.String("instance-state-name"), Values: aliveStates}
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{f, alive}, MaxResults: aws.Int32(pageSize)}
	if token != "" {
		in.NextToken = aws.String(token)
	}
	resp, err := a.ec2.DescribeInstances(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("%s: DescribeInstances: %w", Name, err)
	}
	var page []provider.InstanceRecord
	newKey := awsv1.TagNameKubernetesClusterPrefix + a.set.clusterID
	for r := range resp.Reservations {
		for i := range resp.Reservations[r].Instances {
			inst := &resp.Reservations[r].Instances[i]
			if phase == 1 && hasTagKey(inst.Tags, newKey) {
				continue // listed in phase 0
			}
			md, err := a.metadata(ctx, "", inst, nil)
			if err != nil {
				return nil, "", err
			}
			rec := provider.InstanceRecord{Metadata: *md}
			if inst.State == nil || inst.State.Name == ec2types.InstanceStateNameTerminated {
				rec.Deleted = true
			} else {
				rec.NodeName = aws.ToString(inst.PrivateDnsName)
				rec.Shutdown = inst.State.Name == ec2types.InstanceStateNameStopped
			}
			page = append(page, rec)
		}
	}
	next := aws.ToString(resp.NextToken)
	switch {
	case next != "":
		if phase == 1 && len(page) > 0 {
			a.legacyListed(true, false)
		}
		return page, encodeToken(phase, next), nil
	case phase == 0:
		if a.legacyDue() {
			return page, encodeToken(1, ""), nil
		}
		return page, "", nil
	default:
		a.legacyListed(len(page) > 0, true)
		return page, "", nil
	}
}

// legacyDue reports whether this walk reads the legacy-tag phase: the
// first walk does, and after a phase that listed an instance the next one;
// after one that listed none, every LegacyRecheck-th.
func (a *Instances) legacyDue() bool {
	a.legacyMu.Lock()
	defer a.legacyMu.Unlock()
	if a.legacySkips > 0 {
		a.legacySkips--
		return false
	}
	a.legacyFound = false
	return true
}

// legacyListed records a legacy-tag page: found is whether it listed an
// instance, last whether it ended the phase.
func (a *Instances) legacyListed(found, last bool) {
	a.legacyMu.Lock()
	defer a.legacyMu.Unlock()
	a.legacyFound = a.legacyFound || found
	if last && !a.legacyFound {
		a.legacySkips = LegacyRecheck - 1
	}
}

func hasTagKey(tags []ec2types.Tag, key string) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == key {
			return true
		}
	}
	return false
}

// Page tokens carry the phase (0: cluster tag key, 1: legacy tag) and EC2's token.
func encodeToken(phase int, ec2Token string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(phase) + ":" + ec2Token))
}

func decodeToken(tok string) (int, string, error) {
	if tok == "" {
		return 0, "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err == nil {
		if p, rest, ok := strings.Cut(string(b), ":"); ok && (p == "0" || p == "1") {
			return int(p[0] - '0'), rest, nil
		}
	}
	return 0, "", fmt.Errorf("%s: ListInstances: page token %q was not returned by ListInstances: start again with \"\"", Name, tok)
}

// nodeAddresses is the provider's getInstanceNodeAddress: per IP family in
// the configured order, IPv4 (in-use interfaces by device index, their
// private addresses; then the public IP, the private DNS name as InternalDNS
// and Hostname, the public DNS name) and IPv6 (the first address of each
// in-use interface).
func nodeAddresses(inst *ec2types.Instance, families []string) ([]v1.NodeAddress, error) {
	var out []v1.NodeAddress
	id := aws.ToString(inst.InstanceId)
	nics := append([]ec2types.InstanceNetworkInterface(nil), inst.NetworkInterfaces...)
	for _, family := range families {
		switch family {
		case "ipv4":
			addrs := []v1.NodeAddress{}
			// The provider sorts the interfaces in place with sort.Slice (not
			// stable), attached ones first by device index.
			sort.Slice(nics, func(i, j int) bool {
				if nics[i].Attachment == nil {
					return false
				}
				if nics[j].Attachment == nil {
					return true
				}
				return aws.ToInt32(nics[i].Attachment.DeviceIndex) < aws.ToInt32(nics[j].Attachment.DeviceIndex)
			})
			for _, nic := range nics {
				if nic.Status != ec2types.NetworkInterfaceStatusInUse {
					continue
				}
				for _, p := range nic.PrivateIpAddresses {
					if s := aws.ToString(p.PrivateIpAddress); s != "" {
						ip := netutils.ParseIPSloppy(s)
						if ip == nil {
							return nil, fmt.Errorf("EC2 instance had invalid private address: %s (%q)", id, s)
						}
						addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
					}
				}
			}
			if s := aws.ToString(inst.PublicIpAddress); s != "" {
				ip := netutils.ParseIPSloppy(s)
				if ip == nil {
					return nil, fmt.Errorf("EC2 instance had invalid public address: %s (%s)", id, s)
				}
				addrs = append(addrs, v1.NodeAddress{Type: v1.NodeExternalIP, Address: ip.String()})
			}
			if s := aws.ToString(inst.PrivateDnsName); s != "" {
				addrs = append(addrs, v1.NodeAddress{Type: v1.NodeInternalDNS, Address: s}, v1.NodeAddress{Type: v1.NodeHostName, Address: s})
			}
			if s := aws.ToString(inst.PublicDnsName); s != "" {
				addrs = append(addrs, v1.NodeAddress{Type: v1.NodeExternalDNS, Address: s})
			}
			out = append(out, addrs...)
		case "ipv6":
			for _, nic := range nics {
				if nic.Status != ec2types.NetworkInterfaceStatusInUse || len(nic.Ipv6Addresses) == 0 {
					continue
				}
				s := aws.ToString(nic.Ipv6Addresses[0].Ipv6Address)
				ip := net.ParseIP(s)
				if ip == nil {
					return nil, fmt.Errorf("EC2 instance had invalid IPv6 address: %s (%q)", id, s)
				}
				out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip.String()})
			}
		}
	}
	return out, nil
}

func dedupe(xs []string) []string {
	seen := make(map[string]bool, len(xs))
	out := xs[:0:0]
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// topologyEC2 gives the provider's topology manager the one EC2 call it
// makes. The embedded interface is nil: the manager calls nothing else.
type topologyEC2 struct {
	iface.EC2
	api ec2API
}

func (t topologyEC2) DescribeInstanceTopology(ctx context.Context, in *ec2.DescribeInstanceTopologyInput, _ ...func(*ec2.Options)) ([]ec2types.InstanceTopology, error) {
	var out []ec2types.InstanceTopology
	p := ec2.NewDescribeInstanceTopologyPaginator(t.api, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Instances...)
	}
	return out, nil
}
