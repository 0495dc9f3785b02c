package dashboards_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
	"github.com/cloudgate/cloudgate/metrics"
)

// fleetPanels are the Fleet row's panels, driven by startFleetMember.
var fleetPanels = []string{
	"Fleet budget usage", "Fleet rate and this member's share", "Fleet members",
	"Redis fallback", "Fleet admissions by mode", "Redis admission latency",
}

func init() {
	for title, why := range map[string]string{
		"Fleet budget usage":       "the fleet member admits calls",
		"Fleet members":            "the fleet member registers in Redis",
		"Redis fallback":           "the run kills Redis under the fleet member",
		"Fleet admissions by mode": "the fleet member admits calls",
	} {
		mustBePositive[title] = why
	}
}

// startFleetMember runs a fleet member (package limiter/fleet) on a real
// redis-server beside the e2e load, reporting to m under the test's provider
// label: it admits about 30 calls/s of a 40/s quota, and the server is
// killed 6 s in and restarted 4 s later (fallback, then rejoin). The
// cloudgate provider does not hold a fleet limiter itself yet, so the member
// is driven directly. Without redis-server outside make/CI the Fleet panels
// may be empty; under make/CI its absence fails the test.
func startFleetMember(t *testing.T, m *metrics.Metrics) (stop func()) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil && !underMake() {
		if _, err := os.Stat("/usr/bin/redis-server"); err != nil {
			for _, p := range fleetPanels {
				mayBeEmpty[p] = "redis-server is not installed (make setup installs it), so no fleet member runs"
			}
			return func() {}
		}
	}
	r := fleettest.Start(t)
	rec := m.Fleet(testProvider, "e2e", "read")
	cfg := r.Config("e2e")
	cfg.RedisTimeout = fleet.Duration{Duration: 100 * time.Millisecond}
	f, err := fleet.New(cfg, fleet.Options{Heartbeat: 250 * time.Millisecond, Observer: rec, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	l, err := f.Limiter("read", 40, limiter.BucketConfig{QPS: 40, Burst: 10, Adaptive: true}, nil)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		killed, restarted := false, false
		for ctx.Err() == nil {
			_ = l.Wait(ctx, limiter.PriorityNormal)
			switch el := time.Since(start); {
			case !killed && el > 6*time.Second:
				r.Kill()
				killed = true
			case killed && !restarted && el > 10*time.Second:
				if err := r.TryRestart(); err != nil {
					t.Error(err)
				}
				restarted = true
			}
			time.Sleep(25 * time.Millisecond)
		}
	}()
	return func() {
		cancel()
		<-done
		f.Close()
	}
}
