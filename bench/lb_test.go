//go:build !race

package bench

import (
	"slices"
	"testing"
)

// The LB tests run without -race: the k8s.io/cloud-provider v0.37.2
// service controller races with itself (see race_test.go). make test runs
// them in a separate non-race job: go test -run TestBenchLB ./bench/.

// TestBenchLBScaleup: 100 nodes arrive with 3 LB services, every column
// runs until quiescence; every column initialises every node, updates
// every load balancer and creates every route, none beats its lower bound,
// and cloudgate makes fewer upstream calls and sees fewer 429s than bare.
func TestBenchLBScaleup(t *testing.T) {
	o := smallOptions()
	o.Scenarios = []string{ScenarioScaleup}
	o.Services = 3
	rep := runVirtual(t, o)
	if err := rep.Check(); err != nil {
		t.Fatal(err)
	}
	s := rep.Scenarios[0]
	for _, col := range AllColumns {
		x := s.Columns[col]
		if x.NodesInitialized != 100 || x.InitSeconds == nil || x.QuiesceSeconds == nil || x.TimedOut {
			t.Errorf("%s: %d/100 initialised, init %v, quiescent %v", col, x.NodesInitialized, x.InitSeconds, x.QuiesceSeconds)
		}
		if x.OverBound == nil || *x.OverBound < 1 || x.QuiesceOverBound == nil || *x.QuiesceOverBound < 1 {
			t.Errorf("%s: measured/bound %v and %v, want >= 1 (a run below its bound means the bound is wrong)", col, x.OverBound, x.QuiesceOverBound)
		}
		if x.CallsByMethod["EnsureLoadBalancer"] == 0 || x.CallsByMethod["CreateRoute"] < 100 {
			t.Errorf("%s: LB and route paths not exercised: %v", col, x.CallsByMethod)
		}
	}
	bare := s.Columns[ColBare]
	for _, col := range []string{ColCache, ColBatch, ColList} {
		if cg := s.Columns[col]; cg.UpstreamCalls >= bare.UpstreamCalls || cg.Throttled >= bare.Throttled {
			t.Errorf("%s: %d calls, %d throttled; bare %d and %d: want fewer of both", col, cg.UpstreamCalls, cg.Throttled, bare.UpstreamCalls, bare.Throttled)
		}
	}
	assertJSONKeys(t, rep, AllColumns)
}

// TestBenchLBChaos runs chaos with services on the bare CCM and on
// cloudgate's default policy: every invariant must have been checked, and
// none may be violated, except the known finding below.
func TestBenchLBChaos(t *testing.T) {
	o := smallOptions()
	o.Scenarios = []string{ScenarioChaos}
	o.Columns = []string{ColBare, ColBatch}
	o.Services = 3
	rep := runVirtual(t, o)
	if err := rep.Check(); err != nil {
		t.Fatal(err) // an invariant checked 0 times
	}
	s := rep.Scenarios[0]
	for _, col := range o.Columns {
		ch := s.Columns[col].ChaosSide
		if ch == nil {
			t.Fatalf("%s: no chaos figures", col)
		}
		for inv, n := range ch.Checks {
			if n == 0 {
				t.Errorf("%s: invariant %s checked 0 times", col, inv)
			}
		}
		if ch.WritesAmbiguous == 0 || ch.HiddenAnswers == 0 {
			t.Errorf("%s: faults not exercised: %d ambiguous writes landed, %d 404s for live instances", col, ch.WritesAmbiguous, ch.HiddenAnswers)
		}
		for _, inv := range ch.Violated {
			if inv == invLive404 && col == ColBare {
				// Reported, not asserted: a live NotReady node whose
				// instance the cloud answers 404 once is deleted by the
				// lifecycle controller through bare (expected: it trusts
				// the cloud). cloudgate's not-found guard must keep it.
				t.Logf("%s: FINDING: live node deleted after a one-shot 404 (seed %d)", col, o.Seed)
				continue
			}
			t.Errorf("%s: invariant %s violated: %+v", col, inv, *ch)
		}
	}
	if cg := s.Columns[ColBatch]; cg.BreakerOpensInOutage == nil || *cg.BreakerOpensInOutage < 1 {
		t.Errorf("cloudgate's read breaker did not open during the outage")
	}
	if !slices.Contains(rep.Columns, ColBare) {
		t.Error("bare side did not run")
	}
}
