package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
)

// Report is the whole benchmark's result.
type Report struct {
	// TimeFactor: simulated time ran this many times faster than real time.
	TimeFactor float64 `json:"time_factor"`
	// The simulated cloud's quota, per simulated second.
	ReadQPS    float64 `json:"read_qps"`
	ReadBurst  int     `json:"read_burst"`
	WriteQPS   float64 `json:"write_qps"`
	WriteBurst int     `json:"write_burst"`
	Policy     string  `json:"cloudgate_policy"`
	// Sides that ran: bare, cloudgate or both.
	Sides     []string         `json:"sides"`
	Scenarios []ScenarioResult `json:"scenarios"`
}

// ScenarioResult is one scenario, bare and cloudgate side by side.
type ScenarioResult struct {
	Scenario string `json:"scenario"`
	// Nodes is the cluster size (for scaleup: K, the nodes that arrive).
	Nodes    int `json:"nodes"`
	Services int `json:"services"`
	// NotReady nodes (steady).
	NotReady int `json:"not_ready,omitempty"`
	// SimSeconds is the measured window in simulated seconds.
	SimSeconds float64 `json:"sim_seconds"`
	// LimitSeconds is the physical limit ceil(K/B)/Q (scaleup only).
	LimitSeconds *float64 `json:"limit_seconds"`
	BatchSize    int      `json:"batch_size,omitempty"`
	Bare         Side     `json:"bare"`
	Cloudgate    Side     `json:"cloudgate"`
	// CallRatio is bare/cloudgate upstream calls; ReadCallRatio the same
	// for reads; TimeRatio bare/cloudgate init_seconds (0: not measured).
	CallRatio     float64 `json:"call_ratio"`
	ReadCallRatio float64 `json:"read_call_ratio"`
	TimeRatio     float64 `json:"time_ratio,omitempty"`
	// TimeRatioAtLeast: the bare side timed out, TimeRatio is a lower bound.
	TimeRatioAtLeast bool `json:"time_ratio_at_least,omitempty"`
	// TimeFactor of this scenario (scaleup has its own).
	TimeFactor float64 `json:"time_factor"`
}

