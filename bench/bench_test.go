package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// testWriter sends progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// smallOptions is a small cluster on the default simulated cloud.
func smallOptions() *Options {
	o := DefaultOptions()
	o.Nodes = 200
	o.Services = 0
	o.ScaleupNodes = 100
	o.ChurnNodes = 100
	o.ChurnRate = 5
	o.ChurnDuration = 2 * time.Minute
	o.ChaosNodes = 40
	o.SteadyWindow = 20 * time.Minute
	return o
}

// TestBenchSteadyColumns: every column runs the same steady window on the
// same cloud; the bare CCM makes one lookup per node per status period, a
// cloudgate column with list prefetch far fewer. Counts only, never times.
func TestBenchSteadyColumns(t *testing.T) {
	o := smallOptions()
	o.Scenarios = []string{ScenarioSteady}
	o.Columns = []string{ColBare, ColList}
	o.NotReadyPct = 1
	rep := runVirtual(t, o)
	if err := rep.Check(); err != nil {
		t.Fatal(err)
	}
	s := rep.Scenarios[0]
	bare, list := s.Columns[ColBare], s.Columns[ColList]
	if bare.Steady == nil || list.Steady == nil || bare.QuotaUtilization == nil {
		t.Fatalf("no steady figures: %+v %+v", bare.Steady, list.Steady)
	}
	if bare.SimSeconds != list.SimSeconds && (bare.SimSeconds/list.SimSeconds > 1.2 || list.SimSeconds/bare.SimSeconds > 1.2) {
		t.Errorf("unequal windows: bare %.0fs, list %.0fs", bare.SimSeconds, list.SimSeconds)
	}
	// 200 nodes, one InstanceMetadata each per 5-minute status period: at
	// least 200 x 12 reads per hour, minus a sweep cut by the window's edges.
	if got := bare.Steady.ReadsPerHour; got < 200*10 {
		t.Errorf("bare made %.0f reads/h, want >= 2000 (one per node per status period)", got)
	}
	if list.Steady.ReadsPerHour*5 > bare.Steady.ReadsPerHour {
		t.Errorf("cloudgate:list made %.0f reads/h, bare %.0f: want at least 5x fewer", list.Steady.ReadsPerHour, bare.Steady.ReadsPerHour)
	}
	if list.Throttled != 0 || list.ControllerErrors != 0 {
		t.Errorf("cloudgate:list: %d throttled, %d controller errors; want 0 and 0", list.Throttled, list.ControllerErrors)
	}
	if s.Bare.UpstreamCalls != bare.UpstreamCalls {
		t.Errorf("JSON bare is not the bare column")
	}
}

// TestBoundFormulas checks the bounds against hand-computed values.
func TestBoundFormulas(t *testing.T) {
	o := DefaultOptions()
	b := initBound(o, 1000)
	// cloud: max(0, 2-20)/20 + 0.05 = 0.05; kube: (2000-30)/20 = 98.5.
	if b.Cloud != 0.05 || b.Kube != 98.5 || b.Seconds != 98.5 {
		t.Errorf("init bound %+v, want cloud 0.05, kube 98.5", b)
	}
	o.CloudMaxBatch, o.ReadBurst, o.ReadQPS = 1, 10, 5
	b = initBound(o, 1000)
	// cloud: (1000-10)/5 + 0.05 = 198.05 > kube.
	if b.Seconds != 198.05 || !strings.Contains(b.Formula, "ceil(1000/1)") {
		t.Errorf("init bound %+v, want 198.05 from the cloud side", b)
	}
	q := quiesceBound(DefaultOptions(), 1000, 20, initBound(DefaultOptions(), 1000))
	if q.Kube != 98.5 {
		t.Errorf("quiescence bound keeps the kube side %v, want 98.5", q.Kube)
	}
	// writes: (1000+20-5)/5 + 0.05 = 203.05.
	if q.Seconds != 203.05 {
		t.Errorf("quiescence bound %+v, want 203.05", q)
	}
}

