package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudgate/cloudgate/bench/simcloud"
)

// Run runs every scenario of o, each with every column and seed, and
// returns the report. progress (may be nil) gets a line every few seconds.
func Run(ctx context.Context, o *Options, progress io.Writer) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
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
		}
		for _, spec := range specs {
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
	f                      float64
	workers                int
	initBound, quiesBound  *Bound
	steady                 *Bound
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
	// counters were reset (scaleup).
	shadowBase float64
}

// sim converts a real duration since the run's start into simulated seconds.
func (r *colRun) simSince(t time.Time) float64 { return time.Since(t).Seconds() * r.spec.f }

// real converts a simulated duration to real time.
func (r *colRun) real(d time.Duration) time.Duration { return scale(d, r.spec.f) }

func runScenario(ctx context.Context, o *Options, spec scenarioSpec, progress io.Writer) (*ScenarioResult, error) {
	res := &ScenarioResult{
		Scenario: spec.name, Label: spec.label, Nodes: spec.nodes, Services: spec.services, NotReady: spec.notRd,
		TimeFactor: spec.f, NodeWorkers: spec.workers, BatchSize: o.CloudMaxBatch,
		InitBound: spec.initBound, QuiesceBound: spec.quiesBound, SteadyFloor: spec.steady,
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
		}
	}
	res.aggregate(o)
	return res, nil
}

func newServer(o *Options, seed int64, f float64) (*simcloud.Server, error) {
	return simcloud.NewServer(simcloud.ServerConfig{
		Seed:         seed,
		InMemory:     o.InMemory,
		ReadQPS:      o.ReadQPS * f,
		ReadBurst:    o.ReadBurst,
		WriteQPS:     o.WriteQPS * f,
		WriteBurst:   o.WriteBurst,
		MaxBatchSize: o.CloudMaxBatch,
		BaseLatency:  scale(o.Latency, f),
		Jitter:       scale(o.Jitter, f),
		// An injected hang lasts until the client's timeout ends it.
		HangTimeout: clientTimeout(f) + time.Second,
	})
}

