package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudgate/cloudgate/bench/simcloud"
)

// Run runs every scenario of o, each with every column and seed, and
// returns the report. progress (may be nil) gets a line every few
// simulated minutes. Run must be called inside a synctest bubble (package
// bench/virtual): its clock is virtual.
func Run(ctx context.Context, o *Options, progress io.Writer) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	resetErrorBackoff()
	rep := newReport(o)
	for _, sc := range o.Scenarios {
		var specs []scenarioSpec
		switch sc {
		case ScenarioSweep:
			for _, n := range o.SweepNodes {
				specs = append(specs, steadySpec(o, n, fmt.Sprintf("sweep/%d", n)))
			}
		case ScenarioSteady:
			specs = append(specs, steadySpec(o, o.Nodes, ScenarioSteady))
		case ScenarioScaleup:
			specs = append(specs, scaleupSpec(o, o.NodeWorkers, ScenarioScaleup))
		case ScenarioStress:
			specs = append(specs, scaleupSpec(o, o.StressWorkers, ScenarioStress))
		case ScenarioChurn:
			specs = append(specs, churnSpec(o))
		case ScenarioChaos:
			specs = append(specs, chaosSpec(o))
		case ScenarioChaosZone:
			specs = append(specs, chaosZoneSpec(o))
		}
		for _, spec := range specs {
			o.Meter.begin(spec.name, o.Seeds*len(o.Columns))
			res, err := runScenario(ctx, o, spec, progress)
			if err != nil {
				return nil, err
			}
			rep.Scenarios = append(rep.Scenarios, *res)
		}
	}
	return rep, nil
}

// scenarioSpec is one scenario: its shape and how one column runs it.
type scenarioSpec struct {
	name, label            string
	nodes, services, notRd int
	workers                int
	initBound, quiesBound  *Bound
	steady                 *Bound
	pace                   *PaceModel
	run                    func(ctx context.Context, r *colRun) error
}

// colRun is one column of one scenario with one seed.
type colRun struct {
	o        *Options
	spec     *scenarioSpec
	col      *Column
	srv      *simcloud.Server
	c        *Cluster
	w        *initWatch
	samp     *sampler
	progress io.Writer
	label    string
	start    time.Time
	side     Side
	// shadowBase: the shadow column's predicted calls when the cloud's
	// counters were reset (scaleup); shadowMu guards it: the sampler's
	// goroutine reads it while the scenario sets it.
	shadowMu   sync.Mutex
	shadowBase float64
}

// setShadowBase records the shadow column's predicted calls at a reset.
func (r *colRun) setShadowBase(v float64) {
	r.shadowMu.Lock()
	defer r.shadowMu.Unlock()
	r.shadowBase = v
}

// shadowSince is the shadow column's predicted calls since the last reset.
func (r *colRun) shadowSince() float64 {
	r.shadowMu.Lock()
	defer r.shadowMu.Unlock()
	return shadowCalls(r.col.Registry) - r.shadowBase
}

// simSince is the (virtual) time since t in seconds.
func (r *colRun) simSince(t time.Time) float64 { return time.Since(t).Seconds() }

func runScenario(ctx context.Context, o *Options, spec scenarioSpec, progress io.Writer) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Scenario: spec.name, Label: spec.label, Nodes: spec.nodes, Services: spec.services, NotReady: spec.notRd,
		NodeWorkers: spec.workers, BatchSize: o.CloudMaxBatch,
		InitBound: spec.initBound, QuiesceBound: spec.quiesBound, SteadyFloor: spec.steady, PaceModel: spec.pace,
		Columns: map[string]Side{}, runs: map[string][]Side{},
	}
	if spec.initBound != nil {
		v := spec.initBound.Seconds
		res.LimitSeconds = &v
	}
	for i := 0; i < o.Seeds; i++ {
		seed := o.Seed + int64(i)
		for _, col := range o.Columns {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			s, err := runColumn(ctx, o, &spec, col, seed, progress)
			if err != nil {
				return nil, fmt.Errorf("%s/%s (seed %d): %w", spec.name, col, seed, err)
			}
			res.runs[col] = append(res.runs[col], s)
			o.Meter.step(fmt.Sprintf("%s seed %d", col, seed))
		}
	}
	if err := checkPace(res); err != nil {
		return nil, err
	}
	if spec.initBound != nil {
		res.boundFromCounters(o, spec.nodes)
	}
	res.aggregate(o)
	return res, nil
}

