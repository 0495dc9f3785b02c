//go:build linux

package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// TestE2ECloudRequests: every EC2, ELB and ELBv2 request the CCM sends
// passes cloudgate's request gate. The CCM (cloudgate in front of aws-batch,
// with the node, lifecycle and service controllers) initialises three
// Nodes and gives a classic ELB Service and an NLB Service their load
// balancers, then a fourth Node joins (UpdateLoadBalancer), against
// ec2sim, which verifies every request's SigV4 signature. Then cloudgate_cloud_requests_total, summed per action, must
// equal ec2sim's request count of that action at a moment when ec2sim
// received nothing during the scrape; no request may have been refused for
// its signature (HTTP 401/403: the gate sits before the signer, so a
// request that waited is signed when sent); and every request must be
// attributed to a CCM method (none "unattributed": the provider passes the
// method's context to the SDK).
func TestE2ECloudRequests(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ccmBuild.Start()
	cp := startControlPlaneWithRBAC(ctx, t, dir, etcdBin, apiserverBin)

	tag := map[string]string{"kubernetes.io/cluster/" + clusterID: "owned"}
	zones := []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}, {Name: "us-east-1c", ID: "use1-az4"}}
	var subnets []ec2sim.Subnet
	for i, z := range zones {
		subnets = append(subnets, ec2sim.Subnet{ID: fmt.Sprintf("subnet-0e2e%d", i), VPCID: "vpc-0e2e", Zone: z.Name,
			CIDR: fmt.Sprintf("10.0.%d.0/24", i), Tags: tag})
	}
	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Topology: true, Zones: zones, Subnets: subnets,
		SecurityGroups: []ec2sim.SecurityGroup{{ID: "sg-0node", Name: "nodes", Description: "cluster nodes", VPCID: "vpc-0e2e", Tags: tag}},
		RouteTables: []ec2sim.RouteTable{{ID: "rtb-0e2e", VPCID: "vpc-0e2e", Main: true, Routes: []ec2sim.Route{
			{DestinationCIDR: "10.0.0.0/16", GatewayID: "local"}, {DestinationCIDR: "0.0.0.0/0", GatewayID: "igw-0e2e"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	var fleet []awsNode
	for i := 1; i <= 4; i++ {
		z := zones[i%3]
		dns := fmt.Sprintf("ip-10-0-%d-%d.ec2.internal", i%3, i)
		ip := fmt.Sprintf("10.0.%d.%d", i%3, i)
		in := ec2sim.Instance{
			ID: fmt.Sprintf("i-%017x", i), Type: "m5.large", Zone: z.Name, PrivateDNSName: dns, PrivateIP: ip,
			VPCID: "vpc-0e2e", SubnetID: subnets[i%3].ID, SecurityGroupIDs: []string{"sg-0node"},
			Interfaces: []ec2sim.NetworkInterface{{Status: "in-use", PrivateIPs: []string{ip}}}, Tags: tag,
		}
		sim.Put(in)
		fleet = append(fleet, awsNode{inst: in, nodeName: dns, zoneID: z.ID})
	}

	awsConf := filepath.Join(dir, "aws.conf")
	e2e.WriteFile(t, awsConf, fmt.Sprintf(`[Global]
Zone = us-east-1a
VPC = vpc-0e2e
SubnetID = subnet-0e2e0
KubernetesClusterID = %s
`, clusterID)+serviceOverrides(sim.URL))
	cloudConfig := filepath.Join(dir, "cloudgate.yaml")
	e2e.WriteFile(t, cloudConfig, fmt.Sprintf(`upstream:
  name: aws-batch
  configFile: %s
batch: {enabled: true, maxWait: 200ms, listPrefetch: true, listInterval: 2s}
`, awsConf))
	kubeconfig := filepath.Join(dir, "ccm.kubeconfig")
	cp.Kubeconfig(t, kubeconfig, cp.CCMToken)
	port := e2e.FreePort(t)
	ccm := startCCMControllers(t, dir, ccmBuild.Binary(ctx, t), kubeconfig, cloudConfig, port, "cloud-node,cloud-node-lifecycle,service")
	https, ccmURL := ccm.WaitServing(ctx, t, port, cp.AdminToken, 2*time.Minute)

	joining := fleet[3] // joins once the load balancers exist
	fleet = fleet[:3]
	addReadyNodes(ctx, t, cp, fleet...)
	nodes := cp.Admin.CoreV1().Nodes()
	err = e2e.Poll(ctx, "nodes initialized", 100*time.Millisecond, 2*time.Minute, func() (bool, error) {
		for _, n := range fleet {
			node, err := nodes.Get(ctx, n.nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, taint := range node.Spec.Taints {
				if taint.Key == e2e.UninitializedTaint {
					return false, fmt.Errorf("%s still tainted", n.nodeName)
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	svcs := cp.Admin.CoreV1().Services("default")
	for name, annotations := range map[string]map[string]string{
		"classic": nil,
		"nlb":     {"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"},
	} {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
		}
		if _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err = e2e.Poll(ctx, "load balancers provisioned", 250*time.Millisecond, 3*time.Minute, func() (bool, error) {
		for _, name := range []string{"classic", "nlb"} {
			svc, err := svcs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if len(svc.Status.LoadBalancer.Ingress) == 0 {
				return false, fmt.Errorf("service %s has no load balancer yet", name)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A Node joining: the service controller updates both load balancers'
	// backends (UpdateLoadBalancer).
	addReadyNodes(ctx, t, cp, joining)
	err = e2e.Poll(ctx, "backends updated", 250*time.Millisecond, 3*time.Minute, func() (bool, error) {
		elb, nlb := sim.Stats(ec2sim.ELBAction("RegisterInstancesWithLoadBalancer")).Requests, sim.Stats(ec2sim.ELBv2Action("RegisterTargets")).Requests
		return elb >= 2 && nlb >= 2, fmt.Errorf("RegisterInstancesWithLoadBalancer %d, RegisterTargets %d", elb, nlb)
	})
	if err != nil {
		t.Fatal(err)
	}

	// ec2sim counts a request when it arrives, cloudgate when its answer
	// does: the totals are compared at a moment when ec2sim received
	// nothing while /metrics was read (the CCM's loops leave such moments
	// every second).
	var (
		cg       map[string]map[string]float64 // sim key → method → requests
		simNow   map[string]ec2sim.ActionStats
		mismatch string
		refused  float64 // answered 401 or 403: a signature ec2sim refused
	)
	err = e2e.Poll(ctx, "cloudgate's and ec2sim's counts equal", 50*time.Millisecond, time.Minute, func() (bool, error) {
		before := sim.AllStats()
		code, body, err := e2e.Get(https, ccmURL+"/metrics", cp.AdminToken)
		simNow = sim.AllStats()
		if err != nil || code != http.StatusOK {
			return false, fmt.Errorf("GET /metrics: HTTP %d, %v", code, err)
		}
		if fmt.Sprint(before) != fmt.Sprint(simNow) {
			return false, fmt.Errorf("ec2sim received requests during the scrape")
		}
		samples, err := e2e.ParseMetrics(body)
		if err != nil {
			return false, err
		}
		cg, refused = map[string]map[string]float64{}, 0
		for _, s := range samples {
			if s.Name != "cloudgate_cloud_requests_total" || s.Labels["provider"] != "aws" {
				continue
			}
			if c := s.Labels["code"]; c == "401" || c == "403" {
				refused += s.Value
			}
			key := s.Labels["action"]
			switch s.Labels["service"] {
			case "elb":
				key = ec2sim.ELBAction(key)
			case "elbv2":
				key = ec2sim.ELBv2Action(key)
			}
			if cg[key] == nil {
				cg[key] = map[string]float64{}
			}
			cg[key][s.Labels["method"]] += s.Value
		}
		mismatch = ""
		for _, key := range slices.Sorted(maps.Keys(unionKeys(cg, simNow))) {
			var got float64
			for _, v := range cg[key] {
				got += v
			}
			if want := float64(simNow[key].Requests); got != want {
				mismatch += fmt.Sprintf(" %s: cloudgate %.0f, ec2sim %.0f;", key, got, want)
			}
		}
		return mismatch == "", fmt.Errorf("per-action totals differ:%s", mismatch)
	})
	if err != nil {
		t.Fatal(err)
	}
	var total, unattributed float64
	var elb, elbv2 int
	for _, key := range slices.Sorted(maps.Keys(cg)) {
		var parts []string
		for _, m := range slices.Sorted(maps.Keys(cg[key])) {
			parts = append(parts, fmt.Sprintf("%s %.0f", m, cg[key][m]))
			total += cg[key][m]
			if m == "unattributed" {
				unattributed += cg[key][m]
			}
		}
		if strings.HasPrefix(key, ec2sim.ELBAction("")) {
			elb++
		} else if strings.HasPrefix(key, ec2sim.ELBv2Action("")) {
			elbv2++
		}
		if st := simNow[key]; st.Invalid != 0 {
			t.Errorf("%s: ec2sim does not simulate the action (%d requests)", key, st.Invalid)
		}
		t.Logf("%-55s %s", key, strings.Join(parts, ", "))
	}
	t.Logf("%.0f requests counted alike by cloudgate and ec2sim over %d actions (%d ELB, %d ELBv2)", total, len(cg), elb, elbv2)
	if elb == 0 || elbv2 == 0 || cg["DescribeInstances"] == nil {
		t.Errorf("the run made no ELB (%d), ELBv2 (%d) or DescribeInstances requests: the check covers too little", elb, elbv2)
	}
	if refused != 0 {
		t.Errorf("ec2sim refused %.0f requests' signatures (HTTP 401/403)", refused)
	}
	var updates float64
	for _, byMethod := range cg {
		updates += byMethod["UpdateLoadBalancer"]
	}
	if updates == 0 {
		t.Errorf("no request attributed to UpdateLoadBalancer after a Node joined")
	}
	if unattributed != 0 {
		t.Errorf("%.0f requests attributed to no CCM method", unattributed)
	}
	if done, err := ccm.Exited(); done {
		t.Errorf("cloud-controller-manager exited during the test: %v", err)
	}
}

func unionKeys[A, B any](a map[string]A, b map[string]B) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// serviceOverrides sends the provider's EC2, ELB and ELBv2 clients to url.
func serviceOverrides(url string) string {
	var b strings.Builder
	for i, s := range []struct{ service, signing string }{
		{"EC2", "ec2"}, {"Elastic Load Balancing", "elasticloadbalancing"}, {"Elastic Load Balancing v2", "elasticloadbalancing"},
	} {
		fmt.Fprintf(&b, "\n[ServiceOverride %q]\nService = %s\nRegion = us-east-1\nURL = %s\nSigningRegion = us-east-1\nSigningName = %s\n",
			fmt.Sprint(i+1), s.service, url, s.signing)
	}
	return b.String()
}
