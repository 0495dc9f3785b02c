package bench

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Plan answers "will my quota hold at N nodes?": the steady scenario at
// each node count with one cloudgate column (the user's cloudgate.yaml or
// the default policy) over an upstream that implements only what the
// user's provider implements, on a cloud profile's quota, and a forecast
// from it: the read quota needed in the steady state and during a K-node
// scale-up, the limit that binds, and the setting to change.
type Plan struct {
	Column string `json:"column"`
	// StatusPeriodSeconds is the CCM's --node-status-update-frequency.
	StatusPeriodSeconds float64 `json:"status_period_seconds"`
	Supports            string  `json:"upstream_supports"`
	Policy              string  `json:"policy"`
	// Cloud is the profile (CloudProfiles) the quota and pages come from.
	Cloud      string  `json:"cloud"`
	QuotaRead  float64 `json:"quota_read"`
	ReadBurst  int     `json:"quota_read_burst"`
	QuotaWrite float64 `json:"quota_write"`
	// ListQPS and ListBurst are the cloud's own bucket for list pages
	// (0: they share the read quota).
	ListQPS   float64 `json:"list_qps,omitempty"`
	ListBurst int     `json:"list_burst,omitempty"`
	Window    float64 `json:"window_seconds"`
	// ListPage is the simulated cloud's ListInstances page size: a list
	// refresh costs ceil(nodes/ListPage) calls.
	ListPage int `json:"list_page"`
	// MaxBatch is the cloud's largest batch lookup.
	MaxBatch int         `json:"max_batch"`
	Points   []PlanPoint `json:"points"`
	// ReadRunsOutAt is the first simulated node count where reads reach
	// the read quota (95 %), throttling starts or controllers see errors;
	// null when no simulated count does. Never extrapolated: a straight
	// line through two points overstated reads by 50-70 % (the status
	// loop's round grows with the sweep, the cache's with its TTL).
	ReadRunsOutAt  *int    `json:"read_runs_out_at"`
	WriteRunsOutAt *int    `json:"write_runs_out_at"`
	KubeQPS        float64 `json:"kube_qps"`
	KubeBurst      int     `json:"kube_burst"`
	NodeWorkers    int     `json:"node_workers"`
	// ScaleupNodes is the K of the scale-up forecast.
	ScaleupNodes int `json:"scaleup_nodes"`
}

// CloudProfile is a cloud's read quota and page sizes, as plan simulates
// them.
type CloudProfile struct {
	ReadQPS   float64
	ReadBurst int
	// ListQPS and ListBurst: a separate bucket for list pages (0: none).
	// The simulated cloud draws every read from one bucket; the plan checks
	// list pages against this one by arithmetic.
	ListQPS   float64
	ListBurst int
	ListPage  int
	MaxBatch  int
	// ListTrailingPage and LBSnapshot: the provider's own calls the
	// simulated upstream makes as well (simcloud.ClientConfig's fields of
	// those names).
	ListTrailingPage  bool
	ListTrailingEvery int
	LBSnapshot        time.Duration
	// ListAlive: the list leaves terminated instances out
	// (simcloud.ClientConfig.ListAlive).
	ListAlive bool
	// Terminates: an instance that leaves stays described, terminated
	// (simcloud.Server.TerminateInstance), as EC2 keeps it for about an
	// hour; otherwise it is deleted.
	Terminates bool
	// ProviderBatcher is how the provider alone (the bare columns) merges
	// its lookups by ID (zero: it does not).
	ProviderBatcher simcloud.IDBatcher
	// About says where the figures come from.
	About string
}

