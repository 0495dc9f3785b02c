package ec2sim

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancing/types"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbv2types "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/smithy-go"
)

func elbClient(s *Server, attempts int) *elb.Client {
	return elb.New(elb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer:     retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = attempts }),
	})
}

func elbv2Client(s *Server) *elbv2.Client {
	return elbv2.New(elbv2.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
		Credentials: credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer:     retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 1 }),
	})
}

var lbConfig = Config{
	Region: "us-east-1", Unthrottled: true,
	Zones: []Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}},
	Subnets: []Subnet{{ID: "subnet-a", VPCID: "vpc-1", Zone: "us-east-1a", CIDR: "10.0.0.0/24"},
		{ID: "subnet-b", VPCID: "vpc-1", Zone: "us-east-1b", CIDR: "10.0.1.0/24"}},
	SecurityGroups: []SecurityGroup{{ID: "sg-elb", Name: "elb", Description: "elb", VPCID: "vpc-1"}},
}

// TestClassicELBRoundTrip: what CreateLoadBalancer, ConfigureHealthCheck
// and RegisterInstancesWithLoadBalancer set, DescribeLoadBalancers answers
// as the SDK parses it; an unknown name is the SDK's typed
// AccessPointNotFoundException (code LoadBalancerNotFound); each action is
// counted under its elb: name.
func TestClassicELBRoundTrip(t *testing.T) {
	s := start(t, lbConfig)
	s.Put(Instance{ID: id(1), Zone: "us-east-1a"}, Instance{ID: id(2), Zone: "us-east-1b"})
	c := elbClient(s, 1)
	ctx := context.Background()

	var nf *elbtypes.AccessPointNotFoundException
	if _, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{"web"}}); !errors.As(err, &nf) {
		t.Fatalf("describe before create: %v, want AccessPointNotFoundException", err)
	}
	out, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{
		LoadBalancerName: aws.String("web"), Subnets: []string{"subnet-a", "subnet-b"}, SecurityGroups: []string{"sg-elb"},
		Listeners: []elbtypes.Listener{{Protocol: aws.String("TCP"), LoadBalancerPort: 80, InstancePort: aws.Int32(30080)}},
		Tags:      []elbtypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}},
	})
	if err != nil || !strings.HasPrefix(aws.ToString(out.DNSName), "web-") {
		t.Fatalf("create: %v, %v", out, err)
	}
	if _, err := c.ConfigureHealthCheck(ctx, &elb.ConfigureHealthCheckInput{LoadBalancerName: aws.String("web"), HealthCheck: &elbtypes.HealthCheck{
		Target: aws.String("TCP:30080"), Interval: aws.Int32(10), Timeout: aws.Int32(5), HealthyThreshold: aws.Int32(2), UnhealthyThreshold: aws.Int32(6)}}); err != nil {
		t.Fatal(err)
	}
	reg, err := c.RegisterInstancesWithLoadBalancer(ctx, &elb.RegisterInstancesWithLoadBalancerInput{LoadBalancerName: aws.String("web"),
		Instances: []elbtypes.Instance{{InstanceId: aws.String(id(2))}, {InstanceId: aws.String(id(1))}}})
	if err != nil || len(reg.Instances) != 2 || aws.ToString(reg.Instances[0].InstanceId) != id(1) {
		t.Fatalf("register: %+v, %v", reg, err)
	}
	if _, err := c.RegisterInstancesWithLoadBalancer(ctx, &elb.RegisterInstancesWithLoadBalancerInput{LoadBalancerName: aws.String("web"),
		Instances: []elbtypes.Instance{{InstanceId: aws.String(id(9))}}}); err == nil || !strings.Contains(err.Error(), "InvalidInstance") {
		t.Errorf("register an unknown instance: %v, want InvalidInstance", err)
	}
	d, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerNames: []string{"web"}})
	if err != nil || len(d.LoadBalancerDescriptions) != 1 {
		t.Fatalf("describe: %+v, %v", d, err)
	}
	lb := d.LoadBalancerDescriptions[0]
	if aws.ToString(lb.VPCId) != "vpc-1" || len(lb.Subnets) != 2 || len(lb.AvailabilityZones) != 2 || lb.SecurityGroups[0] != "sg-elb" ||
		len(lb.ListenerDescriptions) != 1 || aws.ToString(lb.ListenerDescriptions[0].Listener.InstanceProtocol) != "TCP" ||
		aws.ToInt32(lb.ListenerDescriptions[0].Listener.InstancePort) != 30080 || aws.ToString(lb.HealthCheck.Target) != "TCP:30080" ||
		aws.ToInt32(lb.HealthCheck.UnhealthyThreshold) != 6 || len(lb.Instances) != 2 || aws.ToString(lb.Scheme) != "internet-facing" {
		t.Errorf("described %+v", lb)
	}
	attrs, err := c.DescribeLoadBalancerAttributes(ctx, &elb.DescribeLoadBalancerAttributesInput{LoadBalancerName: aws.String("web")})
	if err != nil || aws.ToInt32(attrs.LoadBalancerAttributes.ConnectionDraining.Timeout) != 300 || aws.ToInt32(attrs.LoadBalancerAttributes.ConnectionSettings.IdleTimeout) != 60 {
		t.Errorf("attributes %+v, %v; want the documented defaults", attrs, err)
	}
	if _, err := c.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerName: aws.String("web")}); err != nil {
		t.Fatal(err)
	}
	if got := s.ClassicLoadBalancers(); len(got) != 0 {
		t.Errorf("after delete: %+v", got)
	}
	if st := s.Stats(ELBAction("DescribeLoadBalancers")); st.Requests != 2 || st.Errors != 1 || st.Items != 1 {
		t.Errorf("elb:DescribeLoadBalancers %+v, want 2 requests, 1 error, 1 item", st)
	}
	if st := s.Stats("DescribeLoadBalancers"); st.Requests != 0 {
		t.Errorf("counted under the bare name too: %+v", st)
	}
}

