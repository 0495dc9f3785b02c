package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// client is a real SDK EC2 client pointed at the simulator.
func client(t *testing.T, s *Server, attempts int) *ec2.Client {
	t.Helper()
	return ec2.New(ec2.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer:      retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = attempts }),
	})
}

func start(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func id(n int) string { return fmt.Sprintf("i-%017x", n) }

func TestDescribeInstancesFiltersAndPages(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true})
	for n := 1; n <= 12; n++ {
		in := Instance{ID: id(n), Type: "m5.large", Zone: "us-east-1a", PrivateDNSName: fmt.Sprintf("ip-10-0-0-%d.ec2.internal", n),
			Tags: map[string]string{"kubernetes.io/cluster/c1": "owned"}}
		if n%3 == 0 {
			in.State = StateTerminated
		}
		if n > 10 {
			in.Tags = nil
		}
		s.Put(in)
	}
	c := client(t, s, 1)
	ctx := context.Background()

	// Pages of 5 over the cluster tag: 10 instances in pages 5, 5.
	var got []string
	var pages int
	p := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{
		Filters:    []ec2types.Filter{{Name: aws.String("tag-key"), Values: []string{"kubernetes.io/cluster/c1"}}},
		MaxResults: aws.Int32(5),
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range out.Reservations {
			for _, in := range r.Instances {
				got = append(got, aws.ToString(in.InstanceId))
			}
		}
	}
	if len(got) != 10 || pages < 2 {
		t.Fatalf("tag-key listing: got %d instances in %d pages, want 10 in >= 2", len(got), pages)
	}

	tests := []struct {
		name    string
		in      *ec2.DescribeInstancesInput
		want    int
		errCode string
	}{
		{"ids", &ec2.DescribeInstancesInput{InstanceIds: []string{id(1), id(3)}}, 2, ""},
		{"missing id", &ec2.DescribeInstancesInput{InstanceIds: []string{id(1), id(99)}}, 0, "InvalidInstanceID.NotFound"},
		{"malformed id", &ec2.DescribeInstancesInput{InstanceIds: []string{"i-xyz"}}, 0, "InvalidInstanceID.Malformed"},
		{"ids with MaxResults", &ec2.DescribeInstancesInput{InstanceIds: []string{id(1)}, MaxResults: aws.Int32(5)}, 0, "InvalidParameterCombination"},
		{"MaxResults too small", &ec2.DescribeInstancesInput{MaxResults: aws.Int32(4)}, 0, "InvalidParameterValue"},
		{"instance-id filter skips unknown", &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("instance-id"), Values: []string{id(1), id(99)}}}}, 1, ""},
		{"name and live states", &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("private-dns-name"), Values: []string{"ip-10-0-0-2.ec2.internal", "ip-10-0-0-3.ec2.internal"}},
			{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopped"}}}}, 1, ""},
		{"wildcard", &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("private-dns-name"), Values: []string{"ip-10-0-0-1?.ec2.internal"}}}}, 3, ""},
		{"unknown filter", &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("bogus"), Values: []string{"x"}}}}, 0, "InvalidParameterValue"},
		{"too many filter values", &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
			{Name: aws.String("instance-id"), Values: make([]string, MaxFilterValues+1)}}}, 0, "FilterLimitExceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.DescribeInstances(ctx, tt.in)
			if tt.errCode != "" {
				var ae smithy.APIError
				if !errors.As(err, &ae) || ae.ErrorCode() != tt.errCode {
					t.Fatalf("err = %v, want code %s", err, tt.errCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range out.Reservations {
				n += len(r.Instances)
			}
			if n != tt.want {
				t.Fatalf("got %d instances, want %d", n, tt.want)
			}
		})
	}
}