// CloudProfiles are plan's --cloud profiles.
var CloudProfiles = map[string]CloudProfile{
	"simcloud": {ReadQPS: 20, ReadBurst: 20, ListPage: simcloud.DefaultListPageSize, MaxBatch: simcloud.DefaultMaxBatchSize,
		About: "the load benchmark's simulated cloud: 20 reads/s (burst 20), pages of 500, batches of 500"},
	"aws": {ReadQPS: 20, ReadBurst: 100, ListQPS: 10, ListBurst: 50, ListPage: 1000, MaxBatch: 200,
		ListTrailingPage: true, ListTrailingEvery: 6, ListAlive: true, LBSnapshot: 10 * time.Minute, Terminates: true, ProviderBatcher: simcloud.AWSDescribeBatcher,
		About: "EC2's documented buckets (\"Request throttling for the Amazon EC2 API\"): non-mutating actions refill 20/s, bucket 100; " +
			"DescribeInstances without filters or pagination refill 10/s, bucket 50 (list pages are checked against it; the simulation draws them from the read bucket); " +
			"pages of 1,000 instances; batches of 200 IDs (cloudgate's aws-batch adapter: EC2 takes 200 filter values a request); " +
			"the list leaves terminated instances out, and its walk ends with one more page (the adapter's legacy-tag listing) on the first walk and every 6th after while that finds none; a load balancer's update lists every instance unless the last listing is under 10 minutes old and holds every backend (the AWS provider's describeAllInstancesCached); an instance that leaves stays described, terminated; the provider alone (bare columns) merges its lookups by ID as its describe-instance batcher does (100 ms idle, 1 s max, 500 IDs)"},
}

// ApplyCloud sets o's read quota, largest batch and list page from the
// named profile.
func ApplyCloud(o *Options, name string) (CloudProfile, error) {
	c, ok := CloudProfiles[name]
	if !ok {
		return c, fmt.Errorf("plan: --cloud %q: want one of %v", name, slices.Sorted(maps.Keys(CloudProfiles)))
	}
	o.ReadQPS, o.ReadBurst, o.CloudMaxBatch, o.CloudListPage = c.ReadQPS, c.ReadBurst, c.MaxBatch, c.ListPage
	o.CloudListTrailingPage, o.CloudListTrailingEvery, o.CloudListAlive = c.ListTrailingPage, c.ListTrailingEvery, c.ListAlive
	o.CloudLBSnapshot, o.CloudTerminates = c.LBSnapshot, c.Terminates
	o.CloudProviderBatcher = c.ProviderBatcher
	return c, nil
}

// The limits that can bind a plan point (PlanPoint.Binding).
const (
	// LimitQuota: the reads reach the read quota (95 %), or the cloud
	// throttles, or the controllers see errors, or list pages reach the
	// cloud's list bucket.
	LimitQuota = "read quota"
	// LimitWorkers: the status loop's sweep (N lookups over
	// --concurrent-node-syncs workers) takes at least the status period,
	// so more nodes lengthen the round instead of adding reads in
	// proportion.
	LimitWorkers = "node workers"
	// LimitList: ListInstances refreshes make most reads (one refresh per
	// listInterval, ceil(N/page) pages each).
	LimitList = "list refresh"
	// LimitLifecycle: the lifecycle controller's checks of NotReady Nodes
	// make most reads.
	LimitLifecycle = "lifecycle checks"
	// LimitRoutes: the route controller's ListRoutes make most reads.
	LimitRoutes = "route reconciliation"
	// LimitTTL: most status lookups are cache hits; each Node is read once
	// per InstanceMetadata TTL, not once per status round.
	LimitTTL = "cache TTL"
	// LimitPeriod: every status round reads every Node
	// (--node-status-update-frequency sets the reads).
	LimitPeriod = "status period"
)

