package bench

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
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
	// ReadRunsOutAt is the node count where reads reach the read quota
	// (95 %), throttling starts or controllers see errors: measured, or
	// extrapolated linearly from the last two points (Extrapolated), or
	// null when the sweep's reads do not grow.
	ReadRunsOutAt  *int `json:"read_runs_out_at"`
	Extrapolated   bool `json:"extrapolated"`
	WriteRunsOutAt *int `json:"write_runs_out_at"`
}

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
		p.Points = append(p.Points, pt)
	}
	p.ReadRunsOutAt, p.Extrapolated = runsOut(p.Points, func(pt PlanPoint) float64 { return pt.ReadsPerMin }, o.ReadQPS*60, true)
	p.WriteRunsOutAt, _ = runsOut(p.Points, func(pt PlanPoint) float64 { return pt.WritesPerMin }, o.WriteQPS*60, false)
	return p, nil
}

// runsOut finds the first measured count at 95 % of the quota (or, for
// reads, with throttling or controller errors), else extrapolates from
// the last two points.
func runsOut(pts []PlanPoint, get func(PlanPoint) float64, quotaPerMin float64, reads bool) (*int, bool) {
	for _, pt := range pts {
		if get(pt) >= 0.95*quotaPerMin || reads && (pt.Throttled > 0 || pt.ControllerErrors > 0) {
			n := pt.Nodes
			return &n, false
		}
	}
	if len(pts) < 2 {
		return nil, false
	}
	a, b := pts[len(pts)-2], pts[len(pts)-1]
	slope := (get(b) - get(a)) / float64(b.Nodes-a.Nodes)
	if slope <= 0 {
		return nil, false
	}
	n := b.Nodes + int(math.Ceil((0.95*quotaPerMin-get(b))/slope))
	return &n, true
}

// ReadsPerMinAt is the plan's prediction of the steady reads per minute at
// n nodes: the measured point at n, else per method the line through the
// two measured points nearest below n (extrapolated beyond the last), as
// runsOut extrapolates — except ListInstances, whose calls are refreshes
// times pages: its refreshes per minute do not depend on the node count
// (their mean over the points is taken) and a refresh costs
// ceil(n/ListPage) calls, a step a line through two points of one page
// would miss. ok is false with fewer than two points.
func (p *Plan) ReadsPerMinAt(n int) (v float64, ok bool) {
	pts := slices.Clone(p.Points)
	slices.SortFunc(pts, func(a, b PlanPoint) int { return a.Nodes - b.Nodes })
	for _, pt := range pts {
		if pt.Nodes == n {
			return pt.ReadsPerMin, true
		}
	}
	if len(pts) < 2 {
		return 0, false
	}
	i := len(pts) - 2
	for i > 0 && pts[i+1].Nodes > n {
		i--
	}
	a, b := pts[i], pts[i+1]
	line := func(get func(PlanPoint) float64) float64 {
		slope := (get(b) - get(a)) / float64(b.Nodes-a.Nodes)
		return get(b) + slope*float64(n-b.Nodes)
	}
	list := func(pt PlanPoint) float64 { return pt.CallsPerMin[simcloud.MethodListInstances] }
	v = line(func(pt PlanPoint) float64 { return pt.ReadsPerMin })
	if p.ListPage > 0 && list(b) > 0 {
		pages := func(nodes int) float64 { return math.Ceil(float64(nodes) / float64(p.ListPage)) }
		var refreshes float64
		for _, pt := range pts {
			refreshes += list(pt) / pages(pt.Nodes)
		}
		refreshes /= float64(len(pts))
		v += refreshes*pages(n) - line(list)
	}
	return v, true
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
	fmt.Fprintln(tw, "reads/min\tread headroom\twrites/min\twrite headroom\tthrottled\tcontroller errors\t")
	for _, pt := range p.Points {
		fmt.Fprintf(tw, "%d\t", pt.Nodes)
		for _, m := range ms {
			fmt.Fprintf(tw, "%.1f\t", pt.CallsPerMin[m])
		}
		fmt.Fprintf(tw, "%.1f\t%.0f%%\t%.1f\t%.0f%%\t%d\t%d\t\n", pt.ReadsPerMin, pt.ReadHeadroom*100, pt.WritesPerMin, pt.WriteHeadroom*100, pt.Throttled, pt.ControllerErrors)
	}
	tw.Flush()
	say := func(kind string, n *int, extra bool) {
		switch {
		case n == nil:
			fmt.Fprintf(w, "%s quota: does not run out within the sweep (its calls do not grow with the node count)\n", kind)
		case extra:
			fmt.Fprintf(w, "%s quota: runs out near %d nodes (extrapolated linearly from the last two points: measure there before you rely on it)\n", kind, *n)
		default:
			fmt.Fprintf(w, "%s quota: runs out at %d nodes (measured)\n", kind, *n)
		}
	}
	say("read", p.ReadRunsOutAt, p.Extrapolated)
	say("write", p.WriteRunsOutAt, p.WriteRunsOutAt != nil && *p.WriteRunsOutAt > p.Points[len(p.Points)-1].Nodes)
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
