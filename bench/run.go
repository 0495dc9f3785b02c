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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// Run runs the scenarios of opts, each with the bare provider and then with
// cloudgate, and returns the report. progress (may be nil) gets a line every
// few seconds.
func Run(ctx context.Context, o *Options, progress io.Writer) (*Report, error) {
	opts := o
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	rep := &Report{
		TimeFactor: opts.TimeFactor, ReadQPS: opts.ReadQPS, ReadBurst: opts.ReadBurst,
		WriteQPS: opts.WriteQPS, WriteBurst: opts.WriteBurst, Policy: policyString(opts), Sides: opts.Sides,
	}
	for _, sc := range opts.Scenarios {
		res := ScenarioResult{Scenario: sc, Services: opts.Services, TimeFactor: opts.TimeFactor}
		if sc == ScenarioScaleup {
			res.TimeFactor = opts.ScaleupTimeFactor
		}
		for _, side := range o.Sides {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			var s Side
			var secs float64
			var err error
			switch sc {
			case ScenarioSteady:
				res.Nodes, res.NotReady = opts.Nodes, opts.NotReady
				s, secs, err = runSteady(ctx, opts, side, progress)
			case ScenarioScaleup:
				res.Nodes = opts.ScaleupNodes
				s, secs, err = runScaleup(ctx, opts, side, progress)
			case ScenarioChurn:
				res.Nodes = opts.ChurnNodes
				s, secs, err = runChurn(ctx, opts, side, progress)
			case ScenarioChaos:
				res.Nodes = opts.chaosNodes()
				s, secs, err = runChaos(ctx, opts, side, progress)
			}
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", sc, side, err)
			}
			res.SimSeconds = max(res.SimSeconds, secs)
			if side == sideBare {
				res.Bare = s
			} else {
				res.Cloudgate = s
			}
		}
		if sc == ScenarioScaleup {
			res.BatchSize = opts.batchSize()
			limit := math.Ceil(float64(opts.ScaleupNodes)/float64(res.BatchSize)) / opts.ReadQPS
			res.LimitSeconds = &limit
		}
		res.CallRatio = ratio(res.Bare.UpstreamCalls, res.Cloudgate.UpstreamCalls)
		res.ReadCallRatio = ratio(res.Bare.ReadCalls, res.Cloudgate.ReadCalls)
		if res.Cloudgate.InitSeconds != nil && *res.Cloudgate.InitSeconds > 0 {
			switch {
			case res.Bare.InitSeconds != nil:
				res.TimeRatio = *res.Bare.InitSeconds / *res.Cloudgate.InitSeconds
			case res.Bare.TimedOut:
				// A lower bound: bare had not finished when it was cut off.
				res.TimeRatio = res.SimSeconds / *res.Cloudgate.InitSeconds
				res.TimeRatioAtLeast = true
			}
		}
		rep.Scenarios = append(rep.Scenarios, res)
	}
	return rep, nil
}

