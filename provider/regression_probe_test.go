package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/cloudgate/cloudgate/limiter"
)

// Issue 24 suspected item: "a half-open breaker probe of low priority can
// queue behind waiters admitted before the breaker opened for up to
// waitTimeout, while every new call is rejected". Confirmed: with a read
// bucket of 1/s, twenty reads admitted by the closed breaker queue for
// tokens; the cloud fails, the breaker opens, the cloud comes back. The old
// waiters kept their places in the queue, so the probe waited behind them
// (about one second each) and the breaker stayed half-open, rejecting every
// new call, long after the cloud was back. Now the waiters admitted before
// the breaker opened stop waiting when it opens (they get the breaker's
// rejection, as a call arriving then would), so the probe gets the next
// token: the breaker closes within a token interval of the probe.
func TestRegression24_ProbeDoesNotQueueBehindEarlierWaiters(t *testing.T) {
	up := newCountingCloud()
	var down atomic.Bool
	down.Store(true)
	up.getLBHook = func(context.Context) (*v1.LoadBalancerStatus, bool, error) {
		if down.Load() {
			return nil, false, errors.New("HTTP 503 ServiceUnavailable")
		}
		return &v1.LoadBalancerStatus{}, true, nil
	}
	clk := newFakeClock()
	cfg := testConfig(clk)
	cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = 1, 1
	cfg.Limits.Read.WaitTimeout = dur(2 * time.Minute)
	cfg.Breaker = BreakerConfig{FailureRatio: 0.5, MinRequests: 2, Interval: dur(time.Hour),
		OpenTimeout: dur(5 * time.Second), MinOpenTimeout: dur(5 * time.Second), HalfOpenRequests: 1, WaitForProbe: boolp(false)}
	c := mustNew(t, up, cfg)
	lb, _ := c.LoadBalancer()
	br := c.(*cloud).g.breakers[familyRead]

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get := func(name string) error {
		_, _, err := lb.GetLoadBalancer(ctx, "c", testService("ns", name, "u-"+name))
		return err
	}
	for n := range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = get(fmt.Sprint("early-", n)) }()
	}
	// Simulated time moves in 100 ms steps, each followed by a pause for the
	// callers to act on it (bounded loops, no timing assertion on real time).
	step := func() { clk.Step(100 * time.Millisecond); time.Sleep(2 * time.Millisecond) }
	for i := 0; br.State() != limiter.StateOpen; i++ {
		if i > 600 {
			t.Fatal("the breaker never opened")
		}
		step()
	}
	opened := clk.Now()
	down.Store(false)
	// Past the open interval, a new call is the probe.
	for clk.Since(opened) < 5*time.Second+100*time.Millisecond {
		step()
	}
	probeAt := clk.Now()
	wg.Add(1)
	go func() { defer wg.Done(); _ = get("probe") }()
	for i := 0; br.State() != limiter.StateClosed; i++ {
		if i > 600 {
			t.Fatalf("the breaker did not close within %v of simulated time after the probe", clk.Since(probeAt))
		}
		step()
	}
	if d := clk.Since(probeAt); d > 2*time.Second {
		t.Errorf("the breaker closed %v after the probe started (cloud back since %v before it); want within about one token interval (1s): the probe queued behind waiters admitted before the breaker opened",
			d, probeAt.Sub(opened))
	}
}
