package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/bench/virtual"
)

// The scale scenario (--scenario scale, not a default): the steady status
// sweep at each of ScaleNodes for every column, measured over whole status
// rounds rather than per hour (with one node worker a sweep of N nodes
// takes about N x 60 ms, 100 min at 100k). Each column starts with N
// initialised nodes; its first sweep (cold caches) is the warm-up; then
// enough whole rounds to cover ScaleWindow are measured, each a sweep plus the period
// the status loop sleeps after it, from just before one sweep starts to
// just before the one after the last measured starts. Every column
// measures the same number of rounds (from the bare model's round time),
// so they do equal work.

// The world: the node controller, whose status loop is measured, and the
// service controller with ScaleServices LB services (default 0); the
// route and node lifecycle controllers only with ScaleFullCCM (the
// lifecycle one also when nodes are NotReady). With every node Ready the
// lifecycle controller makes no cloud call, and the route controller one
// ListRoutes per 10 s whatever N; but both walk (and the lifecycle one
// deep-copies) every Node each period: at 20,000 nodes they took 65 % of
// the simulator's CPU (a pprof profile), growing as N per period, so as
// N^2 per sweep.

// scaleEdge is how long before a sweep's start a round's window edge is
// taken: the status loop starts its next sweep one period after the last
// answer of the previous one, so the edge is in the idle gap.
const scaleEdge = time.Millisecond

// scaleSettle is the simulated time left between two columns.
const scaleSettle = time.Minute

// ScaleReport is the scale scenario's result, one entry per node count.
type ScaleReport struct {
	// Conditions: the simulated cloud and the CCM defaults.
	Conditions string `json:"conditions"`
	Policy     string `json:"policy"`
	Seed       int64  `json:"seed"`
	// World is which controllers run.
	World    string        `json:"world"`
	Services int           `json:"services"`
	Window   float64       `json:"min_window_seconds"`
	Sizes    []ScaleResult `json:"sizes"`
}

// ScaleResult is one node count: every column's figures and what limits it.
type ScaleResult struct {
	Nodes    int     `json:"nodes"`
	NotReady int     `json:"not_ready"`
	Rounds   int     `json:"rounds_measured"`
	Model    float64 `json:"model_sweep_seconds"`
	// Columns in o.Columns order.
	Columns []ScaleSide `json:"columns"`
	// Limits names what limits this size, each with its figure.
	Limits []string `json:"limits"`
	// WallSeconds is the real time the size took (every column); LoadAvg
	// the 1/5/15-minute load averages at its start and end.
	WallSeconds float64 `json:"wall_seconds"`
	LoadAvg     string  `json:"load_avg"`
	// MaxRSSBytes is the process's peak resident set after this size.
	MaxRSSBytes int64 `json:"max_rss_bytes"`
}

