package ec2sim

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// TestDescribeSubnets: the SDK's DescribeSubnets reads the simulator's
// subnets with their zone IDs and tags, filtered as the AWS provider asks
// (vpc-id, subnet-id); an unknown subnet ID or filter is EC2's error, and
// the counters see every request.
func TestDescribeSubnets(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true,
		Zones: []Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}},
		Subnets: []Subnet{
			{ID: "subnet-a", VPCID: "vpc-1", Zone: "us-east-1a", CIDR: "10.0.1.0/24", Tags: map[string]string{"kubernetes.io/cluster/c1": "owned", "kubernetes.io/role/elb": "1"}},
			{ID: "subnet-b", VPCID: "vpc-1", Zone: "us-east-1b", CIDR: "10.0.2.0/24"},
			{ID: "subnet-c", VPCID: "vpc-2", Zone: "us-east-1a", CIDR: "10.1.1.0/24"},
		}})
	c := client(t, s, 1)
	ctx := context.Background()
	ids := func(out *ec2.DescribeSubnetsOutput) []string {
		var got []string
		for _, sn := range out.Subnets {
			got = append(got, aws.ToString(sn.SubnetId))
		}
		return got
	}

	out, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{"vpc-1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(out); len(got) != 2 || got[0] != "subnet-a" || got[1] != "subnet-b" {
		t.Fatalf("vpc-1's subnets: %v, want [subnet-a subnet-b]", got)
	}
	a := out.Subnets[0]
	if aws.ToString(a.VpcId) != "vpc-1" || aws.ToString(a.AvailabilityZone) != "us-east-1a" || aws.ToString(a.AvailabilityZoneId) != "use1-az1" ||
		aws.ToString(a.CidrBlock) != "10.0.1.0/24" || a.State != ec2types.SubnetStateAvailable || len(a.Tags) != 2 ||
		aws.ToString(a.Tags[0].Key) != "kubernetes.io/cluster/c1" || aws.ToString(a.Tags[0].Value) != "owned" {
		t.Errorf("subnet-a as the SDK reads it: %+v", a)
	}

	out, err = c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-c"},
		Filters: []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"kubernetes.io/cluster/*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(out); len(got) != 0 {
		t.Errorf("subnet-c with a cluster tag: %v, want none (it has no tags)", got)
	}

	var ae smithy.APIError
	if _, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-x"}}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSubnetID.NotFound" {
		t.Errorf("unknown subnet: %v, want InvalidSubnetID.NotFound", err)
	}
	if _, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{{Name: aws.String("cidr-block"), Values: []string{"10.0.1.0/24"}}}}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameterValue" {
		t.Errorf("unknown filter: %v, want InvalidParameterValue", err)
	}
	if st := s.Stats("DescribeSubnets"); st.Requests != 4 || st.Errors != 2 || st.Items != 2 {
		t.Errorf("DescribeSubnets counters %+v, want 4 requests, 2 errors, 2 items", st)
	}
}

// TestDescribeRouteTables: the SDK reads the tables of a VPC with their
// routes and associations (the main one marked), as the AWS provider's
// public-subnet check reads them; an unknown table ID or filter is EC2's
// error.
func TestDescribeRouteTables(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true, RouteTables: []RouteTable{
		{ID: "rtb-main", VPCID: "vpc-1", Main: true, Routes: []Route{{DestinationCIDR: "10.0.0.0/16", GatewayID: "local"}}},
		{ID: "rtb-public", VPCID: "vpc-1", SubnetIDs: []string{"subnet-a"}, Routes: []Route{
			{DestinationCIDR: "10.0.0.0/16", GatewayID: "local"}, {DestinationCIDR: "0.0.0.0/0", GatewayID: "igw-1"}}},
		{ID: "rtb-other", VPCID: "vpc-2", Main: true},
	}})
	c := client(t, s, 1)
	ctx := context.Background()
	out, err := c.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{{Name: aws.String("vpc-id"), Values: []string{"vpc-1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.RouteTables) != 2 {
		t.Fatalf("vpc-1: %d tables, want 2", len(out.RouteTables))
	}
	main, public := out.RouteTables[0], out.RouteTables[1]
	if aws.ToString(main.RouteTableId) != "rtb-main" || len(main.Associations) != 1 || !aws.ToBool(main.Associations[0].Main) || main.Associations[0].SubnetId != nil {
		t.Errorf("main table as the SDK reads it: %+v", main)
	}
	if len(public.Associations) != 1 || aws.ToString(public.Associations[0].SubnetId) != "subnet-a" || aws.ToBool(public.Associations[0].Main) ||
		len(public.Routes) != 2 || aws.ToString(public.Routes[1].GatewayId) != "igw-1" || aws.ToString(public.Routes[1].DestinationCidrBlock) != "0.0.0.0/0" {
		t.Errorf("public table as the SDK reads it: %+v", public)
	}
	out, err = c.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{{Name: aws.String("association.subnet-id"), Values: []string{"subnet-a"}}}})
	if err != nil || len(out.RouteTables) != 1 || aws.ToString(out.RouteTables[0].RouteTableId) != "rtb-public" {
		t.Errorf("by association.subnet-id: %v, %v; want rtb-public", out, err)
	}
	var ae smithy.APIError
	if _, err := c.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{RouteTableIds: []string{"rtb-x"}}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidRouteTableID.NotFound" {
		t.Errorf("unknown table: %v, want InvalidRouteTableID.NotFound", err)
	}
	if _, err := c.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{{Name: aws.String("route.gateway-id"), Values: []string{"igw-1"}}}}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidParameterValue" {
		t.Errorf("unknown filter: %v, want InvalidParameterValue", err)
	}
}