// PlanPoint is one node count's steady state and forecast.
type PlanPoint struct {
	Nodes       int                `json:"nodes"`
	CallsPerMin map[string]float64 `json:"calls_per_min"`
	ReadsPerMin float64            `json:"reads_per_min"`
	// InstanceReadsPerHour are the instance lookups (one by one, batched,
	// list pages) per hour: what DescribeInstances carries on EC2.
	InstanceReadsPerHour float64 `json:"instance_reads_per_hour"`
	WritesPerMin         float64 `json:"writes_per_min"`
	ReadHeadroom         float64 `json:"read_headroom"`
	WriteHeadroom        float64 `json:"write_headroom"`
	Throttled            int64   `json:"throttled"` // read calls the cloud throttled
	ControllerErrors     int64   `json:"controller_errors"`
	// ReadsPerMinByPurpose splits ReadsPerMin by what the requests were
	// for (Purpose*), classified on the wire.
	ReadsPerMinByPurpose map[string]float64 `json:"reads_per_min_by_purpose"`
	// The status loop's pace (simulated): rounds per hour, mean sweep, and
	// the controllers' InstanceMetadata calls per minute.
	StatusRoundsPerHour *float64 `json:"status_rounds_per_hour"`
	SweepSeconds        *float64 `json:"sweep_seconds"`
	StatusCallsPerMin   float64  `json:"status_calls_per_min"`
	CacheHitRatio       *float64 `json:"cache_hit_ratio"`
	// NeedSteady is the read quota the steady state needs (reads/s, the
	// simulated mean).
	NeedSteady float64 `json:"need_reads_per_sec_steady"`
	// ScaleupSeconds is the least time K new Nodes take when the cloud is
	// not what holds them back (the kube client or the node workers);
	// ScaleupReads the least reads they add; NeedScaleup the read quota at
	// which the cloud cannot be the slower side (reads/s, steady included).
	ScaleupSeconds float64 `json:"scaleup_seconds"`
	ScaleupReads   float64 `json:"scaleup_reads"`
	NeedScaleup    float64 `json:"need_reads_per_sec_scaleup"`
	// Binding is the limit that sets the reads at this count (Limit*),
	// Why the simulated figures that show it, Setting the one setting to
	// change.
	Binding string `json:"binding"`
	Why     string `json:"why"`
	Setting string `json:"setting"`
}

// purposeShares names each purpose's reads per minute, largest first.
func purposeShares(pt *PlanPoint) string {
	var parts []string
	for _, p := range purposeOrder(pt) {
		parts = append(parts, fmt.Sprintf("%s %.1f", p, pt.ReadsPerMinByPurpose[p]))
	}
	return fmt.Sprintf("of %.1f reads/min: %s", pt.ReadsPerMin, strings.Join(parts, ", "))
}

// purposeOrder is pt's purposes, most reads first (ties by name).
func purposeOrder(pt *PlanPoint) []string {
	ps := slices.Sorted(maps.Keys(pt.ReadsPerMinByPurpose))
	slices.SortStableFunc(ps, func(a, b string) int {
		return cmp.Compare(pt.ReadsPerMinByPurpose[b], pt.ReadsPerMinByPurpose[a])
	})
	return ps
}

