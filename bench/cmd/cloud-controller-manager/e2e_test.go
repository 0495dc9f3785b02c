//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/deploy"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// e2e parameters: small, fast periods so the controllers sync many times a minute.
const (
	e2eNodes          = 6
	statusUpdateEvery = time.Second // --node-status-update-frequency
	monitorEvery      = time.Second // --node-monitor-period
	steadyWindow      = 12 * time.Second
)

// TestE2E runs the CCM binary, with cloudgate in front of simcloud, against a real etcd and
// kube-apiserver (built by .ci/control-plane.sh; `make test` passes their paths in
// CLOUDGATE_ETCD and CLOUDGATE_KUBE_APISERVER). The CCM runs as deploy/rbac.yaml's
// ServiceAccount, so the test also proves that RBAC is enough. It checks that the CCM:
//   - initializes tainted nodes from the simulated cloud (taint removed, providerID,
//     addresses, zone/region and instance-type labels);
//   - gives a LoadBalancer service its ingress;
//   - in steady state answers the controllers' node syncs mostly from cloudgate's cache:
//     upstream calls (cloudgate's counter and the cloud's own) are fewer than node syncs;
//   - deletes a NotReady node whose instance was removed from the cloud;
//   - was never refused by the API server (no "forbidden" in its log).
func TestE2E(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	// The build is bounded by 20 min, each later step by its own timeout (6 min in all).
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	dir := t.TempDir()
	began := time.Now()
	last := began
	phase := func(name string) {
		now := time.Now()
		t.Logf("phase %-32s %6.1fs (total %6.1fs)", name, now.Sub(last).Seconds(), now.Sub(began).Seconds())
		last = now
	}

	// Build the binary (once per test run) while the control plane starts.
	ccmBuild.Start()

	cp := e2e.StartControlPlane(ctx, t, dir, etcdBin, apiserverBin)
	phase("etcd + kube-apiserver ready")
	rbac, err := deploy.Objects("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Apply(ctx, rbac); err != nil {
		t.Fatal(err)
	}
	phase("deploy/rbac.yaml applied")

	apiKey := e2e.RandomToken(t)
	sim, err := simcloud.NewServer(simcloud.ServerConfig{APIKey: simcloud.Secret(apiKey)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	insts, err := sim.AddInstances(e2eNodes, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	cloudConfig := filepath.Join(dir, "cloudgate.yaml")
	e2e.WriteFile(t, cloudConfig, fmt.Sprintf("upstream:\n  name: simcloud\n  config: |\n    endpoint: %s\n    apiKey: %s\n    clusterName: kubernetes\n",
		sim.URL(), apiKey))
	kubeconfig := filepath.Join(dir, "ccm.kubeconfig")
	cp.Kubeconfig(t, kubeconfig, cp.CCMToken)
	phase("simcloud + configs")

	ccmBin := ccmBuild.Binary(ctx, t)
	phase("CCM binary built")

	port := e2e.FreePort(t)
	ccm := e2e.StartProcess(t, dir, "cloud-controller-manager", ccmBin,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=true", // as deployed; also exercises rbac.yaml's Lease rule
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--webhook-secure-port=0", // the webhook server would listen on 0.0.0.0
		"--cloud-provider=cloudgate", "--cloud-config="+cloudConfig,
		"--controllers=cloud-node,cloud-node-lifecycle,service",
		"--use-service-account-credentials=false",
		"--node-status-update-frequency="+statusUpdateEvery.String(),
		"--node-monitor-period="+monitorEvery.String(),
		"--v=2",
	)
	// However the test ends, report every request the API server refused the CCM: the
	// ServiceAccount has only deploy/rbac.yaml's rules.
	t.Cleanup(func() {
		if forbidden := e2e.GrepLines(t, ccm.Log, regexp.MustCompile(`(?i)forbidden`)); len(forbidden) > 0 {
			t.Errorf("the API server refused the CCM %d times (deploy/rbac.yaml lacks a rule?):\n%s",
				len(forbidden), strings.Join(forbidden[:min(len(forbidden), 10)], "\n"))
		}
	})
	https, ccmURL := ccm.WaitServing(ctx, t, port, cp.AdminToken, time.Minute)
	phase("CCM serving")

	// Nodes as a kubelet with --cloud-provider=external registers them; Ready, as the
	// kubelet would report them.
	nodes := cp.Admin.CoreV1().Nodes()
	for _, inst := range insts {
		node := e2e.UninitializedNode(inst.NodeName)
		if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cp.SetNodeReady(ctx, t, inst.NodeName, corev1.ConditionTrue)
	}
	created := time.Now()
	var pending []string
	err = e2e.Poll(ctx, "nodes initialized", 100*time.Millisecond, time.Minute, func() (bool, error) {
		pending = pending[:0]
		for _, inst := range insts {
			node, err := nodes.Get(ctx, inst.NodeName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if problem := initialized(node, inst); problem != "" {
				pending = append(pending, inst.NodeName+": "+problem)
			}
		}
		return len(pending) == 0, fmt.Errorf("%d of %d nodes not initialized: %v", len(pending), len(insts), pending)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d nodes initialized %.2fs after creation", len(insts), time.Since(created).Seconds())
	phase("nodes initialized")

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
	if _, err := cp.Admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ingress []corev1.LoadBalancerIngress
	err = e2e.Poll(ctx, "service load-balancer ingress", 100*time.Millisecond, time.Minute, func() (bool, error) {
		s, err := cp.Admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ingress = s.Status.LoadBalancer.Ingress
		return len(ingress) > 0 && ingress[0].IP != "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if lbs := sim.LoadBalancers(); len(lbs) != 1 || lbs[0].IngressIP != ingress[0].IP {
		t.Errorf("service ingress %v, but the cloud has load balancers %+v", ingress, lbs)
	}
	t.Logf("service ingress: %s", ingress[0].IP)
	phase("load balancer ingress set")

	// Steady state: with a 1 s status period every node is synced about once a second;
	// cloudgate should answer nearly all of those from its cache.
	scrape := func() []e2e.Sample {
		t.Helper()
		code, body, err := e2e.Get(https, ccmURL+"/metrics", cp.AdminToken)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /metrics: HTTP %d, %v: %.500s", code, err, body)
		}
		s, err := e2e.ParseMetrics(body)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	m0, c0, t0 := scrape(), sim.Counters(), time.Now()
	select {
	case <-time.After(steadyWindow):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	m1, c1, window := scrape(), sim.Counters(), time.Since(t0)
	delta := func(name string, match map[string]string) float64 {
		a, _ := e2e.Sum(m0, name, match)
		b, n := e2e.Sum(m1, name, match)
		if n == 0 {
			t.Errorf("/metrics has no %s%v", name, match)
		}
		return b - a
	}
	syncs := delta("cloudgate_requests_total", map[string]string{"provider": "simcloud", "method": "InstanceMetadata"})
	upstream := delta("cloudgate_upstream_calls_total", map[string]string{"provider": "simcloud"})
	hits := delta("cloudgate_cache_hits_total", map[string]string{"provider": "simcloud"})
	cloudReads := c1.ReadCalls - c0.ReadCalls
	// The periodic loop runs every statusUpdateEvery after the previous run ended; count at
	// least half the ticks so a slow, loaded CI machine does not fail the bound.
	minSyncs := float64(e2eNodes) * (window.Seconds() / statusUpdateEvery.Seconds()) / 2
	t.Logf("steady state over %.1fs: %.0f node syncs (InstanceMetadata), %.0f upstream calls, %.0f cache hits; the cloud saw %d reads (%v)",
		window.Seconds(), syncs, upstream, hits, cloudReads, c1.Calls)
	if syncs < minSyncs {
		t.Errorf("only %.0f node syncs in %.1fs for %d nodes with --node-status-update-frequency=%v; want >= %.0f",
			syncs, window.Seconds(), e2eNodes, statusUpdateEvery, minSyncs)
	}
	if upstream >= syncs || float64(cloudReads) >= syncs {
		t.Errorf("upstream calls (cloudgate %.0f, cloud %d) not lower than node syncs (%.0f)", upstream, cloudReads, syncs)
	}
	if hits <= 0 {
		t.Errorf("no cloudgate cache hits in steady state")
	}
	phase("steady-state metrics")

	// The cloud loses an instance; its node stops reporting (NotReady, as the node
	// lifecycle controller marks it); the CCM must delete the node.
	gone := insts[0]
	if !sim.DeleteInstance(gone.ID) {
		t.Fatalf("simcloud has no instance %s", gone.ID)
	}
	cp.SetNodeReady(ctx, t, gone.NodeName, corev1.ConditionUnknown)
	removed := time.Now()
	err = e2e.Poll(ctx, "node of the deleted instance deleted", 250*time.Millisecond, 2*time.Minute, func() (bool, error) {
		_, err := nodes.Get(ctx, gone.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s deleted %.1fs after its instance was removed", gone.NodeName, time.Since(removed).Seconds())
	for _, inst := range insts[1:] {
		if _, err := nodes.Get(ctx, inst.NodeName, metav1.GetOptions{}); err != nil {
			t.Errorf("node %s of a live instance: %v", inst.NodeName, err)
		}
	}
	phase("dead node deleted")

	final := scrape()
	for _, name := range []string{"cloudgate_upstream_calls_total", "cloudgate_cache_hits_total", "cloudgate_requests_total"} {
		v, n := e2e.Sum(final, name, map[string]string{"provider": "simcloud"})
		t.Logf("%s: %.0f over %d series", name, v, n)
	}
	if done, err := ccm.Exited(); done {
		t.Errorf("cloud-controller-manager exited during the test: %v", err)
	}
	phase("done")
}

// initialized returns what is still missing for node to be initialized from inst, or "".
func initialized(node *corev1.Node, inst simcloud.Instance) string {
	for _, taint := range node.Spec.Taints {
		if taint.Key == e2e.UninitializedTaint {
			return "still tainted"
		}
	}
	if node.Spec.ProviderID != inst.ProviderID() {
		return fmt.Sprintf("providerID %q, want %q", node.Spec.ProviderID, inst.ProviderID())
	}
	for label, want := range map[string]string{
		corev1.LabelTopologyZone:       inst.Zone,
		corev1.LabelTopologyRegion:     inst.Region,
		corev1.LabelInstanceTypeStable: inst.Type,
	} {
		if got := node.Labels[label]; got != want {
			return fmt.Sprintf("label %s=%q, want %q", label, got, want)
		}
	}
	for _, want := range inst.Addresses {
		if !slices.Contains(node.Status.Addresses, want) {
			return fmt.Sprintf("addresses %v lack %v", node.Status.Addresses, want)
		}
	}
	return ""
}

// setReady sets the node's Ready condition, as a kubelet (True) or the node lifecycle
// controller (Unknown) would.
