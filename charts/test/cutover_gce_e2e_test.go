//go:build linux

package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cloudgate/cloudgate/providers/gce/gcesim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// stockGCEManifest is the stock GCE CCM's install (testdata/stock-gce-ccm.yaml: its
// DaemonSet is stockGCEWorkload), gceCloudConfigMap the operator's ConfigMap with its gce.conf.
const (
	stockGCEManifest  = "testdata/stock-gce-ccm.yaml"
	stockGCEWorkload  = "cloud-controller-manager"
	gceCloudConfigMap = "gce-cloud-config"
)

// TestE2ECutoverGCE runs docs/gce.md's runbook — from the stock GCE cloud-controller-manager to
// cloudgate's GCE CCM installed by the chart with values-gce.yaml, and back — against a real
// kube-apiserver + etcd and gcesim on 127.0.0.1, as TestE2ECutover does for AWS (the same
// kubelet, Helm and Lease helpers; see there). The GCE CCM has no Helm chart upstream: the
// stock install is testdata/stock-gce-ccm.yaml, applied and deleted as kubectl does, and its
// binary the stock command (providers/gce/internal/stockccm: k8s.io/cloud-provider's CCM with
// the unmodified GCE provider, --cloud-provider=gce, its own leader election, which keeps the
// Lease on SIGTERM); cloudgate's is providers/gce's CCM (upstream gce-batch). Both read the
// GCE provider's gce.conf pointing at gcesim, with GCE_METADATA_HOST at gcesim too.
//
// Both run nodeipam as cloud-provider-gcp's CCM does on kube-up (--allocate-node-cidrs, the
// cluster's CIDR, the range allocator, in --controllers=*): each new Node gets its Pod CIDR
// from the CCM leading when it joins. Routes are off in both (--configure-cloud-routes=false,
// a value over the profile's true): the route controller's CreateRoute looks the instance up
// with instances.get, which would hide which lookup path initialised a Node; gcebench's
// scale-up runs routes.
//
// Steps: stock applied and leading (a Node initialised by it, by instances.get, and given a
// Pod CIDR by its nodeipam); cloudgate installed beside it (helm install -f values-gce.yaml:
// a DaemonSet, one replica on the one control-plane node; useServiceAccountCredentials: true),
// healthy and waiting on the shared Lease; the stock manifest deleted; cloudgate takes the
// Lease and starts nodeipam; a new Node initialised by it through the adapter (its lists:
// aggregatedList for the list prefetch, filtered instances.list for a batch; no
// instances.get) and given a Pod CIDR by cloudgate's nodeipam; rollback: the stock manifest
// applied again, healthy and waiting; cloudgate's DaemonSet deleted, then `helm uninstall`;
// the stock CCM takes the Lease; a new Node initialised and given a Pod CIDR by it. After
// each hand-over every Node keeps the CIDR it got and no two share one (each new leader
// occupies the CIDRs the last one gave). It checks the leaderless windows against the lease
// duration, that nothing of either install is left behind, and that no CCM log has a
// "forbidden" (so the chart's GCE RBAC is enough for the GCE provider and nodeipam).
func TestE2ECutoverGCE(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 28*time.Minute)
	defer cancel()
	dir := t.TempDir()
	began := time.Now()
	phase := func(name string) { t.Logf("phase %-44s at %6.1fs", name, time.Since(began).Seconds()) }

	gceMod, err := filepath.Abs("../../providers/gce")
	if err != nil {
		t.Fatal(err)
	}
	cloudgateBin, stockBin := filepath.Join(dir, "cloudgate-gce-ccm"), filepath.Join(dir, "gce-cloud-controller-manager")
	builtCloudgate := goBuildRace(ctx, t, gceMod, cloudgateBin, "./cmd/cloud-controller-manager")
	builtStock := goBuildRace(ctx, t, gceMod, stockBin, "./internal/stockccm")
	stockManifest, err := os.ReadFile(stockGCEManifest)
	if err != nil {
		t.Fatal(err)
	}

	cp := e2e.StartControlPlane(ctx, t, dir, etcdBin, apiserverBin)
	adminKubeconfig := filepath.Join(dir, "admin.kubeconfig")
	cp.Kubeconfig(t, adminKubeconfig, cp.AdminToken)
	helm := newHelm(t, adminKubeconfig)
	phase("control plane")

	sim, nodeNames, gceConf := startGCECloud(ctx, t, cp, 3)
	applyManifest(ctx, t, cp, stockManifest)
	phase("stock GCE CCM applied")

	lw := watchLease(ctx, t, cp)
	k := &kubelet{cp: cp, dir: dir, hostNetwork: true}
	if err := <-builtStock; err != nil {
		t.Fatal(err)
	}
	stock := k.run(ctx, t, "DaemonSet", stockGCEWorkload, stockBin)
	stockLeader := lw.waitHolder(ctx, t, "the stock CCM leads", func(h string) bool { return h != "" })
	zone := sim.Zones()[0]
	nodes := nodeSet{cp, "gce://" + sim.Project() + "/" + zone + "/", zone}
	cidrs := newPodCIDRs(t, cp)
	nodes.add(ctx, t, nodeNames[0])
	nodes.waitInitialized(ctx, t, nodeNames[0], stock)
	if sim.Calls()["compute.instances.get"] == 0 {
		t.Errorf("the stock CCM initialised %s without instances.get: %v", nodeNames[0], sim.Calls())
	}
	cidrs.wait(ctx, t, nodeNames[0], stock)
	phase("stock CCM leads; node 1 initialised and given a Pod CIDR by it")

	// cloudgate beside the stock install: helm install -f values-gce.yaml with the gce.conf.
	if err := <-builtCloudgate; err != nil {
		t.Fatal(err)
	}
	// With service-account credentials: each controller and the GCE provider (cloud-provider)
	// act as their own ServiceAccount, so the chart's bindings for each are checked here; the
	// default (false) grants are held equal to deploy/ + rbac-gce.yaml, which providers/gce's
	// e2e test runs with (TestRBACOneSource).
	cloudgateValues := gceValues(t, map[string]any{
		"image":                        map[string]any{"repository": "registry.example.com/cloudgate-gce-ccm", "tag": "v0.0.0-e2e"},
		"upstream":                     map[string]any{"cloudConfig": gceConf},
		"useServiceAccountCredentials": true,
		"clusterCIDR":                  gceClusterCIDR, // the stock manifest's --cluster-cidr
		"configureCloudRoutes":         false,
	})
	cgRel := helm.install(t, cloudgateRelease, "../cloudgate", cloudgateValues)
	cg := k.run(ctx, t, "DaemonSet", workloadName, cloudgateBin)
	phase(fmt.Sprintf("cloudgate installed beside it (%d replica)", len(cg)))

	time.Sleep(2 * cutoverPoll)
	if h := lw.holder(); h != stockLeader {
		t.Fatalf("the Lease went from the stock CCM (%q) to %q while the stock CCM ran", stockLeader, h)
	}
	for _, p := range cg {
		if len(grep(t, p, `Waiting for the Lease`)) == 0 || len(grep(t, p, `Leading: starting the controllers`)) > 0 {
			t.Errorf("%s: not waiting on the Lease:\n%s", p.name, e2e.Tail(p.proc.Log, 10))
		}
	}
	phase("cloudgate healthy and waiting")

	// Cut-over: the stock DaemonSet deleted, its Pod gets SIGTERM, then the rest of the stock
	// manifest (kubectl delete -f); cloudgate takes over.
	before := sim.Calls()
	if err := cp.Admin.AppsV1().DaemonSets("kube-system").Delete(ctx, stockGCEWorkload, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stopped := k.stop(ctx, t, stock, "DaemonSet", stockGCEWorkload)
	deleteManifest(ctx, t, cp, stockManifest)
	cgLeader := lw.waitHolder(ctx, t, "cloudgate leads", func(h string) bool { return h != "" && h != stockLeader })
	if !isCloudgate(t, cg, cgLeader) {
		t.Fatalf("the Lease holder %q after the stock CCM went is no cloudgate replica", cgLeader)
	}
	cutover := lw.handover(t, "cut-over (stock -> cloudgate)", stockLeader, cgLeader, stopped)
	nodes.add(ctx, t, nodeNames[1])
	nodes.waitInitialized(ctx, t, nodeNames[1], cg)
	cidrs.wait(ctx, t, nodeNames[1], cg)
	cidrs.check(ctx, t, "after the cut-over")
	after := sim.Calls()
	// The default install's path since it leads: the adapter's lists (the list prefetch's
	// aggregatedList, a batch's filtered instances.list), never the provider's instances.get.
	lists := func(c map[string]int) int { return c["compute.instances.list"] + c["compute.instances.aggregatedList"] }
	if lists(after) == lists(before) || after["compute.instances.get"] != before["compute.instances.get"] {
		t.Errorf("cloudgate led and initialised %s with instance lists %d -> %d, instances.get %d -> %d; want lists and no get (gce-batch)",
			nodeNames[1], lists(before), lists(after), before["compute.instances.get"], after["compute.instances.get"])
	}
	phase("cloudgate leads; node 2 initialised and given a Pod CIDR by it")
	leftBehind(ctx, t, cp, "stock GCE CCM", string(stockManifest))

	// Rollback: the stock manifest again, healthy and waiting.
	applyManifest(ctx, t, cp, stockManifest)
	stock2 := k.run(ctx, t, "DaemonSet", stockGCEWorkload, stockBin)
	time.Sleep(2 * cutoverPoll)
	if h := lw.holder(); h != cgLeader {
		t.Fatalf("the Lease went from cloudgate (%q) to %q while cloudgate ran", cgLeader, h)
	}
	phase("rollback: stock applied again, healthy and waiting")
	// cloudgate's workload first, so that its Pods release the Lease on SIGTERM while their
	// RBAC still exists (TestE2ECutover says why); then helm uninstall removes the rest.
	if err := cp.Admin.AppsV1().DaemonSets("kube-system").Delete(ctx, workloadName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stopped = k.stop(ctx, t, cg, "DaemonSet", workloadName)
	for _, p := range cg {
		if err := p.proc.WaitExit(10 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v (want exit status 0)", p.name, err)
		}
	}
	helm.uninstall(t, cloudgateRelease)
	stockLeader2 := lw.waitHolder(ctx, t, "the stock CCM leads again", func(h string) bool { return h != "" && h != cgLeader })
	if isCloudgate(t, cg, stockLeader2) {
		t.Fatalf("the Lease holder %q after cloudgate went is a cloudgate replica", stockLeader2)
	}
	rollback := lw.handover(t, "rollback (cloudgate -> stock)", cgLeader, stockLeader2, stopped)
	if rollback >= cutoverLease-cutoverRetry {
		t.Errorf("rollback: the stock CCM led %v after cloudgate's SIGTERM; a released Lease is taken at the next poll (< %v)", rollback, cutoverLease-cutoverRetry)
	}
	nodes.add(ctx, t, nodeNames[2])
	nodes.waitInitialized(ctx, t, nodeNames[2], stock2)
	cidrs.wait(ctx, t, nodeNames[2], stock2)
	cidrs.check(ctx, t, "after the rollback")
	phase("stock CCM leads; node 3 initialised and given a Pod CIDR by it")
	leftBehind(ctx, t, cp, cloudgateRelease, cgRel.Manifest)

	for _, p := range slices.Concat(stock, cg, stock2) {
		if f := grep(t, p, `is forbidden: User`); len(f) > 0 { // RBAC's refusal, not a field validation's "Forbidden" (nodeipam's podCIDR race)
			t.Errorf("%s: the API server refused it %d times (its RBAC lacks a rule):\n%s", p.name, len(f), strings.Join(f[:min(len(f), 10)], "\n"))
		}
	}
	if u := sim.Unknown(); len(u) > 0 {
		t.Errorf("gcesim got calls it does not simulate: %q", u)
	}
	t.Logf("leaderless windows (lease %v, retry %v): cut-over %.1fs, rollback %.1fs from the old leader's SIGTERM", cutoverLease, cutoverRetry, cutover.Seconds(), rollback.Seconds())
	t.Logf("gcesim calls: %v", sim.Calls())
	t.Logf("Pod CIDRs: %v", cidrs.got)
}

// podCIDRs records the Pod CIDR each Node got from the node IPAM controller of the CCM that
// led when it joined.
type podCIDRs struct {
	cp      *e2e.ControlPlane
	cluster *net.IPNet
	got     map[string]string
}

func newPodCIDRs(t *testing.T, cp *e2e.ControlPlane) *podCIDRs {
	_, cluster, err := net.ParseCIDR(gceClusterCIDR)
	if err != nil {
		t.Fatal(err)
	}
	return &podCIDRs{cp: cp, cluster: cluster, got: map[string]string{}}
}

// wait waits until the Node has one Pod CIDR, a /24 of the cluster CIDR (nodeipam's default
// node mask), checks that one of by (the only CCM Pods running) started nodeipam and logged
// setting it, and records it.
func (pc *podCIDRs) wait(ctx context.Context, t *testing.T, name string, by []*ccmProc) {
	t.Helper()
	var cidr string
	err := e2e.Poll(ctx, "node "+name+" given a Pod CIDR", 100*time.Millisecond, 2*time.Minute, func() (bool, error) {
		node, err := pc.cp.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if node.Spec.PodCIDR == "" {
			return false, errors.New("no spec.podCIDR")
		}
		cidr = node.Spec.PodCIDR
		ip, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return false, err
		}
		if ones, _ := n.Mask.Size(); !pc.cluster.Contains(ip) || ones != 24 || !slices.Equal(node.Spec.PodCIDRs, []string{cidr}) {
			t.Fatalf("node %s: podCIDR %q, podCIDRs %q; want one /24 of %s", name, cidr, node.Spec.PodCIDRs, pc.cluster)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pc.got[name] = cidr
	started, set := false, false
	for _, p := range by {
		started = started || len(grep(t, p, `Started "node-ipam-controller"`)) > 0
		set = set || len(grep(t, p, `"Set node PodCIDR" node="`+regexp.QuoteMeta(name)+`"`)) > 0
	}
	if !started || !set {
		t.Errorf("node %s got %s, but %s did not start nodeipam (%v) or did not log setting it (%v)", name, cidr, by[0].name, started, set)
	}
	t.Logf("node %s: Pod CIDR %s from %s's nodeipam", name, cidr, by[0].name)
}

// check re-reads every recorded Node: each keeps the CIDR it got, and no two share one.
func (pc *podCIDRs) check(ctx context.Context, t *testing.T, when string) {
	t.Helper()
	owner := map[string]string{}
	for name, want := range pc.got {
		node, err := pc.cp.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Spec.PodCIDR != want {
			t.Errorf("%s: node %s has Pod CIDR %q, it got %q", when, name, node.Spec.PodCIDR, want)
		}
		if other, ok := owner[node.Spec.PodCIDR]; ok {
			t.Errorf("%s: nodes %s and %s share Pod CIDR %s", when, other, name, node.Spec.PodCIDR)
		}
		owner[node.Spec.PodCIDR] = name
	}
}

// startGCECloud starts gcesim with n instances in its first zone (named gce-cutover-I, as
// their Nodes) and makes the cluster as its operator has it: the GCE provider's gce.conf
// pointing at gcesim in the ConfigMap kube-system/gce-cloud-config (the operator's, not an
// install's), and GCE_METADATA_HOST at gcesim (the control-plane VM's metadata server, in a
// cluster). It returns the simulator, the node names and the gce.conf.
func startGCECloud(ctx context.Context, t *testing.T, cp *e2e.ControlPlane, n int) (*gcesim.Server, []string, string) {
	t.Helper()
	sim, err := gcesim.Start(gcesim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	zone := sim.Zones()[0]
	var names []string
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("gce-cutover-%d", i)
		names = append(names, name)
		sim.Put(gcesim.Instance{Name: name, Zone: zone, MachineType: "e2-standard-4", InternalIP: fmt.Sprintf("10.128.0.%d", i)})
	}
	gceConf := fmt.Sprintf(`[global]
api-endpoint = %s
token-url = %s
project-id = %s
local-zone = %s
network-name = default
subnetwork-name = default
multizone = true
`, sim.APIEndpoint(), sim.TokenURL(), sim.Project(), zone)
	t.Setenv("GCE_METADATA_HOST", sim.MetadataHost())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: gceCloudConfigMap, Namespace: "kube-system"},
		Data: map[string]string{"gce.conf": gceConf}}
	if err := e2e.Poll(ctx, "ConfigMap kube-system/"+gceCloudConfigMap, 200*time.Millisecond, 30*time.Second, func() (bool, error) {
		_, err := cp.Admin.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{})
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	return sim, names, gceConf
}

// manifestObjects decodes a multi-document manifest with each object's resource client.
func manifestObjects(t *testing.T, cp *e2e.ControlPlane, manifest []byte) ([]*unstructured.Unstructured, []dynamic.ResourceInterface) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: cp.URL, BearerToken: cp.AdminToken, TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile}})
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	var clients []dynamic.ResourceInterface
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(manifest)), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		if err != nil {
			t.Fatal(err)
		}
		gvr := gv.WithResource(strings.ToLower(u.GetKind()) + "s")
		var ri dynamic.ResourceInterface = dyn.Resource(gvr)
		if namespaced(u.GetKind()) {
			ri = dyn.Resource(gvr).Namespace("kube-system")
		}
		objs, clients = append(objs, &u), append(clients, ri)
	}
	return objs, clients
}

