//go:build !race

package bench

import (
	"math"
	"os/exec"
	"testing"
	"time"
)

// Without -race, like the LB tests (its clusters have LB services: see
// race_test.go); make test runs it in the non-race job.

// determinismOptions is a small run of the three default scenarios at the
// default service count (20 LB services: the service controller's node
// syncs, one write per LB, are where same-instant order showed); the node
// counts stay small to keep it affordable (about 40 s of CPU a run on the
// project's 2-core machine, two runs).
func determinismOptions() *Options {
	o := smallOptions()
	o.Nodes = 200
	o.Services = DefaultOptions().Services
	o.SteadyWindow = 15 * time.Minute
	o.ScaleupNodes = 300
	o.ChurnNodes = 200
	o.ChurnRate = 10
	o.ChurnDuration = 4 * time.Minute
	o.Seed = 7
	// The default 1 % NotReady (2 of 200): the lifecycle controller's
	// checks ride along in cloudgate's batches (provider/batching.go). Their
	// count followed goroutine order until a batch cached every answer
	// before answering its callers (provider/batching.go; steady
	// cloudgate:list 83-85 calls over eight same-seed runs before, 83 in
	// every run after).
	return o
}

// determinismBound is how far a column's figures may differ between two
// runs of one seed: calls (upstream calls) and split (its reads and
// writes), as a fraction of the larger.
type determinismBound struct{ calls, split float64 }

// determinismBounds per column and scenario. Every cloudgate column holds
// its upstream calls within 1 % in every scenario (the bound; no
// floor of a call: steady cloudgate:list makes 43). Measured at 20
// services, seeds 1-5 twice each and seed 7 six times (idle, and two runs
// at once beside the other work on the shared 2-core machine): scaleup and
// steady equal in every cloudgate column, churn within 0.56 % (batch
// 1,253-1,261). Their read/write split may differ by 2 %: churn
// cloudgate:batch's reads spread 1.32 % (449-455) — the node controller's
// status sweep visits the Nodes in Go map order, random in every run, and
// which of the leaving Nodes it reaches before or after their instance is
// deleted decides how lookups fall into batches.
//
// The bare columns are not held to 1 % (the issue lets their spread be
// reported); their bounds are about 1.5-2x the largest spread measured in
// the same runs. bare (no client-side limit or retry) churns through
// ~1,800 429s: which of two calls at one instant gets the cloud's last
// token, and so which is retried by the service controller's rate-limited
// queue or the route controller's next reconcile, follows the scheduler,
// and each lost race costs calls — churn measured 5.85 % (2,993-3,179
// calls, writes 8.38 %), scaleup 0.97 % (reads 1.15 %), steady 0.17 % (its
// ~30 writes, startup 429 retries, 6.67 %). bare+client's retries honour
// Retry-After and its limiter keeps it near the quota: churn 1.33 %
// (writes 2.33 %), scaleup 1.21 % (reads 1.87 %), steady equal.
var determinismBounds = map[string]map[string]determinismBound{
	ColBare: {
		ScenarioSteady:  {calls: 0.01, split: 0.10},
		ScenarioScaleup: {calls: 0.02, split: 0.03},
		ScenarioChurn:   {calls: 0.10, split: 0.15},
	},
	ColBareClient: {
		ScenarioSteady:  {calls: 0.01, split: 0.02},
		ScenarioScaleup: {calls: 0.03, split: 0.04},
		ScenarioChurn:   {calls: 0.03, split: 0.05},
	},
}

func determinismBoundOf(col, scenario string) determinismBound {
	if b, ok := determinismBounds[col][scenario]; ok {
		return b
	}
	return determinismBound{calls: 0.01, split: 0.02} // every cloudgate column
}

// TestDeterminism: in virtual time the machine's load cannot change a
// figure. The same seed runs alone and beside two CPU hogs (yes >
// /dev/null, as many as this machine's two cores); every cloudgate
// column's upstream calls must agree within 1 % in steady, scaleup and
// churn, the bare columns within their measured bounds
// (determinismBounds). What made the cloudgate columns vary at 20
// services, and was removed in the simulation: scaleup and churn ended
// their count at the first quiescent poll, inside the service controller's
// last node-sync round, whose LBs go in Go map order (now they count until
// the controllers' writes end: settle); steady's window ended on a cached
// ListRoutes refresh (now off the period grid); and the LB services
// existed before the controllers started, racing the first node sync
// (now created once the controllers have taken in the Nodes).
func TestDeterminism(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the three scenarios twice")
	}
	idle := runVirtual(t, determinismOptions())

	// Two CPU hogs (yes > /dev/null), ended with the test.
	for range 2 {
		hog := exec.Command("yes")
		if err := hog.Start(); err != nil {
			t.Fatalf("start a CPU hog: %v", err)
		}
		t.Cleanup(func() { _ = hog.Process.Kill(); _ = hog.Wait() })
	}
	loaded := runVirtual(t, determinismOptions())

	checks := 0
	for i, s := range idle.Scenarios {
		for _, col := range AllColumns {
			bound := determinismBoundOf(col, s.Scenario)
			a, b := s.Columns[col], loaded.Scenarios[i].Columns[col]
			if a.UpstreamCalls == 0 {
				t.Errorf("%s/%s: no upstream calls: nothing compared", s.Scenario, col)
			}
			_, bare := determinismBounds[col]
			if !bare && (a.TimedOut || b.TimedOut) {
				t.Errorf("%s/%s: cut off at the cap (idle %v, loaded %v)", s.Scenario, col, a.TimedOut, b.TimedOut)
			}
			// A bare column's churn is bimodal: now and then a node
			// sync's last LB write fails (429 after the client's
			// retries) and the v0.37.2 service controller leaves that LB
			// stale until the next Node change, which never comes: the
			// run is cut off at the cap, reading status for 15 minutes
			// (bare+client 1,586 calls against 895, 1 run in ~15 at 20
			// services; make run seed 1 cut off in one run, quiescent
			// in another). Reported, not compared.
			if bare && a.TimedOut != b.TimedOut {
				checks += 3
				t.Logf("%s/%s: cut off in one run only (idle %v, loaded %v; %d and %d calls): not compared", s.Scenario, col, a.TimedOut, b.TimedOut, a.UpstreamCalls, b.UpstreamCalls)
				continue
			}
			for _, f := range []struct {
				name string
				a, b int64
				tol  float64
			}{
				{"upstream calls", a.UpstreamCalls, b.UpstreamCalls, bound.calls},
				{"reads", a.ReadCalls, b.ReadCalls, bound.split},
				{"writes", a.WriteCalls, b.WriteCalls, bound.split},
			} {
				checks++
				if diff := math.Abs(float64(f.a - f.b)); diff > f.tol*float64(max(f.a, f.b)) {
					t.Errorf("%s/%s: %s %d idle, %d beside two CPU hogs: differ by more than %.0f %%", s.Scenario, col, f.name, f.a, f.b, f.tol*100)
				}
			}
			t.Logf("%s/%s: upstream calls %d idle, %d loaded (%+.2f %%)", s.Scenario, col, a.UpstreamCalls, b.UpstreamCalls,
				100*float64(b.UpstreamCalls-a.UpstreamCalls)/float64(max(1, a.UpstreamCalls)))
		}
	}
	if checks != 3*len(AllColumns)*3 {
		t.Fatalf("%d checks, want %d", checks, 3*len(AllColumns)*3)
	}
	t.Logf("%d figures compared, idle vs loaded", checks)
}
