package ec2sim

import (
	"encoding/xml"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
)

// The route controller's calls, as the AWS provider (aws_routes.go) makes
// them: ListRoutes is DescribeRouteTables (every table, kept if it has the
// cluster's tag) and DescribeInstances of the routes' instances;
// CreateRoute is DescribeInstances of the Node's instance,
// ModifyInstanceAttribute turning its source/destination check off,
// DescribeRouteTables, DeleteRoute of a blackhole route to the same
// destination if there is one, and CreateRoute with DestinationCidrBlock
// and InstanceId; DeleteRoute is DescribeRouteTables and DeleteRoute.
//
// The errors are EC2's codes (the EC2 API reference's error code list) and
// messages: a destination a table already routes is RouteAlreadyExists,
// whatever the target; deleting a destination the table does not route is
// InvalidRoute.NotFound, the local route InvalidParameterValue; an unknown
// table is InvalidRouteTableID.NotFound, an unknown instance
// InvalidInstanceID.NotFound, and an instance with more than one network
// interface is InvalidInstanceID for both CreateRoute and
// ModifyInstanceAttribute (EC2 then wants the interface named, which the
// provider cannot do). Only IPv4 destinations and instance targets are
// simulated: another target or destination, another instance attribute or
// DryRun fails with UnsupportedOperation, never a silent success. Each
// action takes tokens from its own bucket, as every action.

// Routes returns a table's routes as "DESTINATION->TARGET", with
// " blackhole" after a route DescribeRouteTables answers in that state, in
// the table's order; nil for an unknown table.
func (s *Server) Routes(tableID string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rt := s.table(tableID)
	if rt == nil {
		return nil
	}
	out := make([]string, 0, len(rt.Routes))
	for _, ro := range rt.Routes {
		target := ro.GatewayID
		if ro.InstanceID != "" {
			target = ro.InstanceID
		}
		r := ro.DestinationCIDR + "->" + target
		if s.routeState(ro) == routeBlackhole {
			r += " " + routeBlackhole
		}
		out = append(out, r)
	}
	return out
}

// SourceDestCheck reports whether the instance's source/destination check
// is on, and whether the instance exists.
func (s *Server) SourceDestCheck(id string) (check, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	in, ok := s.instances[id]
	if !ok {
		return false, false
	}
	return !in.SourceDestCheckDisabled, true
}

const (
	routeActive    = "active"
	routeBlackhole = "blackhole"
)

// table is the route table with the ID (nil: none); s.mu held.
func (s *Server) table(id string) *RouteTable {
	for _, rt := range s.tables {
		if rt.ID == id {
			return rt
		}
	}
	return nil
}

// routeState is EC2's state of a route: blackhole when its target is not
// available, which for an instance target means terminated or no longer
// known to EC2; s.mu held.
func (s *Server) routeState(ro Route) string {
	if ro.InstanceID == "" {
		return routeActive
	}
	if in, ok := s.instances[ro.InstanceID]; !ok || in.State == StateTerminated {
		return routeBlackhole
	}
	return routeActive
}