// applyManifest is `kubectl apply --server-side -f` of a manifest (kube-system appears
// shortly after the apiserver is ready: NotFound is retried).
func applyManifest(ctx context.Context, t *testing.T, cp *e2e.ControlPlane, manifest []byte) {
	t.Helper()
	objs, clients := manifestObjects(t, cp, manifest)
	for i, o := range objs {
		err := e2e.Poll(ctx, "apply "+o.GetKind()+" "+o.GetName(), 200*time.Millisecond, 30*time.Second, func() (bool, error) {
			_, err := clients[i].Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "kubectl", Force: true})
			return err == nil || !apierrors.IsNotFound(err), err
		})
		if err == nil {
			_, err = clients[i].Get(ctx, o.GetName(), metav1.GetOptions{})
		}
		if err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// deleteManifest is `kubectl delete -f` of a manifest (objects already gone are skipped), in
// reverse order: the workload before the RBAC its Pods run with.
func deleteManifest(ctx context.Context, t *testing.T, cp *e2e.ControlPlane, manifest []byte) {
	t.Helper()
	objs, clients := manifestObjects(t, cp, manifest)
	for i := len(objs) - 1; i >= 0; i-- {
		if err := clients[i].Delete(ctx, objs[i].GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete %s %s: %v", objs[i].GetKind(), objs[i].GetName(), err)
		}
	}
}
