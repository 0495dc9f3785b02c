package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/cloudgate/cloudgate/bench/measure"
)

// Report is the whole benchmark's result.
type Report struct {
	// Clock is "virtual": every scenario ran inside a synctest bubble.
	Clock string `json:"clock"`
	// The simulated cloud, per simulated second.
	ReadQPS       float64 `json:"read_qps"`
	ReadBurst     int     `json:"read_burst"`
	WriteQPS      float64 `json:"write_qps"`
	WriteBurst    int     `json:"write_burst"`
	CloudMaxBatch int     `json:"cloud_max_batch"`
	LatencyMs     float64 `json:"latency_ms"`
	JitterMs      float64 `json:"jitter_ms"`
	// The CCM.
	KubeQPS     float64          `json:"kube_qps"`
	KubeBurst   int              `json:"kube_burst"`
	NodeWorkers int              `json:"node_workers"`
	Policy      string           `json:"cloudgate_policy"`
	Columns     []string         `json:"column_names"`
	Seeds       int              `json:"seeds"`
	FirstSeed   int64            `json:"first_seed"`
	Scenarios   []ScenarioResult `json:"scenarios"`
}

func newReport(o *Options) *Report {
	return &Report{
		Clock:   "virtual",
		ReadQPS: o.ReadQPS, ReadBurst: o.ReadBurst, WriteQPS: o.WriteQPS, WriteBurst: o.WriteBurst,
		CloudMaxBatch: o.CloudMaxBatch, LatencyMs: ms(o.Latency), JitterMs: ms(o.Jitter),
		KubeQPS: o.KubeQPS, KubeBurst: o.KubeBurst, NodeWorkers: o.NodeWorkers,
		Policy: policyString(o), Columns: slices.Clone(o.Columns), Seeds: o.Seeds, FirstSeed: o.Seed,
	}
}

// ScenarioResult is one scenario, every column side by side.
type ScenarioResult struct {
	Scenario string `json:"scenario"`
	Label    string `json:"label"`
	// Nodes is the cluster size (for scaleup and stress: K, the nodes that
	// arrive).
	Nodes       int `json:"nodes"`
	Services    int `json:"services"`
	NotReady    int `json:"not_ready"`
	NodeWorkers int `json:"node_workers"`
	// SimSeconds is the longest column's window (simulated seconds).
	SimSeconds float64 `json:"sim_seconds"`
	// LimitSeconds is the lower bound on initialising the new nodes
	// (InitBound.Seconds); null where no node arrives.
	LimitSeconds *float64 `json:"limit_seconds"`
	// BatchSize is the cloud's largest batch, B of the bounds.
	BatchSize    int    `json:"batch_size"`
	InitBound    *Bound `json:"init_bound,omitempty"`
	QuiesceBound *Bound `json:"quiesce_bound,omitempty"`
	SteadyFloor  *Bound `json:"steady_floor,omitempty"`
	// PaceModel is a real CCM's status pace (steady, sweep): bare's
	// measured pace must be within 5 % of it.
	PaceModel *PaceModel `json:"pace_model,omitempty"`
	// Bare is the bare column (the CCM's defaults); Cloudgate is
	// cloudgate:batch (DefaultConfig with limits at the quota), or
	// cloudgate:config with --config.
	Bare      Side            `json:"bare"`
	Cloudgate Side            `json:"cloudgate"`
	Columns   map[string]Side `json:"columns"`
	// CallRatio is bare/cloudgate upstream calls; ReadCallRatio the same
	// for reads.
	CallRatio     float64 `json:"call_ratio"`
	ReadCallRatio float64 `json:"read_call_ratio"`

	runs map[string][]Side // per column, one per seed
}

// Runs returns each seed's figures of a column (with their time series).
func (s *ScenarioResult) Runs(col string) []Side { return s.runs[col] }