// initWatch records when watched nodes lose the uninitialized taint.
type initWatch struct {
	mu      sync.Mutex
	created map[string]time.Time // watched nodes -> when they were created
	took    map[string]time.Duration
	last    time.Time
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
		if !ok1 || !ok2 || !tainted(o) || tainted(n) {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if at, ok := w.created[n.Name]; ok {
			if _, done := w.took[n.Name]; !done {
				w.took[n.Name] = now.Sub(at)
				w.last = now
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

func tainted(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}

// side collects one side's figures: upstream from simcloud's counters,
// controller-visible ones from the recorder, hit ratio from the registry.
func (c *cluster) result(w *initWatch) Side {
	cnt := c.srv.Counters()
	rec := c.rec.snapshot()
	s := Side{
		UpstreamCalls: cnt.TotalCalls(), ReadCalls: cnt.ReadCalls, WriteCalls: cnt.WriteCalls,
		CallsByMethod: cnt.Calls, Throttled: cnt.TotalThrottled(), ThrottledByMethod: cnt.Throttled,
		P50Ms: ms(rec.P50), P99Ms: ms(rec.P99),
	}
	for _, v := range rec.Calls {
		s.ControllerCalls += v
	}
	for _, v := range rec.Errors {
		s.ControllerErrors += v
	}
	if w != nil {
		var slowest time.Duration
		s.NodesInitialized, s.NodesToInit, slowest = w.done()
		if s.NodesToInit > 0 && s.NodesInitialized == s.NodesToInit {
			v := slowest.Seconds() * c.opts.TimeFactor
			s.InitSeconds = &v
		}
	}
	if c.reg != nil {
		s.CacheHitRatio = hitRatio(c.reg)
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// hitRatio is (hits + negative hits) / (hits + negative hits + misses)
// over every cloudgate cache.
func hitRatio(reg *prometheus.Registry) *float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return nil
	}
	var hits, misses float64
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
	if hits+misses == 0 {
		return nil
	}
	r := hits / (hits + misses)
	return &r
}

// sleep waits d (real) or until ctx ends, printing progress every 5 s.
func sleep(ctx context.Context, d time.Duration, progress io.Writer, label string, c *cluster) error {
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case <-tick.C:
			cnt := c.srv.Counters()
			left := time.Until(deadline).Round(time.Second)
			fmt.Fprintf(progress, "  %s: %s left, %d upstream calls, %d throttled\n", label, left, cnt.TotalCalls(), cnt.TotalThrottled())
		}
	}
}

// runSteady: N initialised nodes (NotReady of them NotReady, their instances alive), M
// services, the periodic syncs for SteadyDuration.
func runSteady(ctx context.Context, o *Options, side string, progress io.Writer) (Side, float64, error) {
	label := fmt.Sprintf("steady/%s", side)
	fmt.Fprintf(progress, "%s: %d nodes, %d services, %v simulated (%v real)\n", label, o.Nodes, o.Services, o.SteadyDuration, o.real(o.SteadyDuration))
	c, err := newCluster(o, side, zeroFaults)
	if err != nil {
		return Side{}, 0, err
	}
	defer c.stop()
	insts, err := c.addNodes(o.Nodes, "node", true, false)
	if err != nil {
		return Side{}, 0, err
	}
	for k := 0; k < o.NotReady; k++ {
		i := k * len(insts) / o.NotReady
		if err := c.setReady(insts[i].NodeName, false); err != nil {
			return Side{}, 0, err
		}
	}
	if err := c.addServices(o.Services); err != nil {
		return Side{}, 0, err
	}
	if err := c.start(nil); err != nil {
		return Side{}, 0, err
	}
	if err := sleep(ctx, o.real(o.SteadyDuration), progress, label, c); err != nil {
		return Side{}, 0, err
	}
	return c.result(nil), o.SteadyDuration.Seconds(), nil
}

// runScaleup: M services, then K nodes arrive at once with the
// uninitialized taint (their instances already exist); time until all are
// initialised. Counters cover the arrival onwards.
func runScaleup(ctx context.Context, opts *Options, side string, progress io.Writer) (Side, float64, error) {
	so := *opts
	so.TimeFactor = opts.ScaleupTimeFactor
	o := &so
	label := fmt.Sprintf("scaleup/%s", side)
	fmt.Fprintf(progress, "%s: %d nodes arrive\n", label, o.ScaleupNodes)
	c, err := newCluster(o, side, zeroFaults)
	if err != nil {
		return Side{}, 0, err
	}
	defer c.stop()
	if err := c.addServices(o.Services); err != nil {
		return Side{}, 0, err
	}
	w := newInitWatch()
	if err := c.start(w); err != nil {
		return Side{}, 0, err
	}
	// Let the service controller create the load balancers first.
	if err := c.waitLBs(ctx, o.Services); err != nil {
		return Side{}, 0, err
	}
	c.srv.ResetCounters()
	c.rec.reset()
	start := time.Now()
	if _, err := c.addNodesWatched(o.ScaleupNodes, "new", w); err != nil {
		return Side{}, 0, err
	}
	deadline := time.Now().Add(o.real(o.ScaleupTimeout))
	lastPrint := time.Now()
	for {
		n, of, _ := w.done()
		if n == of {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(progress, "  %s: timed out with %d/%d initialized\n", label, n, of)
			break
		}
		if time.Since(lastPrint) > 5*time.Second {
			lastPrint = time.Now()
			fmt.Fprintf(progress, "  %s: %d/%d initialized, %d upstream calls, %d throttled\n", label, n, of, c.srv.Counters().TotalCalls(), c.srv.Counters().TotalThrottled())
		}
		select {
		case <-ctx.Done():
			return Side{}, 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	s := c.result(w)
	if n, of, _ := w.done(); n < of {
		s.TimedOut = true
	}
	return s, time.Since(start).Seconds() * o.TimeFactor, nil
}

// runChurn: ChurnNodes initialised nodes and M services; every
// ChurnInterval ChurnRate nodes join (uninitialised, with a pod CIDR, so
// routes are created) and ChurnRate leave (instance deleted, Node NotReady:
// the lifecycle controller deletes it), and one service is updated.
func runChurn(ctx context.Context, o *Options, side string, progress io.Writer) (Side, float64, error) {
	label := fmt.Sprintf("churn/%s", side)
	fmt.Fprintf(progress, "%s: %d nodes, %d join and %d leave every %v, %v simulated (%v real)\n",
		label, o.ChurnNodes, o.ChurnRate, o.ChurnRate, o.ChurnInterval, o.ChurnDuration, o.real(o.ChurnDuration))
	c, err := newCluster(o, side, zeroFaults)
	if err != nil {
		return Side{}, 0, err
	}
	defer c.stop()
	base, err := c.addNodes(o.ChurnNodes, "node", true, false)
	if err != nil {
		return Side{}, 0, err
	}
	if err := c.addServices(o.Services); err != nil {
		return Side{}, 0, err
	}
	w := newInitWatch()
	if err := c.start(w); err != nil {
		return Side{}, 0, err
	}
	start := time.Now()
	ticks := int(o.ChurnDuration / o.ChurnInterval)
	leaving := base
	for i := 0; i < ticks; i++ {
		if _, err := c.addNodesWatched(o.ChurnRate, "join", w); err != nil {
			return Side{}, 0, err
		}
		for j := 0; j < o.ChurnRate && len(leaving) > 0; j++ {
			inst := leaving[0]
			leaving = leaving[1:]
			c.srv.DeleteInstance(inst.ID)
			if err := c.setReady(inst.NodeName, false); err != nil {
				return Side{}, 0, err
			}
		}
		if o.Services > 0 {
			if err := c.touchService(i % o.Services); err != nil {
				return Side{}, 0, err
			}
		}
		if err := sleep(ctx, o.real(o.ChurnInterval), io.Discard, label, c); err != nil {
			return Side{}, 0, err
		}
		if i%10 == 9 {
			n, of, _ := w.done()
			fmt.Fprintf(progress, "  %s: tick %d/%d, %d/%d joined nodes initialized, %d upstream calls, %d throttled\n",
				label, i+1, ticks, n, of, c.srv.Counters().TotalCalls(), c.srv.Counters().TotalThrottled())
		}
	}
	return c.result(w), time.Since(start).Seconds() * o.TimeFactor, nil
}

// addNodesWatched adds n uninitialised nodes (with pod CIDRs) and watches
// their initialisation.
func (c *cluster) addNodesWatched(n int, prefix string, w *initWatch) ([]string, error) {
	insts, err := c.srv.AddInstances(n, prefix)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, n)
	now := time.Now()
	for _, inst := range insts {
		w.expect(inst.NodeName, now)
		names = append(names, inst.NodeName)
	}
	for _, inst := range insts {
		node := makeNode(inst, false, true)
		a := nextCIDR()
		node.Spec.PodCIDR, node.Spec.PodCIDRs = a, []string{a}
		if _, err := c.kube.CoreV1().Nodes().Create(c.ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// setReady sets a node's Ready condition.
func (c *cluster) setReady(name string, ready bool) error {
	n, err := c.kube.CoreV1().Nodes().Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	st := v1.ConditionTrue
	if !ready {
		st = v1.ConditionFalse
	}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now()}}
	_, err = c.kube.CoreV1().Nodes().UpdateStatus(c.ctx, n, metav1.UpdateOptions{})
	return err
}

// touchService changes a service's port, so the controller ensures its LB.
func (c *cluster) touchService(i int) error {
	name := fmt.Sprintf("svc-%03d", i)
	svc, err := c.kube.CoreV1().Services("default").Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	svc.Spec.Ports[0].Port++
	_, err = c.kube.CoreV1().Services("default").Update(c.ctx, svc, metav1.UpdateOptions{})
	return err
}

// waitLBs waits (bounded) until m load balancers exist in the cloud.
func (c *cluster) waitLBs(ctx context.Context, m int) error {
	deadline := time.Now().Add(max(c.opts.real(10*time.Minute), 30*time.Second))
	for len(c.srv.LoadBalancers()) < m {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d load balancers were created", len(c.srv.LoadBalancers()), m)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}
