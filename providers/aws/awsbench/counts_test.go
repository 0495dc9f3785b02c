package awsbench

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

// TestEC2CountsExcludeLoadBalancing: the EC2 figures (DescribeInstances
// and the other EC2 actions) count EC2's actions only; the classic ELB and
// ELBv2 actions ec2sim also answers (their own API and quota) and a request
// for an API it does not simulate are not EC2 calls.
func TestEC2CountsExcludeLoadBalancing(t *testing.T) {
	sim, err := ec2sim.Start(ec2sim.Config{Region: region, Zones: zones, Unthrottled: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	for _, req := range []struct{ version, action string }{
		{ec2sim.APIVersion, describe}, {ec2sim.APIVersion, describe},
		{ec2sim.APIVersion, "DescribeAvailabilityZones"}, {ec2sim.APIVersion, "DescribeRouteTables"},
		{ec2sim.ELBAPIVersion, "DescribeLoadBalancers"}, {ec2sim.ELBAPIVersion, "DescribeLoadBalancers"},
		{ec2sim.ELBv2APIVersion, "DescribeLoadBalancers"}, {ec2sim.ELBv2APIVersion, "DescribeTargetGroups"},
		{"2011-01-01", "DescribeAutoScalingGroups"},
	} {
		signed, err := ec2sim.SignedForm(context.Background(), sim.URL, "ec2", url.Values{"Action": {req.action}, "Version": {req.version}})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(signed)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := len(sim.AllStats()); n != 7 {
		t.Fatalf("%d actions counted, want 7: %v", n, sim.AllStats())
	}
	r := &rig{sim: sim}
	if calls, throttled, other := r.ec2Counts(); calls != 2 || throttled != 0 || other != 2 {
		t.Errorf("ec2Counts = %d DescribeInstances, %d throttled, %d other EC2 calls; want 2, 0, 2 (not the 4 load balancing calls nor the autoscaling one)",
			calls, throttled, other)
	}
}