// Side is one column's figures: of one run, or the median over seeds
// (Seeds > 1) with the spread of the main figures. Upstream figures come
// from the simulated cloud's own counters; controller figures from the
// recorder the controllers call through.
type Side struct {
	UpstreamCalls     int64            `json:"upstream_calls"`
	ReadCalls         int64            `json:"read_calls"`
	WriteCalls        int64            `json:"write_calls"`
	CallsByMethod     map[string]int64 `json:"calls_by_method"`
	Throttled         int64            `json:"throttled"`
	ThrottledByMethod map[string]int64 `json:"throttled_by_method"`
	ControllerCalls   int64            `json:"controller_calls"`
	// ControllerErrors are the errors the controllers saw, without the
	// not-found guard's deliberate holds (GuardHolds: a retryable
	// *api.RetryError while a "does not exist" awaits confirmation).
	ControllerErrors int64   `json:"controller_errors"`
	GuardHolds       int64   `json:"guard_holds"`
	P50Ms            float64 `json:"p50_ms"`
	P99Ms            float64 `json:"p99_ms"`
	// P50SimMs is P50Ms in simulated time: against the cloud's latency
	// model it shows what the benchmark machine's CPU adds to every call.
	P50SimMs         float64 `json:"p50_simulated_ms"`
	NodesInitialized int     `json:"nodes_initialized"`
	NodesToInit      int     `json:"nodes_to_initialize"`
	// InitSeconds (simulated) until the last new node was initialised:
	// scaleup from the arrival, churn the slowest node. Null when not all
	// were (in some seed) or none arrives.
	InitSeconds *float64 `json:"init_seconds"`
	// TimedOut: the column was not quiescent within the cap (in some seed).
	TimedOut bool `json:"timed_out"`
	// QuiesceSeconds until nodes initialised, LBs current, routes matching
	// and no call waiting all held; TimeTo each condition.
	QuiesceSeconds *float64            `json:"quiesce_seconds"`
	TimeTo         map[string]*float64 `json:"time_to,omitempty"`
	// InitOverBound and QuiesceOverBound: measured / lower bound (>= 1).
	OverBound        *float64 `json:"init_over_bound,omitempty"`
	QuiesceOverBound *float64 `json:"quiesce_over_bound,omitempty"`
	// SimSeconds is this column's window.
	SimSeconds    float64  `json:"sim_seconds"`
	CacheHitRatio *float64 `json:"cache_hit_ratio"`
	// NodesPerBatch is the mean number of nodes in a served
	// BatchGetInstances call (null: none); NodeLookups the controllers'
	// InstanceMetadata, InstanceExists and InstanceShutdown calls, whose
	// rate while the nodes initialise is the batches' arrival rate.
	NodesPerBatch *float64 `json:"nodes_per_batch,omitempty"`
	NodeLookups   int64    `json:"node_lookups"`
	// ShadowCalls are the upstream calls a shadow column's cloudgate
	// predicts it would have made (cloudgate_shadow_upstream_calls_total)
	// over the same window as UpstreamCalls, which are the live calls.
	ShadowCalls float64 `json:"shadow_calls,omitempty"`
	// Steady is the steady-state window's figures (steady, sweep);
	// QuotaUtilization its share of the read quota.
	Steady           *Steady  `json:"steady,omitempty"`
	QuotaUtilization *float64 `json:"quota_utilization"`
	Seeds            int      `json:"seeds"`
	Seed             int64    `json:"seed,omitempty"`
	// NodeKubeRequests are the node controller's kube requests during the
	// scale-up by "verb resource[/subresource]" (the init bound's count).
	NodeKubeRequests map[string]int64 `json:"node_kube_requests,omitempty"`
	// Equal work: the status loop's rounds per hour and the mean time of
	// one sweep, measured from the controllers' InstanceMetadata calls
	// (steady, sweep; null with fewer than two sweeps), and the upstream
	// calls per controller call (the measured window).
	StatusRoundsPerHour *float64 `json:"status_rounds_per_hour"`
	SweepSeconds        *float64 `json:"sweep_seconds"`
	CallsPerLookup      *float64 `json:"calls_per_lookup"`
	// Spread is [min, max] over seeds of the main figures.
	Spread map[string][2]float64 `json:"spread,omitempty"`
	// Series is the run's time series (first seed for a median).
	Series *Series `json:"-"`

	// Chaos only (its keys are inlined).
	*ChaosSide
}

// Steady is a steady-state window: calls per simulated hour after the
// first full resync.
type Steady struct {
	WindowSeconds        float64            `json:"window_seconds"`
	ReadsPerHour         float64            `json:"reads_per_hour"`
	WritesPerHour        float64            `json:"writes_per_hour"`
	ThrottledPerHour     float64            `json:"throttled_per_hour"`
	CallsPerHourByMethod map[string]float64 `json:"calls_per_hour_by_method"`
	QuotaUtilization     float64            `json:"quota_utilization"`
	CacheHitRatio        *float64           `json:"cache_hit_ratio"`
	// StatusCallsPerHour are the controllers' InstanceMetadata calls (the
	// node status loop's demand, the same for every column when the
	// machine keeps pace: N per status period plus the sweep's length).
	StatusCallsPerHour float64 `json:"status_calls_per_hour"`
	// ReadsPerHourByPurpose splits the reads by what they were for
	// (Purpose*: status, lifecycle, list, routes, other), classified on
	// the wire from the Nodes each request carries.
	ReadsPerHourByPurpose map[string]float64 `json:"reads_per_hour_by_purpose,omitempty"`
}