// ScaleSide is one column at one node count.
type ScaleSide struct {
	Column string `json:"column"`
	// Over the measured rounds: every upstream call, the instance reads
	// among them (per-node gets, batches, list pages) and throttled answers.
	UpstreamCalls  int64 `json:"upstream_calls"`
	ReadCalls      int64 `json:"read_calls"`
	InstanceReads  int64 `json:"instance_reads"`
	Throttled      int64 `json:"throttled"`
	StatusLookups  int64 `json:"status_lookups"` // the controllers' InstanceMetadata calls
	ControllerCall int64 `json:"controller_calls"`
	// CallsByMethod splits UpstreamCalls by the simulated cloud's method:
	// with NotReady Nodes the lifecycle controller's checks are among them.
	CallsByMethod map[string]int64 `json:"upstream_calls_by_method,omitempty"`
	// Per round (a sweep and the period after it) and per hour of the
	// measured window.
	CallsPerRound float64 `json:"upstream_calls_per_round"`
	// Runs is how many times the column ran (--scale-repeats): the figures
	// are the median run's (by upstream calls), with every run's spread.
	// The node controller sweeps in the informer's map order, which Go
	// starts at a random point every sweep, so where a node's lookup may
	// or may not find its entry within the TTL (cloudgate:cache and
	// :batch from 5k nodes on) the counts vary from run to run; bare,
	// bare+client and a full list do not.
	Runs                  int     `json:"runs"`
	CallsPerRoundMin      float64 `json:"upstream_calls_per_round_min"`
	CallsPerRoundMax      float64 `json:"upstream_calls_per_round_max"`
	ReadsPerRoundMin      float64 `json:"instance_reads_per_round_min"`
	ReadsPerRoundMax      float64 `json:"instance_reads_per_round_max"`
	InstanceReadsPerRound float64 `json:"instance_reads_per_round"`
	CallsPerHour          float64 `json:"upstream_calls_per_hour"`
	RoundSeconds          float64 `json:"round_seconds"`
	SweepSeconds          float64 `json:"sweep_seconds"`
	RoundsPerHour         float64 `json:"rounds_per_hour"`
	QuotaUtilization      float64 `json:"read_quota_utilization"`
	// HeapBytes is the live heap (runtime/metrics /gc/heap/live:bytes
	// after runtime.GC) at the window's end minus the same once the
	// column's world was torn down and a simulated minute passed: the
	// simulated cloud, the fake cluster, the controllers, the recorder and
	// the provider under test. HeapPerNode is
	// (HeapBytes - bare's HeapBytes) / N: what the column's provider holds
	// beyond the bare client, per node (nil for bare or without bare).
	HeapBytes   int64    `json:"heap_bytes"`
	HeapPerNode *float64 `json:"heap_per_node_bytes,omitempty"`
	// CPUSeconds is the process's user+system CPU time (getrusage) over
	// the window: the whole simulation (controllers, fake API server,
	// simulated cloud, provider), machine-dependent, unlike the counts.
	CPUSeconds         float64  `json:"cpu_seconds"`
	CPUPerUpstreamCall *float64 `json:"cpu_per_upstream_call_seconds,omitempty"`
	CPUPerLookup       *float64 `json:"cpu_per_controller_call_seconds,omitempty"`
	// cloudgate's InstanceMetadata cache: entries at the window's end and
	// evictions over the window (nil for the bare columns).
	CacheEntries   *float64 `json:"metadata_cache_entries,omitempty"`
	CacheEvictions *float64 `json:"metadata_cache_evictions,omitempty"`
}

// scaleWorld describes the controllers the scale clusters run.
func scaleWorld(o *Options) string {
	if o.ScaleFullCCM {
		return "node, node lifecycle, route and service controllers (--scale-full-ccm)"
	}
	w := "node and service controllers; route and node lifecycle controllers off (--scale-full-ccm runs them"
	if o.NotReadyPct > 0 {
		w = "node, node lifecycle (NotReady nodes) and service controllers; route controller off (--scale-full-ccm runs it"
	}
	return w + "; with every node Ready they add only one ListRoutes per 10 s to the cloud calls)"
}

// scaleRounds is how many whole rounds are measured at n nodes: enough to
// cover o.ScaleWindow at the bare model's round time, at least one.
func scaleRounds(o *Options, n int) (rounds int, modelSweep float64) {
	_, sweep, _ := modelPace(o, n, o.NodeWorkers)
	round := nodeStatusUpdateFrequency.Seconds() + sweep
	return max(1, int(math.Ceil(o.ScaleWindow.Seconds()/round))), sweep
}

// RunScale runs the scale scenario: every column at every count of
// o.ScaleNodes, one seed (o.Seed). Like Run it must be called inside a
// synctest bubble.
func RunScale(ctx context.Context, o *Options, progress io.Writer) (*ScaleReport, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	resetErrorBackoff()
	rep := &ScaleReport{Conditions: scaleConditions(o), Policy: policyString(o), Seed: o.Seed, Services: o.ScaleServices, World: scaleWorld(o), Window: o.ScaleWindow.Seconds()}
	for _, n := range o.ScaleNodes {
		res, err := runScaleSize(ctx, o, n, progress)
		if err != nil {
			return nil, err
		}
		rep.Sizes = append(rep.Sizes, *res)
	}
	return rep, nil
}

