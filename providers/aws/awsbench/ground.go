package awsbench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

// Region and zones of the simulated account.
const region = "us-east-1"

var zones = []ec2sim.Zone{
	{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}, {Name: "us-east-1c", ID: "use1-az4"},
}

// instanceType is every simulated instance's type: one without network
// topology, so DescribeInstanceTopology is not on the node path.
const instanceType = "m5.large"

// ground is the benchmark's ground truth on ec2sim: it implements
// bench.GroundTruth (and bench.ProviderIDer) so that bench.Cluster creates
// the instances in the simulated EC2 and their Nodes as kubelets name them
// (the private DNS name), with the AWS provider's provider IDs and
// addresses. Routes and load balancers are out of scope (the route
// controller is off, no LoadBalancer services).
type ground struct {
	sim *ec2sim.Server
	rng *rand.Rand

	mu     sync.Mutex
	next   int
	byName map[string]simcloud.Instance
}

func newGround(sim *ec2sim.Server, seed int64) *ground {
	return &ground{sim: sim, rng: rand.New(rand.NewPCG(uint64(seed), 14)), byName: map[string]simcloud.Instance{}}
}

// AddInstances puts n running instances tagged for cluster into ec2sim, in
// zones drawn from the seed.
func (g *ground) AddInstances(n int, cluster string) ([]simcloud.Instance, error) {
	if n < 0 {
		return nil, fmt.Errorf("awsbench: AddInstances: n must be >= 0, got %d", n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]simcloud.Instance, 0, n)
	put := make([]ec2sim.Instance, 0, n)
	for range n {
		i := g.next
		g.next++
		ip := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
		name := fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", i>>16, (i>>8)&255, i&255)
		zone := zones[g.rng.IntN(len(zones))].Name
		id := fmt.Sprintf("i-%017x", i+1)
		put = append(put, ec2sim.Instance{
			ID: id, Type: instanceType, Zone: zone, PrivateDNSName: name, PrivateIP: ip,
			VPCID: "vpc-0sim", SubnetID: "subnet-0sim",
			Interfaces: []ec2sim.NetworkInterface{{Status: "in-use", PrivateIPs: []string{ip}}},
			Tags:       map[string]string{"kubernetes.io/cluster/" + cluster: "owned"},
		})
		inst := simcloud.Instance{
			ID: id, NodeName: name, Type: instanceType, Zone: zone, Region: region,
			// The AWS provider's order: interface addresses, private DNS as
			// InternalDNS and Hostname.
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeInternalDNS, Address: name}, {Type: v1.NodeHostName, Address: name},
			},
		}
		g.byName[name] = inst
		out = append(out, inst)
	}
	g.sim.Put(put...)
	return out, nil
}

// ProviderIDOf is the AWS provider's provider ID.
func (g *ground) ProviderIDOf(inst simcloud.Instance) string {
	return "aws:///" + inst.Zone + "/" + inst.ID
}

func (g *ground) InstanceByNodeName(name string) (simcloud.Instance, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	inst, ok := g.byName[name]
	return inst, ok
}

func (g *ground) AddRoute(simcloud.Route) error {
	return errors.New("awsbench: routes are out of scope (the route controller is off)")
}

func (g *ground) Routes(string) []simcloud.Route         { return nil }
func (g *ground) LoadBalancers() []simcloud.LoadBalancer { return nil }
