package gcerequests_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/gce/gcebatch"
	"github.com/cloudgate/cloudgate/providers/gce/gcerequests"
	"github.com/cloudgate/cloudgate/providers/gce/gcesim"
)

// sent is cloudgate_cloud_requests_total of the provider label "gce" in
// metrics.Default, by action and by action and method.
func sent(t *testing.T) (byAction map[string]int, byMethod map[[2]string]int) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := metrics.Default.Register(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byAction, byMethod = map[string]int{}, map[[2]string]int{}
	for _, mf := range mfs {
		if mf.GetName() != "cloudgate_cloud_requests_total" {
			continue
		}
		for _, s := range mf.Metric {
			l := map[string]string{}
			for _, p := range s.Label {
				l[p.GetName()] = p.GetValue()
			}
			if l["provider"] != "gce" || l["service"] != gcerequests.Service {
				continue
			}
			n := int(s.GetCounter().GetValue())
			byAction[l["action"]] += n
			byMethod[[2]string{l["action"], l["method"]}] += n
		}
	}
	return byAction, byMethod
}

// noInit is a cloud without Initialize (the GCE provider's needs a kube
// client); cloudgate builds its gate on the first call instead.
type noInit struct{ cloudprovider.Interface }

func (noInit) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

func node(name, providerID string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: providerID}}
}

// TestRequestsThroughGate runs the unmodified GCE provider, as gce-batch
// and as gce, under cloudgate against gcesim, after Install: instance
// lookups (by name and by provider ID), the adapter's list, and a route's
// insert, list and delete with their operation polls. cloudgate's request
// counts per action then equal gcesim's per method, but for the one
// zones.list the provider sends while it is built, before any limiter can
// be set (docs/gce.md, what does not pass). Requests sent with a cloudgate
// call's context carry its method: the adapter's instances.list and
// aggregatedList, every route request, InstanceMetadata's instances.get;
// the provider's other instance lookups build their own context and are
// unattributed.
func TestRequestsThroughGate(t *testing.T) {
	if _, err := gcerequests.Install(); err != nil {
		t.Fatal(err)
	}
	sim, err := gcesim.Start(gcesim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	t.Setenv("GCE_METADATA_HOST", sim.MetadataHost())
	zs := sim.Zones()
	for i := 1; i <= 6; i++ {
		sim.Put(gcesim.Instance{Name: fmt.Sprintf("node-%d", i), Zone: zs[i%len(zs)], MachineType: "e2-standard-4", InternalIP: fmt.Sprintf("10.0.0.%d", i)})
	}
	beforeAction, beforeMethod := sent(t)

	conf := fmt.Sprintf("[global]\napi-endpoint = %s\ntoken-url = %s\nproject-id = %s\nlocal-zone = %s\nnetwork-name = default\nsubnetwork-name = default\nmultizone = true\n",
		sim.APIEndpoint(), sim.TokenURL(), sim.Project(), zs[0])
	c, err := gcebatch.New([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, up := range []cloudprovider.Interface{noInit{c}, noInit{c.Unwrap()}} { // gce-batch, gce
		gated, err := provider.New(up, nil)
		if err != nil {
			t.Fatal(err)
		}
		v2, _ := gated.InstancesV2()
		for i := 1; i <= 7; i++ { // node-7: no such instance
			name := fmt.Sprintf("node-%d", i)
			if _, err := v2.InstanceMetadata(ctx, node(name, "")); err != nil && i < 7 {
				t.Errorf("%T: metadata of %s: %v", up, name, err)
			}
			_, _ = v2.InstanceExists(ctx, node(name, sim.ProviderID(zs[i%len(zs)], name)))
		}
		_ = gated.(interface{ Close() error }).Close()
	}
	if _, _, err := c.BatchInstances().ListInstances(provider.WithCall(ctx, provider.Call{Method: "ListInstances"}), ""); err != nil {
		t.Fatal(err)
	}
	gated, err := provider.New(noInit{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gated.(interface{ Close() error }).Close() }()
	routes, _ := gated.Routes()
	r := &cloudprovider.Route{TargetNode: types.NodeName("node-1"), DestinationCIDR: "10.64.1.0/24"}
	if err := routes.CreateRoute(ctx, "e2e", "r1", r); err != nil {
		t.Fatal(err)
	}
	listed, err := routes.ListRoutes(ctx, "e2e")
	if err != nil || len(listed) != 1 {
		t.Fatalf("routes: %v, %v; want the one created", listed, err)
	}
	if err := routes.DeleteRoute(ctx, "e2e", listed[0]); err != nil {
		t.Fatal(err)
	}

	afterAction, afterMethod := sent(t)
	gate := map[string]int{}
	for a, n := range afterAction {
		if d := n - beforeAction[a]; d > 0 {
			gate[a] = d
		}
	}
	want := map[string]int{}
	for m, n := range sim.Calls() {
		a, ok := strings.CutPrefix(m, "compute.")
		if !ok {
			continue // the token, the metadata server
		}
		if strings.HasPrefix(a, "globalOperations.") { // get or wait: one label
			a = "operations.get"
		}
		want[a] += n
	}
	want["zones.list"]-- // the provider's own, while it is built
	if want["zones.list"] == 0 {
		delete(want, "zones.list")
	}
	if !maps.Equal(gate, want) {
		t.Errorf("cloudgate counted %v,\n gcesim (less the provider's build-time zones.list) %v\n (gcesim: %v)", gate, want, sim.Calls())
	}
	for _, a := range []string{"instances.list", "instances.aggregatedList", "instances.get", "routes.insert", "routes.list", "routes.delete", "operations.get", "zones.list"} {
		if gate[a] == 0 {
			t.Errorf("no %s request: the test does not exercise what it claims (%v)", a, gate)
		}
	}
	methods := map[string][]string{}
	for k, n := range afterMethod {
		if n-beforeMethod[k] > 0 {
			methods[k[0]] = append(methods[k[0]], k[1])
		}
	}
	for a, ms := range methods {
		slices.Sort(ms)
		attributed := !slices.Contains(ms, provider.Unattributed)
		switch a {
		case "instances.get":
			// InstanceMetadata's get by provider ID carries the call's context;
			// the provider's other lookups (a Node's name to its provider ID,
			// InstanceExists by provider ID, CreateRoute's next-hop instance)
			// build their own (cloud.ContextWithCallTimeout).
			if !slices.Equal(ms, []string{"InstanceMetadata", provider.Unattributed}) {
				t.Errorf("%s sent for %v, want InstanceMetadata and unattributed (the provider's own contexts)", a, ms)
			}
		case "zones.list":
			if !slices.Equal(ms, []string{provider.Unattributed}) { // the adapter's, at its build
				t.Errorf("%s sent for %v", a, ms)
			}
		default:
			if !attributed {
				t.Errorf("%s sent for %v: a request inside a cloudgate call must carry its method", a, ms)
			}
		}
	}
	if got := methods["instances.list"]; !slices.Equal(got, []string{"BatchInstanceStatus"}) {
		t.Errorf("instances.list sent for %v, want the batch's method", got)
	}
	if rl := gcerequests.Limiter(); rl.Pending() != 0 {
		t.Errorf("%d calls left unanswered", rl.Pending())
	}
}