func runScaleSize(ctx context.Context, o *Options, n int, progress io.Writer) (*ScaleResult, error) {
	rounds, model := scaleRounds(o, n)
	res := &ScaleResult{Nodes: n, NotReady: int(math.Round(float64(n) * o.NotReadyPct / 100)), Rounds: rounds, Model: model}
	wall0, load0 := virtual.RealNow(), loadAvg()
	var bareHeap *int64
	runs := map[string][]ScaleSide{}
	for r := 0; r < o.ScaleRepeats; r++ {
		for _, col := range o.Columns {
			side, err := runScaleColumn(ctx, o, res, col, progress)
			if err != nil {
				return nil, fmt.Errorf("scale/%d/%s (seed %d): %w", n, col, o.Seed, err)
			}
			// The torn-down world's goroutines end (informers, timers)
			// before the heap without it is taken.
			if err := waitEvery(ctx, scaleSettle, time.Hour, func() {}); err != nil {
				return nil, err
			}
			side.HeapBytes -= liveHeap()
			runs[col] = append(runs[col], side)
		}
	}
	for _, col := range o.Columns {
		side := medianScaleRun(runs[col])
		if col == ColBare {
			bareHeap = &side.HeapBytes
		}
		res.Columns = append(res.Columns, side)
	}
	for i := range res.Columns {
		if s := &res.Columns[i]; bareHeap != nil && s.Column != ColBare {
			v := float64(s.HeapBytes-*bareHeap) / float64(n)
			s.HeapPerNode = &v
		}
	}
	res.WallSeconds = virtual.RealNow().Sub(wall0).Seconds()
	res.LoadAvg = load0 + " -> " + loadAvg()
	res.MaxRSSBytes = maxRSS()
	if err := checkScalePace(o, res); err != nil {
		return nil, err
	}
	res.Limits = scaleLimits(o, res)
	return res, nil
}

// runScaleColumn builds column col's world at res.Nodes nodes, lets its
// first sweep warm up and measures res.Rounds whole status rounds.
func runScaleColumn(ctx context.Context, o *Options, res *ScaleResult, col string, progress io.Writer) (ScaleSide, error) {
	n := res.Nodes
	side := ScaleSide{Column: col}
	srv, err := newServer(o, o.Seed, 1, true)
	if err != nil {
		return side, err
	}
	defer srv.Close()
	const name = "kubernetes"
	column, err := NewColumn(o, col, srv, name)
	if err != nil {
		return side, err
	}
	defer column.Close()
	c, err := NewCluster(ClusterConfig{
		Name: name, Server: srv, Cloud: column.Cloud, TimeFactor: 1,
		NodeWorkers: o.NodeWorkers, ServiceWorkers: o.ServiceWorkers, KubeQPS: o.KubeQPS, KubeBurst: o.KubeBurst,
		NoRoutes: !o.ScaleFullCCM, NoLifecycle: !o.ScaleFullCCM && res.NotReady == 0,
	})
	if err != nil {
		return side, err
	}
	defer c.Stop()
	insts, err := c.AddNodes(n, true, o.ScaleFullCCM)
	if err != nil {
		return side, err
	}
	for k := 0; k < res.NotReady; k++ {
		if err := c.SetReady(insts[k*len(insts)/res.NotReady].NodeName, false); err != nil {
			return side, err
		}
	}
	if err := c.AddServices(o.ScaleServices); err != nil {
		return side, err
	}
	label := fmt.Sprintf("scale/%d/%s seed %d", n, col, o.Seed)
	fmt.Fprintf(progress, "%s: %d nodes, %d services, warm-up sweep + %d rounds (virtual time)\n", label, n, o.ScaleServices, res.Rounds)
	if err := c.Start(); err != nil {
		return side, err
	}
	start := time.Now()
	// The sweeps' InstanceMetadata calls end in order (sweep k is calls
	// [(k-1)N, kN)); a sweep that takes more than four times the model's
	// time plus two periods is an error, not a figure.
	limit := 2*nodeStatusUpdateFrequency + time.Duration(4*res.Model*float64(time.Second))
	edge := func(k int) (time.Time, error) { // just before sweep k+1 starts
		end, err := waitSweep(ctx, c.rec, n, k, limit, func() {
			cnt := srv.Counters()
			fmt.Fprintf(progress, "  %s: t=%.0fs, %d status lookups, %d upstream calls\n", label, time.Since(start).Seconds(), c.rec.count("InstanceMetadata"), cnt.TotalCalls())
		})
		if err != nil {
			return time.Time{}, err
		}
		at := end.Add(nodeStatusUpdateFrequency - scaleEdge)
		if d := time.Until(at); d > 0 {
			if err := waitEvery(ctx, d, time.Hour, func() {}); err != nil {
				return time.Time{}, err
			}
		}
		if c.rec.count("InstanceMetadata") != int64(k*n) {
			return time.Time{}, fmt.Errorf("sweep %d: %d status lookups at the next sweep's edge, want %d (%d per sweep)", k, c.rec.count("InstanceMetadata"), k*n, n)
		}
		return time.Now(), nil
	}
	if _, err := edge(1); err != nil {
		return side, err
	}
	a := scaleSnap(srv, c.rec, column.Registry)
	for k := 2; k <= res.Rounds+1; k++ {
		if _, err := edge(k); err != nil {
			return side, err
		}
	}
	b := scaleSnap(srv, c.rec, column.Registry)
	side.fill(o, n, res.Rounds, a, b, c.rec.statusCalls())
	side.HeapBytes = liveHeap() // minus the heap once torn down: runScaleSize
	return side, nil
}