// required reads a parameter the action cannot do without.
func required(r *http.Request, name string) (string, *apiError) {
	v := r.Form.Get(name)
	if v == "" {
		return "", badRequest("MissingParameter", "The request must contain the parameter %s", lowerFirst(name))
	}
	return v, nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// onlyParams fails a request that sets a parameter other than the ones
// ec2sim simulates for the action, naming it, or asks for a DryRun.
func onlyParams(r *http.Request, action string, simulated ...string) *apiError {
	if r.Form.Get("DryRun") == "true" {
		return badRequest("UnsupportedOperation", "ec2sim does not simulate DryRun for %s", action)
	}
	for _, p := range slices.Sorted(maps.Keys(r.Form)) {
		if p != "Action" && p != "Version" && p != "DryRun" && !slices.Contains(simulated, p) {
			return badRequest("UnsupportedOperation", "ec2sim does not simulate %s with the parameter %s", action, p)
		}
	}
	return nil
}

// destination reads DestinationCidrBlock: an IPv4 CIDR block without host
// bits, as EC2 stores it.
func destination(r *http.Request) (string, *apiError) {
	d, err := required(r, "DestinationCidrBlock")
	if err != nil {
		return "", err
	}
	p, perr := netip.ParsePrefix(d)
	if perr != nil || !p.Addr().Is4() || p.Masked() != p {
		return "", badRequest("InvalidParameterValue", "Value (%s) for parameter destinationCidrBlock is invalid. This is not a valid CIDR block.", d)
	}
	return d, nil
}

// routeTarget is the instance a route or attribute change names: known to
// EC2 and with one network interface at most; s.mu held.
func (s *Server) routeTarget(id string) (*Instance, *apiError) {
	if !instanceIDPattern.MatchString(id) {
		return nil, badRequest("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
	}
	in, ok := s.instances[id]
	if !ok {
		return nil, badRequest("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
	}
	if len(in.Interfaces) > 1 {
		return nil, badRequest("InvalidInstanceID", "There are multiple interfaces attached to instance '%s'. Please specify an interface ID for the operation instead.", id)
	}
	return in, nil
}

// createRoute answers CreateRoute: a route from DestinationCidrBlock to
// InstanceId, appended to the table.
func (s *Server) createRoute(r *http.Request) (any, int, *apiError) {
	if err := onlyParams(r, "CreateRoute", "RouteTableId", "DestinationCidrBlock", "InstanceId"); err != nil {
		return nil, 0, err
	}
	tableID, err := required(r, "RouteTableId")
	if err != nil {
		return nil, 0, err
	}
	dest, err := destination(r)
	if err != nil {
		return nil, 0, err
	}
	instanceID, err := required(r, "InstanceId")
	if err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.table(tableID)
	if rt == nil {
		return nil, 0, badRequest("InvalidRouteTableID.NotFound", "The routeTable ID '%s' does not exist", tableID)
	}
	if _, err := s.routeTarget(instanceID); err != nil {
		return nil, 0, err
	}
	for _, ro := range rt.Routes {
		if ro.DestinationCIDR == dest {
			return nil, 0, badRequest("RouteAlreadyExists", "The route identified by %s already exists.", dest)
		}
	}
	// A new slice: Routes' caller may hold the old one.
	rt.Routes = append(rt.Routes[:len(rt.Routes):len(rt.Routes)], Route{DestinationCIDR: dest, InstanceID: instanceID})
	return returnResponse{XMLName: xml.Name{Local: "CreateRouteResponse"}, XMLNS: Namespace, RequestID: s.requestID(), Return: true}, 1, nil
}

// deleteRoute answers DeleteRoute: the table's route to DestinationCidrBlock
// goes, whatever its target and state.
func (s *Server) deleteRoute(r *http.Request) (any, int, *apiError) {
	if err := onlyParams(r, "DeleteRoute", "RouteTableId", "DestinationCidrBlock"); err != nil {
		return nil, 0, err
	}
	tableID, err := required(r, "RouteTableId")
	if err != nil {
		return nil, 0, err
	}
	dest, err := destination(r)
	if err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rt := s.table(tableID)
	if rt == nil {
		return nil, 0, badRequest("InvalidRouteTableID.NotFound", "The routeTable ID '%s' does not exist", tableID)
	}
	for i, ro := range rt.Routes {
		if ro.DestinationCIDR != dest {
			continue
		}
		if ro.GatewayID == "local" {
			return nil, 0, badRequest("InvalidParameterValue", "cannot remove local route %s in route table %s", dest, tableID)
		}
		routes := make([]Route, 0, len(rt.Routes)-1)
		rt.Routes = append(append(routes, rt.Routes[:i]...), rt.Routes[i+1:]...)
		return returnResponse{XMLName: xml.Name{Local: "DeleteRouteResponse"}, XMLNS: Namespace, RequestID: s.requestID(), Return: true}, 1, nil
	}
	return nil, 0, badRequest("InvalidRoute.NotFound", "no route with destination-cidr-block %s in route table %s", dest, tableID)
}

// modifyInstanceAttribute answers ModifyInstanceAttribute for the one
// attribute the provider changes, the source/destination check, set as
// SourceDestCheck.Value or as Attribute=sourceDestCheck with Value.
func (s *Server) modifyInstanceAttribute(r *http.Request) (any, int, *apiError) {
	if err := onlyParams(r, "ModifyInstanceAttribute", "InstanceId", "SourceDestCheck.Value", "Attribute", "Value"); err != nil {
		return nil, 0, err
	}
	id, err := required(r, "InstanceId")
	if err != nil {
		return nil, 0, err
	}
	var value string
	switch attr := r.Form.Get("Attribute"); attr {
	case "":
		value = r.Form.Get("SourceDestCheck.Value")
		if value == "" {
			return nil, 0, badRequest("MissingParameter", "The request must contain the parameter sourceDestCheck (the only attribute ec2sim simulates)")
		}
	case "sourceDestCheck":
		if r.Form.Get("SourceDestCheck.Value") != "" {
			return nil, 0, badRequest("InvalidParameterCombination", "The parameter attribute cannot be used with the parameter sourceDestCheck")
		}
		value = r.Form.Get("Value")
	default:
		return nil, 0, badRequest("UnsupportedOperation", "ec2sim does not simulate ModifyInstanceAttribute of %s", attr)
	}
	if value != "true" && value != "false" {
		return nil, 0, badRequest("InvalidParameterValue", "Value (%s) for parameter sourceDestCheck is invalid. Expected a boolean.", value)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, aerr := s.routeTarget(id)
	if aerr != nil {
		return nil, 0, aerr
	}
	in.SourceDestCheckDisabled = value == "false"
	return returnResponse{XMLName: xml.Name{Local: "ModifyInstanceAttributeResponse"}, XMLNS: Namespace, RequestID: s.requestID(), Return: true}, 1, nil
}