// newServer is a simulated cloud account; f compresses time (the fleet's
// real-time runs; 1 in virtual time, where inMemory must be set).
func newServer(o *Options, seed int64, f float64, inMemory bool) (*simcloud.Server, error) {
	return simcloud.NewServer(simcloud.ServerConfig{
		Seed:         seed,
		InMemory:     inMemory,
		ReadQPS:      o.ReadQPS * f,
		ReadBurst:    o.ReadBurst,
		WriteQPS:     o.WriteQPS * f,
		WriteBurst:   o.WriteBurst,
		MaxBatchSize: o.CloudMaxBatch,
		ListPageSize: o.CloudListPage,
		BaseLatency:  scale(o.Latency, f),
		Jitter:       scale(o.Jitter, f),
		// An injected hang lasts until the client's timeout ends it.
		HangTimeout: clientTimeoutAt(f) + time.Second,
	})
}

// runColumn runs one column of a scenario on a fresh simulated cloud.
func runColumn(ctx context.Context, o *Options, spec *scenarioSpec, col string, seed int64, progress io.Writer) (Side, error) {
	srv, err := newServer(o, seed, 1, true)
	if err != nil {
		return Side{}, err
	}
	defer srv.Close()
	const name = "kubernetes"
	column, err := NewColumn(o, col, srv, name)
	if err != nil {
		return Side{}, err
	}
	defer column.Close()
	c, err := NewCluster(ClusterConfig{
		Name: name, Server: srv, Cloud: column.Cloud, TimeFactor: 1,
		NodeWorkers: spec.workers, ServiceWorkers: o.ServiceWorkers, KubeQPS: o.KubeQPS, KubeBurst: o.KubeBurst,
		NoRoutes: o.NoRoutes, StatusPeriod: o.StatusPeriod,
	})
	if err != nil {
		return Side{}, err
	}
	defer c.Stop()
	r := &colRun{
		o: o, spec: spec, col: column, srv: srv, c: c, w: newInitWatch(), progress: progress,
		label: fmt.Sprintf("%s/%s seed %d", spec.name, col, seed),
	}
	r.side.Seed = seed // the zone variant's draws are seeded by it
	fmt.Fprintf(progress, "%s: %d nodes, %d services (virtual time)\n", r.label, spec.nodes, spec.services)
	if err := spec.run(ctx, r); err != nil {
		return Side{}, err
	}
	if r.samp != nil {
		r.samp.stop()
		r.side.Series = r.samp.series()
	}
	r.side.Seeds = 1
	r.side.Seed = seed
	return r.side, nil
}

// startCluster starts the controllers with the init watch and the sampler.
func (r *colRun) startCluster(handlers ...cache.ResourceEventHandler) error {
	if err := r.c.Start(append(handlers, r.w.handler())...); err != nil {
		return err
	}
	r.start = time.Now()
	r.samp = newSampler(r)
	return nil
}

// startThenServices starts the controllers, lets them settle on the
// Nodes already there (a virtual millisecond: the clock moves only once
// every goroutine is blocked), then creates m LB services. Services made
// before the start raced the service controller's first node sync at the
// same instant: a service cached by the service worker but not yet synced
// (its finalizer being added) looked to the node worker as synced with no
// Nodes, and got an UpdateLoadBalancer of its own now and then (steady
// cloudgate:list 20 or 21 writes at 20 services, seed 7).
func (r *colRun) startThenServices(ctx context.Context, m int) error {
	if err := r.startCluster(); err != nil {
		return err
	}
	if err := r.sleep(ctx, time.Millisecond); err != nil {
		return err
	}
	return r.c.AddServices(m)
}

