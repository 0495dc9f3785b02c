package ec2sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// keyClient is an SDK EC2 client signing with the access key ID given,
// without retries.
func keyClient(s *Server, key string) *ec2.Client {
	return ec2.New(ec2.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
		Credentials: credentials.NewStaticCredentialsProvider(key, SecretAccessKey, ""),
		Retryer:     retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = 1 }),
	})
}

func throttled(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "RequestLimitExceeded"
}

// Two keys of one account draw from the same bucket; another account's
// key has its own. The refill is too slow to add a token during the test.
func TestBucketsArePerAccount(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Default: Bucket{Size: 3, Refill: 1e-6},
		Accounts: map[string]string{"AKIDCCM": "111111111111", "AKIDKARPENTER": "111111111111", "AKIDOTHER": "222222222222"},
		Credentials: map[string]string{"AKIDCCM": SecretAccessKey, "AKIDKARPENTER": SecretAccessKey,
			"AKIDOTHER": SecretAccessKey, "AKIDUNMAPPED": SecretAccessKey}})
	ctx := context.Background()
	call := func(key string) error {
		_, err := keyClient(s, key).DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
		return err
	}
	for i := range 2 {
		if err := call("AKIDCCM"); err != nil {
			t.Fatalf("CCM call %d: %v", i, err)
		}
	}
	if err := call("AKIDKARPENTER"); err != nil {
		t.Fatalf("the account's third token: %v", err)
	}
	for _, key := range []string{"AKIDCCM", "AKIDKARPENTER"} {
		if err := call(key); !throttled(err) {
			t.Errorf("%s after its account's bucket emptied: got %v, want RequestLimitExceeded", key, err)
		}
	}
	if err := call("AKIDOTHER"); err != nil {
		t.Errorf("another account: %v (its bucket is its own)", err)
	}
	// An unmapped key is an account of its own.
	if err := call("AKIDUNMAPPED"); err != nil {
		t.Errorf("an unmapped key: %v", err)
	}
	if got := s.CallerStats("AKIDKARPENTER")["DescribeAvailabilityZones"]; got.Requests != 2 || got.Throttled != 1 {
		t.Errorf("CallerStats(AKIDKARPENTER) = %+v, want 2 requests, 1 throttled", got)
	}
	if got := s.Stats("DescribeAvailabilityZones"); got.Requests != 7 || got.Throttled != 2 {
		t.Errorf("Stats = %+v, want 7 requests, 2 throttled (every caller)", got)
	}
}

func TestAccountsRejectsEmpty(t *testing.T) {
	if _, err := Start(Config{Region: "us-east-1", Accounts: map[string]string{"AKID": ""}}); err == nil {
		t.Fatal("an empty account was accepted")
	}
}

// A launched instance is unknown to DescribeInstances until its lag has
// passed on the simulator's clock; other instances are not.
func TestLaunchLag(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := start(t, Config{Region: "us-east-1", Unthrottled: true, Clock: func() time.Time { return now }})
	s.Put(Instance{ID: id(1), Zone: "us-east-1a"})
	s.Launch(30*time.Second, Instance{ID: id(2), Zone: "us-east-1a"})
	c := client(t, s, 1)
	ctx := context.Background()
	count := func() int {
		out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Reservations)
	}
	byID := func() error {
		_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id(2)}})
		return err
	}
	var ae smithy.APIError
	if err := byID(); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidInstanceID.NotFound" {
		t.Errorf("a just-launched instance by ID: got %v, want InvalidInstanceID.NotFound", err)
	}
	if n := count(); n != 1 {
		t.Errorf("the list holds %d instances during the lag, want 1", n)
	}
	now = now.Add(29 * time.Second)
	if err := byID(); err == nil {
		t.Error("found 1s before its lag passed")
	}
	now = now.Add(time.Second)
	if err := byID(); err != nil {
		t.Errorf("after its lag: %v", err)
	}
	if n := count(); n != 2 {
		t.Errorf("the list holds %d instances after the lag, want 2", n)
	}
}

// A tenant sends its rates and counts what the account's buckets refused.
func TestTenantCountsThrottles(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Default: Bucket{Size: 5, Refill: 1e-6},
		Accounts: map[string]string{"AKIDCCM": "111111111111", "AKIDNEIGHBOUR": "111111111111"}})
	if err := (&Tenant{URL: s.URL, AccessKey: "AKIDNEIGHBOUR", Rates: map[string]float64{"DescribeNothing": 1}}).Validate(); err == nil {
		t.Error("an unknown action was accepted")
	}
	tn := &Tenant{URL: s.URL, AccessKey: "AKIDNEIGHBOUR", Rates: map[string]float64{"DescribeSecurityGroups": 1000}, Concurrency: 1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tn.Run(ctx) }()
	// Bounded: the tenant sends 1,000/s; stop once it has sent 20.
	for i := 0; i < 10000; i++ {
		if sent, _, _ := tn.Stats("DescribeSecurityGroups"); sent >= 20 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sent, thr, failed := tn.Stats("DescribeSecurityGroups")
	st := s.CallerStats("AKIDNEIGHBOUR")["DescribeSecurityGroups"]
	if failed != 0 || sent < 20 || thr != sent-5 || st.Throttled != thr || st.Requests != sent {
		t.Errorf("tenant: sent %d, throttled %d, failed %d; simulator: %+v; want the bucket's 5 answered, the rest throttled", sent, thr, failed, st)
	}
	if _, err := keyClient(s, "AKIDCCM").DescribeSecurityGroups(context.Background(), &ec2.DescribeSecurityGroupsInput{}); !throttled(err) {
		t.Errorf("the CCM's key after the tenant drained the account: %v, want RequestLimitExceeded", err)
	}
}

// Every request a tenant can send is one the simulator answers (a NotFound
// for a name nobody uses counts as answered).
func TestTenantFormsAnswered(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true, Accounts: map[string]string{"AKIDNEIGHBOUR": "111111111111"}})
	rates := map[string]float64{}
	for _, a := range TenantActions() {
		rates[a] = 1000
	}
	tn := &Tenant{URL: s.URL, AccessKey: "AKIDNEIGHBOUR", Rates: rates, Concurrency: 1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tn.Run(ctx) }()
	enough := func() bool {
		for _, a := range TenantActions() {
			if sent, _, _ := tn.Stats(a); sent < 3 {
				return false
			}
		}
		return true
	}
	for i := 0; i < 10000 && !enough(); i++ {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, a := range TenantActions() {
		sent, thr, failed := tn.Stats(a)
		if sent < 3 || thr != 0 || failed != 0 {
			t.Errorf("%s: sent %d, throttled %d, failed %d; want >= 3 sent, all answered", a, sent, thr, failed)
		}
		if st := s.CallerStats("AKIDNEIGHBOUR")[a]; st.Invalid != 0 {
			t.Errorf("%s: %d InvalidAction answers", a, st.Invalid)
		}
	}
}
