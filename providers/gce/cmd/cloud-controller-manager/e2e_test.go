//go:build linux

package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cloudgate/cloudgate/deploy"
	"github.com/cloudgate/cloudgate/providers/gce/gcesim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// TestE2E runs this module's CCM (cloudgate in front of the unmodified GCE provider:
// --cloud-provider=cloudgate, upstream gce-batch and gce) against a real etcd and
// kube-apiserver and gcesim, reached through the GCE provider's own cloud config. For each
// upstream it checks that the CCM initializes tainted Nodes with gce://PROJECT/ZONE/NAME, the
// zone, region and machine-type labels and the instance's addresses, removes the taint,
// deletes the NotReady Node of an instance gcesim no longer has (and keeps the others), and
// serves cloudgate's metrics, with the lookups on the path that upstream takes (the adapter's
// filtered instances.list, or the provider's own instances.get).
func TestE2E(t *testing.T) {
	etcdBin, apiserverBin, goBin := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := t.TempDir()
	// Built once for both upstreams; -race shares the compiled dependencies (the Compute API
	// client) with this `go test -race` run.
	ccmBin := filepath.Join(dir, "cloud-controller-manager")
	built := e2e.BuildRace(ctx, t, goBin, ccmBin, "./providers/gce/cmd/cloud-controller-manager", 25*time.Minute)
	waitBuilt := sync.OnceValue(func() error { return <-built })
	for _, upstream := range []string{"gce-batch", "gce"} {
		t.Run(upstream, func(t *testing.T) { runE2E(ctx, t, etcdBin, apiserverBin, ccmBin, waitBuilt, upstream) })
	}
}

