package ec2sim

import (
	"encoding/xml"
	"net/http"
	"sort"
	"strings"
)

// Subnet is one subnet of the simulated Region (Config.Subnets): what
// DescribeSubnets answers. The AWS provider's load balancer path looks for
// the cluster's subnets by VPC and cluster tag.
type Subnet struct {
	ID    string // subnet-0123456789abcdef0
	VPCID string // vpc-0123456789abcdef0
	Zone  string // us-east-1a; its zone ID comes from Config.Zones
	CIDR  string // 10.0.1.0/24
	Tags  map[string]string
}

// knownSubnetFilter: the DescribeSubnets filters the simulator answers;
// any other is EC2's InvalidParameterValue.
func knownSubnetFilter(name string) bool {
	switch name {
	case "subnet-id", "vpc-id", "availability-zone", "tag-key":
		return true
	}
	return strings.HasPrefix(name, "tag:")
}

func subnetMatches(sn *Subnet, fs []filter) bool {
	for _, f := range fs {
		var got []string
		switch {
		case f.name == "subnet-id":
			got = []string{sn.ID}
		case f.name == "vpc-id":
			got = []string{sn.VPCID}
		case f.name == "availability-zone":
			got = []string{sn.Zone}
		case f.name == "tag-key":
			for k := range sn.Tags {
				got = append(got, k)
			}
		case strings.HasPrefix(f.name, "tag:"):
			if v, ok := sn.Tags[strings.TrimPrefix(f.name, "tag:")]; ok {
				got = []string{v}
			}
		}
		if !anyMatch(got, f.values) {
			return false
		}
	}
	return true
}

