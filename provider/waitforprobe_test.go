package provider

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cloudgate/cloudgate/limiter"
)

// breaker.waitForProbe: a read the open breaker rejects waits for the next
// probe instead of failing at once, and is sent once if the cloud answers
// again; it fails when the cloud is still down. A write never waits.
// Outcomes are decided on the fake clock, never by timing.
func TestWaitForProbe(t *testing.T) {
	outage := errors.New("HTTP 503 service unavailable")
	for _, tc := range []struct {
		name      string
		cloudBack bool // the cloud answers again before the probe
		wantErr   bool
	}{
		{name: "cloud back: the waiting read is sent once and succeeds", cloudBack: true},
		{name: "cloud still down: the waiting read becomes the probe and fails", cloudBack: false, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			up := newCountingCloud()
			var down atomic.Bool
			down.Store(true)
			up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) {
				if down.Load() {
					return nil, outage
				}
				return &cloudprovider.InstanceMetadata{Zone: "zone-b"}, nil
			}
			c := mustNew(t, up, waitForProbeConfig(clk))
			i := v2(t, c)
			ctx := context.Background()
			br := enf(c).breakers[familyRead]
			for n := 0; n < 4 && br.State() != limiter.StateOpen; n++ {
				_, _ = i.InstanceMetadata(ctx, testNode(fmt.Sprint("n", n), fmt.Sprint("fake://n", n)))
			}
			if st := br.State(); st != limiter.StateOpen {
				t.Fatalf("read breaker = %v after 4 failures, want open", st)
			}
			before := up.Calls("InstanceMetadata")

			done := make(chan error, 1)
			go func() {
				_, err := i.InstanceMetadata(ctx, testNode("waiting", "fake://waiting"))
				done <- err
			}()
			waitUntil(t, "the rejected read to wait for the probe", clk.HasWaiters)
			select {
			case err := <-done:
				t.Fatalf("the rejected read returned %v before the breaker probed; want it to wait", err)
			default:
			}
			if tc.cloudBack {
				down.Store(false)
			}
			clk.Step(2 * time.Second) // the open interval ends: the waiting read is the probe
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiting read did not return after the probe")
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if tc.wantErr && !errors.Is(err, outage) {
				t.Fatalf("err = %v, want the upstream's own error (the read was the probe)", err)
			}
			if got := up.Calls("InstanceMetadata") - before; got != 1 {
				t.Fatalf("upstream InstanceMetadata calls after the breaker opened = %d, want 1", got)
			}
		})
	}
}

// A write the open breaker rejects fails at once, waitForProbe or not: held,
// it could be overtaken by a newer write of the same load balancer.
func TestWaitForProbeNeverHoldsAWrite(t *testing.T) {
	up := newCountingCloud()
	up.ensureLBHook = func() error { return errors.New("HTTP 503 service unavailable") }
	c := mustNew(t, up, waitForProbeConfig(newFakeClock()))
	lb, _ := c.LoadBalancer()
	ctx := context.Background()
	br := enf(c).breakers[familyWrite]
	for n := 0; n < 4 && br.State() != limiter.StateOpen; n++ {
		_, _ = lb.EnsureLoadBalancer(ctx, "c", testService("ns", fmt.Sprint("s", n), "u"), nil)
	}
	if st := br.State(); st != limiter.StateOpen {
		t.Fatalf("write breaker = %v, want open", st)
	}
	before := up.Calls("EnsureLoadBalancer")
	// No clock step: were the write held, this call would never return.
	_, err := lb.EnsureLoadBalancer(ctx, "c", testService("ns", "x", "u"), nil)
	if !limiter.IsOpen(err) {
		t.Fatalf("err = %v, want the breaker's rejection at once", err)
	}
	if up.Calls("EnsureLoadBalancer") != before {
		t.Fatal("a rejected write was sent")
	}
}

func waitForProbeConfig(clk *clocktesting.FakeClock) *Config {
	cfg := testConfig(clk)
	cfg.Breaker = BreakerConfig{FailureRatio: 0.5, MinRequests: 4, Interval: dur(time.Hour),
		OpenTimeout: dur(2 * time.Second), MinOpenTimeout: dur(2 * time.Second), HalfOpenRequests: 1, WaitForProbe: boolp(true)}
	return cfg
}

// A read with a stale-enough cached answer is served at once while the
// breaker is open; only a read without one waits for the probe.
func TestWaitForProbeServesStaleAtOnce(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	c, i, cached := withStaleMetadata(t, up, clk, waitForProbeConfig(clk))
	ctx := context.Background()
	var down atomic.Bool
	down.Store(true)
	up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) {
		if down.Load() {
			return nil, errors.New("HTTP 503 service unavailable")
		}
		return &cloudprovider.InstanceMetadata{Zone: "zone-b"}, nil
	}
	br := enf(c).breakers[familyRead]
	for n := 0; n < 4 && br.State() != limiter.StateOpen; n++ {
		_, _ = i.InstanceMetadata(ctx, testNode(fmt.Sprint("n", n), fmt.Sprint("fake://n", n)))
	}
	if st := br.State(); st != limiter.StateOpen {
		t.Fatalf("read breaker = %v, want open", st)
	}
	// No clock step: a stale answer needs no probe.
	if m, err := i.InstanceMetadata(ctx, cached); err != nil || m.Zone != "zone-a" {
		t.Fatalf("stale read = %+v, %v; want the cached metadata at once", m, err)
	}
	// A read without one waits, and gets the cloud's answer once it is back.
	done := make(chan error, 1)
	go func() {
		m, err := i.InstanceMetadata(ctx, testNode("new", "fake://new"))
		if err == nil && m.Zone != "zone-b" {
			err = fmt.Errorf("zone %q, want zone-b", m.Zone)
		}
		done <- err
	}()
	waitUntil(t, "the uncached read to wait for the probe", clk.HasWaiters)
	down.Store(false)
	clk.Step(2 * time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("read after the probe: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting read did not return after the probe")
	}
}

// withStaleMetadata builds a provider over up whose InstanceMetadata of the
// returned node is cached (1 m TTL) and then expired but within
// cache.staleIfError (10 m), for tests of what an open breaker serves.
func withStaleMetadata(t *testing.T, up *countingCloud, clk *clocktesting.FakeClock, cfg *Config) (cloudprovider.Interface, cloudprovider.InstancesV2, *v1.Node) {
	t.Helper()
	cfg.Methods = map[string]MethodConfig{"InstanceMetadata": {TTL: durp(time.Minute)}}
	cfg.Cache.StaleIfError = dur(10 * time.Minute)
	c := mustNew(t, up, cfg)
	i := v2(t, c)
	cached := testNode("cached", "fake://cached")
	if _, err := i.InstanceMetadata(context.Background(), cached); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Minute)
	return c, i, cached
}