// fill puts the counters and recorder figures into r.side.
func (r *colRun) fill() {
	cnt := r.srv.Counters()
	rec := r.c.rec.snapshot()
	s := &r.side
	s.UpstreamCalls, s.ReadCalls, s.WriteCalls = cnt.TotalCalls(), cnt.ReadCalls, cnt.WriteCalls
	s.CallsByMethod, s.Throttled, s.ThrottledByMethod = cnt.Calls, cnt.TotalThrottled(), cnt.Throttled
	s.P50Ms, s.P99Ms = ms(rec.P50), ms(rec.P99)
	s.P50SimMs = s.P50Ms
	batches := cnt.Calls[simcloud.MethodBatchGetInstances] - cnt.Throttled[simcloud.MethodBatchGetInstances] -
		cnt.Errors[simcloud.MethodBatchGetInstances] - cnt.ClientErrors[simcloud.MethodBatchGetInstances]
	s.NodesPerBatch = nil
	if batches > 0 {
		v := float64(cnt.BatchItems) / float64(batches)
		s.NodesPerBatch = &v
	}
	s.NodeLookups = rec.Calls["InstanceMetadata"] + rec.Calls["InstanceExists"] + rec.Calls["InstanceShutdown"]
	s.ControllerCalls, s.ControllerErrors = 0, 0
	for _, v := range rec.Calls {
		s.ControllerCalls += v
	}
	for _, v := range rec.Errors {
		s.ControllerErrors += v
	}
	s.GuardHolds = rec.Holds
	s.CallsPerLookup = perCall(s.UpstreamCalls, s.ControllerCalls)
	if r.col.Registry != nil {
		s.CacheHitRatio = hitRatio(r.col.Registry)
		s.ShadowCalls = r.shadowSince()
	}
}

// sleep waits d or until ctx ends, printing progress every 5 minutes.
func (r *colRun) sleep(ctx context.Context, d time.Duration) error {
	return waitEvery(ctx, d, 5*time.Minute, func() {
		cnt := r.srv.Counters()
		fmt.Fprintf(r.progress, "  %s: t=%.0fs, %d upstream calls, %d throttled\n", r.label, r.simSince(r.start), cnt.TotalCalls(), cnt.TotalThrottled())
	})
}

// waitQuiescent polls the cluster until every condition holds or limit
// (simulated, from `from`) passes, recording the first time each condition
// held in r.side.TimeTo (seconds since from). It reports whether it got there.
func (r *colRun) waitQuiescent(ctx context.Context, from time.Time, limit time.Duration) (bool, error) {
	if r.side.TimeTo == nil {
		r.side.TimeTo = map[string]*float64{}
	}
	deadline := from.Add(limit)
	lastPrint := time.Now()
	mark := func(key string, ok bool) {
		if _, seen := r.side.TimeTo[key]; ok && !seen {
			v := time.Since(from).Seconds()
			r.side.TimeTo[key] = &v
		}
	}
	for {
		q, err := r.c.Quiescence()
		if err != nil {
			return false, err
		}
		mark("nodes_initialized", q.NodesInitialized)
		mark("lbs_current", q.LBsCurrent)
		mark("routes_match", q.RoutesMatch)
		mark("nodes_gone", q.NodesGone)
		if q.All() {
			mark("quiescent", true)
			v := *r.side.TimeTo["quiescent"]
			r.side.QuiesceSeconds = &v
			return true, nil
		}
		if time.Now().After(deadline) {
			for _, k := range []string{"nodes_initialized", "lbs_current", "routes_match", "nodes_gone", "quiescent"} {
				if _, seen := r.side.TimeTo[k]; !seen {
					r.side.TimeTo[k] = nil
				}
			}
			fmt.Fprintf(r.progress, "  %s: not quiescent after %v simulated (%+v)\n", r.label, limit, q)
			return false, nil
		}
		if time.Since(lastPrint) > time.Minute {
			lastPrint = time.Now()
			n, of, _ := r.w.done()
			cnt := r.srv.Counters()
			fmt.Fprintf(r.progress, "  %s: t=%.0fs, %d/%d initialized, %+v, %d upstream calls, %d throttled\n",
				r.label, time.Since(from).Seconds(), n, of, q, cnt.TotalCalls(), cnt.TotalThrottled())
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(quiescencePoll):
		}
	}
}

