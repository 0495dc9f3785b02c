//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cloud-provider-aws/pkg/controllers/tagging"
	"k8s.io/cloud-provider/names"

	"github.com/cloudgate/cloudgate/deploy"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// dropInValues are the Helm values of the drop-in run: the AWS examples' service-account
// credentials and the tagging controller on.
const dropInValues = `{"useServiceAccountCredentials": true, "tagging": {"tags": {"team": "platform", "cost-center": "1234"}}}`

var dropInTags = map[string]string{"team": "platform", "cost-center": "1234"}

// TestE2EDropIn runs this module's CCM as the Helm chart (charts/cloudgate) deploys it as a
// drop-in for the AWS cloud-controller-manager: the chart's RBAC applied to a real
// kube-apiserver + etcd, the chart's container flags (--controllers=*,tagging,
// --use-service-account-credentials=true, leader election, --tags, --resources), upstream
// aws-batch against ec2sim, and limits.shared on a real redis-server. It checks that every
// kube client the CCM makes under service-account credentials (each its own
// ServiceAccount) is allowed what it does — any "forbidden" in the CCM's log fails the test
// —, that the AWS provider's tagging controller tags each Node's instance with CreateTags
// and labels the Node, and untags (DeleteTags) when the Node goes, and that cloudgate's
// fleet fallback and rejoin are recorded as events.k8s.io Events under the cloudgate
// ServiceAccount.
func TestE2EDropIn(t *testing.T) {
	etcdBin, apiserverBin, goBin := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := t.TempDir()
	began := time.Now()
	phase := func(name string) { t.Logf("phase %-36s at %6.1fs", name, time.Since(began).Seconds()) }

	ccmBuild.Start()
	rbac, chartArgs := renderChart(ctx, t, goBin)
	phase("chart rendered")

	cp := e2e.StartControlPlane(ctx, t, dir, etcdBin, apiserverBin)
	if err := cp.Apply(ctx, rbac); err != nil {
		t.Fatal(err)
	}
	phase("control plane + the chart's rbac")

	redis := fleettest.Start(t)
	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Topology: true,
		Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	var fleet []awsNode
	for i := 1; i <= 3; i++ {
		z := []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}}[i%2]
		dns := fmt.Sprintf("ip-10-0-1-%d.ec2.internal", i)
		in := ec2sim.Instance{
			ID: fmt.Sprintf("i-%017x", 0x100+i), Type: "m5.large", Zone: z.Name, PrivateDNSName: dns,
			PrivateIP: fmt.Sprintf("10.0.1.%d", i), PublicIP: fmt.Sprintf("54.0.1.%d", i),
			Interfaces: []ec2sim.NetworkInterface{{Status: "in-use", PrivateIPs: []string{fmt.Sprintf("10.0.1.%d", i)}}},
			Tags:       map[string]string{"kubernetes.io/cluster/" + clusterID: "owned"},
		}
		sim.Put(in)
		fleet = append(fleet, awsNode{inst: in, nodeName: dns, zoneID: z.ID})
	}

	awsConf := writeAWSConf(t, dir, sim.URL)
	cloudConfig := filepath.Join(dir, "cloudgate.yaml")
	e2e.WriteFile(t, cloudConfig, fmt.Sprintf(`upstream:
  name: aws-batch
  configFile: %s
batch:
  enabled: true
  maxWait: 200ms
limits:
  shared:
    redis: {address: %q, passwordFile: %q}
    account: e2e-dropin
    redisTimeout: 200ms
    heartbeat: 200ms
`, awsConf, redis.Addr, redis.PasswordFile))
	kubeconfig := filepath.Join(dir, "ccm.kubeconfig")
	cp.Kubeconfig(t, kubeconfig, cp.CCMToken)

	ccmBin := ccmBuild.Binary(ctx, t)
	phase("CCM binary built")

	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": ec2sim.AccessKeyID, "AWS_SECRET_ACCESS_KEY": ec2sim.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		t.Setenv(k, v)
	}
	port := e2e.FreePort(t)
	// The chart's flags, then what differs outside a Pod (the last value of a flag wins):
	// files, the loopback ports, and faster node monitoring.
	args := append(slices.Clone(chartArgs),
		"--cloud-config="+cloudConfig,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--readyz-bind-address=127.0.0.1:"+strconv.Itoa(e2e.FreePort(t)),
		"--node-status-update-frequency=5s",
		"--node-monitor-period="+monitorEvery.String(),
	)
	t.Logf("CCM flags: %s", strings.Join(args, " "))
	ccm := e2e.StartProcess(t, dir, "cloud-controller-manager", ccmBin, args...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- the CCM's warnings and errors ---\n%s", strings.Join(e2e.GrepLines(t, ccm.Log, regexp.MustCompile(`^[WEF]\d{4}`)), "\n"))
		}
		if forbidden := e2e.GrepLines(t, ccm.Log, regexp.MustCompile(`(?i)forbidden`)); len(forbidden) > 0 {
			t.Errorf("the API server refused the CCM %d times (the chart's RBAC lacks a rule or binding?):\n%s",
				len(forbidden), strings.Join(forbidden[:min(len(forbidden), 10)], "\n"))
		}
	})
	ccm.WaitServing(ctx, t, port, cp.AdminToken, 2*time.Minute)
	phase("CCM serving (leader)")

	nodes := cp.Admin.CoreV1().Nodes()
	addReadyNodes(ctx, t, cp, fleet...)
	// Initialized by cloud-node (as node-controller), then tagged by the tagging controller
	// (as tagging-controller): the instance carries the tags, the Node the controller's label.
	var pending []string
	err = e2e.Poll(ctx, "nodes initialized and tagged", 200*time.Millisecond, 2*time.Minute, func() (bool, error) {
		pending = pending[:0]
		for _, n := range fleet {
			node, err := nodes.Get(ctx, n.nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if problem := initialized(node, n); problem != "" {
				pending = append(pending, n.nodeName+": "+problem)
				continue
			}
			if node.Labels["k8s.io/cloud-provider-aws"] == "" {
				pending = append(pending, n.nodeName+": no tagging label")
			}
			tags, _ := sim.Tags(n.inst.ID)
			for k, v := range dropInTags {
				if tags[k] != v {
					pending = append(pending, fmt.Sprintf("%s: instance tag %s=%q", n.nodeName, k, tags[k]))
				}
			}
		}
		return len(pending) == 0, fmt.Errorf("%d problems: %v", len(pending), pending)
	})
	if err != nil {
		t.Fatal(err)
	}
	phase("nodes initialized and tagged")

	// A Node deleted (its instance still there): the tagging controller removes the tags.
	gone := fleet[0]
	if err := nodes.Delete(ctx, gone.nodeName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = e2e.Poll(ctx, "tags removed from the deleted node's instance", 200*time.Millisecond, time.Minute, func() (bool, error) {
		tags, _ := sim.Tags(gone.inst.ID)
		return tags["team"] == "" && tags["cost-center"] == "", fmt.Errorf("tags %v", tags)
	})
	if err != nil {
		t.Fatal(err)
	}
	if tags, _ := sim.Tags(gone.inst.ID); tags["kubernetes.io/cluster/"+clusterID] != "owned" {
		t.Errorf("untagging removed the cluster tag: %v", tags)
	}
	phase("deleted node's instance untagged")

	// Redis goes away and comes back: cloudgate records the fallback and the rejoin.
	redis.Kill()
	waitEvent(ctx, t, cp, "CloudgateRedisFallback")
	redis.Restart()
	waitEvent(ctx, t, cp, "CloudgateRedisRejoined")
	phase("fleet Events recorded")

	// Each client acted as its own ServiceAccount, which the CCM created.
	for _, sa := range []string{"node-controller", tagging.TaggingControllerClientName, "aws-cloud-provider", provider.EventsClientName} {
		if _, err := cp.Admin.CoreV1().ServiceAccounts("kube-system").Get(ctx, sa, metav1.GetOptions{}); err != nil {
			t.Errorf("ServiceAccount kube-system/%s (service-account credentials): %v", sa, err)
		}
	}
	// --controllers=*,tagging started the AWS CCM's set.
	for _, c := range []string{names.CloudNodeController, names.CloudNodeLifecycleController, names.ServiceLBController,
		names.NodeRouteController, tagging.TaggingControllerKey} {
		if want := fmt.Sprintf("Starting %q", c); len(e2e.GrepLines(t, ccm.Log, regexp.MustCompile(regexp.QuoteMeta(want)))) == 0 {
			t.Errorf("the CCM's log has no %s", want)
		}
	}
	t.Logf("simulated EC2: %+v", sim.AllStats())
	if done, err := ccm.Exited(); done {
		t.Errorf("cloud-controller-manager exited during the test: %v", err)
	}
}

// renderChart renders charts/cloudgate with dropInValues (charts/test/cmd/render-chart, Helm's
// Go SDK in its own module) and returns its RBAC objects and the CCM container's args.
func renderChart(ctx context.Context, t *testing.T, goBin string) (rbac []runtime.Object, args []string) {
	t.Helper()
	chartTest, err := filepath.Abs("../../../../charts/test")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, goBin, "run", "./cmd/render-chart", "-values", dropInValues,
		"-kinds", "ServiceAccount,ClusterRole,ClusterRoleBinding,Role,RoleBinding,Deployment")
	cmd.Dir = chartTest
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rendering the chart (%s): %v\n%s", cmd, err, stderr.Bytes())
	}
	objs, err := deploy.Decode("charts/cloudgate", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			args = d.Spec.Template.Spec.Containers[0].Args
			continue
		}
		rbac = append(rbac, o)
	}
	if len(rbac) == 0 || len(args) == 0 {
		t.Fatalf("the chart rendered %d RBAC objects and args %q", len(rbac), args)
	}
	return rbac, args
}

// waitEvent waits for an events.k8s.io Event with the reason in kube-system, reported by
// cloudgate.
func waitEvent(ctx context.Context, t *testing.T, cp *e2e.ControlPlane, reason string) {
	t.Helper()
	var seen []string
	err := e2e.Poll(ctx, "Event "+reason, 200*time.Millisecond, time.Minute, func() (bool, error) {
		l, err := cp.Admin.EventsV1().Events("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range l.Items {
			seen = append(seen, e.Reason)
			if e.Reason == reason && e.ReportingController == "cloudgate" && e.Regarding.Kind == "Namespace" {
				logEvent(t, e)
				return true, nil
			}
		}
		return false, fmt.Errorf("Events in kube-system: %v", seen)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func logEvent(t *testing.T, e eventsv1.Event) {
	t.Logf("Event %s/%s %s %s (action %s, by %s/%s): %s", e.Namespace, e.Name, e.Type, e.Reason, e.Action,
		e.ReportingController, e.ReportingInstance, e.Note)
}
