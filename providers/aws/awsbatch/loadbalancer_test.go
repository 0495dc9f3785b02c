package awsbatch_test

import (
	"context"
	"fmt"
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
	lbIn   []string         // a classic ELB's own group's ingress rules
	calls  map[string]int64 // requests per action, load balancing and EC2 alike
	errs   map[string]int64 // error answers per action
}

var lbSteps = []string{"ensure", "ensure again", "update", "change ports", "get", "delete", "get deleted"}

// lbLifecycle drives one Service through EnsureLoadBalancer (nodes 1-3),
// EnsureLoadBalancer again (nothing to change), UpdateLoadBalancer (nodes
// 2-4), EnsureLoadBalancer with changed ports (443 replaced by 8080),
// GetLoadBalancer, EnsureLoadBalancerDeleted and GetLoadBalancer.
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
		if len(s.lbs) == 1 && len(s.lbs[0].SecurityGroups) == 1 && !nlb {
			s.lbIn = slices.Sorted(slices.Values(sim.Ingress(s.lbs[0].SecurityGroups[0])))
		}
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
	changed := svc.DeepCopy()
	changed.Spec.Ports[1] = v1.ServicePort{Name: "alt", Protocol: v1.ProtocolTCP, Port: 8080, NodePort: 30081}
	st, err = lb.EnsureLoadBalancer(ctx, "kubernetes", changed, lbNodes(2, 3, 4))
	record("change ports", st, st != nil, err)
	st, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", svc)
	record("get", st, exists, err)
	err = lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc)
	record("delete", nil, false, err)
	st, exists, err = lb.GetLoadBalancer(ctx, "kubernetes", svc)
	record("get deleted", st, exists, err)
	return steps
}

// lbState is what ec2sim holds after a step: the load balancer, what the
// nodes' security group admits ("sg-elb": the classic ELB's own group) and
// what the classic ELB's own group admits.
type lbState struct {
	lb                     ec2sim.LoadBalancer
	nodeIngress, lbIngress []string
}