// aggregate fills Columns, Bare and Cloudgate from the runs.
func (s *ScenarioResult) aggregate(o *Options) {
	for col, runs := range s.runs {
		agg := medianSide(runs)
		s.Columns[col] = agg
		s.SimSeconds = max(s.SimSeconds, agg.SimSeconds)
	}
	s.Bare = s.Columns[ColBare]
	cg := ColBatch
	if o.ConfigFile != "" {
		cg = ColConfig
	}
	s.Cloudgate = s.Columns[cg]
	s.CallRatio = ratio(s.Bare.UpstreamCalls, s.Cloudgate.UpstreamCalls)
	s.ReadCallRatio = ratio(s.Bare.ReadCalls, s.Cloudgate.ReadCalls)
}

// median is measure.Median, the one both benchmarks use.
func median(v []float64) float64 { return measure.Median(v) }

// medianSide is the median of each figure over runs; a time that is null
// in any run (not reached) is null.
func medianSide(runs []Side) Side {
	if len(runs) == 1 {
		return runs[0]
	}
	out := Side{Seeds: len(runs), Series: runs[0].Series, Spread: map[string][2]float64{}}
	ints := func(get func(Side) int64, name string) int64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = float64(get(r))
		}
		sp := measure.SpreadOf(v)
		if name != "" {
			out.Spread[name] = [2]float64{sp.Min, sp.Max}
		}
		return int64(sp.Median)
	}
	floats := func(get func(Side) float64, name string) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		sp := measure.SpreadOf(v)
		if name != "" {
			out.Spread[name] = [2]float64{sp.Min, sp.Max}
		}
		return sp.Median
	}
	ptrs := func(get func(Side) *float64, name string) *float64 {
		v := make([]float64, 0, len(runs))
		for _, r := range runs {
			if p := get(r); p != nil {
				v = append(v, *p)
			}
		}
		if len(v) == 0 {
			return nil
		}
		sp := measure.SpreadOf(v)
		if name != "" {
			out.Spread[name] = [2]float64{sp.Min, sp.Max}
		}
		if len(v) < len(runs) {
			return nil
		}
		return &sp.Median
	}
	out.UpstreamCalls = ints(func(s Side) int64 { return s.UpstreamCalls }, "upstream_calls")
	out.ReadCalls = ints(func(s Side) int64 { return s.ReadCalls }, "read_calls")
	out.WriteCalls = ints(func(s Side) int64 { return s.WriteCalls }, "write_calls")
	out.Throttled = ints(func(s Side) int64 { return s.Throttled }, "throttled")
	out.ControllerCalls = ints(func(s Side) int64 { return s.ControllerCalls }, "")
	out.ControllerErrors = ints(func(s Side) int64 { return s.ControllerErrors }, "controller_errors")
	out.GuardHolds = ints(func(s Side) int64 { return s.GuardHolds }, "guard_holds")
	out.NodesInitialized = int(ints(func(s Side) int64 { return int64(s.NodesInitialized) }, ""))
	out.NodesToInit = int(ints(func(s Side) int64 { return int64(s.NodesToInit) }, ""))
	out.P50Ms = floats(func(s Side) float64 { return s.P50Ms }, "")
	out.P99Ms = floats(func(s Side) float64 { return s.P99Ms }, "")
	out.P50SimMs = floats(func(s Side) float64 { return s.P50SimMs }, "")
	out.SimSeconds = floats(func(s Side) float64 { return s.SimSeconds }, "")
	out.CallsByMethod, out.ThrottledByMethod = map[string]int64{}, map[string]int64{}
	for _, r := range runs {
		for m := range r.CallsByMethod {
			out.CallsByMethod[m] = ints(func(s Side) int64 { return s.CallsByMethod[m] }, "")
		}
		for m := range r.ThrottledByMethod {
			out.ThrottledByMethod[m] = ints(func(s Side) int64 { return s.ThrottledByMethod[m] }, "")
		}
		out.TimedOut = out.TimedOut || r.TimedOut
	}
	out.InitSeconds = ptrs(func(s Side) *float64 { return s.InitSeconds }, "init_seconds")
	out.QuiesceSeconds = ptrs(func(s Side) *float64 { return s.QuiesceSeconds }, "quiesce_seconds")
	out.OverBound = ptrs(func(s Side) *float64 { return s.OverBound }, "init_over_bound")
	out.QuiesceOverBound = ptrs(func(s Side) *float64 { return s.QuiesceOverBound }, "quiesce_over_bound")
	out.CacheHitRatio = ptrs(func(s Side) *float64 { return s.CacheHitRatio }, "")
	out.NodesPerBatch = ptrs(func(s Side) *float64 { return s.NodesPerBatch }, "nodes_per_batch")
	out.NodeLookups = ints(func(s Side) int64 { return s.NodeLookups }, "")
	out.QuotaUtilization = ptrs(func(s Side) *float64 { return s.QuotaUtilization }, "quota_utilization")
	out.StatusRoundsPerHour = ptrs(func(s Side) *float64 { return s.StatusRoundsPerHour }, "status_rounds_per_hour")
	out.SweepSeconds = ptrs(func(s Side) *float64 { return s.SweepSeconds }, "sweep_seconds")
	out.NodeKubeRequests = runs[0].NodeKubeRequests // the first seed's (the bound takes the least over all)
	out.CallsPerLookup = ptrs(func(s Side) *float64 { return s.CallsPerLookup }, "calls_per_lookup")
	if runs[0].TimeTo != nil {
		out.TimeTo = map[string]*float64{}
		for k := range runs[0].TimeTo {
			out.TimeTo[k] = ptrs(func(s Side) *float64 { return s.TimeTo[k] }, "")
		}
	}
	if runs[0].Steady != nil {
		st := &Steady{WindowSeconds: runs[0].Steady.WindowSeconds, CallsPerHourByMethod: map[string]float64{}}
		sf := func(get func(*Steady) float64, name string) float64 {
			return floats(func(s Side) float64 { return get(s.Steady) }, name)
		}
		st.ReadsPerHour = sf(func(s *Steady) float64 { return s.ReadsPerHour }, "steady_reads_per_hour")
		st.WritesPerHour = sf(func(s *Steady) float64 { return s.WritesPerHour }, "steady_writes_per_hour")
		st.ThrottledPerHour = sf(func(s *Steady) float64 { return s.ThrottledPerHour }, "steady_throttled_per_hour")
		st.QuotaUtilization = sf(func(s *Steady) float64 { return s.QuotaUtilization }, "")
		st.StatusCallsPerHour = sf(func(s *Steady) float64 { return s.StatusCallsPerHour }, "")
		st.CacheHitRatio = ptrs(func(s Side) *float64 { return s.Steady.CacheHitRatio }, "")
		for _, r := range runs {
			for m := range r.Steady.CallsPerHourByMethod {
				st.CallsPerHourByMethod[m] = sf(func(s *Steady) float64 { return s.CallsPerHourByMethod[m] }, "")
			}
			for p := range r.Steady.ReadsPerHourByPurpose {
				if st.ReadsPerHourByPurpose == nil {
					st.ReadsPerHourByPurpose = map[string]float64{}
				}
				st.ReadsPerHourByPurpose[p] = sf(func(s *Steady) float64 { return s.ReadsPerHourByPurpose[p] }, "")
			}
		}
		out.Steady = st
	}
	if runs[0].ChaosSide != nil {
		out.ChaosSide = mergeChaos(runs)
	}
	return out
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteTable writes the human-readable report: every column, medians over
// the seeds with [min-max] spreads, the bounds with their formulas.
func (r *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "cloudgate-bench: simulated cloud quota %g reads/s (burst %d), %g writes/s (burst %d), largest batch %d, latency %gms + up to %gms jitter\n",
		r.ReadQPS, r.ReadBurst, r.WriteQPS, r.WriteBurst, r.CloudMaxBatch, r.LatencyMs, r.JitterMs)
	fmt.Fprintf(w, "CCM defaults: kube client %g QPS / burst %d per controller, --concurrent-node-syncs %d, status every 5m, lifecycle 5s, routes 10s\n",
		r.KubeQPS, r.KubeBurst, r.NodeWorkers)
	fmt.Fprintf(w, "columns: bare = no client-side limit or retry; bare+client = token bucket at the quota, Retry-After in whole seconds, %d retries with backoff\n", typicalMaxRetries)
	fmt.Fprintf(w, "cloudgate: %s\n", r.Policy)
	seeds := fmt.Sprintf("%d seed(s) from %d", r.Seeds, r.FirstSeed)
	if r.Seeds > 1 {
		seeds += ": medians, [min-max] over seeds"
	} else {
		seeds += " (make bench-results uses 3; --seeds N)"
	}
	fmt.Fprintf(w, "%s; times are simulated seconds\n", seeds)
	for i := range r.Scenarios {
		r.writeScenario(w, &r.Scenarios[i])
	}
}