// settleQuiet is how long the controllers must have made no write, with
// none in flight, for settle to end: longer than the gap between two
// writes of one of the service controller's node-sync rounds (one per LB
// service, paced by the write limit: 0.22 s at cloudgate's 4.5/s).
const settleQuiet = 2 * time.Second

// settle waits, after quiescence, until the controllers' writes have ended:
// no write in flight and none ended for settleQuiet, or until deadline.
// Reads are not waited for: a status sweep under way (a read every round
// trip for minutes) would hold it open.
// The counts then hold every call the change caused, not a cut through
// the service controller's last node-sync round. That round (v0.37.2
// rewrites every LB whose last synced Nodes' provider IDs changed, one
// service after another in Go map order) is often under way at
// quiescence: the run would end after as many of its writes as came
// before the one LB quiescence waited for, a random position (scaleup
// cloudgate:cache at 20 services, seed 7: 620, 621, 630 and 631 calls in
// four idle runs; 633 in each after settle).
func (r *colRun) settle(ctx context.Context, deadline time.Time) error {
	for time.Now().Before(deadline) {
		if r.c.rec.writesInProgress() == 0 && r.c.rec.sinceLastWrite() >= settleQuiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quiescencePoll):
		}
	}
	return nil
}

// boundFromCounters sets the init and quiescence bounds from the node
// controller's kube requests per node counted in every run, and each
// run's measured/bound.
func (res *ScenarioResult) boundFromCounters(o *Options, k int) {
	init := initBoundMeasured(o, k, res.NodeWorkers, perNodeRequests(res.runs, k))
	quies := quiesceBound(o, k, res.Services, init)
	res.InitBound, res.QuiesceBound = init, quies
	v := init.Seconds
	res.LimitSeconds = &v
	for _, runs := range res.runs {
		for i := range runs {
			x := &runs[i]
			x.OverBound, x.QuiesceOverBound = nil, nil
			if x.InitSeconds != nil {
				v := *x.InitSeconds / init.Seconds
				x.OverBound = &v
			}
			if x.QuiesceSeconds != nil {
				v := *x.QuiesceSeconds / quies.Seconds
				x.QuiesceOverBound = &v
			}
		}
	}
}

// counterSnap is the cloud's counters and cloudgate's cache figures at one
// moment.
type counterSnap struct {
	at          time.Time
	cnt         simcloud.Counters
	hits, total float64
	statusCalls int64 // InstanceMetadata calls the controllers made
	// controllerCalls are all the controllers' calls.
	controllerCalls int64
	shadowCalls     float64
	// purposes are the reads sent so far, by purpose.
	purposes map[string]int64
}

func (r *colRun) snapshot() counterSnap {
	s := counterSnap{at: time.Now(), cnt: r.srv.Counters(), statusCalls: r.c.rec.count("InstanceMetadata"), controllerCalls: r.c.rec.total(), purposes: r.col.Wire.purposes.snapshot()}
	if r.col.Registry != nil {
		s.hits, s.total = cacheCounts(r.col.Registry)
		s.shadowCalls = r.shadowSince()
	}
	return s
}