func runE2E(ctx context.Context, t *testing.T, etcdBin, apiserverBin, ccmBin string, waitBuilt func() error, upstream string) {
	dir := t.TempDir()
	began := time.Now()
	phase := func(name string) { t.Logf("phase %-36s at %6.1fs", name, time.Since(began).Seconds()) }

	cp := e2e.StartControlPlane(ctx, t, dir, etcdBin, apiserverBin)
	if err := cp.Apply(ctx, rbac(t)); err != nil {
		t.Fatal(err)
	}
	phase("control plane + rbac")

	sim, err := gcesim.Start(gcesim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sim.Close()
		if u := sim.Unknown(); len(u) > 0 {
			t.Errorf("gcesim got calls it does not simulate: %q", u)
		}
	})
	zones := sim.Zones()
	var fleet []gcesim.Instance
	for i := 1; i <= 6; i++ {
		in := gcesim.Instance{Name: fmt.Sprintf("gke-e2e-%d", i), Zone: zones[i%len(zones)], MachineType: "e2-standard-4",
			InternalIP: fmt.Sprintf("10.128.0.%d", i)}
		if i%2 == 0 {
			in.ExternalIP = fmt.Sprintf("34.0.0.%d", i)
		}
		sim.Put(in)
		fleet = append(fleet, in)
	}

	gceConf := filepath.Join(dir, "gce.conf")
	e2e.WriteFile(t, gceConf, fmt.Sprintf(`[global]
api-endpoint = %s
token-url = %s
project-id = %s
local-zone = %s
network-name = default
subnetwork-name = default
multizone = true
`, sim.APIEndpoint(), sim.TokenURL(), sim.Project(), zones[0]))
	cloudConfig := filepath.Join(dir, "cloudgate.yaml")
	e2e.WriteFile(t, cloudConfig, fmt.Sprintf(`upstream:
  name: %s
  configFile: %s
methods:
  InstanceExists: {ttl: 1s}
  InstanceShutdown: {ttl: 1s}
# The nodes are seconds old when their instance goes: the default grace period (2m) would
# hold the deletion to the edge of waitDeleted's limit.
notFoundGuard: {gracePeriod: 5s, confirmAfter: 5s}
`, upstream, gceConf))
	kubeconfig := filepath.Join(dir, "ccm.kubeconfig")
	cp.Kubeconfig(t, kubeconfig, cp.CCMToken)

	if err := waitBuilt(); err != nil {
		t.Fatal(err)
	}
	phase("CCM binary ready")

	port := e2e.FreePort(t)
	// No metadata server: the metadata client asks gcesim, which answers 404 but for the
	// service account token the provider's token-url client needs.
	t.Setenv("GCE_METADATA_HOST", sim.MetadataHost())
	ccm := e2e.StartProcess(t, dir, "cloud-controller-manager", ccmBin,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--webhook-secure-port=0", // the webhook server would listen on 0.0.0.0
		"--cloud-provider=cloudgate", "--cloud-config="+cloudConfig,
		"--controllers=cloud-node,cloud-node-lifecycle",
		"--use-service-account-credentials=false",
		"--node-status-update-frequency=5s",
		"--node-monitor-period=1s",
		"--v=2",
	)
	t.Cleanup(func() {
		if forbidden := e2e.GrepLines(t, ccm.Log, regexp.MustCompile(`(?i)forbidden`)); len(forbidden) > 0 {
			t.Errorf("the API server refused the CCM %d times (a missing RBAC rule?):\n%s",
				len(forbidden), strings.Join(forbidden[:min(len(forbidden), 10)], "\n"))
		}
	})
	https, ccmURL := ccm.WaitServing(ctx, t, port, cp.AdminToken, 2*time.Minute)
	phase("CCM serving")

	// Nodes as a kubelet with --cloud-provider=external registers them: named after the
	// instance, no provider ID, the uninitialized taint; created before any is Ready.
	nodes := cp.Admin.CoreV1().Nodes()
	for _, in := range fleet {
		if _, err := nodes.Create(ctx, e2e.UninitializedNode(in.Name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range fleet {
		cp.SetNodeReady(ctx, t, in.Name, corev1.ConditionTrue)
	}
	var pending []string
	err = e2e.Poll(ctx, "nodes initialized", 100*time.Millisecond, 2*time.Minute, func() (bool, error) {
		pending = pending[:0]
		for _, in := range fleet {
			node, err := nodes.Get(ctx, in.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if problem := initialized(node, in, sim); problem != "" {
				pending = append(pending, in.Name+": "+problem)
			}
		}
		return len(pending) == 0, fmt.Errorf("%d of %d nodes not initialized: %v", len(pending), len(fleet), pending)
	})
	if err != nil {
		t.Fatal(err)
	}
	phase("nodes initialized")

	// An instance Compute Engine no longer knows (404): its NotReady Node is deleted.
	gone := fleet[2]
	sim.Remove(gone.Zone, gone.Name)
	cp.SetNodeReady(ctx, t, gone.Name, corev1.ConditionUnknown)
	start := time.Now()
	err = e2e.Poll(ctx, "node "+gone.Name+" deleted", 250*time.Millisecond, 2*time.Minute, func() (bool, error) {
		_, err := nodes.Get(ctx, gone.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s deleted %.1fs after its instance went", gone.Name, time.Since(start).Seconds())
	phase("removed instance's node deleted")
	for _, in := range fleet {
		if in.Name == gone.Name {
			continue
		}
		if _, err := nodes.Get(ctx, in.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("node %s of an existing instance: %v", in.Name, err)
		}
	}

	code, body, err := e2e.Get(https, ccmURL+"/metrics", cp.AdminToken)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /metrics: HTTP %d, %v", code, err)
	}
	samples, err := e2e.ParseMetrics(body)
	if err != nil {
		t.Fatal(err)
	}
	if v, n := e2e.Sum(samples, "cloudgate_requests_total", map[string]string{"method": "InstanceMetadata"}); n == 0 || v == 0 {
		t.Errorf("/metrics has no cloudgate_requests_total{method=InstanceMetadata}")
	}
	calls := sim.Calls()
	t.Logf("gcesim calls: %v", calls)
	provMD, _ := e2e.Sum(samples, "cloudgate_upstream_calls_total", map[string]string{"method": "InstanceMetadata"})
	flushes, _ := e2e.Sum(samples, "cloudgate_batch_size_count", nil)
	t.Logf("upstream InstanceMetadata calls %.0f, batch flushes %.0f", provMD, flushes)
	switch upstream {
	case "gce-batch":
		// The adapter's path: batches as filtered instances.list, no per-node instances.get.
		if flushes == 0 || calls["compute.instances.list"] == 0 {
			t.Errorf("gce-batch: %.0f batch flushes, %d instances.list calls; want both > 0", flushes, calls["compute.instances.list"])
		}
		if provMD != 0 || calls["compute.instances.get"] != 0 {
			t.Errorf("gce-batch: the provider's own InstanceMetadata ran %.0f times, instances.get %d times; want 0 (the adapter's batch path)",
				provMD, calls["compute.instances.get"])
		}
	case "gce":
		// The provider alone: its own InstanceMetadata and instances.get.
		if provMD == 0 || calls["compute.instances.get"] == 0 {
			t.Errorf("gce: the provider's InstanceMetadata ran %.0f times, instances.get %d times; want both > 0", provMD, calls["compute.instances.get"])
		}
	}
	checkCloudRequests(t, https, ccmURL, cp.AdminToken, sim, upstream)
	if done, err := ccm.Exited(); done {
		t.Errorf("cloud-controller-manager exited during the test: %v", err)
	}
}

// checkCloudRequests: every Compute Engine call the CCM sent passed cloudgate's request gate
// (gcerequests): cloudgate_cloud_requests_total summed per action equals gcesim's count of
// that method, read when gcesim got nothing during the scrape, less the one zones.list the
// provider sends while it is built, before a limiter can be set (docs/gce.md). With gce-batch
// every request but the adapter's build-time zones.list carries the cloudgate method it was
// sent for; with gce, InstanceMetadata's instances.get does.
func checkCloudRequests(t *testing.T, https *http.Client, ccmURL, token string, sim *gcesim.Server, upstream string) {
	t.Helper()
	// A request the gate has let through but whose answer it has not seen yet is counted by
	// gcesim alone for a moment: scrape again until a quiet scrape agrees, and report the last
	// disagreement if none does.
	var gate, want map[string]int
	var byMethod map[[2]string]int
	quiet := false
	for try := 0; try <= 50; try++ {
		if try > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		before := sim.Calls()
		code, body, err := e2e.Get(https, ccmURL+"/metrics", token)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /metrics: HTTP %d, %v", code, err)
		}
		samples, err := e2e.ParseMetrics(body)
		if err != nil {
			t.Fatal(err)
		}
		calls := sim.Calls()
		if !maps.Equal(before, calls) {
			continue
		}
		quiet = true
		gate, byMethod = map[string]int{}, map[[2]string]int{}
		for _, sm := range samples {
			if sm.Name != "cloudgate_cloud_requests_total" || sm.Labels["provider"] != "gce" {
				continue
			}
			gate[sm.Labels["action"]] += int(sm.Value)
			byMethod[[2]string{sm.Labels["action"], sm.Labels["method"]}] += int(sm.Value)
		}
		want = map[string]int{}
		for m, n := range calls {
			if a, ok := strings.CutPrefix(m, "compute."); ok {
				if strings.HasPrefix(a, "globalOperations.") {
					a = "operations.get"
				}
				want[a] += n
			}
		}
		if want["zones.list"]--; want["zones.list"] == 0 {
			delete(want, "zones.list")
		}
		if maps.Equal(gate, want) {
			break
		}
	}
	if !quiet {
		t.Fatalf("gcesim was never quiet during a scrape of /metrics")
	}
	if !maps.Equal(gate, want) {
		t.Errorf("%s: cloudgate counted %v per action; gcesim, less the provider's build-time zones.list, %v", upstream, gate, want)
	}
	for k, n := range byMethod {
		if upstream == "gce-batch" && k[1] == "unattributed" && k[0] != "zones.list" {
			t.Errorf("gce-batch: %d %s requests unattributed; want each carrying its cloudgate method", n, k[0])
		}
	}
	if upstream == "gce" && byMethod[[2]string{"instances.get", "InstanceMetadata"}] == 0 {
		t.Errorf("gce: no instances.get attributed to InstanceMetadata (%v)", byMethod)
	}
}

// initialized returns what is still missing for the node to be initialized, or "".
func initialized(node *corev1.Node, in gcesim.Instance, sim *gcesim.Server) string {
	for _, taint := range node.Spec.Taints {
		if taint.Key == e2e.UninitializedTaint {
			return "still tainted"
		}
	}
	if want := sim.ProviderID(in.Zone, in.Name); node.Spec.ProviderID != want {
		return fmt.Sprintf("providerID %q, want %q", node.Spec.ProviderID, want)
	}
	for k, v := range map[string]string{
		corev1.LabelTopologyZone:       in.Zone,
		corev1.LabelTopologyRegion:     sim.Region(),
		corev1.LabelInstanceTypeStable: in.MachineType,
	} {
		if node.Labels[k] != v {
			return fmt.Sprintf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: in.InternalIP}}
	if in.ExternalIP != "" {
		want = append(want, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: in.ExternalIP})
	}
	if fmt.Sprint(node.Status.Addresses) != fmt.Sprint(want) {
		return fmt.Sprintf("addresses %v, want %v", node.Status.Addresses, want)
	}
	return ""
}

// rbac is deploy/'s least-privilege RBAC for the CCM and the GCE provider's own rules
// (providers/gce/deploy/rbac-gce.yaml).
func rbac(t *testing.T) []runtime.Object {
	t.Helper()
	objs, err := deploy.Objects("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../deploy/rbac-gce.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gce, err := deploy.Decode("rbac-gce.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	return append(objs, gce...)
}