func (r *Report) writeScenario(w io.Writer, s *ScenarioResult) {
	fmt.Fprintf(w, "\n== %s: %s (virtual time)\n", s.Scenario, s.Label)
	if s.InitBound != nil {
		fmt.Fprintf(w, "   init bound:        %s\n", s.InitBound.Formula)
	}
	if s.QuiesceBound != nil {
		fmt.Fprintf(w, "   quiescence bound:  %s\n", s.QuiesceBound.Formula)
	}
	if s.SteadyFloor != nil {
		fmt.Fprintf(w, "   steady floor:      %s\n", s.SteadyFloor.Formula)
	}
	if s.PaceModel != nil {
		fmt.Fprintf(w, "   equal work:        a real CCM's status pace %s; bare must be within %.0f %% of it\n", s.PaceModel.Formula, paceTolerance*100)
	}
	cols := make([]string, 0, len(r.Columns))
	for _, c := range r.Columns {
		if _, ok := s.Columns[c]; ok {
			cols = append(cols, c)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, cell func(Side) string) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, c := range cols {
			fmt.Fprintf(tw, "%s\t", cell(s.Columns[c]))
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "\t%s\t\n", strings.Join(cols, "\t"))
	spread := func(side Side, key string, v string) string {
		if sp, ok := side.Spread[key]; ok && sp[0] != sp[1] {
			return fmt.Sprintf("%s [%s-%s]", v, short(sp[0]), short(sp[1]))
		}
		return v
	}
	row("window (s)", func(x Side) string { return f1(x.SimSeconds) })
	row("upstream calls", func(x Side) string { return spread(x, "upstream_calls", d(x.UpstreamCalls)) })
	row("  reads", func(x Side) string { return spread(x, "read_calls", d(x.ReadCalls)) })
	row("  writes", func(x Side) string { return spread(x, "write_calls", d(x.WriteCalls)) })
	all := map[string]bool{}
	for _, c := range cols {
		for m := range s.Columns[c].CallsByMethod {
			all[m] = true
		}
	}
	for _, m := range slices.Sorted(maps.Keys(all)) {
		row("    "+m, func(x Side) string { return d(x.CallsByMethod[m]) })
	}
	row("throttled (429)", func(x Side) string { return spread(x, "throttled", d(x.Throttled)) })
	row("controller calls", func(x Side) string { return d(x.ControllerCalls) })
	row("controller errors (failures)", func(x Side) string { return spread(x, "controller_errors", d(x.ControllerErrors)) })
	row("not-found holds (by design)", func(x Side) string { return spread(x, "guard_holds", d(x.GuardHolds)) })
	row("latency p50/p99 (ms)", func(x Side) string { return f2(x.P50Ms) + "/" + f2(x.P99Ms) })
	row("upstream calls / controller call", func(x Side) string { return spread(x, "calls_per_lookup", ptrf(x.CallsPerLookup, 3)) })
	if s.PaceModel != nil {
		row("status rounds / h", func(x Side) string { return spread(x, "status_rounds_per_hour", ptrf(x.StatusRoundsPerHour, 3)) })
		row("status sweep (s)", func(x Side) string { return spread(x, "sweep_seconds", ptrf(x.SweepSeconds, 2)) })
	}
	if s.Columns[cols[0]].NodesToInit > 0 {
		row("nodes initialized", func(x Side) string { return fmt.Sprintf("%d/%d", x.NodesInitialized, x.NodesToInit) })
		row("time to init (s)", func(x Side) string { return spread(x, "init_seconds", secs(x.InitSeconds, x.TimedOut)) })
	}
	if s.Columns[cols[0]].TimeTo != nil {
		row("time to LBs current (s)", func(x Side) string { return secs(x.TimeTo["lbs_current"], x.TimedOut) })
		row("time to routes match (s)", func(x Side) string { return secs(x.TimeTo["routes_match"], x.TimedOut) })
		row("time to quiescence (s)", func(x Side) string { return spread(x, "quiesce_seconds", secs(x.QuiesceSeconds, x.TimedOut)) })
	}
	if s.Columns[cols[0]].NodeKubeRequests != nil {
		row("node-controller kube requests / node", func(x Side) string {
			var n int64
			for _, v := range x.NodeKubeRequests {
				n += v
			}
			return fmt.Sprintf("%.2f", float64(n)/float64(max(1, x.NodesToInit)))
		})
	}
	row("nodes per batch", func(x Side) string {
		if x.NodesPerBatch == nil {
			return "—"
		}
		return spread(x, "nodes_per_batch", f1(*x.NodesPerBatch))
	})
	if s.Columns[cols[0]].NodesToInit > 0 {
		row("node lookups / init second", func(x Side) string {
			if x.InitSeconds == nil || *x.InitSeconds <= 0 {
				return "—"
			}
			return f1(float64(x.NodeLookups) / *x.InitSeconds)
		})
	}
	if s.InitBound != nil {
		row("init / bound", func(x Side) string { return spread(x, "init_over_bound", xf(x.OverBound)) })
		row("quiescence / bound", func(x Side) string { return spread(x, "quiesce_over_bound", xf(x.QuiesceOverBound)) })
	}
	if s.Columns[cols[0]].Steady != nil {
		row("controllers' status calls / h", func(x Side) string { return f0(x.Steady.StatusCallsPerHour) })
		row("steady reads / h", func(x Side) string { return spread(x, "steady_reads_per_hour", f0(x.Steady.ReadsPerHour)) })
		row("steady writes / h", func(x Side) string { return f0(x.Steady.WritesPerHour) })
		row("steady throttled / h", func(x Side) string { return f0(x.Steady.ThrottledPerHour) })
		methods := map[string]bool{}
		for _, c := range cols {
			for m := range s.Columns[c].Steady.CallsPerHourByMethod {
				methods[m] = true
			}
		}
		for _, m := range slices.Sorted(maps.Keys(methods)) {
			row("  "+m+" / h", func(x Side) string { return f0(x.Steady.CallsPerHourByMethod[m]) })
		}
		row("read quota utilization", func(x Side) string { return spread(x, "quota_utilization", pct(x.QuotaUtilization)) })
		row("steady cache hit ratio", func(x Side) string { return pct(x.Steady.CacheHitRatio) })
	} else {
		row("cache hit ratio", func(x Side) string { return pct(x.CacheHitRatio) })
	}
	if s.Columns[cols[0]].ChaosSide != nil {
		writeChaosRows(row, s.Scenario == ScenarioChaosZone)
	}
	tw.Flush()
}

func d(v int64) string { return fmt.Sprint(v) }
func ptrf(v *float64, prec int) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, *v)
}
func f0(v float64) string { return fmt.Sprintf("%.0f", v) }
func f1(v float64) string { return fmt.Sprintf("%.1f", v) }
func f2(v float64) string { return fmt.Sprintf("%.2f", v) }
func short(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprint(int64(v))
	}
	if v < 10 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
