package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/limiter"
)

// ScenarioChaos injects faults on a schedule while nodes churn and services
// change, then checks invariants against the simulated cloud's write log.
const ScenarioChaos = "chaos"

var zeroFaults simcloud.Faults

// chaosPhase is one step of the fault schedule (simulated durations).
type chaosPhase struct {
	name   string
	length time.Duration
	faults simcloud.Faults
}

// chaosSchedule: healthy warm-up, 5xx burst, timeouts, latency spikes, a
// throttling storm with Retry-After, a full outage of 2 minutes, recovery.
func chaosSchedule(o *Options) []chaosPhase {
	return []chaosPhase{
		{"warm-up", time.Minute, simcloud.Faults{}},
		{"5xx burst (30%)", time.Minute, simcloud.Faults{ErrorRate: 0.3}},
		{"timeouts (10%)", time.Minute, simcloud.Faults{TimeoutRate: 0.1}},
		{"latency spikes (30%, +2s)", time.Minute, simcloud.Faults{SpikeRate: 0.3, SpikeLatency: o.real(2 * time.Second)}},
		{"throttle storm (Retry-After 5s)", time.Minute, simcloud.Faults{ThrottleStorm: true, StormRetryAfter: o.real(5 * time.Second)}},
		{"outage", 2 * time.Minute, simcloud.Faults{Outage: true}},
		{"recovery", 3 * time.Minute, simcloud.Faults{}},
	}
}

// ChaosSide holds the chaos invariants of one side.
type ChaosSide struct {
	// WritesIssued are the writes the controllers made (recording decorator
	// above cloudgate); WritesFailed those answered with an error.
	WritesIssued int64 `json:"writes_issued"`
	WritesFailed int64 `json:"writes_failed"`
	// WritesLanded are the writes in the simulated cloud's write log.
	WritesLanded int64 `json:"writes_landed"`
	// WritesLost: answered success but not in the log (must be 0).
	WritesLost int64 `json:"writes_lost"`
	// WritesDuplicated: landed beyond what was issued (must be 0; cloudgate
	// never retries or repeats a write).
	WritesDuplicated int64 `json:"writes_duplicated"`
	// StaleReadsBeyondBound: InstanceExists said true for an instance
	// deleted longer ago than the TTL plus cache.staleIfError.
	StaleReadsBeyondBound int64 `json:"stale_reads_beyond_bound"`
	// NodesWronglyDeleted: Nodes deleted while their instance existed.
	NodesWronglyDeleted int64 `json:"nodes_wrongly_deleted"`
	// ConvergeSeconds from the end of the outage until every node is
	// initialised, every node without an instance is gone and every load
	// balancer has its service's port (null: not within recovery).
	ConvergeSeconds *float64 `json:"converge_seconds"`
	// BreakerOpensInOutage counts cloudgate's read-breaker transitions to
	// open during the outage (must be >= 1: the breaker must notice), and
	// BreakerStatesAtEnd is each family's state once converged ("closed"
	// expected for reads). Both are absent on the bare side.
	BreakerOpensInOutage *float64          `json:"breaker_opens_in_outage,omitempty"`
	BreakerStatesAtEnd   map[string]string `json:"breaker_states_at_end,omitempty"`
}

// readBreakerOpens sums the read family's transitions to open.
func readBreakerOpens(reg *prometheus.Registry) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "cloudgate_breaker_transitions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["family"] == "read" && labels["to"] == limiter.StateOpen.String() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// breakerStates reads each family's breaker state gauge.
func breakerStates(reg *prometheus.Registry) map[string]string {
	mfs, err := reg.Gather()
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() != "cloudgate_breaker_state" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "family" {
					out[l.GetValue()] = limiter.State(int(m.GetGauge().GetValue())).String()
				}
			}
		}
	}
	return out
}

func writeChaosRows(row func(name, a, b, ratio string), bare, cg *ChaosSide) {
	row("writes issued", d(bare.WritesIssued), d(cg.WritesIssued), "")
	row("writes landed", d(bare.WritesLanded), d(cg.WritesLanded), "")
	row("writes failed", d(bare.WritesFailed), d(cg.WritesFailed), "")
	row("writes lost", d(bare.WritesLost), d(cg.WritesLost), "")
	row("writes duplicated", d(bare.WritesDuplicated), d(cg.WritesDuplicated), "")
	row("stale reads beyond bound", d(bare.StaleReadsBeyondBound), d(cg.StaleReadsBeyondBound), "")
	row("nodes wrongly deleted", d(bare.NodesWronglyDeleted), d(cg.NodesWronglyDeleted), "")
	row("converge after outage (s)", secs(bare.ConvergeSeconds), secs(cg.ConvergeSeconds), "")
	row("read breaker opens in outage", "-", secs(cg.BreakerOpensInOutage), "")
	row("breakers at end (read/write)", "-", cg.BreakerStatesAtEnd["read"]+"/"+cg.BreakerStatesAtEnd["write"], "")
}

// chaosNodes is the chaos cluster's size.
func (o *Options) chaosNodes() int { return o.ChaosNodes }

