//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// The not-found guard's settings in this test (short, so that the test is
// short; the defaults are 2m and 20s), and the cache's negativeTTL.
const (
	guardGrace   = 8 * time.Second
	guardConfirm = 6 * time.Second
	guardNegTTL  = 2 * time.Second
	guardExists  = time.Second // methods.InstanceExists.ttl
)

// TestE2ENotFoundGuard runs the CCM (cloudgate in front of the unmodified AWS provider with
// the awsbatch adapter) against a real etcd and kube-apiserver and ec2sim, and checks the
// not-found guard end to end, on NotReady nodes (the only ones the node
// lifecycle controller asks about):
//   - an instance EC2 does not know for a short while (InvalidInstanceID.NotFound / omitted
//     from DescribeInstances for less than confirmAfter, then back): its Node is kept, and
//     /metrics counts a refuted confirmation;
//   - an instance EC2 no longer knows: its Node is deleted within existsTTL + negativeTTL +
//     confirmAfter + one node-monitor period (+ slack for the loaded machine), and not sooner
//     than confirmAfter;
//   - a terminated instance (still described, state terminated): deleted without waiting for
//     confirmAfter;
//   - with notFoundGuard.enabled: false (a second CCM, same cluster), the same brief absence
//     deletes the Node: the negative control that shows the first check can fail.
func TestE2ENotFoundGuard(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ccmBuild.Start()
	cp := startControlPlaneWithRBAC(ctx, t, dir, etcdBin, apiserverBin)
	sim, err := ec2sim.Start(ec2sim.Config{Region: "us-east-1", Topology: true, Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	awsConf := writeAWSConf(t, dir, sim.URL)
	kubeconfig := filepath.Join(dir, "ccm.kubeconfig")
	cp.Kubeconfig(t, kubeconfig, cp.CCMToken)
	ccmBin := ccmBuild.Binary(ctx, t)
	nodes := cp.Admin.CoreV1().Nodes()

	// run starts a CCM whose guard is on or off and initializes count new nodes.
	next := 0
	run := func(guard bool, count int) (*e2e.Process, *http.Client, string, []awsNode) {
		t.Helper()
		cfg := filepath.Join(dir, fmt.Sprintf("cloudgate-%t.yaml", guard))
		e2e.WriteFile(t, cfg, fmt.Sprintf(`upstream:
  name: aws-batch
  configFile: %s
methods:
  InstanceExists: {ttl: %s}
  InstanceShutdown: {ttl: %s}
cache: {negativeTTL: %s}
batch: {enabled: true, maxWait: 200ms, listPrefetch: true, listInterval: 2s}
notFoundGuard: {enabled: %t, gracePeriod: %s, confirmAfter: %s}
`, awsConf, guardExists, guardExists, guardNegTTL, guard, guardGrace, guardConfirm))
		port := e2e.FreePort(t)
		ccm := startCCM(t, dir, ccmBin, kubeconfig, cfg, port)
		https, url := ccm.WaitServing(ctx, t, port, cp.AdminToken, 2*time.Minute)
		var fleet []awsNode
		for range count {
			next++
			in := ec2sim.Instance{
				ID: fmt.Sprintf("i-%017x", 0x100+next), Type: "m5.large", Zone: "us-east-1a",
				PrivateDNSName: fmt.Sprintf("ip-10-0-1-%d.ec2.internal", next), PrivateIP: fmt.Sprintf("10.0.1.%d", next), PublicIP: fmt.Sprintf("54.0.1.%d", next),
				Interfaces: []ec2sim.NetworkInterface{{Status: "in-use", PrivateIPs: []string{fmt.Sprintf("10.0.1.%d", next)}}},
				Tags:       map[string]string{"kubernetes.io/cluster/" + clusterID: "owned"},
			}
			sim.Put(in)
			n := awsNode{inst: in, nodeName: in.PrivateDNSName, zoneID: "use1-az1"}
			addReadyNodes(ctx, t, cp, n)
			fleet = append(fleet, n)
		}
		err := e2e.Poll(ctx, "nodes initialized", 100*time.Millisecond, 2*time.Minute, func() (bool, error) {
			for _, n := range fleet {
				node, err := nodes.Get(ctx, n.nodeName, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if p := initialized(node, n); p != "" {
					return false, fmt.Errorf("%s: %s", n.nodeName, p)
				}
			}
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Past the grace period, so that only confirmAfter holds an answer back.
		time.Sleep(guardGrace)
		return ccm, https, url, fleet
	}
	// briefly hides n's instance from EC2 (removed, then put back) until the
	// CCM logged a held "not found" for it and guardConfirm/2 more passed
	// (guard on), or for 3 node-monitor periods (guard off).
	briefly := func(ccm *e2e.Process, n awsNode, guard bool) {
		t.Helper()
		cp.SetNodeReady(ctx, t, n.nodeName, corev1.ConditionUnknown)
		time.Sleep(2 * monitorEvery) // the lifecycle controller sees it exist first
		sim.Remove(n.inst.ID)
		gone := time.Now()
		if guard {
			held := regexp.MustCompile(`node ` + regexp.QuoteMeta(n.nodeName) + ` exists: .*reported missing`)
			err := e2e.Poll(ctx, "a held not-found for "+n.inst.ID, 100*time.Millisecond, guardConfirm, func() (bool, error) {
				return len(e2e.GrepLines(t, ccm.Log, held)) > 0, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(guardConfirm / 2) // back well before a confirming answer could come
		} else {
			time.Sleep(3 * monitorEvery)
		}
		sim.Put(n.inst)
		t.Logf("instance %s missing from EC2 for %.1fs", n.inst.ID, time.Since(gone).Seconds())
	}

	// Guard on.
	ccm, https, url, fleet := run(true, 3)
	brief, removed, terminated := fleet[0], fleet[1], fleet[2]
	briefly(ccm, brief, true)
	// Kept: still there after every bound has passed twice.
	time.Sleep(2 * (guardExists + guardNegTTL + guardConfirm + 2*monitorEvery))
	if _, err := nodes.Get(ctx, brief.nodeName, metav1.GetOptions{}); err != nil {
		t.Fatalf("the Node of an instance missing from EC2 for less than confirmAfter was deleted (or unreadable): %v", err)
	}
	samples, err := metricsOf(https, url, cp.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := e2e.Sum(samples, "cloudgate_notfound_confirmations_total", map[string]string{"outcome": "refuted"}); v < 1 {
		t.Errorf("cloudgate_notfound_confirmations_total{outcome=refuted} = %v, want >= 1 (the held answer was refuted)", v)
	}

	bound := guardExists + guardNegTTL + guardConfirm + monitorEvery
	const slack = 5 * time.Second // a loaded machine, -race, kube round trips
	sim.Remove(removed.inst.ID)
	cp.SetNodeReady(ctx, t, removed.nodeName, corev1.ConditionUnknown)
	start := time.Now()
	waitDeleted(ctx, t, cp, removed.nodeName)
	took := time.Since(start)
	t.Logf("removed instance's Node deleted after %.1fs (bound existsTTL+negativeTTL+confirmAfter+one period = %v, +%v slack)", took.Seconds(), bound, slack)
	if took > bound+slack {
		t.Errorf("removed instance's Node deleted after %v, want within %v + %v", took, bound, slack)
	}
	if took < guardConfirm {
		t.Errorf("removed instance's Node deleted after %v, sooner than confirmAfter %v: the guard did not hold it", took, guardConfirm)
	}

	sim.SetState(terminated.inst.ID, ec2sim.StateTerminated)
	cp.SetNodeReady(ctx, t, terminated.nodeName, corev1.ConditionUnknown)
	start = time.Now()
	waitDeleted(ctx, t, cp, terminated.nodeName)
	took = time.Since(start)
	t.Logf("terminated instance's Node deleted after %.1fs", took.Seconds())
	if took > guardExists+guardNegTTL+2*monitorEvery+slack {
		t.Errorf("terminated instance's Node deleted after %v; terminated is definitive, want within %v + %v", took, guardExists+guardNegTTL+2*monitorEvery, slack)
	}
	if samples, err = metricsOf(https, url, cp.AdminToken); err == nil {
		v, _ := e2e.Sum(samples, "cloudgate_notfound_confirmations_total", map[string]string{"outcome": "confirmed"})
		t.Logf("confirmations: confirmed %.0f", v)
		if v < 1 {
			t.Errorf("cloudgate_notfound_confirmations_total{outcome=confirmed} = %v, want >= 1 (the removed instance)", v)
		}
	} else {
		t.Error(err)
	}
	if done, err := ccm.Exited(); done {
		t.Fatalf("cloud-controller-manager exited during the test: %v", err)
	}
	ccm.Quit(t)

	// Guard off: the same brief absence deletes the Node.
	ccm, _, _, fleet = run(false, 1)
	briefly(ccm, fleet[0], false)
	err = e2e.Poll(ctx, "the briefly missing node deleted without the guard", 250*time.Millisecond, 30*time.Second, func() (bool, error) {
		_, err := nodes.Get(ctx, fleet[0].nodeName, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Errorf("with notFoundGuard.enabled: false the briefly missing instance's Node was kept: the check above cannot fail (%v)", err)
	}
	ccm.Quit(t)
}

func metricsOf(c *http.Client, url, token string) ([]e2e.Sample, error) {
	code, body, err := e2e.Get(c, url+"/metrics", token)
	if err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: HTTP %d, %v", code, err)
	}
	return e2e.ParseMetrics(body)
}