// describeSubnets answers DescribeSubnets: the subnets named by SubnetId.N
// (an unknown one is InvalidSubnetID.NotFound, as EC2 answers), passing
// every filter, in Config order; no pagination (every answer fits a page).
func (s *Server) describeSubnets(r *http.Request) (any, int, *apiError) {
	fs, aerr := filtersWith(r.Form, knownSubnetFilter)
	if aerr != nil {
		return nil, 0, aerr
	}
	ids := list(r.Form, "SubnetId")
	byID := map[string]*Subnet{}
	for i := range s.cfg.Subnets {
		byID[s.cfg.Subnets[i].ID] = &s.cfg.Subnets[i]
	}
	for _, id := range ids {
		if byID[id] == nil {
			return nil, 0, badRequest("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	zoneID := map[string]string{}
	for _, z := range s.cfg.Zones {
		zoneID[z.Name] = z.ID
	}
	resp := describeSubnetsResponse{XMLNS: Namespace, RequestID: s.requestID()}
	for i := range s.cfg.Subnets {
		sn := &s.cfg.Subnets[i]
		if len(want) > 0 && !want[sn.ID] || !subnetMatches(sn, fs) {
			continue
		}
		x := subnetXML{ID: sn.ID, VPCID: sn.VPCID, Zone: sn.Zone, ZoneID: zoneID[sn.Zone], CIDR: sn.CIDR, State: "available"}
		keys := make([]string, 0, len(sn.Tags))
		for k := range sn.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			x.Tags = append(x.Tags, tagXML{Key: k, Value: sn.Tags[k]})
		}
		resp.Subnets = append(resp.Subnets, x)
	}
	return resp, len(resp.Subnets), nil
}

type describeSubnetsResponse struct {
	XMLName   xml.Name    `xml:"DescribeSubnetsResponse"`
	XMLNS     string      `xml:"xmlns,attr"`
	RequestID string      `xml:"requestId"`
	Subnets   []subnetXML `xml:"subnetSet>item"`
}

type subnetXML struct {
	ID     string   `xml:"subnetId"`
	VPCID  string   `xml:"vpcId"`
	Zone   string   `xml:"availabilityZone"`
	ZoneID string   `xml:"availabilityZoneId,omitempty"`
	CIDR   string   `xml:"cidrBlock"`
	State  string   `xml:"state"`
	Tags   []tagXML `xml:"tagSet>item"`
}

// RouteTable is one route table of the simulated Region
// (Config.RouteTables): what DescribeRouteTables answers. The AWS provider
// reads it to tell public subnets (a route to an internet gateway, igw-*)
// from private ones for internet-facing load balancers, and its route
// controller keeps a route per Node's pod CIDR in the table with the
// cluster's tag (CreateRoute, DeleteRoute: routes.go).
type RouteTable struct {
	ID    string // rtb-0123456789abcdef0
	VPCID string
	// Main marks the VPC's main table, which every subnet without an
	// explicit association uses.
	Main bool
	// SubnetIDs are the subnets explicitly associated with the table.
	SubnetIDs []string
	Routes    []Route
	Tags      map[string]string
}

// Route is one route of a RouteTable: to a gateway or to an instance.
// DescribeRouteTables answers a route to an instance that is terminated,
// or that EC2 no longer knows, in state blackhole; every other route is
// active.
type Route struct {
	DestinationCIDR string // 0.0.0.0/0
	GatewayID       string // igw-..., or "local" (the VPC's own range; it cannot be deleted)
	InstanceID      string // a route to an instance (the route controller's)
}

func knownRouteTableFilter(name string) bool {
	switch name {
	case "route-table-id", "vpc-id", "association.subnet-id", "tag-key":
		return true
	}
	return strings.HasPrefix(name, "tag:")
}

func routeTableMatches(rt *RouteTable, fs []filter) bool {
	for _, f := range fs {
		var got []string
		switch {
		case f.name == "route-table-id":
			got = []string{rt.ID}
		case f.name == "vpc-id":
			got = []string{rt.VPCID}
		case f.name == "association.subnet-id":
			got = rt.SubnetIDs
		case f.name == "tag-key":
			for k := range rt.Tags {
				got = append(got, k)
			}
		case strings.HasPrefix(f.name, "tag:"):
			if v, ok := rt.Tags[strings.TrimPrefix(f.name, "tag:")]; ok {
				got = []string{v}
			}
		}
		if !anyMatch(got, f.values) {
			return false
		}
	}
	return true
}

// describeRouteTables answers DescribeRouteTables: the tables named by
// RouteTableId.N (an unknown one is InvalidRouteTableID.NotFound), passing
// every filter, in Config order, with their routes as they are now; no
// pagination.
func (s *Server) describeRouteTables(r *http.Request) (any, int, *apiError) {
	fs, aerr := filtersWith(r.Form, knownRouteTableFilter)
	if aerr != nil {
		return nil, 0, aerr
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	want := map[string]bool{}
	for _, id := range list(r.Form, "RouteTableId") {
		if s.table(id) == nil {
			return nil, 0, badRequest("InvalidRouteTableID.NotFound", "The routeTable ID '%s' does not exist", id)
		}
		want[id] = true
	}
	resp := describeRouteTablesResponse{XMLNS: Namespace, RequestID: s.requestID()}
	for _, rt := range s.tables {
		if len(want) > 0 && !want[rt.ID] || !routeTableMatches(rt, fs) {
			continue
		}
		x := routeTableXML{ID: rt.ID, VPCID: rt.VPCID}
		for _, ro := range rt.Routes {
			origin := "CreateRoute"
			if ro.GatewayID == "local" {
				origin = "CreateRouteTable"
			}
			x.Routes = append(x.Routes, routeXML{DestinationCIDR: ro.DestinationCIDR, GatewayID: ro.GatewayID, InstanceID: ro.InstanceID,
				State: s.routeState(ro), Origin: origin})
		}
		if rt.Main {
			x.Associations = append(x.Associations, associationXML{ID: "rtbassoc-" + rt.ID + "-main", RouteTableID: rt.ID, Main: true})
		}
		for _, sn := range rt.SubnetIDs {
			x.Associations = append(x.Associations, associationXML{ID: "rtbassoc-" + rt.ID + "-" + sn, RouteTableID: rt.ID, SubnetID: sn})
		}
		keys := make([]string, 0, len(rt.Tags))
		for k := range rt.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			x.Tags = append(x.Tags, tagXML{Key: k, Value: rt.Tags[k]})
		}
		resp.RouteTables = append(resp.RouteTables, x)
	}
	return resp, len(resp.RouteTables), nil
}

type describeRouteTablesResponse struct {
	XMLName     xml.Name        `xml:"DescribeRouteTablesResponse"`
	XMLNS       string          `xml:"xmlns,attr"`
	RequestID   string          `xml:"requestId"`
	RouteTables []routeTableXML `xml:"routeTableSet>item"`
}

type routeTableXML struct {
	ID           string           `xml:"routeTableId"`
	VPCID        string           `xml:"vpcId"`
	Routes       []routeXML       `xml:"routeSet>item"`
	Associations []associationXML `xml:"associationSet>item"`
	Tags         []tagXML         `xml:"tagSet>item"`
}

type routeXML struct {
	DestinationCIDR string `xml:"destinationCidrBlock"`
	GatewayID       string `xml:"gatewayId,omitempty"`
	InstanceID      string `xml:"instanceId,omitempty"`
	State           string `xml:"state"`
	Origin          string `xml:"origin"`
}

type associationXML struct {
	ID           string `xml:"routeTableAssociationId"`
	RouteTableID string `xml:"routeTableId"`
	SubnetID     string `xml:"subnetId,omitempty"`
	Main         bool   `xml:"main"`
}
