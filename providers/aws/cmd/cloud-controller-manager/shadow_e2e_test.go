//go:build linux

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// TestE2EShadow runs the CCM with cloudgate in `mode: shadow` in front of the unmodified AWS
// provider (no adapter: what an operator tries first) against a real etcd and kube-apiserver
// and ec2sim. Its read bucket is far below what the controllers ask for
// (0.2/s, burst 1), so enforcing it would make them wait; in shadow mode every call goes
// straight to EC2 and cloudgate only reports what it would have done. Checked: the nodes are
// initialised; the status loop (every 5 s here) is served live; cloudgate counts would-be
// cache hits, would-be waits and fewer would-be calls than it sent; its own caches served
// nothing; nothing changed in EC2, so no would-be answer diverged.
func TestE2EShadow(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir := t.TempDir()

	ccmBuild.Start()
	cp := startControlPlaneWithRBAC(ctx, t, dir, etcdBin, apiserverBin)

	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Topology: true,
		Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	var fleet []awsNode
	for i := 1; i <= 4; i++ {
		zone, zoneID := "us-east-1a", "use1-az1"
		if i%2 == 0 {
			zone, zoneID = "us-east-1b", "use1-az2"
		}
		dns := fmt.Sprintf("ip-10-0-1-%d.ec2.internal", i)
		in := ec2sim.Instance{
			ID: fmt.Sprintf("i-%017x", 0x100+i), Type: "m5.large", Zone: zone, PrivateDNSName: dns,
			PrivateIP: fmt.Sprintf("10.0.1.%d", i), PublicIP: fmt.Sprintf("54.0.1.%d", i),
			Interfaces: []ec2sim.NetworkInterface{{Status: "in-use", PrivateIPs: []string{fmt.Sprintf("10.0.1.%d", i)}}},
			Tags:       map[string]string{"kubernetes.io/cluster/" + clusterID: "owned"},
		}
		sim.Put(in)
		fleet = append(fleet, awsNode{inst: in, nodeName: dns, zoneID: zoneID})
	}

	awsConf := writeAWSConf(t, dir, sim.URL)
	cloudConfig := filepath.Join(dir, "cloudgate.yaml")
	e2e.WriteFile(t, cloudConfig, fmt.Sprintf(`upstream:
  name: aws
  configFile: %s
mode: shadow
limits:
  read: {qps: 0.2, burst: 1}
`, awsConf))
	kubeconfig := filepath.Join(dir, "ccm.kubeconfig")
	cp.Kubeconfig(t, kubeconfig, cp.CCMToken)
	ccmBin := ccmBuild.Binary(ctx, t)
	port := e2e.FreePort(t)
	ccm := startCCM(t, dir, ccmBin, kubeconfig, cloudConfig, port)
	https, ccmURL := ccm.WaitServing(ctx, t, port, cp.AdminToken, 2*time.Minute)

	nodes := cp.Admin.CoreV1().Nodes()
	addReadyNodes(ctx, t, cp, fleet...)
	err = e2e.Poll(ctx, "nodes initialized", 100*time.Millisecond, 2*time.Minute, func() (bool, error) {
		for _, n := range fleet {
			node, err := nodes.Get(ctx, n.nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if problem := initialized(node, n); problem != "" {
				return false, fmt.Errorf("%s: %s", n.nodeName, problem)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Two or more status rounds (--node-status-update-frequency=5s): each asks for every node
	// again, which cloudgate would have answered from its cache.
	var live, predicted, hits, waited float64
	err = e2e.Poll(ctx, "would-be cache hits of the status loop", time.Second, 2*time.Minute, func() (bool, error) {
		samples, err := metricsOf(https, ccmURL, cp.AdminToken)
		if err != nil {
			return false, err
		}
		aws := map[string]string{"provider": "aws"}
		live, _ = e2e.Sum(samples, "cloudgate_upstream_calls_total", aws)
		predicted, _ = e2e.Sum(samples, "cloudgate_shadow_upstream_calls_total", aws)
		hits, _ = e2e.Sum(samples, "cloudgate_shadow_reads_total", map[string]string{"provider": "aws", "result": "hit"})
		waited, _ = e2e.Sum(samples, "cloudgate_shadow_wait_seconds_sum", aws)
		if diverged, _ := e2e.Sum(samples, "cloudgate_shadow_divergences_total", aws); diverged != 0 {
			t.Errorf("%.0f would-be cached answers diverged from EC2's, which did not change", diverged)
		}
		if served, _ := e2e.Sum(samples, "cloudgate_cache_hits_total", aws); served != 0 {
			t.Errorf("cloudgate served %.0f answers from its cache in shadow mode", served)
		}
		return hits >= float64(2*len(fleet)), fmt.Errorf("live %.0f calls, predicted %.0f, would-be hits %.0f", live, predicted, hits)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("shadow: %.0f live upstream calls, %.0f would-be calls, %.0f would-be cache hits, %.1f s would-be token wait; EC2: %+v",
		live, predicted, hits, waited, sim.AllStats())
	if predicted <= 0 || predicted >= live {
		t.Errorf("would-be calls %.0f, live calls %.0f: want 0 < would-be < live (the cache saves the status rounds)", predicted, live)
	}
	if waited <= 0 {
		t.Errorf("no would-be token wait with a read bucket of 0.2/s, burst 1")
	}
	if done, err := ccm.Exited(); done {
		t.Errorf("cloud-controller-manager exited during the test: %v", err)
	}
}