// steadyFigures are the calls between a and b, per simulated hour.
func steadyFigures(a, b counterSnap, window time.Duration, readQPS float64) *Steady {
	h := window.Hours()
	st := &Steady{WindowSeconds: window.Seconds(), CallsPerHourByMethod: map[string]float64{}}
	st.ReadsPerHour = float64(b.cnt.ReadCalls-a.cnt.ReadCalls) / h
	st.WritesPerHour = float64(b.cnt.WriteCalls-a.cnt.WriteCalls) / h
	st.ThrottledPerHour = float64(b.cnt.TotalThrottled()-a.cnt.TotalThrottled()) / h
	for m, v := range b.cnt.Calls {
		if d := v - a.cnt.Calls[m]; d > 0 {
			st.CallsPerHourByMethod[m] = float64(d) / h
		}
	}
	st.QuotaUtilization = st.ReadsPerHour / 3600 / readQPS
	st.StatusCallsPerHour = float64(b.statusCalls-a.statusCalls) / h
	for p, v := range b.purposes {
		if d := v - a.purposes[p]; d > 0 {
			if st.ReadsPerHourByPurpose == nil {
				st.ReadsPerHourByPurpose = map[string]float64{}
			}
			st.ReadsPerHourByPurpose[p] = float64(d) / h
		}
	}
	if t := b.total - a.total; t > 0 {
		v := (b.hits - a.hits) / t
		st.CacheHitRatio = &v
	}
	return st
}

// initWatch records when watched nodes are initialised: the uninitialized
// taint gone and the addresses set.
type initWatch struct {
	mu      sync.Mutex
	created map[string]time.Time
	took    map[string]time.Duration
}

func newInitWatch() *initWatch {
	return &initWatch{created: map[string]time.Time{}, took: map[string]time.Duration{}}
}

func (w *initWatch) expect(name string, at time.Time) {
	w.mu.Lock()
	w.created[name] = at
	w.mu.Unlock()
}

func (w *initWatch) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		o, ok1 := oldObj.(*v1.Node)
		n, ok2 := newObj.(*v1.Node)
		if !ok1 || !ok2 || initialized(o) || !initialized(n) {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if at, ok := w.created[n.Name]; ok {
			if _, done := w.took[n.Name]; !done {
				w.took[n.Name] = now.Sub(at)
			}
		}
	}}
}

// done returns how many watched nodes were initialised and the slowest
// one's time, in real time.
func (w *initWatch) done() (n, of int, slowest time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.took {
		slowest = max(slowest, d)
	}
	return len(w.took), len(w.created), slowest
}

// initialized counts the watched nodes that are initialised now, from the
// API server (the informer may fold a node's update into its add).
func (w *initWatch) initialized(c *Cluster) int {
	w.mu.Lock()
	names := make([]string, 0, len(w.created))
	for n := range w.created {
		names = append(names, n)
	}
	w.mu.Unlock()
	return c.countInitialized(names)
}

// perCall is upstream calls per controller call (nil without calls).
func perCall(upstream, controller int64) *float64 {
	if controller == 0 {
		return nil
	}
	v := float64(upstream) / float64(controller)
	return &v
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cacheCounts sums cloudgate's cache hits (fresh and negative) and all
// lookups (hits + misses).
func cacheCounts(reg *prometheus.Registry) (hits, total float64) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, 0
	}
	var misses float64
	for _, mf := range mfs {
		sum := 0.0
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
		switch mf.GetName() {
		case "cloudgate_cache_hits_total", "cloudgate_cache_negative_hits_total":
			hits += sum
		case "cloudgate_cache_misses_total":
			misses += sum
		}
	}
	return hits, hits + misses
}

// hitRatio is (hits + negative hits) / (hits + negative hits + misses)
// over every cloudgate cache.
func hitRatio(reg *prometheus.Registry) *float64 {
	hits, total := cacheCounts(reg)
	if total == 0 {
		return nil
	}
	r := hits / total
	return &r
}
