package ec2sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

func TestLatencyDraws(t *testing.T) {
	cfg := Latency{
		Default: ActionLatency{Base: 50 * time.Millisecond, Jitter: 20 * time.Millisecond, PerItem: time.Millisecond},
		Actions: map[string]ActionLatency{"DescribeAvailabilityZones": {Base: 7 * time.Millisecond}},
		Seed:    3,
	}
	a, b := newLatencyModel(cfg), newLatencyModel(cfg)
	for i := range 1000 {
		items := i % 7
		da, db := a.draw("DescribeInstances", items), b.draw("DescribeInstances", items)
		if da != db {
			t.Fatalf("draw %d: %v and %v from the same seed", i, da, db)
		}
		lo := 50*time.Millisecond + time.Duration(items)*time.Millisecond
		if da < lo || da >= lo+20*time.Millisecond {
			t.Fatalf("draw %d with %d items: %v, want in [%v, %v)", i, items, da, lo, lo+20*time.Millisecond)
		}
	}
	if d := a.draw("DescribeAvailabilityZones", 3); d != 7*time.Millisecond {
		t.Errorf("per-action latency: %v, want 7ms (no jitter, no per-item cost)", d)
	}
	other := newLatencyModel(Latency{Default: cfg.Default, Seed: 4})
	same := 0
	for range 100 {
		if a.draw("DescribeInstances", 0) == other.draw("DescribeInstances", 0) {
			same++
		}
	}
	if same > 10 {
		t.Errorf("seeds 3 and 4 drew the same latency %d times of 100", same)
	}
	var none *latencyModel
	if d := none.draw("DescribeInstances", 100); d != 0 {
		t.Errorf("no model: %v, want 0", d)
	}
	if newLatencyModel(Latency{Seed: 9}) != nil {
		t.Errorf("a zero latency builds a model; want none (no draws, no lock)")
	}
}

func TestLatencyValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Latency
		want string
	}{
		{"negative base", Latency{Default: ActionLatency{Base: -1}}, "Config.Latency.Default"},
		{"negative jitter", Latency{Actions: map[string]ActionLatency{"DescribeInstances": {Jitter: -time.Second}}}, `Config.Latency.Actions["DescribeInstances"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Start(Config{Region: "us-east-1", Latency: tc.l})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Start = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// TestLatencyServed checks that an answer waits at least its base latency
// (a lower bound the sleep guarantees; no upper bound is asserted) and that
// Close does not wait for a request still in its latency.
func TestLatencyServed(t *testing.T) {
	s := start(t, Config{Region: "us-east-1", Unthrottled: true, Latency: Latency{
		Default: ActionLatency{Base: 40 * time.Millisecond},
		Actions: map[string]ActionLatency{"DescribeAvailabilityZones": {Base: time.Hour}},
	}})
	s.Put(Instance{ID: id(1), Zone: "us-east-1a"})
	c := client(t, s, 1)
	t0 := time.Now()
	out, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(t0); el < 40*time.Millisecond {
		t.Errorf("DescribeInstances answered in %v, want >= its 40ms base latency", el)
	}
	if len(out.Reservations) != 1 || aws.ToString(out.Reservations[0].Instances[0].InstanceId) != id(1) {
		t.Errorf("DescribeInstances with latency answered %+v", out.Reservations)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := c.DescribeAvailabilityZones(context.Background(), &ec2.DescribeAvailabilityZonesInput{})
		errc <- err
	}()
	for s.Stats("DescribeAvailabilityZones").Requests == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited for a request in its one-hour latency")
	}
	if err := <-errc; err == nil {
		t.Errorf("a request cut by Close succeeded")
	}
}
