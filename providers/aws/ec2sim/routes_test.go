package ec2sim

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

func routeConfig() Config {
	return Config{Region: "us-east-1", Unthrottled: true, RouteTables: []RouteTable{
		{ID: "rtb-1", VPCID: "vpc-1", Main: true, Tags: map[string]string{"kubernetes.io/cluster/c1": "owned"},
			Routes: []Route{{DestinationCIDR: "10.0.0.0/16", GatewayID: "local"}, {DestinationCIDR: "0.0.0.0/0", GatewayID: "igw-1"}}},
	}}
}

// errCode is the API error code of err, "" for none.
func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// TestRoutesRoundTrip drives CreateRoute, DeleteRoute and
// DescribeRouteTables through the real SDK client as the AWS provider's
// route controller calls them: created routes come back with their
// instance, active, after the table's own; a terminated or removed
// instance's route is a blackhole; EC2's errors for a destination already
// routed, a route not there, the local route, an unknown table or
// instance, an instance with two interfaces, a bad CIDR block and a target
// ec2sim does not simulate; a refused call changes nothing; the counters
// see every request.
func TestRoutesRoundTrip(t *testing.T) {
	s := start(t, routeConfig())
	s.Put(Instance{ID: id(1), Zone: "us-east-1a"}, Instance{ID: id(2), Zone: "us-east-1a"}, Instance{ID: id(4), Zone: "us-east-1a"},
		Instance{ID: id(3), Zone: "us-east-1a", Interfaces: []NetworkInterface{{DeviceIndex: 0, Status: "in-use"}, {DeviceIndex: 1, Status: "in-use"}}})
	c := client(t, s, 1)
	ctx := context.Background()
	create := func(dest, instance string) error {
		_, err := c.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String("rtb-1"), DestinationCidrBlock: aws.String(dest), InstanceId: aws.String(instance)})
		return err
	}
	del := func(table, dest string) error {
		_, err := c.DeleteRoute(ctx, &ec2.DeleteRouteInput{RouteTableId: aws.String(table), DestinationCidrBlock: aws.String(dest)})
		return err
	}
	base := []string{"10.0.0.0/16->local", "0.0.0.0/0->igw-1"}
	for _, step := range []struct {
		name    string
		call    func() error
		wantErr string
		routes  []string // Routes("rtb-1") after the step
	}{
		{"create", func() error { return create("100.96.1.0/24", id(1)) }, "", append(slices.Clone(base), "100.96.1.0/24->"+id(1))},
		{"create another", func() error { return create("100.96.2.0/24", id(2)) }, "", append(slices.Clone(base), "100.96.1.0/24->"+id(1), "100.96.2.0/24->"+id(2))},
		{"a routed destination, same target", func() error { return create("100.96.1.0/24", id(1)) }, "RouteAlreadyExists", nil},
		{"a routed destination, other target", func() error { return create("100.96.1.0/24", id(4)) }, "RouteAlreadyExists", nil},
		{"the local route's destination", func() error { return create("10.0.0.0/16", id(4)) }, "RouteAlreadyExists", nil},
		{"an unknown instance", func() error { return create("100.96.9.0/24", id(9)) }, "InvalidInstanceID.NotFound", nil},
		{"a malformed instance ID", func() error { return create("100.96.9.0/24", "i-xyz") }, "InvalidInstanceID.Malformed", nil},
		{"an instance with two interfaces", func() error { return create("100.96.3.0/24", id(3)) }, "InvalidInstanceID", nil},
		{"host bits set", func() error { return create("100.96.9.1/24", id(4)) }, "InvalidParameterValue", nil},
		{"not a CIDR block", func() error { return create("100.96.9.0", id(4)) }, "InvalidParameterValue", nil},
		{"an unknown table", func() error {
			_, err := c.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String("rtb-x"), DestinationCidrBlock: aws.String("100.96.9.0/24"), InstanceId: aws.String(id(4))})
			return err
		}, "InvalidRouteTableID.NotFound", nil},
		{"a gateway target", func() error {
			_, err := c.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String("rtb-1"), DestinationCidrBlock: aws.String("100.96.9.0/24"), GatewayId: aws.String("igw-1")})
			return err
		}, "UnsupportedOperation", nil},
		{"an IPv6 destination", func() error {
			_, err := c.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String("rtb-1"), DestinationIpv6CidrBlock: aws.String("2600:1f18::/64"), InstanceId: aws.String(id(4))})
			return err
		}, "UnsupportedOperation", nil},
		{"no target", func() error {
			_, err := c.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String("rtb-1"), DestinationCidrBlock: aws.String("100.96.9.0/24")})
			return err
		}, "MissingParameter", nil},
		{"a dry run", func() error {
			_, err := c.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String("rtb-1"), DestinationCidrBlock: aws.String("100.96.9.0/24"), InstanceId: aws.String(id(4)), DryRun: aws.Bool(true)})
			return err
		}, "UnsupportedOperation", nil},
		{"terminated: blackhole", func() error { s.SetState(id(2), StateTerminated); return nil }, "",
			append(slices.Clone(base), "100.96.1.0/24->"+id(1), "100.96.2.0/24->"+id(2)+" blackhole")},
		{"stopped: still active", func() error { s.SetState(id(1), StateStopped); return nil }, "", nil},
		{"delete a blackhole route", func() error { return del("rtb-1", "100.96.2.0/24") }, "", append(slices.Clone(base), "100.96.1.0/24->"+id(1))},
		{"delete it again", func() error { return del("rtb-1", "100.96.2.0/24") }, "InvalidRoute.NotFound", nil},
		{"delete the local route", func() error { return del("rtb-1", "10.0.0.0/16") }, "InvalidParameterValue", nil},
		{"delete from an unknown table", func() error { return del("rtb-x", "100.96.1.0/24") }, "InvalidRouteTableID.NotFound", nil},
		{"removed: blackhole", func() error { s.Remove(id(1)); return nil }, "", append(slices.Clone(base), "100.96.1.0/24->"+id(1)+" blackhole")},
		{"a destination freed by a delete is free", func() error { return create("100.96.2.0/24", id(4)) }, "",
			append(slices.Clone(base), "100.96.1.0/24->"+id(1)+" blackhole", "100.96.2.0/24->"+id(4))},
	} {
		before := s.Routes("rtb-1")
		if err := step.call(); errCode(err) != step.wantErr {
			t.Fatalf("%s: error %v, want %q", step.name, err, step.wantErr)
		}
		want := step.routes
		if want == nil {
			want = before // a refused call changes nothing
		}
		if got := s.Routes("rtb-1"); !slices.Equal(got, want) {
			t.Fatalf("%s: routes %q, want %q", step.name, got, want)
		}
	}

	// DescribeRouteTables, as the provider reads it: the cluster's tag, the
	// routes with their instance and state, the table's own routes'
	// origin.
	out, err := c.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{})
	if err != nil || len(out.RouteTables) != 1 {
		t.Fatalf("DescribeRouteTables: %+v, %v", out, err)
	}
	rt := out.RouteTables[0]
	if aws.ToString(rt.RouteTableId) != "rtb-1" || len(rt.Tags) != 1 || aws.ToString(rt.Tags[0].Key) != "kubernetes.io/cluster/c1" {
		t.Errorf("rtb-1 as the SDK reads it: %+v", rt)
	}
	type route struct {
		dest, gateway, instance string
		state                   ec2types.RouteState
		origin                  ec2types.RouteOrigin
	}
	var got []route
	for _, r := range rt.Routes {
		got = append(got, route{aws.ToString(r.DestinationCidrBlock), aws.ToString(r.GatewayId), aws.ToString(r.InstanceId), r.State, r.Origin})
	}
	want := []route{
		{"10.0.0.0/16", "local", "", ec2types.RouteStateActive, ec2types.RouteOriginCreateRouteTable},
		{"0.0.0.0/0", "igw-1", "", ec2types.RouteStateActive, ec2types.RouteOriginCreateRoute},
		{"100.96.1.0/24", "", id(1), ec2types.RouteStateBlackhole, ec2types.RouteOriginCreateRoute},
		{"100.96.2.0/24", "", id(4), ec2types.RouteStateActive, ec2types.RouteOriginCreateRoute},
	}
	if !slices.Equal(got, want) {
		t.Errorf("routes as the SDK reads them:\n%+v\nwant %+v", got, want)
	}
	if st := s.Stats("CreateRoute"); st.Requests != 16 || st.Errors != 13 || st.Items != 3 {
		t.Errorf("CreateRoute counters %+v, want 16 requests, 13 errors, 3 routes", st)
	}
	if st := s.Stats("DeleteRoute"); st.Requests != 4 || st.Errors != 3 || st.Items != 1 {
		t.Errorf("DeleteRoute counters %+v, want 4 requests, 3 errors, 1 route", st)
	}
}

