package bench

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cloudgate/cloudgate/bench/simcloud"
)

// The default scenarios: steady, scaleup (and stress), churn.

// quiescencePoll is how often waitQuiescent checks the conditions: the
// precision of the times to each condition.
const quiescencePoll = 100 * time.Millisecond

// steadySpec: N initialised nodes with their routes, NotReadyPct of them
// NotReady (instances alive), M services; after the first full resync (one
// status period + 1 min) the calls of SteadyWindow are counted.
func steadySpec(o *Options, n int, name string) scenarioSpec {
	notReady := int(math.Round(float64(n) * o.NotReadyPct / 100))
	spec := scenarioSpec{
		name: name, nodes: n, services: o.Services, notRd: notReady, workers: o.NodeWorkers,
		label: fmt.Sprintf("%d nodes (%d NotReady), %d LB services; steady window %v after a %v warm-up", n, notReady, o.Services, o.SteadyWindow, steadyWarmup(o)),
	}
	if o.SteadyChurn > 0 {
		spec.label += fmt.Sprintf("; %d join and %d leave every %v", o.SteadyChurn, o.SteadyChurn, o.SteadyChurnEvery)
	}
	spec.steady = steadyFloor(o, n)
	rph, sweep, formula := modelPace(o, n, o.NodeWorkers)
	spec.pace = &PaceModel{RoundsPerHour: rph, SweepSeconds: sweep, Formula: formula}
	spec.run = func(ctx context.Context, r *colRun) error {
		insts, err := r.c.AddNodes(n, true, true)
		if err != nil {
			return err
		}
		held := map[string]bool{}
		for k := 0; k < notReady; k++ {
			inst := insts[k*len(insts)/notReady]
			if err := r.c.SetReady(inst.NodeName, false); err != nil {
				return err
			}
			r.col.Wire.purposes.markNotReady(inst.NodeName, inst.ID)
			held[inst.ID] = true
		}
		if err := r.startThenServices(ctx, o.Services); err != nil {
			return err
		}
		ch := &steadyChurn{k: o.SteadyChurn, every: o.SteadyChurnEvery, base: time.Now().Add(churnPhase), terminate: o.CloudTerminates,
			rng: rand.New(rand.NewPCG(uint64(r.side.Seed), 0x57ead7))}
		ch.schedule()
		for _, inst := range insts {
			if !held[inst.ID] {
				ch.live = append(ch.live, inst)
			}
		}
		// Off the controllers' period grid, like the churn steps: the window
		// ended on one of the route controller's ListRoutes (every 70 s
		// through cloudgate's 60 s TTL), counted or not as the scheduler
		// picked (cloudgate:list 43 or 44 calls at 20 services, seed 7).
		if err := ch.sleep(ctx, r, steadyWarmup(o)+churnPhase); err != nil {
			return err
		}
		a := r.snapshot()
		if err := ch.sleep(ctx, r, o.SteadyWindow); err != nil {
			return err
		}
		b := r.snapshot()
		r.fill()
		r.side.Steady = steadyFigures(a, b, o.SteadyWindow, o.ReadQPS)
		r.side.StatusRoundsPerHour, r.side.SweepSeconds, _ = statusPace(r.c.rec.statusCalls(), r.start, o.statusPeriod())
		r.side.CallsPerLookup = perCall(b.cnt.TotalCalls()-a.cnt.TotalCalls(), b.controllerCalls-a.controllerCalls)
		r.side.QuotaUtilization = &r.side.Steady.QuotaUtilization
		r.side.SimSeconds = r.simSince(r.start)
		return nil
	}
	return spec
}

// steadyChurn is the steady scenario's turnover (Options.SteadyChurn):
// once in every period of `every`, at a time drawn uniformly within it (the
// seed's draw), k Nodes join (uninitialised) and the k oldest Ready ones
// leave (instance gone, Node NotReady). A real cluster's turnover keeps no
// phase with the controllers' periods, and the phase matters: at 1,000
// Nodes on the aws profile the same churn at four fixed phases of the
// 5-minute periods costs 402 to 521 lookups per hour (a joining Node read
// again before the next list refresh, or not); drawn phases average them.
type steadyChurn struct {
	k     int
	every time.Duration
	base  time.Time // the start of the current period
	next  time.Time // the step in it
	rng   *rand.Rand
	live  []simcloud.Instance // Ready Nodes that may leave, oldest first
	// terminate leaves a leaving instance terminated (Options.CloudTerminates).
	terminate bool
}