// runChaos: ChaosNodes initialised nodes (a few NotReady with live
// instances, which must never be deleted), Services services; every 30 s 2
// nodes join, 2 leave and a service changes, while the schedule's faults
// hit the cloud.
func runChaos(ctx context.Context, o *Options, side string, progress io.Writer) (Side, float64, error) {
	label := fmt.Sprintf("chaos/%s", side)
	sched := chaosSchedule(o)
	var total time.Duration
	for _, p := range sched {
		total += p.length
	}
	fmt.Fprintf(progress, "%s: %d nodes, %d services, %v simulated (%v real)\n", label, o.ChaosNodes, o.Services, total, o.real(total))
	c, err := newCluster(o, side, zeroFaults)
	if err != nil {
		return Side{}, 0, err
	}
	defer c.stop()
	base, err := c.addNodes(o.ChaosNodes, "node", true, false)
	if err != nil {
		return Side{}, 0, err
	}
	if err := c.addServices(o.Services); err != nil {
		return Side{}, 0, err
	}

	var (
		mu        sync.Mutex
		deletedAt = map[string]time.Time{} // node name -> when its instance was deleted
		stale     atomic.Int64
		wrong     atomic.Int64
	)
	bound := o.real(time.Minute) // InstanceExists TTL
	if side == sideCloudgate {
		if cfg, err := o.cloudgateConfig(); err == nil {
			bound += cfg.Cache.StaleIfError.Duration
		}
	}
	c.onExists = func(node *v1.Node, exists bool, err error) {
		if err != nil || !exists {
			return
		}
		mu.Lock()
		at, gone := deletedAt[node.Name]
		mu.Unlock()
		if gone && time.Since(at) > bound {
			stale.Add(1)
		}
	}
	c.nodeHandler = cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		n, ok := obj.(*v1.Node)
		if !ok {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				n, _ = t.Obj.(*v1.Node)
			}
		}
		if n == nil {
			return
		}
		if _, exists := c.srv.InstanceByNodeName(n.Name); exists {
			wrong.Add(1)
		}
	}}
	// A few nodes are NotReady with their instances alive: the lifecycle
	// controller checks them every monitor period, through every fault.
	for i := 0; i < len(base) && i < 5; i++ {
		if err := c.setReady(base[len(base)-1-i].NodeName, false); err != nil {
			return Side{}, 0, err
		}
	}
	leaving := base[:len(base)-5]

	w := newInitWatch()
	if err := c.start(w); err != nil {
		return Side{}, 0, err
	}
	start := time.Now()
	step := o.real(30 * time.Second)
	var outageEnd time.Time
	svc := 0
	var converge, opensInOutage *float64
	for _, p := range sched {
		if err := c.srv.SetFaults(p.faults); err != nil {
			return Side{}, 0, err
		}
		fmt.Fprintf(progress, "  %s: %s\n", label, p.name)
		end := time.Now().Add(o.real(p.length))
		var opensBefore float64
		if p.faults.Outage && c.reg != nil {
			opensBefore = readBreakerOpens(c.reg)
		}
		if p.name == "recovery" {
			// No more churn: how long until everything has converged?
			if converge, err = c.waitConverged(ctx, outageEnd, end); err != nil {
				return Side{}, 0, err
			}
			break
		}
		for time.Now().Before(end) {
			if _, err := c.addNodesWatched(2, "join", w); err != nil {
				return Side{}, 0, err
			}
			for j := 0; j < 2 && len(leaving) > 0; j++ {
				inst := leaving[0]
				leaving = leaving[1:]
				mu.Lock()
				deletedAt[inst.NodeName] = time.Now()
				mu.Unlock()
				c.srv.DeleteInstance(inst.ID)
				if err := c.setReady(inst.NodeName, false); err != nil {
					return Side{}, 0, err
				}
			}
			if o.Services > 0 {
				if err := c.touchService(svc % o.Services); err != nil {
					return Side{}, 0, err
				}
				svc++
			}
			if err := sleep(ctx, min(step, time.Until(end)), io.Discard, label, c); err != nil {
				return Side{}, 0, err
			}
		}
		if p.faults.Outage {
			outageEnd = time.Now()
			if c.reg != nil {
				v := readBreakerOpens(c.reg) - opensBefore
				opensInOutage = &v
			}
		}
	}

	s := c.result(w)
	rec := c.rec.snapshot()
	landed := int64(len(c.srv.WriteLog()))
	ch := &ChaosSide{
		WritesIssued: rec.WritesIssued, WritesFailed: rec.WritesFailed, WritesLanded: landed,
		StaleReadsBeyondBound: stale.Load(), NodesWronglyDeleted: wrong.Load(), ConvergeSeconds: converge,
	}
	if c.reg != nil {
		ch.BreakerOpensInOutage = opensInOutage
		ch.BreakerStatesAtEnd = breakerStates(c.reg)
	}
	ch.WritesLost = max(0, rec.WritesIssued-rec.WritesFailed-landed)
	ch.WritesDuplicated = max(0, landed-rec.WritesIssued)
	s.ChaosSide = ch
	return s, time.Since(start).Seconds() * o.TimeFactor, nil
}

// waitConverged polls converged until deadline; the result is in
// simulated seconds since from, nil if it did not converge.
func (c *cluster) waitConverged(ctx context.Context, from, deadline time.Time) (*float64, error) {
	for {
		ok, err := c.converged()
		if err != nil {
			return nil, err
		}
		if ok {
			v := max(0, time.Since(from).Seconds()*c.opts.TimeFactor)
			return &v, nil
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// converged: no node carries the uninitialized taint, no Node lacks its
// instance, and every service's load balancer exists with its port.
func (c *cluster) converged() (bool, error) {
	nodes, err := c.kube.CoreV1().Nodes().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if tainted(n) {
			return false, nil
		}
		if _, ok := c.srv.InstanceByNodeName(n.Name); !ok {
			return false, nil
		}
	}
	lbs := map[string]simcloud.LoadBalancer{}
	for _, lb := range c.srv.LoadBalancers() {
		lbs[lb.Name] = lb
	}
	svcs, err := c.kube.CoreV1().Services("default").List(c.ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		lb, ok := lbs[cloudprovider.DefaultLoadBalancerName(svc)]
		if !ok || len(lb.Ports) == 0 || lb.Ports[0].Port != svc.Spec.Ports[0].Port {
			return false, nil
		}
	}
	return true, nil
}