// runColumn runs one column of a scenario on a fresh simulated cloud.
func runColumn(ctx context.Context, o *Options, spec *scenarioSpec, col string, seed int64, progress io.Writer) (Side, error) {
	srv, err := newServer(o, seed, spec.f)
	if err != nil {
		return Side{}, err
	}
	defer srv.Close()
	const name = "kubernetes"
	column, err := NewColumn(o, col, srv, name, spec.f)
	if err != nil {
		return Side{}, err
	}
	defer column.Close()
	c, err := NewCluster(ClusterConfig{
		Name: name, Server: srv, Cloud: column.Cloud, TimeFactor: spec.f,
		NodeWorkers: spec.workers, ServiceWorkers: o.ServiceWorkers, KubeQPS: o.KubeQPS, KubeBurst: o.KubeBurst,
	})
	if err != nil {
		return Side{}, err
	}
	defer c.Stop()
	r := &colRun{
		o: o, spec: spec, col: column, srv: srv, c: c, w: newInitWatch(), progress: progress,
		label: fmt.Sprintf("%s/%s seed %d", spec.name, col, seed),
	}
	fmt.Fprintf(progress, "%s: %d nodes, %d services (time x%g)\n", r.label, spec.nodes, spec.services, spec.f)
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

// fill puts the counters and recorder figures into r.side.
func (r *colRun) fill() {
	cnt := r.srv.Counters()
	rec := r.c.rec.snapshot()
	s := &r.side
	s.UpstreamCalls, s.ReadCalls, s.WriteCalls = cnt.TotalCalls(), cnt.ReadCalls, cnt.WriteCalls
	s.CallsByMethod, s.Throttled, s.ThrottledByMethod = cnt.Calls, cnt.TotalThrottled(), cnt.Throttled
	s.P50Ms, s.P99Ms = ms(rec.P50), ms(rec.P99)
	s.P50SimMs = s.P50Ms * r.spec.f
	s.ControllerCalls, s.ControllerErrors = 0, 0
	for _, v := range rec.Calls {
		s.ControllerCalls += v
	}
	for _, v := range rec.Errors {
		s.ControllerErrors += v
	}
	if r.col.Registry != nil {
		s.CacheHitRatio = hitRatio(r.col.Registry)
		s.ShadowCalls = shadowCalls(r.col.Registry) - r.shadowBase
	}
}

// sleep waits d (simulated) or until ctx ends, printing progress every 5 s.
func (r *colRun) sleep(ctx context.Context, d time.Duration) error {
	return Wait(ctx, r.real(d), func() {
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
	deadline := from.Add(r.real(limit))
	lastPrint := time.Now()
	mark := func(key string, ok bool) {
		if _, seen := r.side.TimeTo[key]; ok && !seen {
			v := time.Since(from).Seconds() * r.spec.f
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
		if time.Since(lastPrint) > 5*time.Second {
			lastPrint = time.Now()
			n, of, _ := r.w.done()
			cnt := r.srv.Counters()
			fmt.Fprintf(r.progress, "  %s: t=%.0fs, %d/%d initialized, %+v, %d upstream calls, %d throttled\n",
				r.label, time.Since(from).Seconds()*r.spec.f, n, of, q, cnt.TotalCalls(), cnt.TotalThrottled())
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// steadySpec: N initialised nodes with their routes, NotReadyPct of them
// NotReady (instances alive), M services; after the first full resync (one
// status period + 1 min) the calls of SteadyWindow are counted.
func steadySpec(o *Options, n int, name string) scenarioSpec {
	notReady := int(math.Round(float64(n) * o.NotReadyPct / 100))
	spec := scenarioSpec{
		name: name, nodes: n, services: o.Services, notRd: notReady, f: o.TimeFactor, workers: o.NodeWorkers,
		label: fmt.Sprintf("%d nodes (%d NotReady), %d LB services; steady window %v after a %v warm-up", n, notReady, o.Services, o.SteadyWindow, steadyWarmup),
	}
	spec.steady = steadyFloor(o, n)
	spec.run = func(ctx context.Context, r *colRun) error {
		insts, err := r.c.AddNodes(n, true, true)
		if err != nil {
			return err
		}
		for k := 0; k < notReady; k++ {
			if err := r.c.SetReady(insts[k*len(insts)/notReady].NodeName, false); err != nil {
				return err
			}
		}
		if err := r.c.AddServices(o.Services); err != nil {
			return err
		}
		if err := r.startCluster(); err != nil {
			return err
		}
		if err := r.sleep(ctx, steadyWarmup); err != nil {
			return err
		}
		a := r.snapshot()
		if err := r.sleep(ctx, o.SteadyWindow); err != nil {
			return err
		}
		b := r.snapshot()
		r.fill()
		r.side.Steady = steadyFigures(a, b, o.SteadyWindow, o.ReadQPS)
		r.side.QuotaUtilization = &r.side.Steady.QuotaUtilization
		r.side.SimSeconds = r.simSince(r.start)
		return nil
	}
	return spec
}

// steadyWarmup is the first full resync: one status period plus a minute.
const steadyWarmup = nodeStatusUpdateFrequency + time.Minute

// scaleupSpec: M services with their load balancers, then K nodes arrive
// at once with the uninitialized taint and pod CIDRs (their instances
// exist); every column runs until quiescence or QuiesceTimeout.
func scaleupSpec(o *Options, workers int, name string) scenarioSpec {
	k := o.ScaleupNodes
	spec := scenarioSpec{
		name: name, nodes: k, services: o.Services, f: o.ScaleupTimeFactor, workers: workers,
		label: fmt.Sprintf("%d nodes arrive at once, %d LB services, --concurrent-node-syncs %d", k, o.Services, workers),
	}
	if name == ScenarioStress {
		spec.label += " (stress case, not a CCM default)"
	}
	spec.initBound = initBound(o, k)
	spec.quiesBound = quiesceBound(o, k, o.Services, spec.initBound)
	spec.run = func(ctx context.Context, r *colRun) error {
		if err := r.c.AddServices(o.Services); err != nil {
			return err
		}
		if err := r.startCluster(); err != nil {
			return err
		}
		// The load balancers first, then a settled cloud bucket.
		if ok, err := r.waitQuiescent(ctx, time.Now(), 10*time.Minute); err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("the %d load balancers were not created within 10 minutes (simulated)", o.Services)
			}
			return err
		}
		if err := r.sleep(ctx, 5*time.Second); err != nil {
			return err
		}
		r.side.TimeTo, r.side.QuiesceSeconds = nil, nil
		r.srv.ResetCounters()
		r.shadowBase = shadowCalls(r.col.Registry)
		r.c.rec.reset()
		r.samp.restart()
		from := time.Now()
		r.start = from
		insts, err := r.c.AddNodes(k, false, false)
		if err != nil {
			return err
		}
		for _, inst := range insts {
			r.w.expect(inst.NodeName, from)
		}
		done, err := r.waitQuiescent(ctx, from, o.QuiesceTimeout)
		if err != nil {
			return err
		}
		r.fill()
		r.side.SimSeconds = r.simSince(from)
		r.side.TimedOut = !done
		_, r.side.NodesToInit, _ = r.w.done()
		r.side.NodesInitialized = r.w.initialized(r.c)
		if v := r.side.TimeTo["nodes_initialized"]; v != nil {
			r.side.InitSeconds = v
			x := *v / spec.initBound.Seconds
			r.side.OverBound = &x
		}
		if r.side.QuiesceSeconds != nil {
			x := *r.side.QuiesceSeconds / spec.quiesBound.Seconds
			r.side.QuiesceOverBound = &x
		}
		return nil
	}
	return spec
}

// churnSpec: ChurnNodes nodes with routes and M services; every
// ChurnInterval ChurnRate nodes join (uninitialised, pod CIDRs) and as many
// leave (instance deleted, Node NotReady: the lifecycle controller deletes
// it) and one service changes; then every column drains until quiescence
// or QuiesceTimeout. Counters cover churn and drain.
func churnSpec(o *Options) scenarioSpec {
	spec := scenarioSpec{
		name: ScenarioChurn, nodes: o.ChurnNodes, services: o.Services, f: o.TimeFactor, workers: o.NodeWorkers,
		label: fmt.Sprintf("%d nodes, %d join and %d leave every %v for %v, %d LB services; then drain to quiescence",
			o.ChurnNodes, o.ChurnRate, o.ChurnRate, o.ChurnInterval, o.ChurnDuration, o.Services),
	}
	spec.run = func(ctx context.Context, r *colRun) error {
		base, err := r.c.AddNodes(o.ChurnNodes, true, true)
		if err != nil {
			return err
		}
		if err := r.c.AddServices(o.Services); err != nil {
			return err
		}
		if err := r.startCluster(); err != nil {
			return err
		}
		ticks := int(o.ChurnDuration / o.ChurnInterval)
		leaving := base
		for i := 0; i < ticks; i++ {
			now := time.Now()
			insts, err := r.c.AddNodes(o.ChurnRate, false, false)
			if err != nil {
				return err
			}
			for _, inst := range insts {
				r.w.expect(inst.NodeName, now)
			}
			for j := 0; j < o.ChurnRate && len(leaving) > 0; j++ {
				inst := leaving[0]
				leaving = leaving[1:]
				r.srv.DeleteInstance(inst.ID)
				if err := r.c.SetReady(inst.NodeName, false); err != nil {
					return err
				}
			}
			if o.Services > 0 {
				if err := r.c.TouchService(i % o.Services); err != nil {
					return err
				}
			}
			if err := r.sleep(ctx, o.ChurnInterval); err != nil {
				return err
			}
		}
		done, err := r.waitQuiescent(ctx, time.Now(), o.QuiesceTimeout)
		if err != nil {
			return err
		}
		r.fill()
		r.side.SimSeconds = r.simSince(r.start)
		r.side.TimedOut = !done
		var slowest time.Duration
		_, r.side.NodesToInit, slowest = r.w.done()
		r.side.NodesInitialized = r.w.initialized(r.c)
		if r.side.NodesToInit > 0 && r.side.NodesInitialized == r.side.NodesToInit {
			v := slowest.Seconds() * r.spec.f
			r.side.InitSeconds = &v
		}
		return nil
	}
	return spec
}

// counterSnap is the cloud's counters and cloudgate's cache figures at one
// moment.
type counterSnap struct {
	at          time.Time
	cnt         simcloud.Counters
	hits, total float64
	statusCalls int64 // InstanceMetadata calls the controllers made
	shadowCalls float64
}

func (r *colRun) snapshot() counterSnap {
	s := counterSnap{at: time.Now(), cnt: r.srv.Counters(), statusCalls: r.c.rec.count("InstanceMetadata")}
	if r.col.Registry != nil {
		s.hits, s.total = cacheCounts(r.col.Registry)
		s.shadowCalls = shadowCalls(r.col.Registry) - r.shadowBase
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
