package simcloud

import (
	"context"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

func TestCloudInterfaceShape(t *testing.T) {
	s := startServer(t, ServerConfig{})
	c := cloudFor(t, s, "")
	var iface cloudprovider.Interface = c
	if iface.ProviderName() != "simcloud" || !iface.HasClusterID() {
		t.Fatalf("ProviderName=%q HasClusterID=%v", iface.ProviderName(), iface.HasClusterID())
	}
	iface.Initialize(nil, nil)
	for name, ok := range map[string]bool{
		"LoadBalancer": second(iface.LoadBalancer()),
		"Instances":    second(iface.Instances()),
		"InstancesV2":  second(iface.InstancesV2()),
		"Zones":        second(iface.Zones()),
		"Clusters":     second(iface.Clusters()),
		"Routes":       second(iface.Routes()),
	} {
		if !ok {
			t.Errorf("%s() ok = false", name)
		}
	}
	batcher(t, c)
	if n := s.Counters().TotalCalls(); n != 0 {
		t.Fatalf("building the client made %d calls", n)
	}
}

func second[T any](_ T, ok bool) bool { return ok }

func TestInstancesV2RoundTrip(t *testing.T) {
	s := startServer(t, ServerConfig{})
	insts := addInstances(t, s, 3, "node")
	c := cloudFor(t, s, "")
	v2, _ := c.InstancesV2()
	ctx := context.Background()
	in := insts[1]

	for _, node := range []*v1.Node{nodeByProviderID(in.NodeName, in.ProviderID()), nodeByName(in.NodeName)} {
		exists, err := v2.InstanceExists(ctx, node)
		if err != nil || !exists {
			t.Fatalf("InstanceExists(%s) = %v, %v", node.Spec.ProviderID, exists, err)
		}
		md, err := v2.InstanceMetadata(ctx, node)
		if err != nil {
			t.Fatal(err)
		}
		if md.ProviderID != in.ProviderID() || md.InstanceType != in.Type || md.Zone != in.Zone || md.Region != in.Region ||
			!slices.Equal(md.NodeAddresses, in.Addresses) {
			t.Fatalf("metadata %+v, want %+v", md, in)
		}
		if md.InstanceType != "sim-standard-2" || md.Zone != "zone-b" || !strings.HasPrefix(md.NodeAddresses[0].Address, "10.") ||
			md.NodeAddresses[1] != (v1.NodeAddress{Type: v1.NodeHostName, Address: "node-00001"}) {
			t.Fatalf("AddInstances layout changed: %+v", md)
		}
	}
	node := nodeByName(in.NodeName)
	if down, err := v2.InstanceShutdown(ctx, node); err != nil || down {
		t.Fatalf("InstanceShutdown = %v, %v", down, err)
	}
	s.SetShutdown(in.ID, true)
	if down, err := v2.InstanceShutdown(ctx, node); err != nil || !down {
		t.Fatalf("InstanceShutdown after SetShutdown = %v, %v", down, err)
	}

	s.DeleteInstance(in.ID)
	for _, node := range []*v1.Node{nodeByProviderID(in.NodeName, in.ProviderID()), nodeByName(in.NodeName)} {
		exists, err := v2.InstanceExists(ctx, node)
		if err != nil || exists {
			t.Fatalf("InstanceExists(deleted) = %v, %v; want false, nil", exists, err)
		}
		if _, err := v2.InstanceShutdown(ctx, node); err != cloudprovider.InstanceNotFound {
			t.Fatalf("InstanceShutdown(deleted) err = %v, want InstanceNotFound", err)
		}
		if md, err := v2.InstanceMetadata(ctx, node); err != cloudprovider.InstanceNotFound || md != nil {
			t.Fatalf("InstanceMetadata(deleted) = %v, %v; want nil, InstanceNotFound", md, err)
		}
	}
	// A foreign provider ID is an error, never "does not exist".
	if exists, err := v2.InstanceExists(ctx, nodeByProviderID("x", "aws:///zone/i-1")); err == nil || exists {
		t.Fatalf("foreign provider ID: %v, %v", exists, err)
	}
}

func TestInstancesV1AndZonesRoundTrip(t *testing.T) {
	s := startServer(t, ServerConfig{})
	insts := addInstances(t, s, 3, "node")
	c := cloudFor(t, s, "")
	inst, _ := c.Instances()
	zs, _ := c.Zones()
	ctx := context.Background()
	in := insts[2]
	name, pid := types.NodeName(in.NodeName), in.ProviderID()

	if addrs, err := inst.NodeAddresses(ctx, name); err != nil || !slices.Equal(addrs, in.Addresses) {
		t.Fatalf("NodeAddresses = %v, %v", addrs, err)
	}
	if addrs, err := inst.NodeAddressesByProviderID(ctx, pid); err != nil || !slices.Equal(addrs, in.Addresses) {
		t.Fatalf("NodeAddressesByProviderID = %v, %v", addrs, err)
	}
	if id, err := inst.InstanceID(ctx, name); err != nil || id != in.Zone+"/"+in.ID {
		t.Fatalf("InstanceID = %q, %v", id, err)
	}
	if got, err := cloudprovider.GetInstanceProviderID(ctx, c, name); err != nil || got != pid {
		t.Fatalf("GetInstanceProviderID = %q, %v; want %q", got, err, pid)
	}
	if typ, err := inst.InstanceType(ctx, name); err != nil || typ != in.Type {
		t.Fatalf("InstanceType = %q, %v", typ, err)
	}
	if typ, err := inst.InstanceTypeByProviderID(ctx, pid); err != nil || typ != in.Type {
		t.Fatalf("InstanceTypeByProviderID = %q, %v", typ, err)
	}
	if err := inst.AddSSHKeyToAllInstances(ctx, "root", []byte("ssh-ed25519 AAAA")); err != cloudprovider.NotImplemented {
		t.Fatalf("AddSSHKeyToAllInstances = %v, want NotImplemented", err)
	}
	if n, err := inst.CurrentNodeName(ctx, "host-1"); err != nil || n != "host-1" {
		t.Fatalf("CurrentNodeName = %q, %v", n, err)
	}
	if ok, err := inst.InstanceExistsByProviderID(ctx, pid); err != nil || !ok {
		t.Fatalf("InstanceExistsByProviderID = %v, %v", ok, err)
	}
	s.SetShutdown(in.ID, true)
	if down, err := inst.InstanceShutdownByProviderID(ctx, pid); err != nil || !down {
		t.Fatalf("InstanceShutdownByProviderID = %v, %v", down, err)
	}
	if z, err := zs.GetZoneByProviderID(ctx, pid); err != nil || z != (cloudprovider.Zone{FailureDomain: "zone-c", Region: "region-1"}) {
		t.Fatalf("GetZoneByProviderID = %+v, %v", z, err)
	}
	if z, err := zs.GetZoneByNodeName(ctx, name); err != nil || z.FailureDomain != in.Zone || z.Region != in.Region {
		t.Fatalf("GetZoneByNodeName = %+v, %v", z, err)
	}
	if _, err := zs.GetZone(ctx); err != cloudprovider.NotImplemented {
		t.Fatalf("GetZone = %v, want NotImplemented", err)
	}
	callsBefore := s.Counters().TotalCalls()

	s.DeleteInstance(in.ID)
	if _, err := inst.NodeAddresses(ctx, name); err != cloudprovider.InstanceNotFound {
		t.Fatalf("NodeAddresses(deleted) = %v", err)
	}
	if _, err := inst.NodeAddressesByProviderID(ctx, pid); err != cloudprovider.InstanceNotFound {
		t.Fatalf("NodeAddressesByProviderID(deleted) = %v", err)
	}
	if _, err := inst.InstanceID(ctx, name); err != cloudprovider.InstanceNotFound {
		t.Fatalf("InstanceID(deleted) = %v", err)
	}
	if _, err := cloudprovider.GetInstanceProviderID(ctx, c, name); err != cloudprovider.InstanceNotFound {
		t.Fatalf("GetInstanceProviderID(deleted) = %v", err)
	}
	if _, err := inst.InstanceType(ctx, name); err != cloudprovider.InstanceNotFound {
		t.Fatalf("InstanceType(deleted) = %v", err)
	}
	if _, err := inst.InstanceTypeByProviderID(ctx, pid); err != cloudprovider.InstanceNotFound {
		t.Fatalf("InstanceTypeByProviderID(deleted) = %v", err)
	}
	if ok, err := inst.InstanceExistsByProviderID(ctx, pid); err != nil || ok {
		t.Fatalf("InstanceExistsByProviderID(deleted) = %v, %v", ok, err)
	}
	if _, err := inst.InstanceShutdownByProviderID(ctx, pid); err != cloudprovider.InstanceNotFound {
		t.Fatalf("InstanceShutdownByProviderID(deleted) = %v", err)
	}
	if _, err := zs.GetZoneByProviderID(ctx, pid); err != cloudprovider.InstanceNotFound {
		t.Fatalf("GetZoneByProviderID(deleted) = %v", err)
	}
	if _, err := zs.GetZoneByNodeName(ctx, name); err != cloudprovider.InstanceNotFound {
		t.Fatalf("GetZoneByNodeName(deleted) = %v", err)
	}
	cnt := s.Counters()
	if cnt.TotalCalls()-callsBefore != 10 || cnt.ClientErrors[MethodGetInstance]+cnt.ClientErrors[MethodGetInstanceByName] != 10 {
		t.Fatalf("counters %+v: want 10 more calls, all 404s", cnt)
	}
}

func TestClustersRoundTrip(t *testing.T) {
	s := startServer(t, ServerConfig{Clusters: []string{"prod", "kubernetes"}})
	c := cloudFor(t, s, "")
	cl, _ := c.Clusters()
	ctx := context.Background()
	names, err := cl.ListClusters(ctx)
	if err != nil || !slices.Equal(names, []string{"kubernetes", "prod"}) {
		t.Fatalf("ListClusters = %v, %v", names, err)
	}
	if addr, err := cl.Master(ctx, "prod"); err != nil || addr != "api.prod.simcloud.invalid" {
		t.Fatalf("Master = %q, %v", addr, err)
	}
	_, err = cl.Master(ctx, "nope")
	apiError(t, err, http.StatusNotFound, CodeClusterNotFound)
	cnt := s.Counters()
	if cnt.Calls[MethodListClusters] != 1 || cnt.Calls[MethodGetMaster] != 2 {
		t.Fatalf("counters %+v", cnt)
	}
}

func TestLoadBalancerRoundTripAndWriteLog(t *testing.T) {
	s := startServer(t, ServerConfig{})
	insts := addInstances(t, s, 3, "node")
	c := cloudFor(t, s, "")
	lb, _ := c.LoadBalancer()
	ctx := context.Background()
	svc1, svc2 := service("1111-aaaa", 80, 443), service("2222-bbbb", 53)
	nodes := []*v1.Node{nodeByName(insts[2].NodeName), nodeByName(insts[0].NodeName), nil}

	if name := lb.GetLoadBalancerName(ctx, "kubernetes", svc1); name != "a1111aaaa" || name != cloudprovider.DefaultLoadBalancerName(svc1) {
		t.Fatalf("GetLoadBalancerName = %q", name)
	}
	if st, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", svc1); st != nil || exists || err != nil {
		t.Fatalf("GetLoadBalancer(absent) = %v, %v, %v", st, exists, err)
	}
	st, err := lb.EnsureLoadBalancer(ctx, "kubernetes", svc1, nodes)
	if err != nil || len(st.Ingress) != 1 || st.Ingress[0].IP != "203.0.113.1" || *st.Ingress[0].IPMode != v1.LoadBalancerIPModeVIP {
		t.Fatalf("EnsureLoadBalancer = %+v, %v", st, err)
	}
	if st, err := lb.EnsureLoadBalancer(ctx, "", svc2, nodes[:1]); err != nil || st.Ingress[0].IP != "203.0.113.2" {
		t.Fatalf("EnsureLoadBalancer(svc2) = %+v, %v", st, err)
	}
	st, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", svc1)
	if err != nil || !exists || st.Ingress[0].IP != "203.0.113.1" {
		t.Fatalf("GetLoadBalancer = %+v, %v, %v", st, exists, err)
	}
	lbs := s.LoadBalancers()
	if len(lbs) != 2 || !slices.Equal(lbs[0].Hosts, []string{"node-00000", "node-00002"}) || lbs[0].Cluster != "kubernetes" ||
		len(lbs[0].Ports) != 2 || lbs[0].Ports[1] != (LoadBalancerPort{Protocol: "TCP", Port: 443, NodePort: 30443}) {
		t.Fatalf("LoadBalancers() = %+v", lbs)
	}
	if err := lb.UpdateLoadBalancer(ctx, "kubernetes", svc1, nodes[1:2]); err != nil { // change
		t.Fatal(err)
	}
	if err := lb.UpdateLoadBalancer(ctx, "kubernetes", svc1, nodes[1:2]); err != nil { // confirm
		t.Fatal(err)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc1); err != nil {
		t.Fatal(err)
	}
	if err := lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc1); err != nil { // idempotent
		t.Fatalf("second delete: %v", err)
	}
	if _, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", svc1); exists || err != nil {
		t.Fatalf("GetLoadBalancer(deleted) = %v, %v", exists, err)
	}
	// The freed address is reused first.
	if st, err := lb.EnsureLoadBalancer(ctx, "kubernetes", service("3333"), nil); err != nil || st.Ingress[0].IP != "203.0.113.1" {
		t.Fatalf("EnsureLoadBalancer(svc3) = %+v, %v", st, err)
	}

	want := []struct {
		method, target string
		changed        bool
	}{
		{MethodEnsureLoadBalancer, "a1111aaaa", true},
		{MethodEnsureLoadBalancer, "a2222bbbb", true},
		{MethodEnsureLoadBalancer, "a1111aaaa", true},
		{MethodEnsureLoadBalancer, "a1111aaaa", false},
		{MethodDeleteLoadBalancer, "a1111aaaa", true},
		{MethodDeleteLoadBalancer, "a1111aaaa", false},
		{MethodEnsureLoadBalancer, "a3333", true},
	}
	checkWriteLog(t, s.WriteLog(), want)
	cnt := s.Counters()
	if cnt.WriteCalls != 7 || cnt.Calls[MethodGetLoadBalancer] != 3 {
		t.Fatalf("counters %+v", cnt)
	}
}

