package awsrequests_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elbv2 "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/smithy-go"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/metrics/metricstest"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/aws/awsrequests"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

// requests sums cloudgate_cloud_requests_total (or another counter of
// metrics.Default) over the series matching labels.
func requests(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricstest.Of(t, metrics.Default, name, labels)
}

// noBackoff retries at once: the test counts attempts, not their pacing.
var noBackoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })

// TestInstallGovernsSDKClients: after Install, an SDK client built as the
// AWS provider builds its own (config.LoadDefaultConfig, the credentials
// from the environment) sends every attempt through the gate: each is
// counted by action, method and code, as ec2sim counts it, retries
// included; throttling answers are counted as such; a request without a
// cloudgate call is unattributed; and the requests keep valid signatures
// (ec2sim verifies them).
func TestInstallGovernsSDKClients(t *testing.T) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": ec2sim.AccessKeyID, "AWS_SECRET_ACCESS_KEY": ec2sim.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		"AWS_PROFILE": "", "AWS_REGION": "",
	} {
		t.Setenv(k, v)
	}
	if _, err := awsrequests.Install(); err != nil {
		t.Fatal(err)
	}
	sim, err := ec2sim.Start(ec2sim.Config{Region: "us-east-1", Buckets: map[string]ec2sim.Bucket{"DescribeSubnets": {Size: 1, Refill: 0.001}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	ctx := context.Background()
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion("us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	ec := ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		o.BaseEndpoint = aws.String(sim.URL)
		o.Retryer = retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts, o.Backoff = 3, noBackoff })
	})
	lb := elbv2.NewFromConfig(cfg, func(o *elbv2.Options) { o.BaseEndpoint = aws.String(sim.URL) })

	ensure := provider.WithCall(ctx, provider.Call{Method: "EnsureLoadBalancer", Priority: limiter.PriorityCritical})
	if _, err := ec.DescribeSubnets(ensure, &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatal(err)
	}
	// The bucket is empty now: three attempts, each throttled.
	var ae smithy.APIError
	if _, err := ec.DescribeSubnets(ensure, &ec2.DescribeSubnetsInput{}); !errors.As(err, &ae) || ae.ErrorCode() != "RequestLimitExceeded" {
		t.Fatalf("second DescribeSubnets: %v, want RequestLimitExceeded", err)
	}
	if _, err := lb.DescribeLoadBalancers(ctx, &elbv2.DescribeLoadBalancersInput{}); err != nil {
		t.Fatal(err)
	}

	st := sim.Stats("DescribeSubnets")
	if st.Requests != 4 || st.Throttled != 3 || st.Errors != 0 {
		t.Errorf("ec2sim counted %+v, want 4 requests, 3 throttled, no refused signature", st)
	}
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"service": "ec2", "action": "DescribeSubnets", "method": "EnsureLoadBalancer", "code": "200"}, 1},
		{map[string]string{"service": "ec2", "action": "DescribeSubnets", "method": "EnsureLoadBalancer", "code": "503"}, 3},
		{map[string]string{"service": "elbv2", "action": "DescribeLoadBalancers", "method": provider.Unattributed, "code": "200"}, 1},
	} {
		if got := requests(t, "cloudgate_cloud_requests_total", c.labels); got != c.want {
			t.Errorf("cloudgate_cloud_requests_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
	if got := requests(t, "cloudgate_cloud_request_throttles_total", map[string]string{"action": "DescribeSubnets"}); got != 3 {
		t.Errorf("throttles = %v, want 3", got)
	}
	if sim.Stats(ec2sim.ELBv2Action("DescribeLoadBalancers")).Requests != 1 {
		t.Errorf("ec2sim: %+v", sim.AllStats())
	}
}