func xf(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2fx", *v)
}
func secs(v *float64, cut bool) string {
	if v == nil {
		if cut {
			return "cut off"
		}
		return "-"
	}
	return fmt.Sprintf("%.1f", *v)
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

// Check fails a report that cannot be trusted: a column that beat its
// lower bound (the bound is wrong) or a chaos invariant checked 0 times
// (it proved nothing). Violated invariants are findings, printed in the
// table, not errors of the benchmark.
func (r *Report) Check() error {
	var problems []string
	for _, s := range r.Scenarios {
		for col, runs := range s.runs {
			for _, x := range runs {
				if x.OverBound != nil && *x.OverBound < 1 {
					problems = append(problems, fmt.Sprintf("%s/%s seed %d: initialised in %.2fx its lower bound", s.Scenario, col, x.Seed, *x.OverBound))
				}
				if x.QuiesceOverBound != nil && *x.QuiesceOverBound < 1 {
					problems = append(problems, fmt.Sprintf("%s/%s seed %d: quiescent in %.2fx its lower bound", s.Scenario, col, x.Seed, *x.QuiesceOverBound))
				}
				if x.ChaosSide != nil && len(x.Unchecked) > 0 {
					problems = append(problems, fmt.Sprintf("%s/%s seed %d: invariants checked 0 times: %v", s.Scenario, col, x.Seed, x.Unchecked))
				}
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("the report cannot be trusted:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}