func checkWriteLog(t *testing.T, log []WriteRecord, want []struct {
	method, target string
	changed        bool
}) {
	t.Helper()
	if len(log) != len(want) {
		t.Fatalf("write log has %d records, want %d: %+v", len(log), len(want), log)
	}
	ids := map[string]bool{}
	for i, r := range log {
		w := want[i]
		if r.Seq != log[0].Seq+int64(i) || r.Method != w.method || r.Target != w.target || r.Changed != w.changed {
			t.Errorf("record %d = %+v, want %+v", i, r, w)
		}
		if r.RequestID == "" || ids[r.RequestID] || r.Time.IsZero() {
			t.Errorf("record %d: request ID %q empty or repeated, or no time", i, r.RequestID)
		}
		ids[r.RequestID] = true
	}
}

func TestRoutesRoundTripAndWriteLog(t *testing.T) {
	s := startServer(t, ServerConfig{})
	insts := addInstances(t, s, 2, "node")
	c := cloudFor(t, s, "")
	rt, _ := c.Routes()
	ctx := context.Background()
	r0 := &cloudprovider.Route{TargetNode: types.NodeName(insts[0].NodeName), DestinationCIDR: "10.244.0.0/24"}
	r1 := &cloudprovider.Route{TargetNode: types.NodeName(insts[1].NodeName), DestinationCIDR: "10.244.1.0/24"}

	if routes, err := rt.ListRoutes(ctx, "kubernetes"); err != nil || len(routes) != 0 {
		t.Fatalf("ListRoutes(empty) = %v, %v", routes, err)
	}
	if err := rt.CreateRoute(ctx, "kubernetes", "uid-0", r0); err != nil {
		t.Fatal(err)
	}
	if err := rt.CreateRoute(ctx, "", "uid-1", r1); err != nil { // "" = clusterName
		t.Fatal(err)
	}
	if err := rt.CreateRoute(ctx, "kubernetes", "uid-0", r0); err != nil { // identical: confirmed
		t.Fatalf("identical CreateRoute: %v", err)
	}
	err := rt.CreateRoute(ctx, "kubernetes", "uid-0", r1) // same name, other route
	apiError(t, err, http.StatusConflict, CodeConflict)
	err = rt.CreateRoute(ctx, "kubernetes", "uid-9", r1) // same destination, other name
	apiError(t, err, http.StatusConflict, CodeConflict)
	err = rt.CreateRoute(ctx, "kubernetes", "uid-8", &cloudprovider.Route{TargetNode: "n", DestinationCIDR: "not-a-cidr"})
	apiError(t, err, http.StatusBadRequest, CodeBadRequest)

	s.DeleteInstance(insts[1].ID)
	routes, err := rt.ListRoutes(ctx, "kubernetes")
	if err != nil || len(routes) != 2 {
		t.Fatalf("ListRoutes = %v, %v", routes, err)
	}
	if !reflect.DeepEqual(*routes[0], cloudprovider.Route{Name: "uid-0", TargetNode: "node-00000", DestinationCIDR: "10.244.0.0/24"}) ||
		!reflect.DeepEqual(*routes[1], cloudprovider.Route{Name: "uid-1", TargetNode: "node-00001", DestinationCIDR: "10.244.1.0/24", Blackhole: true}) {
		t.Fatalf("routes %+v %+v", *routes[0], *routes[1])
	}
	if err := rt.DeleteRoute(ctx, "kubernetes", routes[1]); err != nil {
		t.Fatal(err)
	}
	if err := rt.DeleteRoute(ctx, "kubernetes", routes[1]); err != nil { // idempotent
		t.Fatalf("second DeleteRoute: %v", err)
	}
	if got := s.Routes("kubernetes"); len(got) != 1 || got[0].Name != "uid-0" || got[0].Cluster != "kubernetes" {
		t.Fatalf("Routes() = %+v", got)
	}
	// Another cluster's table is separate, and becomes known.
	if err := rt.CreateRoute(ctx, "other", "", r1); err != nil {
		t.Fatal(err)
	}
	if got := s.Routes("other"); len(got) != 1 || !strings.HasPrefix(got[0].Name, "r-") {
		t.Fatalf("Routes(other) = %+v", got)
	}
	if got := s.Clusters(); !slices.Equal(got, []string{"kubernetes", "other"}) {
		t.Fatalf("Clusters() = %v", got)
	}
	log := s.WriteLog()
	want := []struct {
		method, target string
		changed        bool
	}{
		{MethodCreateRoute, "kubernetes/uid-0", true},
		{MethodCreateRoute, "kubernetes/uid-1", true},
		{MethodCreateRoute, "kubernetes/uid-0", false},
		{MethodDeleteRoute, "kubernetes/uid-1", true},
		{MethodDeleteRoute, "kubernetes/uid-1", false},
		{MethodCreateRoute, "other/" + s.Routes("other")[0].Name, true},
	}
	checkWriteLog(t, log, want)
	cnt := s.Counters()
	if cnt.Calls[MethodCreateRoute] != 7 || cnt.ClientErrors[MethodCreateRoute] != 3 || cnt.Calls[MethodListRoutes] != 2 {
		t.Fatalf("counters %+v", cnt)
	}
	s.ResetWriteLog()
	if err := rt.DeleteRoute(ctx, "kubernetes", routes[0]); err != nil {
		t.Fatal(err)
	}
	if log := s.WriteLog(); len(log) != 1 || log[0].Seq != 7 {
		t.Fatalf("after ResetWriteLog: %+v", log)
	}
}