func TestInstanceFieldsRoundTrip(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true,
		Zones: []Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}}})
	s.Put(Instance{ID: id(1), Type: "m5.large", Zone: "us-east-1b", State: StateStopped,
		PrivateDNSName: "ip-10-0-0-1.ec2.internal", PublicDNSName: "ec2-54-0-0-1.compute-1.amazonaws.com",
		PrivateIP: "10.0.0.1", PublicIP: "54.0.0.1",
		Interfaces: []NetworkInterface{{DeviceIndex: 0, Status: "in-use", PrivateIPs: []string{"10.0.0.1", "10.0.0.9"}, IPv6Addresses: []string{"2600::1"}}},
		Tags:       map[string]string{"Name": "n1"}})
	c := client(t, s, 1)
	out, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id(1)}})
	if err != nil {
		t.Fatal(err)
	}
	in := out.Reservations[0].Instances[0]
	nic := in.NetworkInterfaces[0]
	got := []string{string(in.InstanceType), aws.ToString(in.Placement.AvailabilityZone), string(in.State.Name),
		fmt.Sprint(aws.ToInt32(in.State.Code)), aws.ToString(in.PrivateDnsName), aws.ToString(in.PublicDnsName),
		aws.ToString(in.PublicIpAddress), string(nic.Status), fmt.Sprint(aws.ToInt32(nic.Attachment.DeviceIndex)),
		aws.ToString(nic.PrivateIpAddresses[1].PrivateIpAddress), aws.ToString(nic.Ipv6Addresses[0].Ipv6Address),
		aws.ToString(in.Tags[0].Key)}
	want := []string{"m5.large", "us-east-1b", "stopped", "80", "ip-10-0-0-1.ec2.internal", "ec2-54-0-0-1.compute-1.amazonaws.com",
		"54.0.0.1", "in-use", "0", "10.0.0.9", "2600::1", "Name"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fields\n got %v\nwant %v", got, want)
	}

	zones, err := c.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{})
	if err != nil || len(zones.AvailabilityZones) != 2 || aws.ToString(zones.AvailabilityZones[1].ZoneId) != "use1-az2" {
		t.Fatalf("zones = %+v, %v", zones, err)
	}
	_, err = c.DescribeInstanceTopology(context.Background(), &ec2.DescribeInstanceTopologyInput{InstanceIds: []string{id(1)}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "UnsupportedOperation" {
		t.Fatalf("topology without support: err = %v, want UnsupportedOperation", err)
	}
}

// The per-action bucket: 3 tokens, (practically) no refill. Five calls without
// SDK retries: three answered, two 503 RequestLimitExceeded; another action
// has its own bucket.
func TestThrottlingPerAction(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Default: Bucket{Size: 3, Refill: 0.001}})
	c := client(t, s, 1)
	ctx := context.Background()
	var throttled int
	for i := 0; i < 5; i++ {
		_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		var ae smithy.APIError
		var re *awshttp.ResponseError
		switch {
		case err == nil:
		case errors.As(err, &ae) && ae.ErrorCode() == "RequestLimitExceeded" && errors.As(err, &re) && re.HTTPStatusCode() == 503:
			throttled++
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if throttled != 2 {
		t.Fatalf("throttled %d calls, want 2", throttled)
	}
	if got := s.Stats("DescribeInstances"); got != (ActionStats{Requests: 5, Throttled: 2}) {
		t.Fatalf("stats = %+v", got)
	}
	if _, err := c.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{}); err != nil {
		t.Fatalf("another action's bucket: %v", err)
	}
}

// The SDK's standard retryer retries RequestLimitExceeded until a token is
// there: one token, refilled once a second; the second call (right after the
// first) is throttled and retried every 300 ms until it is answered.
func TestSDKRetriesThrottling(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Default: Bucket{Size: 1, Refill: 1}})
	c := ec2.New(ec2.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 10
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 300 * time.Millisecond, nil })
			o.RateLimiter = ratelimit.None
		}),
	})
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	st := s.Stats("DescribeInstances")
	if st.Requests != 2+st.Throttled || st.Throttled < 1 {
		t.Fatalf("stats = %+v: want the second call throttled at least once, then answered", st)
	}
	// Every throttled attempt was sent again: those are the retries, and
	// Requests - Retries is the two calls the caller made.
	if st.Retries != st.Throttled {
		t.Fatalf("stats = %+v: want Retries == Throttled (the SDK's Amz-Sdk-Request attempt > 1)", st)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{}, {Region: "r", Default: Bucket{Size: 0, Refill: 1}}, {Region: "r", Buckets: map[string]Bucket{"X": {}}}} {
		if s, err := Start(cfg); err == nil {
			s.Close()
			t.Errorf("Start(%+v) succeeded", cfg)
		}
	}
}

func TestDescribeShapes(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true})
	s.Put(Instance{ID: id(10), Zone: "us-east-1a"}, Instance{ID: id(11), Zone: "us-east-1a"})
	c := client(t, s, 1)
	ctx := t.Context()
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id(10), id(11)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5),
		Filters: []ec2types.Filter{{Name: aws.String("tag:kubernetes.io/cluster/x"), Values: []string{"owned"}}, {Name: aws.String("instance-id"), Values: []string{id(10)}}}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]DescribeShape{
		"InstanceId":                      {Requests: 1, IDs: 2},
		"filter:instance-id,tag:* +paged": {Requests: 1, IDs: 1},
	}
	if got := s.DescribeShapes(); !maps.Equal(got, want) {
		t.Errorf("DescribeShapes() = %v, want %v", got, want)
	}
}