// TestLoadBalancerLifecycle drives the unmodified AWS provider's load
// balancer calls against ec2sim, for a classic ELB (the default) and an NLB,
// with 3 backend Nodes, then a changed node set and changed ports: every
// call succeeds, ec2sim holds the load balancer the calls asked for
// (listeners, registered instances or targets, security group rules,
// deletion), each action is called as often as the provider's code says,
// and no action fails but the documented "not found" answers. The same
// through cloudgate (provider.New over the provider) gives the same
// answers, the same load balancers and the same calls.
func TestLoadBalancerLifecycle(t *testing.T) {
	setAWSEnv(t)
	b := func(ns ...int) []string {
		var out []string
		for _, n := range ns {
			out = append(out, lbBackend(n).ID)
		}
		return out
	}
	targets := func(ports []int, ns ...int) []string {
		var out []string
		for _, port := range ports {
			for _, id := range b(ns...) {
				out = append(out, fmt.Sprintf("%s:%d", id, port))
			}
		}
		slices.Sort(out)
		return out
	}
	subnets := []string{"subnet-0sim0", "subnet-0sim1", "subnet-0sim2"}
	listeners := []string{"TCP:80->TCP:30080", "TCP:443->TCP:30443"}
	changedListeners := []string{"TCP:80->TCP:30080", "TCP:8080->TCP:30081"}
	classic := func(l []string, ns ...int) ec2sim.LoadBalancer {
		return ec2sim.LoadBalancer{Name: "auid1", Scheme: "internet-facing", Subnets: subnets, Listeners: l, Instances: b(ns...), HealthCheck: []string{"TCP:30080"}}
	}
	network := func(l []string, ports []int, ns ...int) ec2sim.LoadBalancer {
		return ec2sim.LoadBalancer{Name: "auid1", Scheme: "internet-facing", Subnets: subnets, Listeners: l, Instances: targets(ports, ns...),
			HealthCheck: []string{"TCP:traffic-port", "TCP:traffic-port"}}
	}
	// The classic ELB's group admits the clients to its ports, and ICMP
	// for path MTU discovery.
	elbIn := []string{"icmp:3-4<-0.0.0.0/0", "tcp:443-443<-0.0.0.0/0", "tcp:80-80<-0.0.0.0/0"}
	changedELBIn := []string{"icmp:3-4<-0.0.0.0/0", "tcp:80-80<-0.0.0.0/0", "tcp:8080-8080<-0.0.0.0/0"}
	nlbIn := []string{"icmp:3-4<-0.0.0.0/0", "tcp:30080-30080<-0.0.0.0/0", "tcp:30443-30443<-0.0.0.0/0"}
	changedNLBIn := []string{"icmp:3-4<-0.0.0.0/0", "tcp:30080-30080<-0.0.0.0/0", "tcp:30081-30081<-0.0.0.0/0"}
	for _, tc := range []struct {
		name string
		svc  *v1.Service
		nlb  bool
		// states are ec2sim's state after the steps the load balancer exists in.
		states map[string]lbState
		// calls are the requests per action of each step. The provider
		// describes all the cluster's instances once (its instance cache,
		// whose max age is far longer than the test, serves the other steps).
		calls map[string]map[string]int64
	}{
		{
			name: "classic ELB", svc: lbService(nil),
			states: map[string]lbState{
				"ensure":       {classic(listeners, 1, 2, 3), []string{"-1:-1--1<-sg-elb"}, elbIn},
				"ensure again": {classic(listeners, 1, 2, 3), []string{"-1:-1--1<-sg-elb"}, elbIn},
				"update":       {classic(listeners, 2, 3, 4), []string{"-1:-1--1<-sg-elb"}, elbIn},
				"change ports": {classic(changedListeners, 2, 3, 4), []string{"-1:-1--1<-sg-elb"}, changedELBIn},
				"get":          {classic(changedListeners, 2, 3, 4), []string{"-1:-1--1<-sg-elb"}, changedELBIn},
			},
			calls: map[string]map[string]int64{
				"ensure": {"DescribeInstances": 1, "DescribeAvailabilityZones": 1, "DescribeSubnets": 1, "DescribeRouteTables": 1, "DescribeSecurityGroups": 5,
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
				"change ports": {"DescribeSubnets": 1, "DescribeRouteTables": 1, "DescribeSecurityGroups": 4,
					"AuthorizeSecurityGroupIngress": 1, "RevokeSecurityGroupIngress": 1, // the ELB's group: 8080 in, 443 out
					"elb:DescribeLoadBalancers": 2, "elb:DeleteLoadBalancerListeners": 1, "elb:CreateLoadBalancerListeners": 1,
					"elb:DescribeLoadBalancerAttributes": 1, "elb:ModifyLoadBalancerAttributes": 1},
				"get": {"elb:DescribeLoadBalancers": 1},
				"delete": {"DescribeSecurityGroups": 4, "RevokeSecurityGroupIngress": 1, "DeleteSecurityGroup": 1,
					"elb:DescribeLoadBalancers": 1, "elb:DeleteLoadBalancer": 1},
				"get deleted": {"elb:DescribeLoadBalancers": 1},
			},
		},
		{
			name: "NLB", svc: lbService(nlbAnnotations), nlb: true,
			states: map[string]lbState{
				"ensure":       {network(listeners, []int{30080, 30443}, 1, 2, 3), nlbIn, nil},
				"ensure again": {network(listeners, []int{30080, 30443}, 1, 2, 3), nlbIn, nil},
				"update":       {network(listeners, []int{30080, 30443}, 2, 3, 4), nlbIn, nil},
				"change ports": {network(changedListeners, []int{30080, 30081}, 2, 3, 4), changedNLBIn, nil},
				"get":          {network(changedListeners, []int{30080, 30081}, 2, 3, 4), changedNLBIn, nil},
			},
			calls: map[string]map[string]int64{
				// One target group and listener per port.
				"ensure": {"DescribeInstances": 1, "DescribeAvailabilityZones": 1, "DescribeSubnets": 2, "DescribeRouteTables": 1, "DescribeSecurityGroups": 3,
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
				// Port 443's listener and target group go, 8080's come.
				"change ports": {"DescribeSubnets": 2, "DescribeRouteTables": 1, "DescribeSecurityGroups": 3,
					"AuthorizeSecurityGroupIngress": 1, "RevokeSecurityGroupIngress": 1,
					"elbv2:DescribeLoadBalancers": 3, "elbv2:DescribeListeners": 1, "elbv2:DescribeTargetGroups": 1, "elbv2:DescribeTargetHealth": 1,
					"elbv2:CreateTargetGroup": 1, "elbv2:RegisterTargets": 1, "elbv2:CreateListener": 1, "elbv2:DeleteListener": 1,
					"elbv2:DeleteTargetGroup": 1, "elbv2:DescribeLoadBalancerAttributes": 1},
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
			stock, ok := newLBCloud(t, sim).Unwrap().LoadBalancer()
			if !ok {
				t.Fatal("the AWS provider has no LoadBalancer")
			}
			got := lbLifecycle(t, sim, stock, tc.svc, tc.nlb)
			var total int64
			for _, name := range lbSteps {
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
				if want := tc.calls[name]; !reflect.DeepEqual(s.calls, want) {
					t.Errorf("%s: calls %v\nwant %v", name, s.calls, want)
				}
				for _, n := range s.calls {
					total += n
				}

				want, exists := tc.states[name]
				if !exists {
					if len(s.lbs) != 0 || s.tgs != 0 || !slices.Equal(s.groups, []string{"sg-0node"}) || len(s.nodeIn) != 0 {
						t.Errorf("%s: left %d load balancers, %d target groups, groups %v, node ingress %v; want none of them but the nodes' group",
							name, len(s.lbs), s.tgs, s.groups, s.nodeIn)
					}
					continue
				}
				if len(s.lbs) != 1 {
					t.Fatalf("%s: %d load balancers in ec2sim, want 1: %+v", name, len(s.lbs), s.lbs)
				}
				lb := s.lbs[0]
				if lb.Name != want.lb.Name || lb.Scheme != want.lb.Scheme || !slices.Equal(lb.Subnets, want.lb.Subnets) ||
					!slices.Equal(lb.Listeners, want.lb.Listeners) || !slices.Equal(lb.Instances, want.lb.Instances) ||
					!slices.Equal(lb.HealthCheck, want.lb.HealthCheck) {
					t.Errorf("%s: load balancer %+v\nwant %+v", name, lb, want.lb)
				}
				elbGroups := slices.DeleteFunc(slices.Clone(s.groups), func(g string) bool { return g == "sg-0node" })
				if tc.nlb != (len(elbGroups) == 0) || !tc.nlb && !slices.Equal(lb.SecurityGroups, elbGroups) {
					t.Errorf("%s: security groups %v, load balancer's %v; want one of its own for a classic ELB, none for an NLB", name, s.groups, lb.SecurityGroups)
				}
				var in []string
				for _, r := range s.nodeIn {
					for _, g := range elbGroups {
						r = strings.ReplaceAll(r, g, "sg-elb")
					}
					in = append(in, r)
				}
				if !slices.Equal(in, want.nodeIngress) || !slices.Equal(s.lbIn, want.lbIngress) {
					t.Errorf("%s: the nodes' group admits %v, the load balancer's %v; want %v, %v", name, in, s.lbIn, want.nodeIngress, want.lbIngress)
				}
				if st := s.status; name != "update" && name != "change ports" && (!s.exists || st == nil || len(st.Ingress) != 1 || st.Ingress[0].Hostname != lb.DNSName) {
					t.Errorf("%s: status %+v, want the load balancer's DNS name %s", name, st, lb.DNSName)
				}
			}
			if g := got["get deleted"]; g.exists || g.status != nil {
				t.Errorf("get deleted: %+v, want not found", g)
			}
			t.Logf("%s: %d calls in %d steps, as the provider's code makes them", tc.name, total, len(lbSteps))

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
			for _, name := range lbSteps {
				if g, want := viaGate[name], got[name]; !reflect.DeepEqual(g, want) {
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
