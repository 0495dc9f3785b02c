package awsbatch_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/aws/awsbatch"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

// lbServiceOverrides point the provider's ELB and ELBv2 clients at url too:
// an action ec2sim does not know must fail there, not reach AWS.
func lbServiceOverrides(url string) string {
	return `
[ServiceOverride "2"]
Service = Elastic Load Balancing
Region = us-east-1
URL = ` + url + `
SigningRegion = us-east-1
SigningName = elasticloadbalancing

[ServiceOverride "3"]
Service = Elastic Load Balancing v2
Region = us-east-1
URL = ` + url + `
SigningRegion = us-east-1
SigningName = elasticloadbalancing
`
}

// lbBackend is backend instance n of the load balancer tests: running,
// the cluster's, one per zone in turn.
func lbBackend(n int) ec2sim.Instance {
	zone := []string{"us-east-1a", "us-east-1b", "us-east-1c"}[n%3]
	return ec2sim.Instance{ID: iid(0x100 + n), Type: "m5.large", Zone: zone, PrivateDNSName: fmt.Sprintf("ip-10-0-1-%d.ec2.internal", n),
		PrivateIP: fmt.Sprintf("10.0.1.%d", n), VPCID: "vpc-0sim", Tags: tagged, SecurityGroupIDs: []string{"sg-0node"}}
}

func lbNodes(ns ...int) []*v1.Node {
	var out []*v1.Node
	for _, n := range ns {
		in := lbBackend(n)
		out = append(out, node(fmt.Sprintf("b%d", n), "aws:///"+in.Zone+"/"+in.ID, nil))
	}
	return out
}