// binding names the limit that sets pt's reads, from its simulated
// figures, and the one setting to change: the quota first (the read
// bucket, then the cloud's list bucket), then the node workers, then the
// purpose that made most of the reads (status lookups: the cache's TTL or
// the status period).
func binding(pt *PlanPoint, p *Plan) (limit, why, setting string) {
	quota := p.QuotaRead * 60
	period := p.StatusPeriodSeconds
	if period == 0 {
		period = nodeStatusUpdateFrequency.Seconds()
	}
	periodD := durationOf(period)
	workers := max(1, p.NodeWorkers)
	listPerSec := pt.ReadsPerMinByPurpose[PurposeList] / 60
	if listPerSec == 0 {
		listPerSec = pt.CallsPerMin[simcloud.MethodListInstances] / 60
	}
	needQuota := fmt.Sprintf("the read quota: at least %.1f reads/s (steady %.1f; a %d-Node scale-up %.1f)",
		max(pt.NeedSteady, pt.NeedScaleup)/0.95, pt.NeedSteady, p.ScaleupNodes, pt.NeedScaleup)
	switch {
	case pt.Throttled > 0 || pt.ReadsPerMin >= 0.95*quota:
		return LimitQuota, fmt.Sprintf("reads %.0f/min = %.0f %% of the quota, %d throttled, %d controller errors", pt.ReadsPerMin, 100*pt.ReadsPerMin/quota, pt.Throttled, pt.ControllerErrors), needQuota
	case p.ListQPS > 0 && listPerSec >= 0.95*p.ListQPS:
		return LimitQuota, fmt.Sprintf("list pages %.2f/s = %.0f %% of the list bucket's %g/s", listPerSec, 100*listPerSec/p.ListQPS, p.ListQPS),
			"batch.listInterval: longer, so that ceil(N/page) pages per interval stay under the list bucket"
	}
	raise := func(sweep float64) string {
		w := int(math.Ceil(float64(workers) * sweep / (period / 2)))
		return fmt.Sprintf("--concurrent-node-syncs: from %d to %d (a sweep of about half the %v period at the simulated lookup rate; the status reads grow with the rounds)", workers, max(w, workers+1), periodD)
	}
	switch {
	case pt.SweepSeconds != nil && *pt.SweepSeconds >= period:
		return LimitWorkers, fmt.Sprintf("a status sweep takes %.0f s >= the %v period", *pt.SweepSeconds, periodD), raise(*pt.SweepSeconds)
	case pt.SweepSeconds == nil && pt.Nodes > 0 && pt.StatusCallsPerMin > 0 && float64(pt.Nodes)/(pt.StatusCallsPerMin/60) >= 2*period:
		// No sweep ended twice in the run (at 20,000 Nodes with 1 %
		// NotReady one sweep outlasts warm-up and window): a round of N
		// lookups at the measured rate is the sweep plus the period.
		round := float64(pt.Nodes) / (pt.StatusCallsPerMin / 60)
		return LimitWorkers, fmt.Sprintf("no status sweep ended twice in the run; at %.0f InstanceMetadata lookups/min a round of %d Nodes takes %.0f s, a sweep %.0f s >= the %v period",
			pt.StatusCallsPerMin, pt.Nodes, round, round-period, periodD), raise(round - period)
	}
	if order := purposeOrder(pt); len(order) > 0 && pt.ReadsPerMin > 0 {
		why := purposeShares(pt)
		switch order[0] {
		case PurposeList:
			return LimitList, why, "batch.listInterval (default half the InstanceMetadata TTL): longer for fewer list pages, at older answers"
		case PurposeLifecycle:
			return LimitLifecycle, why, "methods.InstanceExists.ttl and methods.InstanceShutdown.ttl (default 1m): longer for fewer checks of NotReady Nodes, at a later deletion of a removed one"
		case PurposeRoutes:
			return LimitRoutes, why, "methods.ListRoutes.ttl (default 1m): longer for fewer ListRoutes, at later route repairs"
		case PurposeStatus:
			if pt.CacheHitRatio != nil && *pt.CacheHitRatio >= 0.5 {
				return LimitTTL, fmt.Sprintf("%s; %.0f %% of the lookups are cache hits", why, 100**pt.CacheHitRatio), statusSetting(p)
			}
			return LimitPeriod, fmt.Sprintf("%s; %.0f InstanceMetadata lookups/min", why, pt.StatusCallsPerMin), statusSetting(p)
		}
	}
	switch {
	case pt.ReadsPerMin > 0 && pt.CallsPerMin[simcloud.MethodListInstances] >= 0.5*pt.ReadsPerMin:
		return LimitList, fmt.Sprintf("ListInstances makes %.0f %% of the reads", 100*pt.CallsPerMin[simcloud.MethodListInstances]/pt.ReadsPerMin), "batch.listInterval"
	case pt.CacheHitRatio != nil && *pt.CacheHitRatio >= 0.5:
		return LimitTTL, fmt.Sprintf("%.0f %% of the lookups are cache hits", 100**pt.CacheHitRatio), statusSetting(p)
	}
	return LimitPeriod, fmt.Sprintf("%.0f InstanceMetadata lookups/min, each a cloud read", pt.StatusCallsPerMin), statusSetting(p)
}

