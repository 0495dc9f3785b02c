package ec2sim

import (
	"context"
	"errors"
	"net/http"
	"net/url"
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
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:     retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = attempts }),
	})
}

func elbv2Client(s *Server) *elbv2.Client {
	return elbv2.New(elbv2.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
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
	resp, err := http.PostForm(s.URL, url.Values{"Action": {"ListQueues"}, "Version": {"2012-11-05"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || s.Stats("ListQueues").Errors != 1 {
		t.Errorf("another API: HTTP %d, %+v", resp.StatusCode, s.Stats("ListQueues"))
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