// startLBSim starts ec2sim with the cluster's VPC: a public subnet in each
// of three zones (a main route table with an internet gateway) and the
// backend instances 1 to 4 in the cluster's node security group.
func startLBSim(t *testing.T) *ec2sim.Server {
	t.Helper()
	var subnets []ec2sim.Subnet
	for i, z := range []string{"us-east-1a", "us-east-1b", "us-east-1c"} {
		subnets = append(subnets, ec2sim.Subnet{ID: fmt.Sprintf("subnet-0sim%d", i), VPCID: "vpc-0sim", Zone: z,
			CIDR: fmt.Sprintf("10.0.%d.0/24", i), Tags: map[string]string{"kubernetes.io/cluster/" + cluster: "owned"}})
	}
	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Unthrottled: true, Topology: true,
		Zones:   []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}, {Name: "us-east-1c", ID: "use1-az4"}},
		Subnets: subnets,
		SecurityGroups: []ec2sim.SecurityGroup{{ID: "sg-0node", Name: "nodes", Description: "cluster nodes", VPCID: "vpc-0sim",
			Tags: map[string]string{"kubernetes.io/cluster/" + cluster: "owned"}}},
		RouteTables: []ec2sim.RouteTable{{ID: "rtb-0sim", VPCID: "vpc-0sim", Main: true, Routes: []ec2sim.Route{
			{DestinationCIDR: "10.0.0.0/16", GatewayID: "local"}, {DestinationCIDR: "0.0.0.0/0", GatewayID: "igw-0sim"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	for n := 1; n <= 4; n++ {
		sim.Put(lbBackend(n))
	}
	return sim
}

// newLBCloud is the stock AWS provider (inside awsbatch, as cloudgate's
// AWS CCM builds it) pointed at sim for EC2, ELB and ELBv2.
func newLBCloud(t *testing.T, sim *ec2sim.Server) *awsbatch.Cloud {
	t.Helper()
	c, err := awsbatch.New([]byte(CloudConfig(sim.URL, "") + lbServiceOverrides(sim.URL)))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	c.Initialize(fakeBuilder{fake.NewClientset()}, stop)
	return c
}

func lbService(annotations map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", Annotations: annotations},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, SessionAffinity: v1.ServiceAffinityNone,
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
			Ports: []v1.ServicePort{
				{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080},
				{Name: "https", Protocol: v1.ProtocolTCP, Port: 443, NodePort: 30443},
			}},
	}
}

var nlbAnnotations = map[string]string{"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}

// lbStep is what one call of the lifecycle returned and left in ec2sim.
type lbStep struct {
	status *v1.LoadBalancerStatus
	exists bool
	err    string
	lbs    []ec2sim.LoadBalancer
	tgs    int
	groups []string         // the Region's security groups
	nodeIn []string         // the node security group's ingress rules
	calls  map[string]int64 // requests per action, load balancing and EC2 alike
	errs   map[string]int64 // error answers per action
}

// lbLifecycle drives one Service through EnsureLoadBalancer (nodes 1-3),
// EnsureLoadBalancer again (nothing to change), UpdateLoadBalancer (nodes
// 2-4), GetLoadBalancer, EnsureLoadBalancerDeleted and GetLoadBalancer.
func lbLifecycle(t *testing.T, sim *ec2sim.Server, lb cloudprovider.LoadBalancer, svc *v1.Service, nlb bool) map[string]lbStep {
	t.Helper()
	ctx := context.Background()
	steps := map[string]lbStep{}
	record := func(name string, st *v1.LoadBalancerStatus, exists bool, err error) {
		s := lbStep{status: st, exists: exists, calls: map[string]int64{}, errs: map[string]int64{}}
		if err != nil {
			s.err = err.Error()
		}
		if nlb {
			s.lbs = sim.NetworkLoadBalancers()
		} else {
			s.lbs = sim.ClassicLoadBalancers()
		}
		s.tgs = sim.TargetGroupCount()
		s.groups = sim.Groups()
		// Sorted: the provider authorizes a rule set in map order.
		s.nodeIn = slices.Sorted(slices.Values(sim.Ingress("sg-0node")))
		for a, x := range sim.AllStats() {
			s.calls[a] = x.Requests
			if x.Errors > 0 {
				s.errs[a] = x.Errors
			}
		}
		steps[name] = s
		sim.ResetStats()
	}
	sim.ResetStats()
	st, err := lb.EnsureLoadBalancer(ctx, "kubernetes", svc, lbNodes(1, 2, 3))
	record("ensure", st, st != nil, err)
	st, err = lb.EnsureLoadBalancer(ctx, "kubernetes", svc, lbNodes(1, 2, 3))
	record("ensure again", st, st != nil, err)
	err = lb.UpdateLoadBalancer(ctx, "kubernetes", svc, lbNodes(2, 3, 4))
	record("update", nil, false, err)
	st, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", svc)
	record("get", st, exists, err)
	err = lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc)
	record("delete", nil, false, err)
	st, exists, err = lb.GetLoadBalancer(ctx, "kubernetes", svc)
	record("get deleted", st, exists, err)
	return steps
}

// TestLoadBalancerLifecycle drives the unmodified AWS provider's load
// balancer calls against ec2sim, for a classic ELB (the default) and an NLB,
// with 3 backend Nodes and then a changed set: every call succeeds, ec2sim
// holds the load balancer the calls asked for (listeners, registered
// instances or targets, deletion), each action is called as often as the
// provider's code says, and no action fails. The same through cloudgate
// (provider.New over the provider) gives the same answers, the same
// load balancers and the same calls.
func TestLoadBalancerLifecycle(t *testing.T) {
	setAWSEnv(t)
	b := func(ns ...int) []string {
		var out []string
		for _, n := range ns {
			out = append(out, lbBackend(n).ID)
		}
		return out
	}
	targets := func(ns ...int) []string {
		var out []string
		for _, port := range []int{30080, 30443} {
			for _, id := range b(ns...) {
				out = append(out, fmt.Sprintf("%s:%d", id, port))
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name string
		svc  *v1.Service
		nlb  bool
		// want is the load balancer after ensure, and after update.
		want, updated ec2sim.LoadBalancer
		// nodeIngress is what the nodes' security group admits while the
		// load balancer exists ("sg-elb": the classic ELB's own group).
		nodeIngress []string
		// calls are the requests per action of each step (DescribeInstances
		// aside: the provider's instance cache decides those by wall time).
		calls map[string]map[string]int64
	}{
		{
			name: "classic ELB", svc: lbService(nil),
			want: ec2sim.LoadBalancer{Name: "auid1", Scheme: "internet-facing", Subnets: []string{"subnet-0sim0", "subnet-0sim1", "subnet-0sim2"},
				Listeners: []string{"TCP:80->TCP:30080", "TCP:443->TCP:30443"}, Instances: b(1, 2, 3), HealthCheck: []string{"TCP:30080"}},
			updated:     ec2sim.LoadBalancer{Instances: b(2, 3, 4)},
			nodeIngress: []string{"-1:-1--1<-sg-elb"},
			calls: map[string]map[string]int64{
				"ensure": {"DescribeAvailabilityZones": 1, "DescribeSubnets": 1, "DescribeRouteTables": 1, "DescribeSecurityGroups": 5,
					"CreateSecurityGroup": 1, "AuthorizeSecurityGroupIngress": 2, // the ELB's group, then the nodes' group
					"elb:DescribeLoadBalancers": 2, "elb:CreateLoadBalancer": 1, "elb:DescribeLoadBalancerAttributes": 1, "elb:ModifyLoadBalancerAttributes": 1,
					"elb:ConfigureHealthCheck": 1, "elb:RegisterInstancesWithLoadBalancer": 1},
				// AWS answers the connection draining timeout and the desync
				// mitigation mode the provider does not set, so it modifies
				// the attributes on every ensure.
				"ensure again": {"DescribeSubnets": 1, "DescribeRouteTables": 1, "DescribeSecurityGroups": 4,
					"elb:DescribeLoadBalancers": 2, "elb:DescribeLoadBalancerAttributes": 1, "elb:ModifyLoadBalancerAttributes": 1},
				"update": {"DescribeSecurityGroups": 2, "elb:DescribeLoadBalancers": 1,
					"elb:RegisterInstancesWithLoadBalancer": 1, "elb:DeregisterInstancesFromLoadBalancer": 1},
				"get": {"elb:DescribeLoadBalancers": 1},
				"delete": {"DescribeSecurityGroups": 4, "RevokeSecurityGroupIngress": 1, "DeleteSecurityGroup": 1,
					"elb:DescribeLoadBalancers": 1, "elb:DeleteLoadBalancer": 1},
				"get deleted": {"elb:DescribeLoadBalancers": 1},
			},
		},
		{
			name: "NLB", svc: lbService(nlbAnnotations), nlb: true,
			want: ec2sim.LoadBalancer{Name: "auid1", Scheme: "internet-facing", Subnets: []string{"subnet-0sim0", "subnet-0sim1", "subnet-0sim2"},
				Listeners: []string{"TCP:80->TCP:30080", "TCP:443->TCP:30443"}, Instances: targets(1, 2, 3), HealthCheck: []string{"TCP:traffic-port", "TCP:traffic-port"}},
			updated:     ec2sim.LoadBalancer{Instances: targets(2, 3, 4)},
			nodeIngress: []string{"icmp:3-4<-0.0.0.0/0", "tcp:30080-30080<-0.0.0.0/0", "tcp:30443-30443<-0.0.0.0/0"},
			calls: map[string]map[string]int64{
				// One target group and listener per port.
				"ensure": {"DescribeAvailabilityZones": 1, "DescribeSubnets": 2, "DescribeRouteTables": 1, "DescribeSecurityGroups": 3,
					"AuthorizeSecurityGroupIngress": 2, // the clients to the node ports, then ICMP for path MTU discovery
					"elbv2:DescribeLoadBalancers":   2, "elbv2:CreateLoadBalancer": 1, "elbv2:CreateTargetGroup": 2, "elbv2:RegisterTargets": 2,
					"elbv2:CreateListener": 2, "elbv2:DescribeLoadBalancerAttributes": 1},
				// An existing listener always marks the NLB dirty: one more describe.
				"ensure again": {"DescribeSubnets": 2, "DescribeRouteTables": 1, "DescribeSecurityGroups": 1,
					"elbv2:DescribeLoadBalancers": 3, "elbv2:DescribeListeners": 1, "elbv2:DescribeTargetGroups": 1,
					"elbv2:DescribeTargetHealth": 2, "elbv2:DescribeLoadBalancerAttributes": 1},
				// UpdateLoadBalancer is a describe and an EnsureLoadBalancer.
				"update": {"DescribeSubnets": 2, "DescribeRouteTables": 1, "DescribeSecurityGroups": 1,
					"elbv2:DescribeLoadBalancers": 4, "elbv2:DescribeListeners": 1, "elbv2:DescribeTargetGroups": 1,
					"elbv2:DescribeTargetHealth": 2, "elbv2:DeregisterTargets": 2, "elbv2:RegisterTargets": 2, "elbv2:DescribeLoadBalancerAttributes": 1},
				"get": {"elbv2:DescribeLoadBalancers": 1},
				"delete": {"DescribeSecurityGroups": 3, "RevokeSecurityGroupIngress": 2,
					"elbv2:DescribeLoadBalancers": 1, "elbv2:DescribeTargetGroups": 1, "elbv2:DeleteLoadBalancer": 1, "elbv2:DeleteTargetGroup": 2},
				"get deleted": {"elbv2:DescribeLoadBalancers": 1},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notFound := "elb:DescribeLoadBalancers"
			if tc.nlb {
				notFound = "elbv2:DescribeLoadBalancers"
			}
			sim := startLBSim(t)
			c := newLBCloud(t, sim)
			stock, ok := c.Unwrap().LoadBalancer()
			if !ok {
				t.Fatal("the AWS provider has no LoadBalancer")
			}
			got := lbLifecycle(t, sim, stock, tc.svc, tc.nlb)
			for _, name := range []string{"ensure", "ensure again", "update", "get", "delete", "get deleted"} {
				s := got[name]
				// The only error answers are the documented "no such load
				// balancer" that tells the provider to create one, or that
				// it is gone.
				wantErrs := map[string]int64{}
				if name == "ensure" || name == "get deleted" {
					wantErrs[notFound] = 1
					if tc.nlb && name == "ensure" {
						wantErrs[notFound] = 2 // once more to ensure its security group
					}
				}
				if s.err != "" || !reflect.DeepEqual(s.errs, wantErrs) {
					t.Errorf("%s: error %q, error answers %v; want none but %v", name, s.err, s.errs, wantErrs)
				}
				if tc.calls == nil {
					continue
				}
				calls := maps.Clone(s.calls)
				delete(calls, "DescribeInstances")
				if want := tc.calls[name]; !reflect.DeepEqual(calls, want) {
					t.Errorf("%s: calls %v\nwant %v", name, calls, want)
				}
			}
			check := func(step string, want ec2sim.LoadBalancer) {
				lbs := got[step].lbs
				if len(lbs) != 1 {
					t.Fatalf("%s: %d load balancers in ec2sim, want 1: %+v", step, len(lbs), lbs)
				}
				lb := lbs[0]
				if want.Name != "" && (lb.Name != want.Name || lb.Scheme != want.Scheme || !slices.Equal(lb.Subnets, want.Subnets) ||
					!slices.Equal(lb.Listeners, want.Listeners) || !slices.Equal(lb.HealthCheck, want.HealthCheck)) {
					t.Errorf("%s: load balancer %+v\nwant %+v", step, lb, want)
				}
				if !slices.Equal(lb.Instances, want.Instances) {
					t.Errorf("%s: instances %v, want %v", step, lb.Instances, want.Instances)
				}
				elbGroups := slices.DeleteFunc(slices.Clone(got[step].groups), func(g string) bool { return g == "sg-0node" })
				if tc.nlb != (len(elbGroups) == 0) || !tc.nlb && !slices.Equal(lb.SecurityGroups, elbGroups) {
					t.Errorf("%s: security groups %v, load balancer's %v; want one of its own for a classic ELB, none for an NLB", step, got[step].groups, lb.SecurityGroups)
				}
				var in []string
				for _, r := range got[step].nodeIn {
					for _, g := range elbGroups {
						r = strings.ReplaceAll(r, g, "sg-elb")
					}
					in = append(in, r)
				}
				if !slices.Equal(in, tc.nodeIngress) {
					t.Errorf("%s: the nodes' group admits %v, want %v", step, in, tc.nodeIngress)
				}
				ing := got[step].status
				if step != "update" && (ing == nil || len(ing.Ingress) != 1 || ing.Ingress[0].Hostname != lb.DNSName) {
					t.Errorf("%s: status %+v, want the load balancer's DNS name %s", step, ing, lb.DNSName)
				}
			}
			check("ensure", tc.want)
			check("ensure again", tc.want)
			check("update", tc.updated)
			if g := got["get"]; !g.exists || g.status == nil || g.status.Ingress[0].Hostname != got["update"].lbs[0].DNSName {
				t.Errorf("get: %+v, want the load balancer", g)
			}
			if d := got["delete"]; len(d.lbs) != 0 || d.tgs != 0 || !slices.Equal(d.groups, []string{"sg-0node"}) || len(d.nodeIn) != 0 {
				t.Errorf("delete: left %d load balancers, %d target groups, groups %v, node ingress %v; want none of them but the nodes' group",
					len(d.lbs), d.tgs, d.groups, d.nodeIn)
			}
			if g := got["get deleted"]; g.exists || g.status != nil || g.err != "" {
				t.Errorf("get deleted: %+v, want not found", g)
			}

			// The same lifecycle through cloudgate, on a fresh ec2sim.
			sim2 := startLBSim(t)
			gated, err := provider.New(newLBCloud(t, sim2), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { gated.Close() })
			glb, ok := gated.LoadBalancer()
			if !ok {
				t.Fatal("cloudgate has no LoadBalancer")
			}
			viaGate := lbLifecycle(t, sim2, glb, tc.svc, tc.nlb)
			for name, want := range got {
				g := viaGate[name]
				delete(g.calls, "DescribeInstances")
				delete(want.calls, "DescribeInstances")
				if !reflect.DeepEqual(g, want) {
					t.Errorf("%s through cloudgate: %+v\nstock: %+v", name, g, want)
				}
			}
		})
	}
}

// TestUnknownLoadBalancerActionFails: an ELB or ELBv2 action ec2sim does
// not simulate fails the provider's call with InvalidAction, never a silent
// success. The proxy protocol annotation makes the classic path create a
// load balancer policy, and the target group attributes annotation makes
// the NLB path describe them: neither is simulated.
func TestUnknownLoadBalancerActionFails(t *testing.T) {
	setAWSEnv(t)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		unknown     string
	}{
		{"classic ELB", map[string]string{"service.beta.kubernetes.io/aws-load-balancer-proxy-protocol": "*"}, "elb:CreateLoadBalancerPolicy"},
		{"NLB", map[string]string{"service.beta.kubernetes.io/aws-load-balancer-type": "nlb",
			"service.beta.kubernetes.io/aws-load-balancer-target-group-attributes": "preserve_client_ip.enabled=true"}, "elbv2:DescribeTargetGroupAttributes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := startLBSim(t)
			lb, _ := newLBCloud(t, sim).Unwrap().LoadBalancer()
			st, err := lb.EnsureLoadBalancer(context.Background(), "kubernetes", lbService(tc.annotations), lbNodes(1, 2, 3))
			if err == nil || st != nil {
				t.Fatalf("EnsureLoadBalancer = %v, %v; want no status and an error (ec2sim does not know %s)", st, err, tc.unknown)
			}
			stats := sim.AllStats()
			// The not-found answers are the load balancer not existing yet.
			prefix := tc.unknown[:strings.Index(tc.unknown, ":")+1]
			for a, s := range stats {
				if s.Errors > 0 && a != tc.unknown && a != prefix+"DescribeLoadBalancers" {
					t.Errorf("%s: %d errors; want only %s to fail", a, s.Errors, tc.unknown)
				}
			}
			action := tc.unknown[len(prefix):]
			// It fails once per listener's target group, or once.
			if s := stats[tc.unknown]; s.Errors < 1 || s.Errors != s.Requests || !strings.Contains(err.Error(), action) || !strings.Contains(err.Error(), "InvalidAction") {
				t.Errorf("%s: %+v, error %v; want the call to fail on it once", tc.unknown, s, err)
			}
		})
	}
}