// TestNLBRoundTrip: a network load balancer, a target group, a listener
// forwarding to it and registered targets, as the SDK parses them; an
// unknown load balancer is the SDK's typed LoadBalancerNotFoundException,
// and a target group a listener uses cannot be deleted.
func TestNLBRoundTrip(t *testing.T) {
	s := start(t, lbConfig)
	s.Put(Instance{ID: id(1), Zone: "us-east-1a"})
	c := elbv2Client(s)
	ctx := context.Background()
	var nf *elbv2types.LoadBalancerNotFoundException
	if _, err := c.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{Names: []string{"web"}}); !errors.As(err, &nf) {
		t.Fatalf("describe before create: %v, want LoadBalancerNotFoundException", err)
	}
	lbOut, err := c.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("web"), Type: elbv2types.LoadBalancerTypeEnumNetwork,
		SubnetMappings: []elbv2types.SubnetMapping{{SubnetId: aws.String("subnet-a")}, {SubnetId: aws.String("subnet-b")}}})
	if err != nil {
		t.Fatal(err)
	}
	lb := lbOut.LoadBalancers[0]
	if lb.Type != elbv2types.LoadBalancerTypeEnumNetwork || aws.ToString(lb.VpcId) != "vpc-1" || len(lb.AvailabilityZones) != 2 || lb.State.Code != elbv2types.LoadBalancerStateEnumActive {
		t.Errorf("created %+v", lb)
	}
	tgOut, err := c.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("tg"), Protocol: elbv2types.ProtocolEnumTcp,
		Port: aws.Int32(30080), VpcId: aws.String("vpc-1"), TargetType: elbv2types.TargetTypeEnumInstance, HealthCheckPort: aws.String("traffic-port")})
	if err != nil {
		t.Fatal(err)
	}
	tg := tgOut.TargetGroups[0]
	if _, err := c.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Port: aws.Int32(80), Protocol: elbv2types.ProtocolEnumTcp,
		DefaultActions: []elbv2types.Action{{Type: elbv2types.ActionTypeEnumForward, TargetGroupArn: tg.TargetGroupArn}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterTargets(ctx, &elbv2.RegisterTargetsInput{TargetGroupArn: tg.TargetGroupArn,
		Targets: []elbv2types.TargetDescription{{Id: aws.String(id(1)), Port: aws.Int32(30080)}}}); err != nil {
		t.Fatal(err)
	}
	tgs, err := c.DescribeTargetGroups(ctx, &elbv2.DescribeTargetGroupsInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil || len(tgs.TargetGroups) != 1 || len(tgs.TargetGroups[0].LoadBalancerArns) != 1 || aws.ToInt32(tgs.TargetGroups[0].Port) != 30080 {
		t.Errorf("target groups of the load balancer: %+v, %v", tgs, err)
	}
	h, err := c.DescribeTargetHealth(ctx, &elbv2.DescribeTargetHealthInput{TargetGroupArn: tg.TargetGroupArn})
	if err != nil || len(h.TargetHealthDescriptions) != 1 || aws.ToString(h.TargetHealthDescriptions[0].Target.Id) != id(1) ||
		h.TargetHealthDescriptions[0].TargetHealth.State != elbv2types.TargetHealthStateEnumHealthy {
		t.Errorf("target health: %+v, %v", h, err)
	}
	ls, err := c.DescribeListeners(ctx, &elbv2.DescribeListenersInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil || len(ls.Listeners) != 1 || aws.ToString(ls.Listeners[0].DefaultActions[0].TargetGroupArn) != aws.ToString(tg.TargetGroupArn) {
		t.Errorf("listeners: %+v, %v", ls, err)
	}
	if _, err := c.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tg.TargetGroupArn}); err == nil || !strings.Contains(err.Error(), "ResourceInUse") {
		t.Errorf("delete a target group in use: %v, want ResourceInUse", err)
	}
	if _, err := c.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tg.TargetGroupArn}); err != nil {
		t.Fatal(err)
	}
	if s.TargetGroupCount() != 0 || len(s.NetworkLoadBalancers()) != 0 {
		t.Errorf("left %d target groups, %+v", s.TargetGroupCount(), s.NetworkLoadBalancers())
	}
	if st := s.Stats(ELBv2Action("CreateListener")); st.Requests != 1 || st.Errors != 0 {
		t.Errorf("elbv2:CreateListener %+v", st)
	}
}