// TestBoundFromCounters: the kube side counts the node controller's
// requests per node as measured (the least over runs, rounded down per
// node), the last node's Event after its initialisation.
func TestBoundFromCounters(t *testing.T) {
	o := DefaultOptions()
	runs := map[string][]Side{
		ColBare:  {{NodeKubeRequests: map[string]int64{"update nodes": 1000, "patch nodes/status": 1000, "create events": 1000, "get nodes": 7}}},
		ColCache: {{NodeKubeRequests: map[string]int64{"update nodes": 1003, "patch nodes/status": 1000, "create events": 1000}}},
	}
	per := perNodeRequests(runs, 1000)
	if len(per) != 3 || per["update nodes"] != 1 || per["patch nodes/status"] != 1 || per["create events"] != 1 {
		t.Fatalf("per node %v, want update, status patch and event once each", per)
	}
	b := initBoundMeasured(o, 1000, 1, per)
	// kube: (3*1000 - 1 - 30)/20 = 148.45.
	if math.Abs(b.Kube-148.45) > 1e-9 || b.Seconds != b.Kube || !strings.Contains(b.Formula, "r = 3") {
		t.Errorf("bound %+v, want kube 148.45 with r = 3", b)
	}
	// Several workers: the Events may lag, only update and patch count:
	// (2*1000 - 0 - 30)/20 = 98.5.
	if b := initBoundMeasured(o, 1000, 100, per); math.Abs(b.Kube-98.5) > 1e-9 || !strings.Contains(b.Formula, "r = 2") {
		t.Errorf("bound with 100 workers %+v, want kube 98.5 with r = 2", b)
	}
	runs[ColList] = []Side{{}} // a run without counters: no measured bound
	if perNodeRequests(runs, 1000) != nil {
		t.Errorf("a run without counters still gave a per-node count")
	}
}

// TestMedianSide: medians and spreads over seeds; a time not reached in
// one seed is not reached.
func TestMedianSide(t *testing.T) {
	one, three := 1.0, 3.0
	runs := []Side{
		{UpstreamCalls: 10, InitSeconds: &one, Seed: 1},
		{UpstreamCalls: 30, InitSeconds: &three, Seed: 2},
		{UpstreamCalls: 20, InitSeconds: nil, TimedOut: true, Seed: 3},
	}
	m := medianSide(runs)
	if m.UpstreamCalls != 20 || m.Seeds != 3 || m.Spread["upstream_calls"] != [2]float64{10, 30} {
		t.Errorf("median %d seeds %d spread %v", m.UpstreamCalls, m.Seeds, m.Spread["upstream_calls"])
	}
	if m.InitSeconds != nil || !m.TimedOut {
		t.Errorf("init %v timed out %v: a seed that did not finish must not vanish in the median", m.InitSeconds, m.TimedOut)
	}
}

// TestJoinWrites: lost, duplicated and ambiguous writes from a wire log
// and a write log joined on request IDs.
func TestJoinWrites(t *testing.T) {
	wire := []wireEntry{
		{"a", 200}, // landed
		{"b", 200}, // answered ok, never landed: lost
		{"c", 500}, // landed anyway: ambiguous
		{"c", 200}, // the retry of c landed again and changed state: duplicated
		{"d", 429}, // rejected, not landed
		{"e", 500}, // landed anyway: ambiguous
		{"e", 200}, // the retry of e landed again, changing nothing: not a duplicate
	}
	log := []simWrite{{requestID: "a"}, {requestID: "c"}, {requestID: "c"}, {requestID: "e"}, {requestID: "e", unchanged: true}}
	ch := &ChaosSide{}
	joinWrites(ch, wire, toRecords(log))
	if ch.WritesLost != 1 || ch.WritesDuplicated != 1 || ch.WritesAmbiguous != 2 || ch.WritesSent != 7 || ch.WritesLanded != 5 {
		t.Errorf("join: %+v", *ch)
	}
}

// assertJSONKeys checks the keys the report promises.
func assertJSONKeys(t *testing.T, rep *Report, columns []string) {
	t.Helper()
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
		for _, k := range []string{"scenario", "nodes", "bare", "cloudgate", "limit_seconds", "columns"} {
			if _, ok := s[k]; !ok {
				t.Errorf("JSON scenario lacks key %q", k)
			}
		}
		var cols map[string]map[string]json.RawMessage
		if err := json.Unmarshal(s["columns"], &cols); err != nil {
			t.Fatal(err)
		}
		for _, c := range columns {
			m, ok := cols[c]
			if !ok {
				t.Errorf("JSON columns lack %q", c)
				continue
			}
			for _, k := range []string{"upstream_calls", "throttled", "init_seconds", "quota_utilization", "seeds"} {
				if _, ok := m[k]; !ok {
					t.Errorf("JSON column %s lacks key %q", c, k)
				}
			}
		}
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	for _, want := range []string{"init bound", "ceil(K/B)", "rK-e-burst", "r = 3 node-controller requests per node"} {
		if !strings.Contains(table.String(), want) && slices.ContainsFunc(rep.Scenarios, func(s ScenarioResult) bool { return s.InitBound != nil }) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}