// medianScaleRun is the run with the median upstream calls (the lower
// middle one of an even count), with every run's spread of calls and
// instance reads per round.
func medianScaleRun(rs []ScaleSide) ScaleSide {
	sorted := slices.Clone(rs)
	slices.SortStableFunc(sorted, func(a, b ScaleSide) int { return cmp.Compare(a.UpstreamCalls, b.UpstreamCalls) })
	m := sorted[(len(sorted)-1)/2]
	m.Runs = len(rs)
	m.CallsPerRoundMin, m.CallsPerRoundMax = sorted[0].CallsPerRound, sorted[len(sorted)-1].CallsPerRound
	m.ReadsPerRoundMin, m.ReadsPerRoundMax = m.InstanceReadsPerRound, m.InstanceReadsPerRound
	for _, r := range rs {
		m.ReadsPerRoundMin = min(m.ReadsPerRoundMin, r.InstanceReadsPerRound)
		m.ReadsPerRoundMax = max(m.ReadsPerRoundMax, r.InstanceReadsPerRound)
	}
	return m
}

// waitSweep polls (each simulated second) until the controllers made k*n
// InstanceMetadata calls and returns the last answer's time of sweep k.
func waitSweep(ctx context.Context, rec *recorder, n, k int, limit time.Duration, progress func()) (time.Time, error) {
	deadline := time.Now().Add(limit)
	lastPrint := time.Now()
	for rec.count("InstanceMetadata") < int64(k*n) {
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("sweep %d not done within %v (simulated): %d of %d status lookups", k, limit, rec.count("InstanceMetadata"), k*n)
		}
		if time.Since(lastPrint) >= 5*time.Minute {
			lastPrint = time.Now()
			progress()
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	calls := rec.statusCalls()
	var end time.Time
	for _, c := range calls[(k-1)*n : k*n] {
		if c.end.After(end) {
			end = c.end
		}
	}
	return end, nil
}

// scaleSnapshot is the counters at one round edge.
type scaleSnapshot struct {
	at               time.Time
	cnt              simcloud.Counters
	cpu              float64
	status, ctrl     int64
	entries, evicted float64
}

func scaleSnap(srv *simcloud.Server, rec *recorder, reg *prometheus.Registry) scaleSnapshot {
	s := scaleSnapshot{at: time.Now(), cnt: srv.Counters(), cpu: cpuSeconds(), status: rec.count("InstanceMetadata"), ctrl: rec.total()}
	if reg != nil {
		s.entries = metricSum(reg, "cloudgate_cache_entries", "InstanceMetadata")
		s.evicted = metricSum(reg, "cloudgate_cache_evictions_total", "InstanceMetadata")
	}
	return s
}

// instanceReadMethods are the simulated cloud's instance reads.
var instanceReadMethods = []string{simcloud.MethodGetInstance, simcloud.MethodGetInstanceByName, simcloud.MethodBatchGetInstances, simcloud.MethodListInstances}

func (s *ScaleSide) fill(o *Options, n, rounds int, a, b scaleSnapshot, status []statusCall) {
	s.UpstreamCalls = b.cnt.TotalCalls() - a.cnt.TotalCalls()
	s.ReadCalls = b.cnt.ReadCalls - a.cnt.ReadCalls
	for _, m := range instanceReadMethods {
		s.InstanceReads += b.cnt.Calls[m] - a.cnt.Calls[m]
	}
	s.CallsByMethod = map[string]int64{}
	for m, v := range b.cnt.Calls {
		if d := v - a.cnt.Calls[m]; d > 0 {
			s.CallsByMethod[m] = d
		}
	}
	s.Throttled = b.cnt.TotalThrottled() - a.cnt.TotalThrottled()
	s.StatusLookups, s.ControllerCall = b.status-a.status, b.ctrl-a.ctrl
	window := b.at.Sub(a.at).Seconds()
	s.RoundSeconds = window / float64(rounds)
	s.RoundsPerHour = 3600 / s.RoundSeconds
	s.CallsPerRound = float64(s.UpstreamCalls) / float64(rounds)
	s.InstanceReadsPerRound = float64(s.InstanceReads) / float64(rounds)
	s.CallsPerHour = float64(s.UpstreamCalls) / window * 3600
	s.QuotaUtilization = float64(s.ReadCalls) / window / o.ReadQPS
	var sum float64
	for k := 0; k < rounds; k++ { // sweeps 2 .. rounds+1
		var first, last time.Time
		for i, c := range status[(k+1)*n : (k+2)*n] {
			if i == 0 || c.start.Before(first) {
				first = c.start
			}
			if c.end.After(last) {
				last = c.end
			}
		}
		sum += last.Sub(first).Seconds()
	}
	s.SweepSeconds = sum / float64(rounds)
	s.CPUSeconds = b.cpu - a.cpu
	if s.UpstreamCalls > 0 {
		v := s.CPUSeconds / float64(s.UpstreamCalls)
		s.CPUPerUpstreamCall = &v
	}
	if s.ControllerCall > 0 {
		v := s.CPUSeconds / float64(s.ControllerCall)
		s.CPUPerLookup = &v
	}
	if s.Column != ColBare && s.Column != ColBareClient {
		e, ev := b.entries, b.evicted-a.evicted
		s.CacheEntries, s.CacheEvictions = &e, &ev
	}
}

// checkScalePace fails a size whose bare status rounds differ from a real
// CCM's (modelPace) by more than paceTolerance: equal work, as in steady.
func checkScalePace(o *Options, res *ScaleResult) error {
	rph, _, formula := modelPace(o, res.Nodes, o.NodeWorkers)
	for _, s := range res.Columns {
		if s.Column != ColBare {
			continue
		}
		if d := s.RoundsPerHour / rph; math.Abs(d-1) > paceTolerance {
			return fmt.Errorf("scale/%d: the bare CCM's status loop ran %.3f rounds/h, a real CCM's %s: off by %+.1f %% (> %.0f %%)",
				res.Nodes, s.RoundsPerHour, formula, (d-1)*100, paceTolerance*100)
		}
	}
	return nil
}

// scaleLimits names what limits a size, each with its figure.
func scaleLimits(o *Options, res *ScaleResult) []string {
	var out []string
	period := nodeStatusUpdateFrequency.Seconds()
	rph, sweep, _ := modelPace(o, res.Nodes, o.NodeWorkers)
	if sweep > period {
		out = append(out, fmt.Sprintf("status pace: one sweep of %d nodes with %d node worker(s) takes %.0f s (model) > the %v status period, so bare's rounds/h drop to %.2f (12 with an instant sweep); each node's status is refreshed every %.0f s",
			res.Nodes, o.NodeWorkers, sweep, nodeStatusUpdateFrequency, rph, period+sweep))
	} else {
		out = append(out, fmt.Sprintf("status pace: one sweep takes %.0f s (model) of the %v period: %.2f rounds/h", sweep, nodeStatusUpdateFrequency, rph))
	}
	if ttl := metadataTTL(o); ttl > 0 && period+sweep > ttl.Seconds() {
		out = append(out, fmt.Sprintf("cache TTL: a node's next lookup comes %.0f s after its last > the InstanceMetadata TTL %v: cloudgate:cache (no list) answers a steady lookup from its cache only if another caller asked in between",
			period+sweep, ttl))
	}
	if size := o.cacheSize(); size > 0 {
		// List prefetch stores every instance under its provider ID and
		// its node name: two entries per node.
		if 2*res.Nodes > size {
			out = append(out, fmt.Sprintf("cache size: list prefetch stores 2 entries per node (provider ID and name) = %d > cache.size %d: the LRU evicts listed answers before the sweep reads them; raise cache.size to >= %d",
				2*res.Nodes, size, 2*res.Nodes))
		} else {
			out = append(out, fmt.Sprintf("cache size: list prefetch needs 2 entries per node = %d of cache.size %d", 2*res.Nodes, size))
		}
	}
	for _, s := range res.Columns {
		if s.QuotaUtilization > 0.9 {
			out = append(out, fmt.Sprintf("read quota: %s uses %.0f %% of the read quota", s.Column, 100*s.QuotaUtilization))
		}
		if s.Throttled > 0 {
			out = append(out, fmt.Sprintf("throttling: %s got %d throttled answers over the window", s.Column, s.Throttled))
		}
	}
	out = append(out, fmt.Sprintf("simulator: peak RSS %.2f GB after this size (the process's, every column so far), %.0f s of real time for %d columns",
		float64(res.MaxRSSBytes)/1e9, res.WallSeconds, len(res.Columns)))
	return out
}

// policyColumn is the cloudgate column whose policy the limits quote:
// the user's (--config) or the default columns'.
func (o *Options) policyColumn() string {
	if o.ConfigFile != "" {
		return ColConfig
	}
	return ColCache
}

// metadataTTL is the InstanceMetadata TTL of the cloudgate columns.
func metadataTTL(o *Options) time.Duration {
	cfg, err := o.cloudgateConfig(o.policyColumn())
	if err != nil {
		return 0
	}
	if m, ok := cfg.Methods["InstanceMetadata"]; ok && m.TTL != nil {
		return m.TTL.Duration
	}
	return 0
}

// cacheSize is the cloudgate columns' cache.size.
func (o *Options) cacheSize() int {
	cfg, err := o.cloudgateConfig(o.policyColumn())
	if err != nil {
		return 0
	}
	return cfg.Cache.Size
}

// liveHeap is the heap marked live by a forced GC (runtime/metrics
// /gc/heap/live:bytes).
func liveHeap() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// cpuSeconds is the process's user+system CPU time so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// maxRSS is the process's peak resident set in bytes (Linux: ru_maxrss in KiB).
func maxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return int64(ru.Maxrss) * 1024
}

// loadAvg is /proc/loadavg's three load averages ("n/a" elsewhere).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// metricSum sums a cloudgate metric's values whose "cache" label is cache.
func metricSum(reg *prometheus.Registry, name, cache string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cache" && l.GetValue() == cache {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

// errScaleAlone: the scale scenario runs in a command of its own.
var errScaleAlone = errors.New("--scenario: scale runs alone (its sizes take many minutes): give --scenario scale by itself")
