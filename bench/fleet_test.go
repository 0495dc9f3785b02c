package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
)

// smallFleetOptions: 3 clusters × 60 nodes, 40 joining, an account of 3
// reads/s with a background client at 0.5/s; short windows, time × 20.
func smallFleetOptions(t *testing.T) *FleetOptions {
	o := DefaultFleetOptions()
	o.RedisServer = fleettest.Bin(t) // under CI a missing redis-server fails
	o.Nodes, o.ScaleupNodes = 60, 40
	o.ReadQPS, o.ReadBurst, o.BackgroundQPS = 3, 3, 0.5
	o.Warmup, o.SteadyWindow, o.QuiesceTimeout = 2*time.Minute, time.Minute, 10*time.Minute
	o.TimeFactor = 20 // compressed to keep the test short: it checks invariants, not figures
	return o
}

// TestFleetScenario runs the fleet scenario's three columns once, the shared
// one with Redis killed mid-scale-up and restarted (no LB services: it runs
// under -race). Invariants: no write lost or duplicated, every scale-up done
// and not below its bound, every member fell back while Redis was down and
// rejoined after, throttling around the outage within the fallback bound.
// Each is shown exercised: writes were sent, the fleet was contended
// (local-full throttled), the outage happened.
func TestFleetScenario(t *testing.T) {
	o := smallFleetOptions(t)
	o.Chaos = true
	rep, err := RunFleet(context.Background(), o, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	var md strings.Builder
	rep.WriteMarkdown(&md)
	t.Log("\n" + md.String())
	if err := rep.Check(); err != nil {
		t.Fatal(err)
	}
	for _, col := range FleetColumns {
		s := rep.Columns[col]
		if s == nil {
			t.Fatalf("column %s missing", col)
		}
		if s.NodesInitialized != o.ScaleupNodes || s.Bound == nil || s.OverBound == nil {
			t.Errorf("%s: %d/%d nodes initialised, bound %v", col, s.NodesInitialized, o.ScaleupNodes, s.Bound)
		}
		if s.WritesSent < int64(o.ScaleupNodes) || s.WritesLanded < int64(o.ScaleupNodes) {
			t.Errorf("%s: %d writes sent, %d landed: want a route per new node (%d)", col, s.WritesSent, s.WritesLanded, o.ScaleupNodes)
		}
		if run := rep.Runs[col][0]; run.ScaleupCalls["GetInstanceByName"] < int64(o.ScaleupNodes) {
			t.Errorf("%s: %d instance reads during the scale-up, want one per new node at least", col, run.ScaleupCalls["GetInstanceByName"])
		}
	}
	if full := rep.Columns[FleetLocalFull]; full.Throttled+full.ThrottledWarmup == 0 {
		t.Errorf("local-full: no throttled answer: the fleet was not contended, the scenario shows nothing")
	}
	ch := rep.Columns[FleetShared].Chaos
	if ch == nil || ch.KilledAt <= 0 || ch.RestartedAt <= ch.KilledAt {
		t.Fatalf("shared: the Redis outage did not happen: %+v", ch)
	}
	if rep.Columns[FleetShared].FallbackTransitions < float64(o.Clusters) {
		t.Errorf("shared: %v fallback transitions, want at least one per member", rep.Columns[FleetShared].FallbackTransitions)
	}
}

// TestFleetOptionsValidate: bad options name the flag.
func TestFleetOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*FleetOptions)
		want string
	}{
		{func(o *FleetOptions) { o.Columns = []string{"everything"} }, "--columns"},
		{func(o *FleetOptions) { o.Clusters = 1 }, "--clusters"},
		{func(o *FleetOptions) { o.BackgroundQPS = 100 }, "--background-qps"},
		{func(o *FleetOptions) { o.Seeds = 0 }, "--seeds"},
		{func(o *FleetOptions) { o.RedisTimeout = 0 }, "--redis-timeout"},
	} {
		o := DefaultFleetOptions()
		tc.mod(o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error naming %s", err, tc.want)
		}
	}
	if err := DefaultFleetOptions().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// TestFleetMarkdownBoundAndReading: the table prints measured/bound with Q =
// quota − the background client only, and the all-others figure only as a
// labelled reading beside it, with medians and spreads of both (fabricated
// runs: no cluster is started).
func TestFleetMarkdownBoundAndReading(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	side := func(seed int64, init, bound, reading float64) FleetSide {
		return FleetSide{
			Seed: seed, Seeds: 1, MemberQPS: 8.5, SteadyReadsPerSec: []float64{1, 1, 1},
			InitSeconds: f(init), QuiesceSeconds: f(init), NodesInitialized: 500,
			Bound: &Bound{Seconds: bound, Formula: "bound formula"}, OverBound: f(init / bound),
			BoundAllOthers: &Bound{Seconds: reading, Formula: "reading formula"}, OverBoundAllOthers: f(init / reading),
			WritesSent: 500, WritesLanded: 500, ThrottledByMethod: map[string]int64{"GetInstance": 2},
		}
	}
	rep := &FleetReport{
		Options: FleetOptionsJSON{Seeds: 3, Seed: 1, Clusters: 3, ScaleupNodes: 500},
		Columns: map[string]*FleetSide{}, Runs: map[string][]FleetSide{FleetShared: {side(1, 120, 60, 100), side(2, 130, 65, 110), side(3, 140, 70, 100)}},
		Spread: map[string]map[string][2]float64{},
	}
	rep.Columns[FleetShared], rep.Spread[FleetShared] = medianFleet(rep.Runs[FleetShared])
	var md strings.Builder
	rep.WriteMarkdown(&md)
	out := md.String()
	for _, want := range []string{
		"| bound, Q = quota − the background client's reads (s) | 65 [60–70] |",
		"| measured / bound | **2.00 [2.00–2.00]×** |",
		"| (a reading, not a bound: Q = quota − every other read measured meanwhile, incl. the clusters' own) (s) | 100 [100–110] |",
		"| (measured / that reading; not a bound) | 1.20 [1.18–1.40]× |",
		"Bound (shared): median over seeds; per seed: bound formula.",
		"Reading beside it, not a bound (shared): median over seeds; per seed: reading formula.",
		"| 2 | 130.0 s, 2.00×, 0 throttled (GetInstance 2); 0 transitions, 0 Redis errors |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	if err := rep.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	// A column below its bound fails the run; below the reading does not.
	rep.Runs[FleetShared][1].OverBound = f(0.9)
	if err := rep.Check(); err == nil || !strings.Contains(err.Error(), "beat its bound") {
		t.Errorf("Check with measured/bound 0.9 = %v, want a beaten bound", err)
	}
}