// sleep sleeps d, making the churn steps that fall in it.
func (ch *steadyChurn) sleep(ctx context.Context, r *colRun, d time.Duration) error {
	end := time.Now().Add(d)
	for ch.k > 0 && ch.next.Before(end) {
		if err := r.sleep(ctx, time.Until(ch.next)); err != nil {
			return err
		}
		if err := ch.step(r); err != nil {
			return err
		}
		ch.base = ch.base.Add(ch.every)
		ch.schedule()
	}
	return r.sleep(ctx, time.Until(end))
}

// schedule draws the step's time in the period from base.
func (ch *steadyChurn) schedule() {
	if ch.k > 0 {
		ch.next = ch.base.Add(time.Duration(ch.rng.Int64N(int64(ch.every))))
	}
}

func (ch *steadyChurn) step(r *colRun) error {
	joined, err := r.c.AddNodes(ch.k, false, false)
	if err != nil {
		return err
	}
	for j := 0; j < ch.k && len(ch.live) > 0; j++ {
		inst := ch.live[0]
		ch.live = ch.live[1:]
		if ch.terminate {
			r.srv.TerminateInstance(inst.ID)
		} else {
			r.srv.DeleteInstance(inst.ID)
		}
		if err := r.c.SetReady(inst.NodeName, false); err != nil {
			return err
		}
		r.col.Wire.purposes.markNotReady(inst.NodeName, inst.ID)
	}
	ch.live = append(ch.live, joined...)
	return nil
}

// steadyWarmup is the first full resync: one status period plus a minute.
func steadyWarmup(o *Options) time.Duration { return o.statusPeriod() + time.Minute }

// scaleupSpec: M services with their load balancers, then K nodes arrive
// at once with the uninitialized taint and pod CIDRs (their instances
// exist); every column runs until quiescence or QuiesceTimeout.
func scaleupSpec(o *Options, workers int, name string) scenarioSpec {
	k := o.ScaleupNodes
	spec := scenarioSpec{
		name: name, nodes: k, services: o.Services, workers: workers,
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
		r.setShadowBase(shadowCalls(r.col.Registry))
		r.c.rec.reset()
		r.c.ResetKubeRequests()
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
		if done {
			if err := r.settle(ctx, from.Add(o.QuiesceTimeout)); err != nil {
				return err
			}
		}
		r.fill()
		r.side.SimSeconds = r.simSince(from)
		r.side.TimedOut = !done
		_, r.side.NodesToInit, _ = r.w.done()
		r.side.NodesInitialized = r.w.initialized(r.c)
		r.side.InitSeconds = r.side.TimeTo["nodes_initialized"]
		r.side.NodeKubeRequests = r.c.KubeRequests(ClientNode)
		return nil
	}
	return spec
}

// churnPhase offsets the churn steps from the controllers' periods.
const churnPhase = 1234567 * time.Microsecond

// churnSpec: ChurnNodes nodes with routes and M services; every
// ChurnInterval ChurnRate nodes join (uninitialised, pod CIDRs) and as many
// leave (instance deleted, Node NotReady: the lifecycle controller deletes
// it) and one service changes; then every column drains until quiescence
// or QuiesceTimeout. Counters cover churn and drain.
func churnSpec(o *Options) scenarioSpec {
	spec := scenarioSpec{
		name: ScenarioChurn, nodes: o.ChurnNodes, services: o.Services, workers: o.NodeWorkers,
		label: fmt.Sprintf("%d nodes, %d join and %d leave every %v for %v, %d LB services; then drain to quiescence",
			o.ChurnNodes, o.ChurnRate, o.ChurnRate, o.ChurnInterval, o.ChurnDuration, o.Services),
	}
	spec.run = func(ctx context.Context, r *colRun) error {
		base, err := r.c.AddNodes(o.ChurnNodes, true, true)
		if err != nil {
			return err
		}
		if err := r.startThenServices(ctx, o.Services); err != nil {
			return err
		}
		// Off the controllers' period grid (5 s, 10 s, 5 min from the
		// start): a churn step on the same virtual instant as a
		// controller's tick would run before or after it as the scheduler
		// picks, and the run would depend on that pick.
		if err := r.sleep(ctx, churnPhase); err != nil {
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
		drain := time.Now()
		done, err := r.waitQuiescent(ctx, drain, o.QuiesceTimeout)
		if err != nil {
			return err
		}
		if done {
			if err := r.settle(ctx, drain.Add(o.QuiesceTimeout)); err != nil {
				return err
			}
		}
		r.fill()
		r.side.SimSeconds = r.simSince(r.start)
		r.side.TimedOut = !done
		var slowest time.Duration
		_, r.side.NodesToInit, slowest = r.w.done()
		r.side.NodesInitialized = r.w.initialized(r.c)
		if r.side.NodesToInit > 0 && r.side.NodesInitialized == r.side.NodesToInit {
			v := slowest.Seconds()
			r.side.InitSeconds = &v
		}
		return nil
	}
	return spec
}
