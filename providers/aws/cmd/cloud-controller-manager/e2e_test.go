//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudgate/cloudgate/deploy"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

const (
	shutdownKey  = "node.cloudprovider.kubernetes.io/shutdown"
	clusterID    = "e2e"
	monitorEvery = time.Second // --node-monitor-period
)

// awsNode is one simulated instance and the Node a kubelet registers for it.
type awsNode struct {
	inst     ec2sim.Instance
	nodeName string
	zoneID   string
}

func (n awsNode) providerID() string { return "aws:///" + n.inst.Zone + "/" + n.inst.ID }

// TestE2E runs this module's CCM (cloudgate in front of the unmodified AWS provider with the
// awsbatch adapter: --cloud-provider=cloudgate, upstream aws-batch) against a real etcd and
// kube-apiserver and a simulated EC2 endpoint reached through the AWS provider's own
// [ServiceOverride]. It checks that the CCM initializes tainted nodes with the AWS
// provider's provider IDs, addresses and zone/region/instance-type labels; puts the
// shutdown taint on the NotReady node of a stopped instance; deletes the NotReady nodes of
// a removed and of a terminated instance; serves cloudgate's metrics on /metrics; and that
// node lookups went through the adapter's batched DescribeInstances.
func TestE2E(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := t.TempDir()
	began := time.Now()
	phase := func(name string) { t.Logf("phase %-36s at %6.1fs", name, time.Since(began).Seconds()) }

	// Build the binary while the control plane starts; -race shares the compiled
	// dependencies (the AWS SDK) with this `go test -race` run.
	ccmBuild.Start()

	cp := startControlPlaneWithRBAC(ctx, t, dir, etcdBin, apiserverBin)
	phase("control plane + rbac")

	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Topology: true,
		Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}, {Name: "us-east-1c", ID: "use1-az4"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	zones := []struct{ name, id string }{{"us-east-1a", "use1-az1"}, {"us-east-1b", "use1-az2"}, {"us-east-1c", "use1-az4"}}
	var fleet []awsNode
	for i := 1; i <= 6; i++ {
		z := zones[i%3]
		dns := fmt.Sprintf("ip-10-0-0-%d.ec2.internal", i)
		in := ec2sim.Instance{
			ID: fmt.Sprintf("i-%017x", i), Type: "m5.large", Zone: z.name, PrivateDNSName: dns,
			PrivateIP: fmt.Sprintf("10.0.0.%d", i), PublicIP: fmt.Sprintf("54.0.0.%d", i),
			Interfaces: []ec2sim.NetworkInterface{{Status: "in-use", PrivateIPs: []string{fmt.Sprintf("10.0.0.%d", i)}}},
			Tags:       map[string]string{"kubernetes.io/cluster/" + clusterID: "owned"},
		}
		name := dns
		if i == 6 {
			name = in.ID // a resource-based name
		}
		sim.Put(in)
		fleet = append(fleet, awsNode{inst: in, nodeName: name, zoneID: z.id})
	}

	awsConf := writeAWSConf(t, dir, sim.URL)
	cloudConfig := filepath.Join(dir, "cloudgate.yaml")
	e2e.WriteFile(t, cloudConfig, fmt.Sprintf(`upstream:
  name: aws-batch
  configFile: %s
methods:
  InstanceExists: {ttl: 1s}
  InstanceShutdown: {ttl: 1s}
batch:
  enabled: true
  maxWait: 200ms
  listPrefetch: true
  listInterval: 2s
# The nodes are seconds old when their instances go: the default grace period
# (2m) would hold the removed one's deletion to the edge of waitDeleted's limit.
notFoundGuard: {gracePeriod: 5s, confirmAfter: 5s}
`, awsConf))
	kubeconfig := filepath.Join(dir, "ccm.kubeconfig")
	cp.Kubeconfig(t, kubeconfig, cp.CCMToken)

	ccmBin := ccmBuild.Binary(ctx, t)
	phase("CCM binary built")

	port := e2e.FreePort(t)
	ccm := startCCM(t, dir, ccmBin, kubeconfig, cloudConfig, port)
	t.Cleanup(func() {
		if forbidden := e2e.GrepLines(t, ccm.Log, regexp.MustCompile(`(?i)forbidden`)); len(forbidden) > 0 {
			t.Errorf("the API server refused the CCM %d times (deploy/rbac.yaml lacks a rule?):\n%s",
				len(forbidden), strings.Join(forbidden[:min(len(forbidden), 10)], "\n"))
		}
	})
	https, ccmURL := ccm.WaitServing(ctx, t, port, cp.AdminToken, 2*time.Minute)
	phase("CCM serving")

	// Nodes as a kubelet with --cloud-provider=external registers them (no provider ID;
	// named by private DNS name, one by instance ID); all created before any is marked
	// Ready, so their lookups can share batches.
	nodes := cp.Admin.CoreV1().Nodes()
	addReadyNodes(ctx, t, cp, fleet...)
	var pending []string
	err = e2e.Poll(ctx, "nodes initialized", 100*time.Millisecond, 2*time.Minute, func() (bool, error) {
		pending = pending[:0]
		for _, n := range fleet {
			node, err := nodes.Get(ctx, n.nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if problem := initialized(node, n); problem != "" {
				pending = append(pending, n.nodeName+": "+problem)
			}
		}
		return len(pending) == 0, fmt.Errorf("%d of %d nodes not initialized: %v", len(pending), len(fleet), pending)
	})
	if err != nil {
		t.Fatal(err)
	}
	phase("nodes initialized")

	// A stopped instance: its node goes NotReady; the lifecycle controller taints it.
	stopped := fleet[1]
	sim.SetState(stopped.inst.ID, ec2sim.StateStopped)
	cp.SetNodeReady(ctx, t, stopped.nodeName, corev1.ConditionUnknown)
	err = e2e.Poll(ctx, "shutdown taint on the stopped instance's node", 250*time.Millisecond, 2*time.Minute, func() (bool, error) {
		node, err := nodes.Get(ctx, stopped.nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == shutdownKey {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	phase("stopped node tainted")

	// An instance EC2 no longer knows (InvalidInstanceID.NotFound): its node is deleted.
	removed := fleet[2]
	sim.Remove(removed.inst.ID)
	cp.SetNodeReady(ctx, t, removed.nodeName, corev1.ConditionUnknown)
	waitDeleted(ctx, t, cp, removed.nodeName)
	phase("removed instance's node deleted")

	// A terminated instance (still described by EC2): the AWS provider answers
	// InstanceExists=false, the adapter Deleted=true, which cloudgate answers as
	// "does not exist" (a negative entry): the node is deleted.
	terminated := fleet[3]
	sim.SetState(terminated.inst.ID, ec2sim.StateTerminated)
	cp.SetNodeReady(ctx, t, terminated.nodeName, corev1.ConditionUnknown)
	waitDeleted(ctx, t, cp, terminated.nodeName)
	phase("terminated instance's node deleted")

	for _, n := range []awsNode{fleet[0], fleet[4], fleet[5], stopped} {
		if _, err := nodes.Get(ctx, n.nodeName, metav1.GetOptions{}); err != nil {
			t.Errorf("node %s of an existing instance: %v", n.nodeName, err)
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
	// The node lookups went through the adapter: batches (BatchInstanceStatus) and list
	// pages (ListInstances), not the provider's per-node calls.
	for _, m := range []struct {
		name  string
		match map[string]string
	}{
		{"cloudgate_requests_total", map[string]string{"provider": "aws", "method": "InstanceMetadata"}},
		{"cloudgate_batch_flushes_total", map[string]string{"provider": "aws"}},
		{"cloudgate_batch_size_count", map[string]string{"provider": "aws"}},
		{"cloudgate_upstream_calls_total", map[string]string{"provider": "aws", "method": "ListInstances", "result": "ok"}},
	} {
		v, n := e2e.Sum(samples, m.name, m.match)
		t.Logf("%s%v: %.0f over %d series", m.name, m.match, v, n)
		if n == 0 || v == 0 {
			t.Errorf("/metrics has no %s%v", m.name, m.match)
		}
	}
	for _, method := range []string{"InstanceMetadata", "InstanceExists", "InstanceShutdown"} {
		if v, _ := e2e.Sum(samples, "cloudgate_upstream_calls_total", map[string]string{"provider": "aws", "method": method}); v != 0 {
			t.Errorf("cloudgate called the provider's own %s %.0f times: the adapter's batch path was not used", method, v)
		}
	}
	size, _ := e2e.Sum(samples, "cloudgate_batch_size_sum", map[string]string{"provider": "aws"})
	flushes, _ := e2e.Sum(samples, "cloudgate_batch_size_count", map[string]string{"provider": "aws"})
	t.Logf("%.0f nodes looked up in %.0f batches", size, flushes)
	t.Logf("simulated EC2: %+v", sim.AllStats())
	if done, err := ccm.Exited(); done {
		t.Errorf("cloud-controller-manager exited during the test: %v", err)
	}
}

func startCCM(t *testing.T, dir, bin, kubeconfig, cloudConfig string, port int) *e2e.Process {
	t.Helper()
	// Load balancers and routes are out of this test's scope.
	return startCCMControllers(t, dir, bin, kubeconfig, cloudConfig, port, "cloud-node,cloud-node-lifecycle")
}

// startCCMControllers starts the CCM with the controllers named (--controllers).
func startCCMControllers(t *testing.T, dir, bin, kubeconfig, cloudConfig string, port int, controllers string) *e2e.Process {
	t.Helper()
	// Static credentials and no instance-metadata service, as in the provider's docs for
	// running outside EC2; the environment also reaches the provider's SDK clients.
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": ec2sim.AccessKeyID, "AWS_SECRET_ACCESS_KEY": ec2sim.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		t.Setenv(k, v)
	}
	return e2e.StartProcess(t, dir, "cloud-controller-manager", bin,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--webhook-secure-port=0", // the webhook server would listen on 0.0.0.0
		"--cloud-provider=cloudgate", "--cloud-config="+cloudConfig,
		"--controllers="+controllers,
		"--use-service-account-credentials=false",
		"--node-status-update-frequency=5s",
		"--node-monitor-period="+monitorEvery.String(),
		"--v=2",
	)
}

// initialized returns what is still missing for the node to be initialized, or "".
func initialized(node *corev1.Node, n awsNode) string {
	for _, taint := range node.Spec.Taints {
		if taint.Key == e2e.UninitializedTaint {
			return "still tainted"
		}
	}
	if node.Spec.ProviderID != n.providerID() {
		return fmt.Sprintf("providerID %q, want %q", node.Spec.ProviderID, n.providerID())
	}
	want := map[string]string{
		corev1.LabelTopologyZone:       n.inst.Zone,
		corev1.LabelTopologyRegion:     "us-east-1",
		corev1.LabelInstanceTypeStable: n.inst.Type,
		"topology.k8s.aws/zone-id":     n.zoneID,
	}
	for k, v := range want {
		if node.Labels[k] != v {
			return fmt.Sprintf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	wantAddrs := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: n.inst.PrivateIP},
		{Type: corev1.NodeExternalIP, Address: n.inst.PublicIP},
		{Type: corev1.NodeInternalDNS, Address: n.inst.PrivateDNSName},
		{Type: corev1.NodeHostName, Address: n.inst.PrivateDNSName},
	}
	if fmt.Sprint(node.Status.Addresses) != fmt.Sprint(wantAddrs) {
		return fmt.Sprintf("addresses %v, want %v", node.Status.Addresses, wantAddrs)
	}
	return ""
}

func waitDeleted(ctx context.Context, t *testing.T, cp *e2e.ControlPlane, name string) {
	t.Helper()
	start := time.Now()
	err := e2e.Poll(ctx, "node "+name+" deleted", 250*time.Millisecond, 2*time.Minute, func() (bool, error) {
		_, err := cp.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s deleted %.1fs after its instance went", name, time.Since(start).Seconds())
}

// startControlPlaneWithRBAC starts a real etcd and kube-apiserver in dir and
// applies deploy/'s least-privilege RBAC for the CCM.
func startControlPlaneWithRBAC(ctx context.Context, t *testing.T, dir, etcdBin, apiserverBin string) *e2e.ControlPlane {
	t.Helper()
	cp := e2e.StartControlPlane(ctx, t, dir, etcdBin, apiserverBin)
	rbac, err := deploy.Objects("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Apply(ctx, rbac); err != nil {
		t.Fatal(err)
	}
	return cp
}

// addReadyNodes creates each node uninitialised (the cloud provider's
// taint), then marks them all Ready, as kubelets joining at once would.
func addReadyNodes(ctx context.Context, t *testing.T, cp *e2e.ControlPlane, fleet ...awsNode) {
	t.Helper()
	for _, n := range fleet {
		if _, err := cp.Admin.CoreV1().Nodes().Create(ctx, e2e.UninitializedNode(n.nodeName), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range fleet {
		cp.SetNodeReady(ctx, t, n.nodeName, corev1.ConditionTrue)
	}
}

// setReady sets the node's Ready condition, as its kubelet (or the node lifecycle
// controller) would.

// writeAWSConf writes the AWS provider's cloud config for ec2sim at simURL: no
// instance-metadata lookups (Zone, VPC, SubnetID, cluster ID set) and EC2 redirected with a
// [ServiceOverride]. It returns the file's path.
func writeAWSConf(t *testing.T, dir, simURL string) string {
	t.Helper()
	path := filepath.Join(dir, "aws.conf")
	e2e.WriteFile(t, path, fmt.Sprintf(`[Global]
Zone = us-east-1a
VPC = vpc-0e2e
SubnetID = subnet-0e2e
KubernetesClusterID = %s

[ServiceOverride "1"]
Service = EC2
Region = us-east-1
URL = %s
SigningRegion = us-east-1
SigningName = ec2
`, clusterID, simURL))
	return path
}