// Side is one provider's figures. Upstream figures come from the simulated
// cloud's own counters; controller figures from the recorder the
// controllers call through.
type Side struct {
	UpstreamCalls int64            `json:"upstream_calls"`
	ReadCalls     int64            `json:"read_calls"`
	WriteCalls    int64            `json:"write_calls"`
	CallsByMethod map[string]int64 `json:"calls_by_method"`
	Throttled     int64            `json:"throttled"`
	// ThrottledByMethod: the 429s by API method.
	ThrottledByMethod map[string]int64 `json:"throttled_by_method"`
	// ControllerCalls and ControllerErrors are what the controllers made
	// and saw (answers such as "instance not found" are not errors).
	ControllerCalls  int64   `json:"controller_calls"`
	ControllerErrors int64   `json:"controller_errors"`
	P50Ms            float64 `json:"p50_ms"`
	P99Ms            float64 `json:"p99_ms"`
	NodesInitialized int     `json:"nodes_initialized"`
	NodesToInit      int     `json:"nodes_to_initialize"`
	// InitSeconds (simulated) until the last of the nodes to initialise was
	// initialised: scaleup from their arrival; churn the slowest node. Null
	// when not all were initialised or the scenario adds none.
	InitSeconds *float64 `json:"init_seconds"`
	// TimedOut: scaleup gave up before all nodes were initialised.
	TimedOut      bool     `json:"timed_out,omitempty"`
	CacheHitRatio *float64 `json:"cache_hit_ratio"`

	// Chaos only (its keys are inlined).
	*ChaosSide
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteTable writes the human-readable report.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "cloudgate-bench: simulated cloud quota %g reads/s (burst %d), %g writes/s (burst %d)\n",
		r.ReadQPS, r.ReadBurst, r.WriteQPS, r.WriteBurst)
	fmt.Fprintf(w, "time compressed x%g unless a scenario says otherwise: periods / x, quotas * x; times are simulated seconds\n", r.TimeFactor)
	fmt.Fprintf(w, "cloudgate policy: %s\n", r.Policy)
	for _, s := range r.Scenarios {
		fmt.Fprintf(w, "\n== %s: %d nodes, %d services, %.1fs simulated (time x%g)", s.Scenario, s.Nodes, s.Services, s.SimSeconds, s.TimeFactor)
		if s.NotReady > 0 {
			fmt.Fprintf(w, ", %d nodes NotReady", s.NotReady)
		}
		if s.LimitSeconds != nil {
			fmt.Fprintf(w, ", physical limit ceil(K/B)/Q = ceil(%d/%d)/%g = %.2fs", s.Nodes, s.BatchSize, r.ReadQPS, *s.LimitSeconds)
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		row := func(name, a, b, ratio string) { fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, a, b, ratio) }
		switch {
		case len(r.Sides) == 1 && r.Sides[0] == sideBare:
			row = func(name, a, _, _ string) { fmt.Fprintf(tw, "%s\t%s\t\n", name, a) }
		case len(r.Sides) == 1:
			row = func(name, _, b, _ string) { fmt.Fprintf(tw, "%s\t%s\t\n", name, b) }
		}
		row("", sideBare, sideCloudgate, "bare/cloudgate")
		row("upstream calls", d(s.Bare.UpstreamCalls), d(s.Cloudgate.UpstreamCalls), x(s.CallRatio))
		row("  reads", d(s.Bare.ReadCalls), d(s.Cloudgate.ReadCalls), x(s.ReadCallRatio))
		row("  writes", d(s.Bare.WriteCalls), d(s.Cloudgate.WriteCalls), "")
		for _, m := range methods(s.Bare.CallsByMethod, s.Cloudgate.CallsByMethod) {
			row("    "+m, d(s.Bare.CallsByMethod[m]), d(s.Cloudgate.CallsByMethod[m]), "")
		}
		row("throttled (429)", d(s.Bare.Throttled), d(s.Cloudgate.Throttled), "")
		row("controller calls", d(s.Bare.ControllerCalls), d(s.Cloudgate.ControllerCalls), "")
		row("controller errors", d(s.Bare.ControllerErrors), d(s.Cloudgate.ControllerErrors), "")
		row("latency p50 (real ms)", f2(s.Bare.P50Ms), f2(s.Cloudgate.P50Ms), "")
		row("latency p99 (real ms)", f2(s.Bare.P99Ms), f2(s.Cloudgate.P99Ms), "")
		if s.Bare.NodesToInit > 0 || s.Cloudgate.NodesToInit > 0 {
			row("nodes initialized", fmt.Sprintf("%d/%d", s.Bare.NodesInitialized, s.Bare.NodesToInit),
				fmt.Sprintf("%d/%d", s.Cloudgate.NodesInitialized, s.Cloudgate.NodesToInit), "")
			tr := x(s.TimeRatio)
			if s.TimeRatioAtLeast {
				tr = ">" + tr
			}
			row("time to initialize (s)", initSecs(s.Bare, s.SimSeconds), initSecs(s.Cloudgate, s.SimSeconds), tr)
			if s.LimitSeconds != nil && s.Cloudgate.InitSeconds != nil {
				row("  / physical limit", "", x(*s.Cloudgate.InitSeconds / *s.LimitSeconds), "")
			}
		}
		row("cache hit ratio", "-", pct(s.Cloudgate.CacheHitRatio), "")
		if s.Bare.ChaosSide != nil && s.Cloudgate.ChaosSide != nil {
			writeChaosRows(row, s.Bare.ChaosSide, s.Cloudgate.ChaosSide)
		}
		tw.Flush()
	}
}

func methods(a, b map[string]int64) []string {
	set := map[string]bool{}
	for k := range a {
		set[k] = true
	}
	for k := range b {
		set[k] = true
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func d(v int64) string    { return fmt.Sprint(v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
func x(v float64) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%.1fx", v)
}
func secs(v *float64) string {
	if v == nil {
		return "not all"
	}
	return fmt.Sprintf("%.1f", *v)
}
func initSecs(s Side, window float64) string {
	if s.InitSeconds == nil && s.TimedOut {
		return fmt.Sprintf(">%.1f (cut off)", window)
	}
	return secs(s.InitSeconds)
}

func pct(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", *v*100)
}

func ratio(a, b int64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return float64(a)
	}
	return float64(a) / float64(b)
}

func policyString(o *Options) string {
	if o.ConfigFile != "" {
		return "from " + o.ConfigFile
	}
	return strings.Join([]string{
		fmt.Sprintf("defaults, limits.read %.3g/s burst %d (0.95 x quota, 0.9 x burst)", o.ReadQPS*0.95, max(1, o.ReadBurst*9/10)),
		fmt.Sprintf("limits.write %.3g/s burst %d", o.WriteQPS*0.95, max(1, o.WriteBurst*9/10)),
		"batching on", "batch.listPrefetch true",
		fmt.Sprintf("controllers: --concurrent-node-syncs %d", o.NodeWorkers),
	}, ", ")
}
