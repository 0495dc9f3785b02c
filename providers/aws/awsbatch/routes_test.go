package awsbatch_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/aws/awsbatch"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

// routeTable is the cluster's route table in the route tests: the VPC's
// local route and an internet gateway, tagged with the cluster's tag.
const routeTable = "rtb-0sim"

// podCIDR is the pod range of route test node n.
func podCIDR(n int) string { return fmt.Sprintf("100.96.%d.0/24", n) }

// startRouteSim starts ec2sim with the cluster's route table and the
// instances of route test nodes 1 to 5.
func startRouteSim(t *testing.T) *ec2sim.Server {
	t.Helper()
	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Unthrottled: true, Topology: true,
		Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}, {Name: "us-east-1c", ID: "use1-az4"}},
		RouteTables: []ec2sim.RouteTable{{ID: routeTable, VPCID: "vpc-0sim", Main: true, Tags: tagged, Routes: []ec2sim.Route{
			{DestinationCIDR: "10.0.0.0/16", GatewayID: "local"}, {DestinationCIDR: "0.0.0.0/0", GatewayID: "igw-0sim"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	for n := 1; n <= 5; n++ {
		sim.Put(lbBackend(n))
	}
	return sim
}

// routeCloud is the stock AWS provider (inside awsbatch) pointed at sim,
// or cloudgate over it (gated), set up as the CCM sets up its cloud:
// Initialize, then the node informer holding route test nodes 1 to 5 (the
// provider maps node names to instance IDs and back through it). Gated, it
// waits for cloudgate's first instance list (the list prefetch Initialize
// starts, a cost of starting, not of routes) by one node lookup, which
// waits for it; start is what the setup called.
func routeCloud(t *testing.T, sim *ec2sim.Server, gated bool) (routes cloudprovider.Routes, start map[string]int64) {
	t.Helper()
	c, err := awsbatch.New([]byte(CloudConfig(sim.URL, "")))
	if err != nil {
		t.Fatal(err)
	}
	var objs []runtime.Object
	for _, n := range lbNodes(1, 2, 3, 4, 5) {
		objs = append(objs, n)
	}
	cs := fake.NewClientset(objs...)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	var cloud cloudprovider.Interface = c
	if gated {
		g, err := provider.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		cloud = g
	} else {
		cloud = c.Unwrap()
	}
	cloud.Initialize(fakeBuilder{cs}, stop)
	f := informers.NewSharedInformerFactory(cs, 0)
	iu, ok := cloud.(cloudprovider.InformerUser)
	if !ok {
		t.Fatalf("%T takes no informers", cloud)
	}
	iu.SetInformers(f)
	f.Start(stop)
	f.WaitForCacheSync(stop)
	if gated {
		v2, ok := cloud.InstancesV2()
		if !ok {
			t.Fatal("cloudgate has no InstancesV2")
		}
		if exists, err := v2.InstanceExists(context.Background(), lbNodes(1)[0]); !exists || err != nil {
			t.Fatalf("cloudgate's InstanceExists(b1) = %v, %v; want true", exists, err)
		}
	}
	start = map[string]int64{}
	for a, st := range sim.AllStats() {
		start[a] = st.Requests
	}
	routes, ok = cloud.Routes()
	if !ok {
		t.Fatalf("%T has no Routes", cloud)
	}
	return routes, start
}

// routeStep is what one step of the route lifecycle returned and left in
// ec2sim.
type routeStep struct {
	listed []string // ListRoutes: "DESTINATION->NODE" or "DESTINATION blackhole"
	err    string   // the EC2 error code the call failed with, "" none
	table  []string // ec2sim's routes of the cluster's table
	// unchecked are the instances whose source/destination check is off.
	unchecked []string
	calls     map[string]int64
	errs      map[string]int64
}

var routeSteps = []string{"create", "list", "delete", "list blackhole", "replace", "list again", "create routed"}

// routeLifecycle is the route controller's work for a cluster losing and
// replacing nodes: routes for nodes 1-4, the list, node 4's route deleted,
// node 3's instance terminated (its route a blackhole in the list), its
// pod range given to node 5 (the provider deletes the blackhole route
// first), the list again, and node 1's range created once more (EC2
// refuses: the table routes it).
func routeLifecycle(t *testing.T, sim *ec2sim.Server, r cloudprovider.Routes) map[string]routeStep {
	t.Helper()
	ctx := context.Background()
	steps := map[string]routeStep{}
	create := func(n, cidr int) error {
		return r.CreateRoute(ctx, "kubernetes", fmt.Sprintf("hint-%d", n), &cloudprovider.Route{TargetNode: types.NodeName(lbNodes(n)[0].Name), DestinationCIDR: podCIDR(cidr)})
	}
	record := func(name string, listed []*cloudprovider.Route, err error) {
		s := routeStep{table: sim.Routes(routeTable), calls: map[string]int64{}, errs: map[string]int64{}}
		for n := 1; n <= 5; n++ {
			if check, _ := sim.SourceDestCheck(lbBackend(n).ID); !check {
				s.unchecked = append(s.unchecked, lbBackend(n).ID)
			}
		}
		for _, rt := range listed {
			if rt.Name != "kubernetes-"+rt.DestinationCIDR {
				t.Errorf("%s: route %+v named %q, want kubernetes-%s", name, rt, rt.Name, rt.DestinationCIDR)
			}
			if rt.Blackhole {
				s.listed = append(s.listed, rt.DestinationCIDR+" blackhole"+string(rt.TargetNode)) // a node named here would show
			} else {
				s.listed = append(s.listed, rt.DestinationCIDR+"->"+string(rt.TargetNode))
			}
		}
		if err != nil {
			s.err = "unknown: " + err.Error()
			for _, code := range []string{"RouteAlreadyExists", "InvalidRoute.NotFound", "InvalidInstanceID.NotFound"} {
				if strings.Contains(err.Error(), "api error "+code+":") {
					s.err = code
				}
			}
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
	list := func(name string) {
		routes, err := r.ListRoutes(ctx, "kubernetes")
		record(name, routes, err)
	}
	sim.ResetStats()
	var err error
	for n := 1; n <= 4 && err == nil; n++ {
		err = create(n, n)
	}
	record("create", nil, err)
	list("list")
	record("delete", nil, r.DeleteRoute(ctx, "kubernetes", &cloudprovider.Route{Name: "kubernetes-" + podCIDR(4), DestinationCIDR: podCIDR(4)}))
	sim.SetState(lbBackend(3).ID, ec2sim.StateTerminated)
	list("list blackhole")
	record("replace", nil, create(5, 3))
	list("list again")
	record("create routed", nil, create(1, 1))
	return steps
}

// TestRouteLifecycle drives the unmodified AWS provider's route calls
// (ListRoutes, CreateRoute, DeleteRoute) against ec2sim as the route
// controller makes them: the routes it creates list back with their Node
// and pod range, a deleted one is gone, a route to a terminated instance
// lists as a blackhole and is replaced by a route for another Node, the
// route targets' source/destination check is off, EC2's refusal of a
// routed destination reaches the caller, and each action is called as
// often as the provider's code says. The same through cloudgate
// (provider.New over the provider) gives the same answers, the same routes
// and the same calls.
func TestRouteLifecycle(t *testing.T) {
	setAWSEnv(t)
	id := func(n int) string { return lbBackend(n).ID }
	to := func(cidr, n int) string { return podCIDR(cidr) + "->" + id(n) }
	base := []string{"10.0.0.0/16->local", "0.0.0.0/0->igw-0sim"}
	table := func(routes ...string) []string { return append(slices.Clone(base), routes...) }
	want := map[string]routeStep{
		// Per route: the Node's instance, its check turned off, the table, the route.
		"create": {table: table(to(1, 1), to(2, 2), to(3, 3), to(4, 4)), unchecked: []string{id(1), id(2), id(3), id(4)},
			calls: map[string]int64{"DescribeInstances": 4, "ModifyInstanceAttribute": 4, "DescribeRouteTables": 4, "CreateRoute": 4}},
		// The routes' instances in one batched DescribeInstances.
		"list": {listed: []string{podCIDR(1) + "->b1", podCIDR(2) + "->b2", podCIDR(3) + "->b3", podCIDR(4) + "->b4"},
			table: table(to(1, 1), to(2, 2), to(3, 3), to(4, 4)), unchecked: []string{id(1), id(2), id(3), id(4)},
			calls: map[string]int64{"DescribeRouteTables": 1, "DescribeInstances": 1}},
		"delete": {table: table(to(1, 1), to(2, 2), to(3, 3)), unchecked: []string{id(1), id(2), id(3), id(4)},
			calls: map[string]int64{"DescribeRouteTables": 1, "DeleteRoute": 1}},
		"list blackhole": {listed: []string{podCIDR(1) + "->b1", podCIDR(2) + "->b2", podCIDR(3) + " blackhole"},
			table: table(to(1, 1), to(2, 2), to(3, 3)+" blackhole"), unchecked: []string{id(1), id(2), id(3), id(4)},
			calls: map[string]int64{"DescribeRouteTables": 1, "DescribeInstances": 1}},
		// The blackhole route to the range goes before the new one comes.
		"replace": {table: table(to(1, 1), to(2, 2), to(3, 5)), unchecked: []string{id(1), id(2), id(3), id(4), id(5)},
			calls: map[string]int64{"DescribeInstances": 1, "ModifyInstanceAttribute": 1, "DescribeRouteTables": 1, "DeleteRoute": 1, "CreateRoute": 1}},
		"list again": {listed: []string{podCIDR(1) + "->b1", podCIDR(2) + "->b2", podCIDR(3) + "->b5"},
			table: table(to(1, 1), to(2, 2), to(3, 5)), unchecked: []string{id(1), id(2), id(3), id(4), id(5)},
			calls: map[string]int64{"DescribeRouteTables": 1, "DescribeInstances": 1}},
		"create routed": {err: "RouteAlreadyExists", table: table(to(1, 1), to(2, 2), to(3, 5)), unchecked: []string{id(1), id(2), id(3), id(4), id(5)},
			calls: map[string]int64{"DescribeInstances": 1, "ModifyInstanceAttribute": 1, "DescribeRouteTables": 1, "CreateRoute": 1},
			errs:  map[string]int64{"CreateRoute": 1}},
	}
	sim := startRouteSim(t)
	stock, _ := routeCloud(t, sim, false)
	got := routeLifecycle(t, sim, stock)
	total := map[string]int64{}
	for _, name := range routeSteps {
		g, w := got[name], want[name]
		if w.errs == nil {
			w.errs = map[string]int64{}
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, g, w)
		}
		for a, n := range g.calls {
			total[a] += n
		}
	}
	var all int64
	var per []string
	for _, a := range slices.Sorted(maps.Keys(total)) {
		all += total[a]
		per = append(per, fmt.Sprintf("%s %d", a, total[a]))
	}
	t.Logf("route lifecycle: %d calls in %d steps (5 routes created, 1 refused, 1 deleted, 1 blackhole replaced, 3 lists): %s",
		all, len(routeSteps), strings.Join(per, ", "))

	// The same lifecycle through cloudgate, on a fresh ec2sim.
	sim2 := startRouteSim(t)
	gated, start := routeCloud(t, sim2, true)
	t.Logf("cloudgate's start (its first instance list, before the lifecycle): %v", start)
	viaGate := routeLifecycle(t, sim2, gated)
	for _, name := range routeSteps {
		if g, w := viaGate[name], got[name]; !reflect.DeepEqual(g, w) {
			t.Errorf("%s through cloudgate:\n got %+v\nstock %+v", name, g, w)
		}
	}
}

// TestListRoutesToPurgedInstance: ec2sim keeps the instance ID of a route
// whose instance EC2 no longer knows (a blackhole); the provider's
// ListRoutes describes that instance, gets InvalidInstanceID.NotFound and
// fails, and cloudgate passes the failure on rather than an empty list
// (which would make the route controller create every route again).
func TestListRoutesToPurgedInstance(t *testing.T) {
	setAWSEnv(t)
	for _, gated := range []bool{false, true} {
		sim := startRouteSim(t)
		r, _ := routeCloud(t, sim, gated)
		ctx := context.Background()
		for n := 1; n <= 2; n++ {
			if err := r.CreateRoute(ctx, "kubernetes", "hint", &cloudprovider.Route{TargetNode: types.NodeName(lbNodes(n)[0].Name), DestinationCIDR: podCIDR(n)}); err != nil {
				t.Fatal(err)
			}
		}
		sim.Remove(lbBackend(2).ID)
		if got, want := sim.Routes(routeTable)[3], podCIDR(2)+"->"+lbBackend(2).ID+" blackhole"; got != want {
			t.Errorf("gated %v: the purged instance's route %q, want %q", gated, got, want)
		}
		routes, err := r.ListRoutes(ctx, "kubernetes")
		if err == nil || !strings.Contains(err.Error(), "InvalidInstanceID.NotFound") || routes != nil {
			t.Errorf("gated %v: ListRoutes = %v, %v; want no routes and the provider's InvalidInstanceID.NotFound", gated, routes, err)
		}
	}
}