// TestSecurityGroups: CreateSecurityGroup adds a group with its
// TagSpecification's tags, DescribeSecurityGroups finds it by name and VPC
// as the AWS provider asks, a second create of the name in the VPC is
// InvalidGroup.Duplicate, an unknown group ID InvalidGroup.NotFound.
func TestSecurityGroups(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true, SecurityGroups: []SecurityGroup{{ID: "sg-default", Name: "default", Description: "default", VPCID: "vpc-1"}}})
	c := client(t, s, 1)
	ctx := context.Background()
	byName := func(name string) []ec2types.SecurityGroup {
		t.Helper()
		out, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
			{Name: aws.String("group-name"), Values: []string{name}}, {Name: aws.String("vpc-id"), Values: []string{"vpc-1"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.SecurityGroups
	}
	if got := byName("k8s-elb-a1"); len(got) != 0 {
		t.Fatalf("before create: %v", got)
	}
	in := &ec2.CreateSecurityGroupInput{GroupName: aws.String("k8s-elb-a1"), Description: aws.String("Security group for Kubernetes ELB a1"), VpcId: aws.String("vpc-1"),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: []ec2types.Tag{{Key: aws.String("kubernetes.io/cluster/c1"), Value: aws.String("owned")}}}}}
	created, err := c.CreateSecurityGroup(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	got := byName("k8s-elb-a1")
	if len(got) != 1 || aws.ToString(got[0].GroupId) != aws.ToString(created.GroupId) || !strings.HasPrefix(aws.ToString(created.GroupId), "sg-") ||
		aws.ToString(got[0].Description) != "Security group for Kubernetes ELB a1" || len(got[0].Tags) != 1 || aws.ToString(got[0].Tags[0].Value) != "owned" {
		t.Errorf("created %v, described %+v", aws.ToString(created.GroupId), got)
	}
	var ae smithy.APIError
	if _, err := c.CreateSecurityGroup(ctx, in); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidGroup.Duplicate" {
		t.Errorf("second create: %v, want InvalidGroup.Duplicate", err)
	}
	if _, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-x"}}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidGroup.NotFound" {
		t.Errorf("unknown group: %v, want InvalidGroup.NotFound", err)
	}
	out, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{})
	if err != nil || len(out.SecurityGroups) != 2 || aws.ToString(out.SecurityGroups[0].GroupId) != "sg-default" {
		t.Errorf("all groups: %v, %v; want sg-default then the created one", out, err)
	}
}

// TestAuthorizeIngress: the rules AuthorizeSecurityGroupIngress adds come
// back in DescribeSecurityGroups grouped by protocol and ports, as the SDK
// reads them; a rule the group has is InvalidPermission.Duplicate and adds
// nothing; an unknown group is InvalidGroup.NotFound.
func TestAuthorizeIngress(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true, SecurityGroups: []SecurityGroup{
		{ID: "sg-elb", Name: "k8s-elb-a1", Description: "elb", VPCID: "vpc-1"}, {ID: "sg-nodes", Name: "nodes", Description: "nodes", VPCID: "vpc-1"}}})
	c := client(t, s, 1)
	ctx := context.Background()
	perm := func(from, to int32, cidrs ...string) ec2types.IpPermission {
		p := ec2types.IpPermission{IpProtocol: aws.String("tcp"), FromPort: aws.Int32(from), ToPort: aws.Int32(to)}
		for _, c := range cidrs {
			p.IpRanges = append(p.IpRanges, ec2types.IpRange{CidrIp: aws.String(c)})
		}
		return p
	}
	icmp := ec2types.IpPermission{IpProtocol: aws.String("icmp"), FromPort: aws.Int32(3), ToPort: aws.Int32(4), UserIdGroupPairs: []ec2types.UserIdGroupPair{{GroupId: aws.String("sg-elb")}}}
	if _, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String("sg-elb"),
		IpPermissions: []ec2types.IpPermission{perm(80, 80, "0.0.0.0/0", "10.0.0.0/8"), icmp}}); err != nil {
		t.Fatal(err)
	}
	var ae smithy.APIError
	if _, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String("sg-elb"),
		IpPermissions: []ec2types.IpPermission{perm(443, 443, "0.0.0.0/0"), perm(80, 80, "10.0.0.0/8")}}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidPermission.Duplicate" {
		t.Errorf("a rule the group has: %v, want InvalidPermission.Duplicate", err)
	}
	if _, err := c.AuthorizeSecurityGroupIngress(ctx, &ec2.AuthorizeSecurityGroupIngressInput{GroupId: aws.String("sg-x"),
		IpPermissions: []ec2types.IpPermission{perm(80, 80, "0.0.0.0/0")}}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidGroup.NotFound" {
		t.Errorf("unknown group: %v, want InvalidGroup.NotFound", err)
	}
	out, err := c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{"sg-elb"}})
	if err != nil || len(out.SecurityGroups) != 1 {
		t.Fatalf("describe sg-elb: %v, %v", out, err)
	}
	ps := out.SecurityGroups[0].IpPermissions
	if len(ps) != 2 || aws.ToInt32(ps[0].FromPort) != 80 || len(ps[0].IpRanges) != 2 || aws.ToString(ps[0].IpRanges[1].CidrIp) != "10.0.0.0/8" ||
		aws.ToString(ps[1].IpProtocol) != "icmp" || len(ps[1].UserIdGroupPairs) != 1 || aws.ToString(ps[1].UserIdGroupPairs[0].GroupId) != "sg-elb" {
		t.Errorf("sg-elb's rules as the SDK reads them: %+v (the 443 rule of the refused call must not be there)", ps)
	}
}