// TestModifyInstanceAttributeSourceDestCheck: the provider's call turns the
// check off, DescribeInstances answers it, the Attribute/Value form turns
// it on again; an unknown or two-interface instance and an attribute
// ec2sim does not simulate are errors that change nothing.
func TestModifyInstanceAttributeSourceDestCheck(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true})
	s.Put(Instance{ID: id(1), Zone: "us-east-1a"},
		Instance{ID: id(2), Zone: "us-east-1a", Interfaces: []NetworkInterface{{DeviceIndex: 0, Status: "in-use"}, {DeviceIndex: 1, Status: "in-use"}}})
	c := client(t, s, 1)
	ctx := context.Background()
	described := func() bool {
		t.Helper()
		out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id(1)}})
		if err != nil || len(out.Reservations) != 1 {
			t.Fatalf("DescribeInstances: %+v, %v", out, err)
		}
		return aws.ToBool(out.Reservations[0].Instances[0].SourceDestCheck)
	}
	if !described() {
		t.Fatal("a new instance's source/destination check is off, want EC2's default (on)")
	}
	off := &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String(id(1)), SourceDestCheck: &ec2types.AttributeBooleanValue{Value: aws.Bool(false)}}
	if _, err := c.ModifyInstanceAttribute(ctx, off); err != nil {
		t.Fatal(err)
	}
	if check, ok := s.SourceDestCheck(id(1)); !ok || check || described() {
		t.Errorf("after turning it off: check %v (exists %v), described %v; want off", check, ok, described())
	}
	if _, err := c.ModifyInstanceAttribute(ctx, &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String(id(1)),
		Attribute: ec2types.InstanceAttributeNameSourceDestCheck, Value: aws.String("true")}); err != nil {
		t.Fatal(err)
	}
	if !described() {
		t.Error("Attribute=sourceDestCheck, Value=true left it off")
	}
	for _, tc := range []struct {
		name, want string
		in         *ec2.ModifyInstanceAttributeInput
	}{
		{"unknown instance", "InvalidInstanceID.NotFound", &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String(id(9)), SourceDestCheck: off.SourceDestCheck}},
		{"two interfaces", "InvalidInstanceID", &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String(id(2)), SourceDestCheck: off.SourceDestCheck}},
		{"another attribute", "UnsupportedOperation", &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String(id(1)), InstanceType: &ec2types.AttributeValue{Value: aws.String("m5.xlarge")}}},
		{"another attribute by name", "UnsupportedOperation", &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String(id(1)),
			Attribute: ec2types.InstanceAttributeNameInstanceType, Value: aws.String("m5.xlarge")}},
		{"the check and another attribute", "UnsupportedOperation", &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String(id(1)),
			SourceDestCheck: off.SourceDestCheck, EbsOptimized: &ec2types.AttributeBooleanValue{Value: aws.Bool(true)}}},
	} {
		if _, err := c.ModifyInstanceAttribute(ctx, tc.in); errCode(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
	if check, _ := s.SourceDestCheck(id(2)); !check || !described() {
		t.Error("a refused ModifyInstanceAttribute turned a check off")
	}
	if st := s.Stats("ModifyInstanceAttribute"); st.Requests != 7 || st.Errors != 5 || st.Items != 2 {
		t.Errorf("ModifyInstanceAttribute counters %+v, want 7 requests, 5 errors, 2 instances", st)
	}
}

// TestRouteActionsThrottled: CreateRoute, DeleteRoute and
// ModifyInstanceAttribute each take tokens from their own bucket, as every
// action; a throttled call is RequestLimitExceeded and changes nothing. An
// action the route controller does not call (ReplaceRoute) stays
// InvalidAction.
func TestRouteActionsThrottled(t *testing.T) {
	cfg := routeConfig()
	cfg.Unthrottled = false
	// One token, refilled far slower than the test runs.
	cfg.Buckets = map[string]Bucket{"CreateRoute": {Size: 1, Refill: 0.001}, "DeleteRoute": {Size: 1, Refill: 0.001}, "ModifyInstanceAttribute": {Size: 1, Refill: 0.001}}
	s := start(t, cfg)
	s.Put(Instance{ID: id(1), Zone: "us-east-1a"})
	c := client(t, s, 1)
	ctx := context.Background()
	for i, dest := range []string{"100.96.1.0/24", "100.96.2.0/24"} {
		_, err := c.CreateRoute(ctx, &ec2.CreateRouteInput{RouteTableId: aws.String("rtb-1"), DestinationCidrBlock: aws.String(dest), InstanceId: aws.String(id(1))})
		if want := []string{"", "RequestLimitExceeded"}[i]; errCode(err) != want {
			t.Errorf("CreateRoute %d: %v, want %q", i+1, err, want)
		}
	}
	for i := range 2 {
		_, err := c.DeleteRoute(ctx, &ec2.DeleteRouteInput{RouteTableId: aws.String("rtb-1"), DestinationCidrBlock: aws.String("100.96.1.0/24")})
		if want := []string{"", "RequestLimitExceeded"}[i]; errCode(err) != want {
			t.Errorf("DeleteRoute %d: %v, want %q", i+1, err, want)
		}
	}
	for i := range 2 {
		_, err := c.ModifyInstanceAttribute(ctx, &ec2.ModifyInstanceAttributeInput{InstanceId: aws.String(id(1)),
			SourceDestCheck: &ec2types.AttributeBooleanValue{Value: aws.Bool(i == 0)}})
		if want := []string{"", "RequestLimitExceeded"}[i]; errCode(err) != want {
			t.Errorf("ModifyInstanceAttribute %d: %v, want %q", i+1, err, want)
		}
	}
	if got := s.Routes("rtb-1"); !slices.Equal(got, []string{"10.0.0.0/16->local", "0.0.0.0/0->igw-1"}) {
		t.Errorf("routes %q: the throttled create must not have added its route", got)
	}
	if check, _ := s.SourceDestCheck(id(1)); !check {
		t.Error("the throttled ModifyInstanceAttribute turned the check off")
	}
	for _, a := range []string{"CreateRoute", "DeleteRoute", "ModifyInstanceAttribute"} {
		if st := s.Stats(a); st.Requests != 2 || st.Throttled != 1 || st.Errors != 0 {
			t.Errorf("%s counters %+v, want 2 requests, 1 throttled", a, st)
		}
	}
	_, err := c.ReplaceRoute(ctx, &ec2.ReplaceRouteInput{RouteTableId: aws.String("rtb-1"), DestinationCidrBlock: aws.String("0.0.0.0/0"), GatewayId: aws.String("igw-2")})
	if errCode(err) != "InvalidAction" {
		t.Errorf("ReplaceRoute: %v, want InvalidAction (not simulated)", err)
	}
}