// statusSetting is the setting that cuts status lookups for p's column.
func statusSetting(p *Plan) string {
	if p.Supports == SupportsNone {
		return "methods.InstanceMetadata.ttl (default 10m): longer for fewer lookups, at older addresses; or a provider implementing BatchInstances / InstanceLister (--upstream-supports)"
	}
	return "methods.InstanceMetadata.ttl (default 10m): longer for fewer lookups, at older addresses"
}

// forecastScaleup fills pt's scale-up forecast: K new Nodes take at least
// the kube client's time (InitBound's kube side, the node controller's
// requests per Node counted) or the node workers' (one cloud round trip
// per Node per worker); the cloud is not the slower side when its quota
// covers the lookups beyond its burst in that time,
// max(0, L − S)/(T − RTT), with L = K lookups when the upstream cannot
// batch and ceil(K/B) when it can (the cloud's largest batch B: a lower
// bound, as in the load benchmark's init bound). The steady reads go on
// meanwhile.
func forecastScaleup(pt *PlanPoint, o *Options, k int, supports string) {
	if k <= 0 {
		pt.NeedScaleup = pt.NeedSteady
		return
	}
	rtt := o.Latency.Seconds()
	workers := max(1, o.NodeWorkers)
	kube := InitBound(o, k).Kube
	t := max(kube, math.Ceil(float64(k)/float64(workers))*rtt)
	lookups := float64(k)
	if supports != SupportsNone {
		lookups = math.Ceil(float64(k) / float64(o.CloudMaxBatch))
	}
	pt.ScaleupSeconds, pt.ScaleupReads = t, lookups
	pt.NeedScaleup = pt.NeedSteady + math.Max(0, lookups-float64(o.ReadBurst))/math.Max(t-rtt, rtt)
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

// PlanConfig is what a plan forecasts beyond the simulated steady state.
type PlanConfig struct {
	// Cloud names the profile (CloudProfiles) o's quota was set from:
	// its list bucket is checked by arithmetic. "" is "simcloud".
	Cloud string
	// ScaleupNodes is the K of the scale-up forecast (0: none).
	ScaleupNodes int
}

// RunPlan runs the steady scenario at every node count of nodes and
// forecasts from it.
func RunPlan(ctx context.Context, o *Options, nodes []int, cfg PlanConfig, progress io.Writer) (*Plan, error) {
	resetErrorBackoff() // as Run does: a controller error must not stall the bubble
	col := planColumn(o)
	o.Columns = []string{col}
	o.Scenarios = []string{ScenarioSteady}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("plan: --nodes: name at least one node count")
	}
	if cfg.Cloud == "" {
		cfg.Cloud = "simcloud"
	}
	profile, ok := CloudProfiles[cfg.Cloud]
	if !ok {
		return nil, fmt.Errorf("plan: --cloud %q: want one of %v", cfg.Cloud, slices.Sorted(maps.Keys(CloudProfiles)))
	}
	if cfg.ScaleupNodes < 0 {
		return nil, fmt.Errorf("plan: --scaleup-nodes must be >= 0, got %d", cfg.ScaleupNodes)
	}
	if progress == nil {
		progress = io.Discard
	}
	listPage := o.CloudListPage
	if listPage == 0 {
		listPage = simcloud.DefaultListPageSize
	}
	p := &Plan{Column: col, StatusPeriodSeconds: o.statusPeriod().Seconds(), Supports: o.upstreamSupports(col), Policy: policyString(o), Cloud: cfg.Cloud,
		QuotaRead: o.ReadQPS, ReadBurst: o.ReadBurst, QuotaWrite: o.WriteQPS, ListQPS: profile.ListQPS, ListBurst: profile.ListBurst,
		Window: o.SteadyWindow.Seconds(), ListPage: listPage, MaxBatch: o.CloudMaxBatch,
		KubeQPS: o.KubeQPS, KubeBurst: o.KubeBurst, NodeWorkers: max(1, o.NodeWorkers), ScaleupNodes: cfg.ScaleupNodes}
	for _, n := range slices.Sorted(slices.Values(nodes)) {
		res, err := runScenario(ctx, o, steadySpec(o, n, fmt.Sprintf("plan/%d", n)), progress)
		if err != nil {
			return nil, err
		}
		x := res.Columns[col]
		pt := PlanPoint{Nodes: n, CallsPerMin: map[string]float64{}, ReadsPerMinByPurpose: map[string]float64{},
			Throttled: readThrottled(x.ThrottledByMethod), ControllerErrors: x.ControllerErrors}
		for m, v := range x.Steady.CallsPerHourByMethod {
			pt.CallsPerMin[m] = v / 60
		}
		for k, v := range x.Steady.ReadsPerHourByPurpose {
			pt.ReadsPerMinByPurpose[k] = v / 60
		}
		pt.ReadsPerMin, pt.WritesPerMin = x.Steady.ReadsPerHour/60, x.Steady.WritesPerHour/60
		pt.InstanceReadsPerHour = InstanceReads(x.Steady.CallsPerHourByMethod)
		pt.ReadHeadroom = 1 - pt.ReadsPerMin/(o.ReadQPS*60)
		pt.WriteHeadroom = 1 - pt.WritesPerMin/(o.WriteQPS*60)
		pt.StatusRoundsPerHour, pt.SweepSeconds, pt.CacheHitRatio = x.StatusRoundsPerHour, x.SweepSeconds, x.Steady.CacheHitRatio
		pt.StatusCallsPerMin = x.Steady.StatusCallsPerHour / 60
		pt.NeedSteady = pt.ReadsPerMin / 60
		forecastScaleup(&pt, o, cfg.ScaleupNodes, p.Supports)
		pt.Binding, pt.Why, pt.Setting = binding(&pt, p)
		p.Points = append(p.Points, pt)
	}
	p.ReadRunsOutAt = runsOut(p.Points, func(pt PlanPoint) float64 { return pt.ReadsPerMin }, o.ReadQPS*60, true)
	p.WriteRunsOutAt = runsOut(p.Points, func(pt PlanPoint) float64 { return pt.WritesPerMin }, o.WriteQPS*60, false)
	return p, nil
}