// TestLoadBalancingUnknownAndThrottled: an ELB action ec2sim does not
// simulate, and any API version it does not know, is InvalidAction in the
// Query APIs' error format; a load balancing action over its bucket is
// 400 Throttling, which the SDK's standard retryer retries.
func TestLoadBalancingUnknownAndThrottled(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Buckets: map[string]Bucket{ELBAction("DescribeLoadBalancers"): {Size: 1, Refill: 0.001}}})
	ctx := context.Background()
	c := elbClient(s, 1)
	var ae smithy.APIError
	if _, err := c.DescribeLoadBalancerPolicies(ctx, &elb.DescribeLoadBalancerPoliciesInput{}); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidAction" {
		t.Errorf("unknown ELB action: %v, want InvalidAction", err)
	}
	if st := s.Stats(ELBAction("DescribeLoadBalancerPolicies")); st.Requests != 1 || st.Errors != 1 {
		t.Errorf("unknown action counted %+v", st)
	}
	req, err := SignedForm(ctx, s.URL, "sqs", url.Values{"Action": {"ListQueues"}, "Version": {"2012-11-05"}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Counted apart from EC2's actions, as the load balancing APIs' are.
	if resp.StatusCode != http.StatusBadRequest || s.Stats(otherAPIPrefix+"ListQueues").Errors != 1 || s.Stats("ListQueues").Requests != 0 {
		t.Errorf("another API: HTTP %d, %+v (EC2's ListQueues %+v)", resp.StatusCode, s.Stats(otherAPIPrefix+"ListQueues"), s.Stats("ListQueues"))
	}
	for key, ec2 := range map[string]bool{"DescribeInstances": true, "CreateRoute": true, ELBAction("DescribeLoadBalancers"): false,
		ELBv2Action("DescribeLoadBalancers"): false, otherAPIPrefix + "ListQueues": false} {
		if IsEC2Action(key) != ec2 {
			t.Errorf("IsEC2Action(%q) = %v, want %v", key, !ec2, ec2)
		}
	}

	// The first call takes the bucket's token; the next is throttled on
	// every attempt (3 with the standard retryer).
	if _, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{}); err != nil {
		t.Fatal(err)
	}
	_, err = elbClient(s, 3).DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{})
	if !errors.As(err, &ae) || ae.ErrorCode() != "Throttling" {
		t.Errorf("over the bucket: %v, want Throttling", err)
	}
	if st := s.Stats(ELBAction("DescribeLoadBalancers")); st.Requests != 4 || st.Throttled != 3 {
		t.Errorf("elb:DescribeLoadBalancers %+v, want 4 requests, 3 throttled", st)
	}
}

