package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// smallOptions is a 200-node run that takes a few seconds.
func smallOptions() *Options {
	o := DefaultOptions()
	o.Nodes = 200
	o.Services = 3
	o.ScaleupNodes = 200
	o.ChurnNodes = 100
	o.ChurnRate = 5
	o.ChurnDuration = 3 * time.Minute
	o.SteadyDuration = 6 * time.Minute
	o.ScaleupTimeout = 10 * time.Minute
	o.ScaleupTimeFactor = 60
	// A quota the bare provider exceeds at 200 nodes: 200 lookups per
	// status period in a burst, against 5 reads/s.
	o.ReadQPS, o.ReadBurst = 5, 5
	o.WriteQPS, o.WriteBurst = 5, 5
	o.NodeWorkers = 20
	if raceEnabled {
		o.Services = 0 // see race_test.go
	}
	return o
}

// TestSteadyCloudgateCallsLessAndIsNotThrottled is the benchmark's promise
// at 200 nodes: where the bare provider is throttled, cloudgate makes fewer
// upstream calls and sees no throttling. Counts only, never times.
func TestSteadyCloudgateCallsLessAndIsNotThrottled(t *testing.T) {
	o := smallOptions()
	o.Scenarios = []string{ScenarioSteady}
	// Less compression than elsewhere: cloudgate takes a token when it
	// sends, the cloud when the call arrives, and on a loaded machine a few
	// milliseconds between the two are worth a lot of compressed time.
	o.TimeFactor = 30
	o.SteadyDuration = 5*time.Minute + 30*time.Second
	rep, err := Run(context.Background(), o, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Scenarios[0]
	if s.Bare.Throttled == 0 {
		t.Fatalf("bare provider was not throttled (%d calls): the test's quota is too generous", s.Bare.UpstreamCalls)
	}
	if s.Cloudgate.Throttled != 0 {
		t.Errorf("cloudgate was throttled %d times (%v), want 0", s.Cloudgate.Throttled, s.Cloudgate.ThrottledByMethod)
	}
	if s.Cloudgate.ReadCalls*10 > s.Bare.ReadCalls {
		t.Errorf("cloudgate made %d upstream reads, bare %d: want at least 10x fewer", s.Cloudgate.ReadCalls, s.Bare.ReadCalls)
	}
	if s.Cloudgate.ControllerErrors != 0 {
		t.Errorf("controllers saw %d errors through cloudgate, want 0", s.Cloudgate.ControllerErrors)
	}
	if s.Cloudgate.CacheHitRatio == nil || *s.Cloudgate.CacheHitRatio < 0.5 {
		t.Errorf("cache hit ratio %v, want >= 50%%", s.Cloudgate.CacheHitRatio)
	}
	if s.Cloudgate.CallsByMethod["GetInstance"] != 0 {
		t.Errorf("cloudgate made %d single GetInstance calls; want batches and lists only", s.Cloudgate.CallsByMethod["GetInstance"])
	}
}

// TestScaleupAndChurnInitialiseEveryNode checks that every arriving node is
// initialised through cloudgate, with fewer upstream calls than bare, and
// that the report's JSON has the promised keys.
func TestScaleupAndChurnInitialiseEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	o := smallOptions()
	o.Scenarios = []string{ScenarioScaleup, ScenarioChurn}
	rep, err := Run(context.Background(), o, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Scenarios {
		cg := s.Cloudgate
		if cg.NodesToInit == 0 || cg.NodesInitialized != cg.NodesToInit || cg.InitSeconds == nil {
			t.Errorf("%s: cloudgate initialised %d of %d nodes", s.Scenario, cg.NodesInitialized, cg.NodesToInit)
		}
		if cg.UpstreamCalls >= s.Bare.UpstreamCalls {
			t.Errorf("%s: cloudgate made %d upstream calls, bare %d: want fewer", s.Scenario, cg.UpstreamCalls, s.Bare.UpstreamCalls)
		}
	}
	if rep.Scenarios[0].LimitSeconds == nil {
		t.Error("scaleup has no limit_seconds")
	}

	path := filepath.Join(t.TempDir(), "r.json")
	if err := rep.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scenarios []map[string]json.RawMessage `json:"scenarios"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, s := range doc.Scenarios {
		for _, k := range []string{"scenario", "nodes", "bare", "cloudgate", "limit_seconds"} {
			if _, ok := s[k]; !ok {
				t.Errorf("JSON scenario lacks key %q", k)
			}
		}
		for _, side := range []string{"bare", "cloudgate"} {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(s[side], &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"upstream_calls", "throttled", "init_seconds"} {
				if _, ok := m[k]; !ok {
					t.Errorf("JSON %s lacks key %q", side, k)
				}
			}
		}
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if !strings.Contains(table.String(), "physical limit") {
		t.Errorf("table lacks the physical limit:\n%s", table.String())
	}
}

// testWriter sends progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestChaosInvariants: through every fault of the schedule, cloudgate loses
// no write, repeats none, deletes no live node, serves no read staler than
// its bound, and the cluster converges after the outage.
func TestChaosInvariants(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	o := smallOptions()
	o.Scenarios = []string{ScenarioChaos}
	o.Sides = []string{sideCloudgate}
	o.ChaosNodes = 50
	rep, err := Run(context.Background(), o, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	cg := rep.Scenarios[0].Cloudgate.ChaosSide
	if cg == nil {
		t.Fatal("no chaos figures")
	}
	if cg.WritesLost != 0 || cg.WritesDuplicated != 0 {
		t.Errorf("writes: %d lost, %d duplicated; want 0 and 0 (%+v)", cg.WritesLost, cg.WritesDuplicated, *cg)
	}
	if cg.NodesWronglyDeleted != 0 {
		t.Errorf("%d nodes deleted while their instance existed", cg.NodesWronglyDeleted)
	}
	if cg.StaleReadsBeyondBound != 0 {
		t.Errorf("%d reads staler than the bound", cg.StaleReadsBeyondBound)
	}
	if cg.ConvergeSeconds == nil {
		t.Error("did not converge after the outage")
	}
	if cg.BreakerOpensInOutage == nil || *cg.BreakerOpensInOutage < 1 {
		t.Errorf("the read breaker did not open during the outage (opens: %v)", cg.BreakerOpensInOutage)
	}
	if got := cg.BreakerStatesAtEnd["read"]; got != "closed" {
		t.Errorf("read breaker %q after convergence, want closed", got)
	}
	if cg.WritesLanded == 0 || cg.WritesIssued == 0 {
		t.Errorf("no writes issued (%d) or landed (%d): the scenario exercised nothing", cg.WritesIssued, cg.WritesLanded)
	}
}
