package awsbatch_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

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

// TestEnsureLoadBalancerUnknownActionsFail runs the stock AWS provider's
// EnsureLoadBalancer (classic ELB, the default, and NLB) against ec2sim with
// the cluster's subnet and a public main route table: the calls ec2sim
// answers (subnets, route tables, the classic ELB's security group) succeed,
// and the
// first action it does not know fails the call with no status — never a
// silent success — with InvalidAction as the client reads it (the ELBv2
// client too: its error is in that API's format). The actions after it are
// not simulated yet.
func TestEnsureLoadBalancerUnknownActionsFail(t *testing.T) {
	setAWSEnv(t)
	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Unthrottled: true, Topology: true,
		Zones:   []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}, {Name: "us-east-1c", ID: "use1-az4"}},
		Subnets: []ec2sim.Subnet{{ID: "subnet-0sim", VPCID: "vpc-0sim", Zone: "us-east-1a", CIDR: "10.0.0.0/24", Tags: map[string]string{"kubernetes.io/cluster/" + cluster: "owned"}}},
		RouteTables: []ec2sim.RouteTable{{ID: "rtb-0sim", VPCID: "vpc-0sim", Main: true, Routes: []ec2sim.Route{
			{DestinationCIDR: "10.0.0.0/16", GatewayID: "local"}, {DestinationCIDR: "0.0.0.0/0", GatewayID: "igw-0sim"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.Put(fleet()...)
	c, err := awsbatch.New([]byte(CloudConfig(sim.URL, "") + lbServiceOverrides(sim.URL)))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	c.Initialize(fakeBuilder{fake.NewClientset()}, stop)
	lb, ok := c.Unwrap().LoadBalancer()
	if !ok {
		t.Fatal("the AWS provider has no LoadBalancer")
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		// answered are the actions ec2sim must answer on the way; unknown
		// is the first one it does not answer yet.
		answered []string
		unknown  string
	}{
		// Both reach the ELB API (classic: 2012-06-01, NLB: ELBv2 2015-12-01).
		{"classic ELB", nil, []string{"DescribeSubnets", "DescribeRouteTables", "DescribeSecurityGroups", "CreateSecurityGroup", "AuthorizeSecurityGroupIngress"}, "DescribeLoadBalancers"},
		{"NLB", map[string]string{"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}, []string{"DescribeSubnets", "DescribeRouteTables"}, "DescribeLoadBalancers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim.ResetStats()
			svc := &v1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", Annotations: tc.annotations},
				Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, SessionAffinity: v1.ServiceAffinityNone,
					ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
					Ports:                 []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}}},
			}
			st, err := lb.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nodes())
			if err == nil || st != nil {
				t.Fatalf("EnsureLoadBalancer = %v, %v; want no status and an error (ec2sim does not know %s)", st, err, tc.unknown)
			}
			stats := sim.AllStats()
			var seen []string
			for a, s := range stats {
				seen = append(seen, a)
				if s.Errors > 0 && a != tc.unknown {
					t.Errorf("%s: %d errors; want only %s to fail", a, s.Errors, tc.unknown)
				}
			}
			slices.Sort(seen)
			t.Logf("%s: actions %v; error %v", tc.name, seen, err)
			for _, a := range tc.answered {
				if s := stats[a]; s.Requests == 0 || s.Errors != 0 || s.Items == 0 {
					t.Errorf("%s: %+v; want answered with items", a, s)
				}
			}
			if s := stats[tc.unknown]; s.Errors != 1 || !strings.Contains(err.Error(), tc.unknown) || !strings.Contains(err.Error(), "InvalidAction") {
				t.Errorf("%s: %+v, error %v; want the call to fail on it once", tc.unknown, s, err)
			}
		})
	}
}
