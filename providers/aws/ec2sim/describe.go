package ec2sim

import (
	"encoding/base64"
	"encoding/xml"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// EC2 limits the simulation enforces as EC2 does.
const (
	// MaxFilterValues is the most values one request may give across its
	// filters (EC2 answers FilterLimitExceeded beyond it; the AWS cloud
	// provider's filterNodeLimit comment cites the same 200).
	MaxFilterValues = 200
	// MinMaxResults and MaxMaxResults bound DescribeInstances' MaxResults.
	MinMaxResults = 5
	MaxMaxResults = 1000
	// MaxTopologyInstanceIDs bounds DescribeInstanceTopology's InstanceId list
	// (the SDK documents "Maximum 100 explicitly specified instance IDs").
	MaxTopologyInstanceIDs = 100
)

var instanceIDPattern = regexp.MustCompile(`^i-([0-9a-f]{8}|[0-9a-f]{17})$`)

// filter is one Filter.N of a request.
type filter struct {
	name   string
	values []string
}

// list reads a flat query list: prefix.1, prefix.2, ... in index order.
func list(form url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[prefix+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

func filters(form url.Values) ([]filter, *apiError) {
	return filtersWith(form, knownFilter)
}

// filtersWith parses Filter.N, each name checked by known.
func filtersWith(form url.Values, known func(string) bool) ([]filter, *apiError) {
	var out []filter
	total := 0
	for i := 1; ; i++ {
		p := "Filter." + strconv.Itoa(i)
		name, ok := form[p+".Name"]
		if !ok {
			break
		}
		f := filter{name: name[0], values: list(form, p+".Value")}
		if !known(f.name) {
			return nil, badRequest("InvalidParameterValue", "The filter '%s' is invalid", f.name)
		}
		total += len(f.values)
		out = append(out, f)
	}
	if total > MaxFilterValues {
		return nil, badRequest("FilterLimitExceeded", "The maximum number of filter values specified on a single call is %d", MaxFilterValues)
	}
	return out, nil
}

func knownFilter(name string) bool {
	switch name {
	case "instance-id", "private-dns-name", "instance-state-name", "availability-zone", "instance-type", "vpc-id", "tag-key":
		return true
	}
	return strings.HasPrefix(name, "tag:")
}

// matches reports whether an instance passes every filter (AND of filters,
// OR of a filter's values).
func matches(in *Instance, fs []filter) bool {
	for _, f := range fs {
		var got []string
		switch {
		case f.name == "instance-id":
			got = []string{in.ID}
		case f.name == "private-dns-name":
			got = []string{in.PrivateDNSName}
		case f.name == "instance-state-name":
			got = []string{in.State}
		case f.name == "availability-zone":
			got = []string{in.Zone}
		case f.name == "instance-type":
			got = []string{in.Type}
		case f.name == "vpc-id":
			got = []string{in.VPCID}
		case f.name == "tag-key":
			for k := range in.Tags {
				got = append(got, k)
			}
		case strings.HasPrefix(f.name, "tag:"):
			if v, ok := in.Tags[strings.TrimPrefix(f.name, "tag:")]; ok {
				got = []string{v}
			}
		}
		if !anyMatch(got, f.values) {
			return false
		}
	}
	return true
}

// anyMatch compares with EC2's filter wildcards: * (any run) and ? (one character).
func anyMatch(got, want []string) bool {
	for _, w := range want {
		for _, g := range got {
			if wildcard(w, g) {
				return true
			}
		}
	}
	return false
}

func wildcard(pattern, s string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == s
	}
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	ok, _ := regexp.MatchString(re, s)
	return ok
}

func (s *Server) describeInstances(r *http.Request) (any, int, *apiError) {
	ids := list(r.Form, "InstanceId")
	fs, err := filters(r.Form)
	if err != nil {
		return nil, 0, err
	}
	s.countShape(r.Form, ids, fs)
	maxResults := 0
	if v := r.Form.Get("MaxResults"); v != "" {
		if len(ids) > 0 {
			return nil, 0, badRequest("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
		}
		n, perr := strconv.Atoi(v)
		if perr != nil || n < MinMaxResults || n > MaxMaxResults {
			return nil, 0, badRequest("InvalidParameterValue", "Value ( %s ) for parameter maxResults is invalid. Expecting a value between %d and %d.", v, MinMaxResults, MaxMaxResults)
		}
		maxResults = n
	}

	s.mu.RLock()
	defer s.mu.RUnlock()
	now := s.cfg.Clock()
	var candidates []*Instance
	if len(ids) > 0 {
		var missing []string
		seen := map[string]bool{}
		for _, id := range ids {
			if !instanceIDPattern.MatchString(id) {
				return nil, 0, badRequest("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
			}
			in, ok := s.instances[id]
			if !ok || !s.visible(id, now) {
				missing = append(missing, id)
				continue
			}
			if !seen[id] {
				seen[id] = true
				candidates = append(candidates, in)
			}
		}
		if len(missing) == 1 {
			return nil, 0, badRequest("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
		}
		if len(missing) > 1 {
			return nil, 0, badRequest("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
		}
		sort.Slice(candidates, func(i, j int) bool { return candidates[i].ID < candidates[j].ID })
	} else {
		for _, id := range sortedIDs(s.instances) {
			if s.visible(id, now) {
				candidates = append(candidates, s.instances[id])
			}
		}
	}

	// NextToken is the ID of the last instance of the previous page.
	after := ""
	if tok := r.Form.Get("NextToken"); tok != "" {
		b, derr := base64.RawURLEncoding.DecodeString(tok)
		if derr != nil || !instanceIDPattern.Match(b) {
			return nil, 0, badRequest("InvalidParameterValue", "The specified token %s is invalid", tok)
		}
		after = string(b)
	}
	resp := describeInstancesResponse{XMLNS: Namespace, RequestID: s.requestID()}
	n := 0
	for _, in := range candidates {
		if after != "" && in.ID <= after {
			continue
		}
		if !matches(in, fs) {
			continue
		}
		if maxResults > 0 && n == maxResults {
			resp.NextToken = base64.RawURLEncoding.EncodeToString([]byte(resp.Reservations[n-1].Instances[0].InstanceID))
			break
		}
		resp.Reservations = append(resp.Reservations, reservationXML{
			ReservationID: "r-" + strings.TrimPrefix(in.ID, "i-"),
			OwnerID:       "123456789012",
			Instances:     []instanceXML{toXML(in)},
		})
		n++
	}
	return resp, n, nil
}

func toXML(in *Instance) instanceXML {
	x := instanceXML{
		InstanceID:      in.ID,
		State:           stateXML{Code: stateCodes[in.State], Name: in.State},
		PrivateDNSName:  in.PrivateDNSName,
		DNSName:         in.PublicDNSName,
		InstanceType:    in.Type,
		Placement:       placementXML{AvailabilityZone: in.Zone},
		SubnetID:        in.SubnetID,
		VPCID:           in.VPCID,
		PrivateIP:       in.PrivateIP,
		PublicIP:        in.PublicIP,
		SourceDestCheck: !in.SourceDestCheckDisabled,
	}
	for _, g := range in.SecurityGroupIDs {
		x.Groups = append(x.Groups, groupRefXML{ID: g})
	}
	keys := make([]string, 0, len(in.Tags))
	for k := range in.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		x.Tags = append(x.Tags, tagXML{Key: k, Value: in.Tags[k]})
	}
	for i, ni := range in.Interfaces {
		nx := nicXML{
			ID:         "eni-" + strings.TrimPrefix(in.ID, "i-") + strconv.Itoa(i),
			Status:     ni.Status,
			Attachment: &attachmentXML{DeviceIndex: ni.DeviceIndex, Status: "attached"},
		}
		for j, ip := range ni.PrivateIPs {
			nx.PrivateIPs = append(nx.PrivateIPs, privateIPXML{Address: ip, Primary: j == 0})
		}
		for _, ip := range ni.IPv6Addresses {
			nx.IPv6 = append(nx.IPv6, ipv6XML{Address: ip})
		}
		x.Interfaces = append(x.Interfaces, nx)
	}
	return x
}

func (s *Server) describeAvailabilityZones(r *http.Request) (any, int, *apiError) {
	names := list(r.Form, "ZoneName")
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	resp := describeZonesResponse{XMLNS: Namespace, RequestID: s.requestID()}
	for _, z := range s.cfg.Zones {
		if len(want) > 0 && !want[z.Name] {
			continue
		}
		typ := z.Type
		if typ == "" {
			typ = "availability-zone"
		}
		resp.Zones = append(resp.Zones, zoneXML{
			ZoneName: z.Name, ZoneID: z.ID, ZoneType: typ, ZoneState: "available", RegionName: s.cfg.Region,
		})
	}
	return resp, len(resp.Zones), nil
}

func (s *Server) describeInstanceTopology(r *http.Request) (any, int, *apiError) {
	if !s.cfg.Topology {
		return nil, 0, badRequest("UnsupportedOperation", "The functionality you requested is not available in this region.")
	}
	ids := list(r.Form, "InstanceId")
	if len(ids) > MaxTopologyInstanceIDs {
		return nil, 0, badRequest("InvalidParameterValue", "You can specify up to %d instance IDs", MaxTopologyInstanceIDs)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	resp := describeTopologyResponse{XMLNS: Namespace, RequestID: s.requestID()}
	for _, id := range ids {
		in, ok := s.instances[id]
		if !ok || len(in.NetworkNodes) == 0 || in.State != StateRunning {
			continue
		}
		t := topologyXML{InstanceID: in.ID, InstanceType: in.Type, AvailabilityZone: in.Zone}
		for _, n := range in.NetworkNodes {
			t.NetworkNodes = append(t.NetworkNodes, itemXML{Value: n})
		}
		resp.Instances = append(resp.Instances, t)
	}
	return resp, len(resp.Instances), nil
}

// The XML answers, element names as the SDK's ec2query deserializers read them.

type describeInstancesResponse struct {
	XMLName      xml.Name         `xml:"DescribeInstancesResponse"`
	XMLNS        string           `xml:"xmlns,attr"`
	RequestID    string           `xml:"requestId"`
	Reservations []reservationXML `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

type reservationXML struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []instanceXML `xml:"instancesSet>item"`
}

type instanceXML struct {
	InstanceID      string        `xml:"instanceId"`
	State           stateXML      `xml:"instanceState"`
	PrivateDNSName  string        `xml:"privateDnsName"`
	DNSName         string        `xml:"dnsName,omitempty"`
	InstanceType    string        `xml:"instanceType"`
	Placement       placementXML  `xml:"placement"`
	SubnetID        string        `xml:"subnetId,omitempty"`
	VPCID           string        `xml:"vpcId,omitempty"`
	PrivateIP       string        `xml:"privateIpAddress,omitempty"`
	PublicIP        string        `xml:"ipAddress,omitempty"`
	SourceDestCheck bool          `xml:"sourceDestCheck"`
	Tags            []tagXML      `xml:"tagSet>item"`
	Interfaces      []nicXML      `xml:"networkInterfaceSet>item"`
	Groups          []groupRefXML `xml:"groupSet>item"`
}

type groupRefXML struct {
	ID string `xml:"groupId"`
}

type stateXML struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

type placementXML struct {
	AvailabilityZone string `xml:"availabilityZone"`
}

type tagXML struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type nicXML struct {
	ID         string         `xml:"networkInterfaceId"`
	Status     string         `xml:"status"`
	Attachment *attachmentXML `xml:"attachment"`
	PrivateIPs []privateIPXML `xml:"privateIpAddressesSet>item"`
	IPv6       []ipv6XML      `xml:"ipv6AddressesSet>item"`
}

type attachmentXML struct {
	DeviceIndex int    `xml:"deviceIndex"`
	Status      string `xml:"status"`
}

type privateIPXML struct {
	Address string `xml:"privateIpAddress"`
	Primary bool   `xml:"primary"`
}

type ipv6XML struct {
	Address string `xml:"ipv6Address"`
}

type describeZonesResponse struct {
	XMLName   xml.Name  `xml:"DescribeAvailabilityZonesResponse"`
	XMLNS     string    `xml:"xmlns,attr"`
	RequestID string    `xml:"requestId"`
	Zones     []zoneXML `xml:"availabilityZoneInfo>item"`
}

type zoneXML struct {
	ZoneName   string `xml:"zoneName"`
	ZoneID     string `xml:"zoneId"`
	ZoneType   string `xml:"zoneType"`
	ZoneState  string `xml:"zoneState"`
	RegionName string `xml:"regionName"`
}

type describeTopologyResponse struct {
	XMLName   xml.Name      `xml:"DescribeInstanceTopologyResponse"`
	XMLNS     string        `xml:"xmlns,attr"`
	RequestID string        `xml:"requestId"`
	Instances []topologyXML `xml:"instanceSet>item"`
}

type topologyXML struct {
	InstanceID       string    `xml:"instanceId"`
	InstanceType     string    `xml:"instanceType"`
	AvailabilityZone string    `xml:"availabilityZone"`
	NetworkNodes     []itemXML `xml:"networkNodeSet>item"`
}

type itemXML struct {
	Value string `xml:",chardata"`
}

// DescribeShape counts the DescribeInstances requests of one shape (see
// [Server.DescribeShapes]).
type DescribeShape struct {
	Requests int64
	// IDs are the instance IDs the requests named (InstanceId.N and
	// instance-id filter values): IDs/Requests is the mean batch.
	IDs int64
}

// DescribeShapes returns the DescribeInstances requests received so far by
// shape: which parameters they carried ("InstanceId", "filter:NAME,...",
// tag filters as "tag:*", "+paged" when MaxResults or NextToken was
// given). A benchmark tells the callers apart by it: a by-ID lookup, a
// filtered batch, a paged list.
func (s *Server) DescribeShapes() map[string]DescribeShape {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return maps.Clone(s.shapes)
}

func (s *Server) countShape(form url.Values, ids []string, fs []filter) {
	var parts []string
	n := int64(len(ids))
	if len(ids) > 0 {
		parts = append(parts, "InstanceId")
	}
	var names []string
	for _, f := range fs {
		name := f.name
		if strings.HasPrefix(name, "tag:") {
			name = "tag:*"
		}
		if f.name == "instance-id" {
			n += int64(len(f.values))
		}
		names = append(names, name)
	}
	if len(names) > 0 {
		slices.Sort(names)
		parts = append(parts, "filter:"+strings.Join(names, ","))
	}
	if len(parts) == 0 {
		parts = append(parts, "all")
	}
	key := strings.Join(parts, " ")
	if form.Get("MaxResults") != "" || form.Get("NextToken") != "" {
		key += " +paged"
	}
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st := s.shapes[key]
	st.Requests++
	st.IDs += n
	s.shapes[key] = st
}
