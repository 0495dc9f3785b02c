package bench

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"io"
	"maps"
	"os"
	"slices"
	"text/tabwriter"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Plan answers "will my quota hold at N nodes?": the steady scenario at
// each node count with one cloudgate column (the user's cloudgate.yaml or
// the default policy) over an upstream that implements only what the
// user's provider implements.
type Plan struct {
	Column     string  `json:"column"`
	Supports   string  `json:"upstream_supports"`
	Policy     string  `json:"policy"`
	QuotaRead  float64 `json:"quota_read"`
	QuotaWrite float64 `json:"quota_write"`
	Window     float64 `json:"window_seconds"`
	// ListPage is the simulated cloud's ListInstances page size: a list
	// refresh costs ceil(nodes/ListPage) calls.
	ListPage int         `json:"list_page"`
	Points   []PlanPoint `json:"points"`
	// ReadRunsOutAt is the first simulated node count where reads reach
	// the read quota (95 %), throttling starts or controllers see errors;
	// null when no simulated count does. Never extrapolated: a straight
	// line through two points overstated reads by 50-70 % (the status
	// loop's round grows with the sweep, the cache's with its TTL).
	ReadRunsOutAt  *int    `json:"read_runs_out_at"`
	WriteRunsOutAt *int    `json:"write_runs_out_at"`
	KubeQPS        float64 `json:"kube_qps"`
	NodeWorkers    int     `json:"node_workers"`
}

// The limits that can bind a plan point (PlanPoint.Binding).
const (
	// LimitQuota: the reads reach the read quota (95 %), or the cloud
	// throttles, or the controllers see errors.
	LimitQuota = "read quota"
	// LimitWorkers: the status loop's sweep (N lookups over
	// --concurrent-node-syncs workers) takes at least the status period,
	// so more nodes lengthen the round instead of adding reads in
	// proportion.
	LimitWorkers = "node workers"
	// LimitList: ListInstances refreshes make most reads (one refresh per
	// listInterval, ceil(N/page) pages each).
	LimitList = "list refresh"
	// LimitTTL: most status lookups are cache hits; each Node is read once
	// per InstanceMetadata TTL, not once per status round.
	LimitTTL = "cache TTL"
	// LimitPeriod: every status round reads every Node
	// (--node-status-update-frequency sets the reads).
	LimitPeriod = "status period"
)

// PlanPoint is one node count's steady state.
type PlanPoint struct {
	Nodes            int                `json:"nodes"`
	CallsPerMin      map[string]float64 `json:"calls_per_min"`
	ReadsPerMin      float64            `json:"reads_per_min"`
	WritesPerMin     float64            `json:"writes_per_min"`
	ReadHeadroom     float64            `json:"read_headroom"`
	WriteHeadroom    float64            `json:"write_headroom"`
	Throttled        int64              `json:"throttled"`
	ControllerErrors int64              `json:"controller_errors"`
	// The status loop's pace (simulated): rounds per hour, mean sweep, and
	// the controllers' InstanceMetadata calls per minute.
	StatusRoundsPerHour *float64 `json:"status_rounds_per_hour"`
	SweepSeconds        *float64 `json:"sweep_seconds"`
	StatusCallsPerMin   float64  `json:"status_calls_per_min"`
	CacheHitRatio       *float64 `json:"cache_hit_ratio"`
	// Binding is the limit that sets the reads at this count (Limit*),
	// Why the simulated figures that show it.
	Binding string `json:"binding"`
	Why     string `json:"why"`
}

