package gcebench

import (
	"fmt"
	"math/rand/v2"
	"path"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/providers/gce/gcesim"
)

// machineType is every simulated instance's machine type.
const machineType = "e2-standard-4"

// ground is the benchmark's ground truth on gcesim: it implements bench.GroundTruth (and
// bench.ProviderIDer) so that bench.Cluster creates the instances in gcesim and their Nodes
// as kubelets name them (the instance name), with the GCE provider's provider IDs and
// addresses, and reads the routes the route controller made back from gcesim.
type ground struct {
	sim *gcesim.Server
	rng *rand.Rand

	mu     sync.Mutex
	next   int
	byName map[string]simcloud.Instance
}

func newGround(sim *gcesim.Server, seed int64) *ground {
	return &ground{sim: sim, rng: rand.New(rand.NewPCG(uint64(seed), 41)), byName: map[string]simcloud.Instance{}}
}

// AddInstances puts n running instances into gcesim, in zones drawn from the seed.
func (g *ground) AddInstances(n int, cluster string) ([]simcloud.Instance, error) {
	if n < 0 {
		return nil, fmt.Errorf("gcebench: AddInstances: n must be >= 0, got %d", n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	zones := g.sim.Zones()
	out := make([]simcloud.Instance, 0, n)
	for range n {
		i := g.next
		g.next++
		ip := fmt.Sprintf("10.%d.%d.%d", 64+i>>16, (i>>8)&255, i&255)
		name := fmt.Sprintf("%s-node-%05d", cluster, i)
		zone := zones[g.rng.IntN(len(zones))]
		g.sim.Put(gcesim.Instance{Name: name, Zone: zone, MachineType: machineType, InternalIP: ip})
		inst := simcloud.Instance{
			ID: name, NodeName: name, Type: machineType, Zone: zone, Region: g.sim.Region(),
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}},
		}
		g.byName[name] = inst
		out = append(out, inst)
	}
	return out, nil
}

// ProviderIDOf is the GCE provider's provider ID.
func (g *ground) ProviderIDOf(inst simcloud.Instance) string {
	return g.sim.ProviderID(inst.Zone, inst.NodeName)
}

func (g *ground) InstanceByNodeName(name string) (simcloud.Instance, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	inst, ok := g.byName[name]
	return inst, ok
}

func (g *ground) AddRoute(simcloud.Route) error {
	return fmt.Errorf("gcebench: routes are made by the route controller only")
}

// Routes are gcesim's routes, as the route controller sees them.
func (g *ground) Routes(cluster string) []simcloud.Route {
	var out []simcloud.Route
	for _, r := range g.sim.Routes() {
		out = append(out, simcloud.Route{Cluster: cluster, Name: r.Name, TargetNode: path.Base(r.NextHopInstance), DestinationCIDR: r.DestRange})
	}
	return out
}

func (g *ground) LoadBalancers() []simcloud.LoadBalancer { return nil }