// TestLoadBalancerChanges: the calls the provider makes when a Service's
// subnets, security groups, tags, listeners or health check change leave
// the load balancer as asked, and DeleteLoadBalancer of a load balancer
// that is gone succeeds in both APIs, as AWS documents.
func TestLoadBalancerChanges(t *testing.T) {
	cfg := lbConfig
	cfg.SecurityGroups = append(cfg.SecurityGroups, SecurityGroup{ID: "sg-2", Name: "two", Description: "two", VPCID: "vpc-1"})
	s := start(t, cfg)
	s.Put(Instance{ID: id(1), Zone: "us-east-1a"})
	ctx := context.Background()
	c := elbClient(s, 1)
	if _, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{LoadBalancerName: aws.String("web"), Subnets: []string{"subnet-a"},
		SecurityGroups: []string{"sg-elb"}, Listeners: []elbtypes.Listener{{Protocol: aws.String("TCP"), LoadBalancerPort: 80, InstancePort: aws.Int32(30080)}}}); err != nil {
		t.Fatal(err)
	}
	name := aws.String("web")
	for _, step := range []func() error{
		func() error {
			_, err := c.AttachLoadBalancerToSubnets(ctx, &elb.AttachLoadBalancerToSubnetsInput{LoadBalancerName: name, Subnets: []string{"subnet-b"}})
			return err
		},
		func() error {
			_, err := c.DetachLoadBalancerFromSubnets(ctx, &elb.DetachLoadBalancerFromSubnetsInput{LoadBalancerName: name, Subnets: []string{"subnet-a"}})
			return err
		},
		func() error {
			_, err := c.ApplySecurityGroupsToLoadBalancer(ctx, &elb.ApplySecurityGroupsToLoadBalancerInput{LoadBalancerName: name, SecurityGroups: []string{"sg-2"}})
			return err
		},
		func() error {
			_, err := c.CreateLoadBalancerListeners(ctx, &elb.CreateLoadBalancerListenersInput{LoadBalancerName: name,
				Listeners: []elbtypes.Listener{{Protocol: aws.String("TCP"), LoadBalancerPort: 8080, InstancePort: aws.Int32(30081)}}})
			return err
		},
		func() error {
			_, err := c.DeleteLoadBalancerListeners(ctx, &elb.DeleteLoadBalancerListenersInput{LoadBalancerName: name, LoadBalancerPorts: []int32{80}})
			return err
		},
		func() error {
			_, err := c.AddTags(ctx, &elb.AddTagsInput{LoadBalancerNames: []string{"web"}, Tags: []elbtypes.Tag{{Key: aws.String("team"), Value: aws.String("a")}}})
			return err
		},
		func() error {
			_, err := c.ModifyLoadBalancerAttributes(ctx, &elb.ModifyLoadBalancerAttributesInput{LoadBalancerName: name,
				LoadBalancerAttributes: &elbtypes.LoadBalancerAttributes{ConnectionSettings: &elbtypes.ConnectionSettings{IdleTimeout: aws.Int32(120)}}})
			return err
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AttachLoadBalancerToSubnets(ctx, &elb.AttachLoadBalancerToSubnetsInput{LoadBalancerName: name, Subnets: []string{"subnet-x"}}); err == nil || !strings.Contains(err.Error(), "SubnetNotFound") {
		t.Errorf("attach an unknown subnet: %v, want SubnetNotFound", err)
	}
	got := s.ClassicLoadBalancers()
	if len(got) != 1 || !equal(got[0].Subnets, "subnet-b") || !equal(got[0].SecurityGroups, "sg-2") || !equal(got[0].Listeners, "TCP:8080->TCP:30081") {
		t.Errorf("after the changes: %+v", got)
	}
	d, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{})
	if err != nil || len(d.LoadBalancerDescriptions) != 1 || d.LoadBalancerDescriptions[0].AvailabilityZones[0] != "us-east-1b" {
		t.Errorf("describe all: %+v, %v", d, err)
	}
	a, err := c.DescribeLoadBalancerAttributes(ctx, &elb.DescribeLoadBalancerAttributesInput{LoadBalancerName: name})
	if err != nil || aws.ToInt32(a.LoadBalancerAttributes.ConnectionSettings.IdleTimeout) != 120 || aws.ToInt32(a.LoadBalancerAttributes.ConnectionDraining.Timeout) != 300 {
		t.Errorf("attributes after modifying the idle timeout: %+v, %v", a, err)
	}
	for i := 0; i < 2; i++ {
		if _, err := c.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerName: name}); err != nil {
			t.Errorf("delete %d: %v", i, err)
		}
	}

	v2 := elbv2Client(s)
	lbOut, err := v2.CreateLoadBalancer(ctx, &elbv2.CreateLoadBalancerInput{Name: aws.String("net"), Type: elbv2types.LoadBalancerTypeEnumNetwork, Subnets: []string{"subnet-a"}})
	if err != nil {
		t.Fatal(err)
	}
	arn := lbOut.LoadBalancers[0].LoadBalancerArn
	tg := func(name string, port int32) *string {
		out, err := v2.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String(name), Protocol: elbv2types.ProtocolEnumTcp, Port: aws.Int32(port), VpcId: aws.String("vpc-1")})
		if err != nil {
			t.Fatal(err)
		}
		return out.TargetGroups[0].TargetGroupArn
	}
	tg1, tg2 := tg("one", 30080), tg("two", 30081)
	if again := tg("one", 30080); aws.ToString(again) != aws.ToString(tg1) {
		t.Errorf("creating a target group again: %s, want the same %s", aws.ToString(again), aws.ToString(tg1))
	}
	if _, err := v2.CreateTargetGroup(ctx, &elbv2.CreateTargetGroupInput{Name: aws.String("one"), Protocol: elbv2types.ProtocolEnumTcp, Port: aws.Int32(1), VpcId: aws.String("vpc-1")}); err == nil || !strings.Contains(err.Error(), "DuplicateTargetGroupName") {
		t.Errorf("same name, other settings: %v, want DuplicateTargetGroupName", err)
	}
	l, err := v2.CreateListener(ctx, &elbv2.CreateListenerInput{LoadBalancerArn: arn, Port: aws.Int32(80), Protocol: elbv2types.ProtocolEnumTcp,
		DefaultActions: []elbv2types.Action{{Type: elbv2types.ActionTypeEnumForward, TargetGroupArn: tg1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v2.ModifyListener(ctx, &elbv2.ModifyListenerInput{ListenerArn: l.Listeners[0].ListenerArn, Port: aws.Int32(81),
		DefaultActions: []elbv2types.Action{{Type: elbv2types.ActionTypeEnumForward, TargetGroupArn: tg2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.ModifyTargetGroup(ctx, &elbv2.ModifyTargetGroupInput{TargetGroupArn: tg2, HealthyThresholdCount: aws.Int32(3), HealthCheckPort: aws.String("10256")}); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.SetSecurityGroups(ctx, &elbv2.SetSecurityGroupsInput{LoadBalancerArn: arn, SecurityGroups: []string{"sg-2"}}); err != nil {
		t.Fatal(err)
	}
	nlbs := s.NetworkLoadBalancers()
	if len(nlbs) != 1 || !equal(nlbs[0].Listeners, "TCP:81->TCP:30081") || !equal(nlbs[0].HealthCheck, "TCP:10256") || !equal(nlbs[0].SecurityGroups, "sg-2") {
		t.Errorf("after the changes: %+v", nlbs)
	}
	if _, err := v2.ModifyLoadBalancerAttributes(ctx, &elbv2.ModifyLoadBalancerAttributesInput{LoadBalancerArn: arn,
		Attributes: []elbv2types.LoadBalancerAttribute{{Key: aws.String("no.such.attribute"), Value: aws.String("1")}}}); err == nil || !strings.Contains(err.Error(), "ValidationError") {
		t.Errorf("unknown attribute: %v, want ValidationError", err)
	}
	if _, err := v2.DeleteListener(ctx, &elbv2.DeleteListenerInput{ListenerArn: l.Listeners[0].ListenerArn}); err != nil {
		t.Fatal(err)
	}
	if _, err := v2.DeleteTargetGroup(ctx, &elbv2.DeleteTargetGroupInput{TargetGroupArn: tg2}); err != nil {
		t.Errorf("delete a target group no listener uses: %v", err)
	}
	for i := 0; i < 2; i++ {
		if _, err := v2.DeleteLoadBalancer(ctx, &elbv2.DeleteLoadBalancerInput{LoadBalancerArn: arn}); err != nil {
			t.Errorf("delete %d: %v", i, err)
		}
	}
}

func equal(got []string, want ...string) bool { return slices.Equal(got, want) }