// binding names the limit that sets pt's reads, from its simulated
// figures: the quota first, then the node workers, then what spares the
// cloud the status loop's lookups (list refreshes, the cache's TTL), else
// the status period itself.
func binding(pt *PlanPoint, readQPS float64) (string, string) {
	quota := readQPS * 60
	switch {
	case pt.Throttled > 0 || pt.ControllerErrors > 0 || pt.ReadsPerMin >= 0.95*quota:
		return LimitQuota, fmt.Sprintf("reads %.0f/min = %.0f %% of the quota, %d throttled, %d controller errors", pt.ReadsPerMin, 100*pt.ReadsPerMin/quota, pt.Throttled, pt.ControllerErrors)
	case pt.SweepSeconds != nil && *pt.SweepSeconds >= nodeStatusUpdateFrequency.Seconds():
		return LimitWorkers, fmt.Sprintf("a status sweep takes %.0f s >= the %v period", *pt.SweepSeconds, nodeStatusUpdateFrequency)
	case pt.SweepSeconds == nil && pt.Nodes > 0 && pt.StatusCallsPerMin > 0 && float64(pt.Nodes)/(pt.StatusCallsPerMin/60) >= 2*nodeStatusUpdateFrequency.Seconds():
		// No sweep ended twice in the run (at 20,000 Nodes with 1 %
		// NotReady one sweep outlasts warm-up and window): a round of N
		// lookups at the measured rate is the sweep plus the period.
		round := float64(pt.Nodes) / (pt.StatusCallsPerMin / 60)
		return LimitWorkers, fmt.Sprintf("no status sweep ended twice in the run; at %.0f InstanceMetadata lookups/min a round of %d Nodes takes %.0f s, a sweep %.0f s >= the %v period",
			pt.StatusCallsPerMin, pt.Nodes, round, round-nodeStatusUpdateFrequency.Seconds(), nodeStatusUpdateFrequency)
	case pt.ReadsPerMin > 0 && pt.CallsPerMin[simcloud.MethodListInstances] >= 0.5*pt.ReadsPerMin:
		return LimitList, fmt.Sprintf("ListInstances makes %.0f %% of the reads", 100*pt.CallsPerMin[simcloud.MethodListInstances]/pt.ReadsPerMin)
	case pt.CacheHitRatio != nil && *pt.CacheHitRatio >= 0.5:
		return LimitTTL, fmt.Sprintf("%.0f %% of the lookups are cache hits", 100**pt.CacheHitRatio)
	}
	return LimitPeriod, fmt.Sprintf("%.0f InstanceMetadata lookups/min, each a cloud read", pt.StatusCallsPerMin)
}

// planColumn is the column a plan measures.
func planColumn(o *Options) string {
	if o.ConfigFile != "" {
		return ColConfig
	}
	switch o.UpstreamSupports {
	case SupportsBatch:
		return ColBatch
	case SupportsList:
		return ColList
	}
	return ColCache
}

// RunPlan runs the steady scenario at every node count of nodes.
func RunPlan(ctx context.Context, o *Options, nodes []int, progress io.Writer) (*Plan, error) {
	col := planColumn(o)
	o.Columns = []string{col}
	o.Scenarios = []string{ScenarioSteady}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("plan: --nodes: name at least one node count")
	}
	if progress == nil {
		progress = io.Discard
	}
	p := &Plan{Column: col, Supports: o.upstreamSupports(col), Policy: policyString(o),
		QuotaRead: o.ReadQPS, QuotaWrite: o.WriteQPS, Window: o.SteadyWindow.Seconds(), ListPage: simcloud.DefaultListPageSize}
	for _, n := range slices.Sorted(slices.Values(nodes)) {
		res, err := runScenario(ctx, o, steadySpec(o, n, fmt.Sprintf("plan/%d", n)), progress)
		if err != nil {
			return nil, err
		}
		x := res.Columns[col]
		pt := PlanPoint{Nodes: n, CallsPerMin: map[string]float64{}, Throttled: x.Throttled, ControllerErrors: x.ControllerErrors}
		for m, v := range x.Steady.CallsPerHourByMethod {
			pt.CallsPerMin[m] = v / 60
		}
		pt.ReadsPerMin, pt.WritesPerMin = x.Steady.ReadsPerHour/60, x.Steady.WritesPerHour/60
		pt.ReadHeadroom = 1 - pt.ReadsPerMin/(o.ReadQPS*60)
		pt.WriteHeadroom = 1 - pt.WritesPerMin/(o.WriteQPS*60)
		pt.StatusRoundsPerHour, pt.SweepSeconds, pt.CacheHitRatio = x.StatusRoundsPerHour, x.SweepSeconds, x.Steady.CacheHitRatio
		pt.StatusCallsPerMin = x.Steady.StatusCallsPerHour / 60
		pt.Binding, pt.Why = binding(&pt, o.ReadQPS)
		p.Points = append(p.Points, pt)
	}
	p.KubeQPS, p.NodeWorkers = o.KubeQPS, o.NodeWorkers
	p.ReadRunsOutAt = runsOut(p.Points, func(pt PlanPoint) float64 { return pt.ReadsPerMin }, o.ReadQPS*60, true)
	p.WriteRunsOutAt = runsOut(p.Points, func(pt PlanPoint) float64 { return pt.WritesPerMin }, o.WriteQPS*60, false)
	return p, nil
}

// runsOut is the first simulated count at 95 % of the quota (or, for
// reads, with throttling or controller errors); nil when none is.
func runsOut(pts []PlanPoint, get func(PlanPoint) float64, quotaPerMin float64, reads bool) *int {
	for _, pt := range pts {
		if get(pt) >= 0.95*quotaPerMin || reads && (pt.Throttled > 0 || pt.ControllerErrors > 0) {
			n := pt.Nodes
			return &n
		}
	}
	return nil
}