// runsOut is the first simulated count at 95 % of the quota (or, for
// reads, with read throttling); nil when none is.
func runsOut(pts []PlanPoint, get func(PlanPoint) float64, quotaPerMin float64, reads bool) *int {
	for _, pt := range pts {
		if get(pt) >= 0.95*quotaPerMin || reads && pt.Throttled > 0 {
			n := pt.Nodes
			return &n
		}
	}
	return nil
}

// WriteTable prints the plan.
func (p *Plan) WriteTable(w io.Writer) {
	cloud := p.Cloud
	if cloud == "" {
		cloud = "simcloud"
	}
	fmt.Fprintf(w, "cloudgate-bench plan: cloud %s: read quota %g/s (burst %d, %g/min), write quota %g/s (%g/min)", cloud,
		p.QuotaRead, p.ReadBurst, p.QuotaRead*60, p.QuotaWrite, p.QuotaWrite*60)
	if p.ListQPS > 0 {
		fmt.Fprintf(w, ", list pages %g/s (burst %d)", p.ListQPS, p.ListBurst)
	}
	fmt.Fprintf(w, "; pages of %d, batches of %d\n", p.ListPage, p.MaxBatch)
	if c, ok := CloudProfiles[cloud]; ok {
		fmt.Fprintf(w, "cloud profile: %s\n", c.About)
	}
	fmt.Fprintf(w, "CCM: kube client %g QPS / burst %d, --concurrent-node-syncs %d; column %s, upstream implements %s\n",
		p.KubeQPS, p.KubeBurst, p.NodeWorkers, p.Column, p.Supports)
	fmt.Fprintf(w, "policy: %s\n", p.Policy)
	fmt.Fprintf(w, "steady state after the first full resync, %.0f simulated seconds per node count; calls per minute:\n", p.Window)
	methods := map[string]bool{}
	purposes := map[string]bool{}
	for _, pt := range p.Points {
		for m := range pt.CallsPerMin {
			methods[m] = true
		}
		for k := range pt.ReadsPerMinByPurpose {
			purposes[k] = true
		}
	}
	ms := slices.Sorted(maps.Keys(methods))
	ps := slices.Sorted(maps.Keys(purposes))
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
	if len(ps) > 0 {
		fmt.Fprintln(w, "reads per minute by what they were for (classified on the wire: lifecycle = lookups carrying only NotReady Nodes):")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "nodes\t")
		for _, k := range ps {
			fmt.Fprintf(tw, "%s\t", k)
		}
		fmt.Fprintln(tw)
		for _, pt := range p.Points {
			fmt.Fprintf(tw, "%d\t", pt.Nodes)
			for _, k := range ps {
				fmt.Fprintf(tw, "%.1f\t", pt.ReadsPerMinByPurpose[k])
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	fmt.Fprint(w, "instance lookups per hour (one by one, batched, list pages; on EC2 each is a DescribeInstances):")
	for _, pt := range p.Points {
		fmt.Fprintf(w, " %d nodes %.0f;", pt.Nodes, pt.InstanceReadsPerHour)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "read quota needed (reads/s): steady = the simulated mean; a %d-Node scale-up = steady + max(0, L - S)/(T - RTT), "+
		"L the least lookups (K, or ceil(K/B) when the upstream batches), S the burst, T the least time the kube client or the node workers allow:\n", p.ScaleupNodes)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "nodes\tsteady reads/s\tscale-up lookups\tscale-up s\tscale-up reads/s\tquota\t")
	for _, pt := range p.Points {
		fmt.Fprintf(tw, "%d\t%.2f\t%.0f\t%.1f\t%.2f\t%g\t\n", pt.Nodes, pt.NeedSteady, pt.ScaleupReads, pt.ScaleupSeconds, pt.NeedScaleup, p.QuotaRead)
	}
	tw.Flush()
	fmt.Fprintln(w, "binding limit at each count (from the simulated figures), and the setting to change:")
	for _, pt := range p.Points {
		fmt.Fprintf(w, "  %d nodes: %s (%s)\n    change: %s\n", pt.Nodes, pt.Binding, pt.Why, pt.Setting)
	}
	fmt.Fprintf(w, "kube client (%g QPS per controller): the steady status loop writes no Node that did not change; it binds scale-ups (3 requests per new node: at least 3K/%g s for K nodes)\n", p.KubeQPS, p.KubeQPS)
	if len(p.Points) == 0 {
		return
	}
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

func durationOf(seconds float64) time.Duration { return time.Duration(seconds * float64(time.Second)) }

// readThrottled counts the read calls the cloud throttled: a write's
// throttling (a load balancer update) says nothing of the read quota.
func readThrottled(by map[string]int64) int64 {
	var n int64
	for m, v := range by {
		switch m {
		case simcloud.MethodEnsureLoadBalancer, simcloud.MethodDeleteLoadBalancer, simcloud.MethodCreateRoute, simcloud.MethodDeleteRoute:
		default:
			n += v
		}
	}
	return n
}

// InstanceReads sums the instance lookups (one by one, batched, list pages)
// of calls by method: what DescribeInstances carries on EC2.
func InstanceReads(by map[string]float64) float64 {
	return by[simcloud.MethodGetInstance] + by[simcloud.MethodGetInstanceByName] + by[simcloud.MethodBatchGetInstances] + by[simcloud.MethodListInstances]
}
