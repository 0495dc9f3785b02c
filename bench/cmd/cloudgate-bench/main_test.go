package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudgate/cloudgate/bench"
	"github.com/cloudgate/cloudgate/bench/virtual"
)

// TestRunWritesTableAndJSON runs a tiny steady benchmark end to end
// through the command line.
func TestRunWritesTableAndJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.json")
	html := filepath.Join(t.TempDir(), "out.html")
	raw := runCommand(t, []string{
		"--scenario", "steady", "--nodes", "50", "--services", "0", "--steady-window", "10m",
		"--columns", "bare,cloudgate:list",
		"--json", path, "--html", html, "--metrics-addr", "127.0.0.1:0",
	}, path, "== steady: 50 nodes", "upstream calls", "cloudgate:list", "throttled (429)", "steady reads / h")
	var doc struct {
		Scenarios []struct {
			Scenario  string `json:"scenario"`
			Nodes     int    `json:"nodes"`
			Cloudgate struct {
				UpstreamCalls int64 `json:"upstream_calls"`
			} `json:"cloudgate"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Scenarios) != 1 || doc.Scenarios[0].Scenario != "steady" || doc.Scenarios[0].Nodes != 50 {
		t.Errorf("JSON: %s", raw)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "<svg") || strings.Contains(string(page), "<script") {
		t.Errorf("HTML report has no inline SVG or has a script")
	}
}

func TestRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "nope"},
		{"--columns", "both"},
		{"--upstream-supports", "all"},
		{"--seeds", "0"},
		{"--metrics-addr", "0.0.0.0:9464"},
		{"--read-qps", "0"},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(args, &stdout, &stderr); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestPlanPrintsHeadroomAndRunsOut runs a tiny plan end to end.
func TestPlanPrintsHeadroomAndRunsOut(t *testing.T) {
	useTestHost(t)
	html := filepath.Join(t.TempDir(), "plan.html")
	var stdout, stderr bytes.Buffer
	err := run([]string{
		"plan", "--quota-read", "2", "--quota-write", "5", "--nodes", "20,40", "--services", "0",
		"--steady-window", "10m", "--html", html,
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"read headroom", "upstream implements none", "read quota:", "GetInstance"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, stdout.String())
		}
	}
	if page, err := os.ReadFile(html); err != nil || !strings.Contains(string(page), "<svg") {
		t.Errorf("plan HTML: %v", err)
	}
}

// TestPlanAWSForecast: plan on the aws profile with the CCM's settings as
// flags prints the forecast (quota needed, binding limit, the setting to
// change) for each upstream named, and writes them as a JSON array.
func TestPlanAWSForecast(t *testing.T) {
	useTestHost(t)
	out := filepath.Join(t.TempDir(), "plan.json")
	var stdout, stderr bytes.Buffer
	err := run([]string{
		"plan", "--cloud", "aws", "--nodes", "30", "--services", "0", "--not-ready-pct", "10", "--steady-window", "10m",
		"--node-workers", "4", "--kube-qps", "50", "--kube-burst", "60", "--scaleup-nodes", "200",
		"--upstream-supports", "none,list", "--json", out,
	}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"cloud aws: read quota 20/s (burst 100", "list pages 10/s (burst 50)", "pages of 1000",
		"kube client 50 QPS / burst 60, --concurrent-node-syncs 4", "upstream implements none", "upstream implements list",
		"read quota needed", "200-Node scale-up", "change: ", "lifecycle"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, stdout.String())
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var plans []bench.Plan
	if err := json.Unmarshal(b, &plans); err != nil {
		t.Fatal(err)
	}
	if len(plans) != 2 || plans[0].Cloud != "aws" || plans[0].NodeWorkers != 4 || plans[0].KubeQPS != 50 || plans[1].Supports != bench.SupportsList ||
		plans[0].ListPage != 1000 || plans[0].Points[0].Setting == "" || plans[0].Points[0].NeedScaleup <= 0 {
		t.Errorf("plans: %s", b)
	}
	if err := run([]string{"plan", "--cloud", "gcp"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "--cloud") {
		t.Errorf("--cloud gcp: %v, want an error naming --cloud", err)
	}
}

// TestPlanCPUProfile: plan --cpuprofile writes a CPU profile (gzipped
// protobuf) of the simulation. Started inside the bubble, the profiler's
// writer goroutine stalled it; stopped after virtual.Main's exit, the file
// stayed empty.
func TestPlanCPUProfile(t *testing.T) {
	useTestHost(t)
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	var stdout, stderr bytes.Buffer
	if err := run([]string{"plan", "--nodes", "20", "--services", "0", "--steady-window", "5m", "--cpuprofile", prof}, &stdout, &stderr); err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("plan --cpuprofile: %d bytes, err %v: want a gzipped profile", len(b), err)
	}
}

// runCommand runs the command with args in a synctest bubble of t, checks
// that its table holds every one of want, and returns the JSON report it
// wrote to jsonPath.
func runCommand(t *testing.T, args []string, jsonPath string, want ...string) []byte {
	t.Helper()
	useTestHost(t)
	var stdout, stderr bytes.Buffer
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, w := range want {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, stdout.String())
		}
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// useTestHost runs the command's simulations in a synctest bubble of t.
func useTestHost(t *testing.T) {
	t.Helper()
	old := host
	host = func(ctx context.Context, fn virtual.Func) error { return virtual.Test(t, ctx, virtual.Options{}, fn) }
	t.Cleanup(func() { host = old })
}

// TestScaleWritesTableAndJSON runs a tiny scale scenario through the
// command line: its table names each size's limits, its JSON each column.
func TestScaleWritesTableAndJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scale.json")
	raw := runCommand(t, []string{"--scenario", "scale", "--scale-nodes", "100", "--scale-window", "0", "--columns", "bare,cloudgate:list", "--json", path}, path,
		"== scale/100: 100 nodes", "calls/round", "CPU/upstream call", "limit: status pace", "limit: cache size", "load average")
	var stdout, stderr bytes.Buffer
	var doc struct {
		Sizes []struct {
			Nodes    int `json:"nodes"`
			NotReady int `json:"not_ready"`
			Rounds   int `json:"rounds_measured"`
			Columns  []struct {
				Column        string  `json:"column"`
				InstanceReads float64 `json:"instance_reads_per_round"`
				StatusLookups float64 `json:"status_lookups"`
				Controller    float64 `json:"controller_calls"`
			} `json:"columns"`
		} `json:"sizes"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	// The default 1 % NotReady: one of the 100 Nodes, which the lifecycle
	// controller checks every 5 s. bare sends every lookup to the cloud:
	// the status loop's 100 per round and the lifecycle controller's.
	if len(doc.Sizes) != 1 || doc.Sizes[0].Nodes != 100 || doc.Sizes[0].NotReady != 1 || doc.Sizes[0].Rounds < 1 || len(doc.Sizes[0].Columns) != 2 {
		t.Fatalf("JSON: %s", raw)
	}
	sz := doc.Sizes[0]
	bare, rounds := sz.Columns[0], float64(sz.Rounds)
	if bare.Column != "bare" || bare.StatusLookups != 100*rounds || bare.Controller <= bare.StatusLookups || bare.InstanceReads != bare.Controller/rounds {
		t.Errorf("bare: %+v over %d rounds: want 100 status lookups per round, lifecycle checks beside them, and every lookup a cloud read; JSON: %s", bare, sz.Rounds, raw)
	}
	for _, args := range [][]string{
		{"--scenario", "scale,steady"},
		{"--scenario", "scale", "--scale-nodes", "1000,x"},
		{"--scenario", "scale", "--seeds", "3"},
	} {
		if err := run(args, &stdout, &stderr); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestFullFlag: --full picks the full sweep's defaults before the other
// flags are parsed, in every spelling the flag package accepts.
func TestFullFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--full"}, true},
		{[]string{"-full"}, true},
		{[]string{"--seeds", "3", "--full=true"}, true},
		{[]string{"--full=false"}, false},
		{[]string{"--fullness"}, false},
		{[]string{"--", "--full"}, false},
	} {
		if got := fullFlag(tc.args); got != tc.want {
			t.Errorf("fullFlag(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