// WriteTable prints the plan.
func (p *Plan) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "cloudgate-bench plan: read quota %g/s (%g/min), write quota %g/s (%g/min); column %s, upstream implements %s\n",
		p.QuotaRead, p.QuotaRead*60, p.QuotaWrite, p.QuotaWrite*60, p.Column, p.Supports)
	fmt.Fprintf(w, "policy: %s\n", p.Policy)
	fmt.Fprintf(w, "steady state after the first full resync, %.0f simulated seconds per node count; calls per minute:\n", p.Window)
	methods := map[string]bool{}
	for _, pt := range p.Points {
		for m := range pt.CallsPerMin {
			methods[m] = true
		}
	}
	ms := slices.Sorted(maps.Keys(methods))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "nodes\t")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t", m)
	}
	fmt.Fprintln(tw, "reads/min\tread headroom\twrites/min\twrite headroom\tthrottled\tcontroller errors\tstatus rounds/h\tsweep s\tbinding limit\t")
	for _, pt := range p.Points {
		fmt.Fprintf(tw, "%d\t", pt.Nodes)
		for _, m := range ms {
			fmt.Fprintf(tw, "%.1f\t", pt.CallsPerMin[m])
		}
		fmt.Fprintf(tw, "%.1f\t%.0f%%\t%.1f\t%.0f%%\t%d\t%d\t%s\t%s\t%s\t\n", pt.ReadsPerMin, pt.ReadHeadroom*100, pt.WritesPerMin, pt.WriteHeadroom*100,
			pt.Throttled, pt.ControllerErrors, optFloat(pt.StatusRoundsPerHour, "%.2f"), optFloat(pt.SweepSeconds, "%.0f"), pt.Binding)
	}
	tw.Flush()
	fmt.Fprintln(w, "binding limit at each count (from the simulated figures):")
	for _, pt := range p.Points {
		fmt.Fprintf(w, "  %d nodes: %s (%s)\n", pt.Nodes, pt.Binding, pt.Why)
	}
	fmt.Fprintf(w, "kube client (%g QPS per controller): the steady status loop writes no Node that did not change; it binds scale-ups (3 requests per new node: at least 3K/%g s for K nodes)\n", p.KubeQPS, p.KubeQPS)
	last := p.Points[len(p.Points)-1]
	say := func(kind string, n *int, share float64) {
		if n != nil {
			fmt.Fprintf(w, "%s quota: runs out at %d nodes (simulated)\n", kind, *n)
			return
		}
		fmt.Fprintf(w, "%s quota: holds at every simulated count (at %d nodes: %.0f %% of it); larger counts are not predicted: simulate them with --nodes\n", kind, last.Nodes, share*100)
	}
	say("read", p.ReadRunsOutAt, 1-last.ReadHeadroom)
	say("write", p.WriteRunsOutAt, 1-last.WriteHeadroom)
}

func optFloat(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

// WriteHTML writes the plan as one self-contained page: calls per minute
// by method against the quota, over node counts.
func (p *Plan) WriteHTML(path string) error {
	pl := newPlot("calls per minute by node count (dashed: the read quota)", "nodes", "calls/min")
	methods := map[string]bool{}
	for _, pt := range p.Points {
		for m := range pt.CallsPerMin {
			methods[m] = true
		}
	}
	palette := []string{ColBare, ColBareClient, ColCache, ColBatch, ColList, ColConfig}
	for i, m := range slices.Sorted(maps.Keys(methods)) {
		var xys plotter.XYs
		for _, pt := range p.Points {
			xys = append(xys, plotter.XY{X: float64(pt.Nodes), Y: pt.CallsPerMin[m]})
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		l.Color = columnColors[palette[i%len(palette)]]
		pl.Add(l)
		pl.Legend.Add(m, l)
	}
	last := float64(p.Points[len(p.Points)-1].Nodes)
	if err := addLine(pl, "read quota", plotter.XYs{{X: 0, Y: p.QuotaRead * 60}, {X: last, Y: p.QuotaRead * 60}}, true); err != nil {
		return err
	}
	img, err := svg(pl, 7*vg.Inch, 3.5*vg.Inch)
	if err != nil {
		return err
	}
	var t bytes.Buffer
	p.WriteTable(&t)
	page := template.Must(template.New("plan").Parse(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>cloudgate-bench plan</title>
<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}pre{background:#f6f6f6;padding:1em;font-size:12px;overflow-x:auto}</style></head>
<body><h1>Will my quota hold?</h1><figure>{{.Plot}}</figure><pre>{{.Table}}</pre></body></html>
`))
	var b bytes.Buffer
	if err := page.Execute(&b, struct {
		Plot  template.HTML
		Table string
	}{img, t.String()}); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
