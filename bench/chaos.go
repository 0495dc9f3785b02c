package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/provider"
)

// chaosPhase is one step of the fault schedule (simulated durations).
type chaosPhase struct {
	name   string
	length time.Duration
	faults simcloud.Faults
}

// chaosFaultPhases: healthy warm-up, 5xx burst, ambiguous writes, timeouts,
// latency spikes, a throttling storm with Retry-After, a full outage.
// Recovery (no faults, no churn) follows, longer than every bound.
func chaosFaultPhases(f float64) []chaosPhase {
	return []chaosPhase{
		{"warm-up", time.Minute, simcloud.Faults{}},
		{"5xx burst (30%)", time.Minute, simcloud.Faults{ErrorRate: 0.3}},
		{"ambiguous writes (40%: applied, then 500 or timeout)", time.Minute, simcloud.Faults{AmbiguousRate: 0.4}},
		{"timeouts (10%)", time.Minute, simcloud.Faults{TimeoutRate: 0.1}},
		{"latency spikes (30%, +2s)", time.Minute, simcloud.Faults{SpikeRate: 0.3, SpikeLatency: scale(2*time.Second, f)}},
		{"throttle storm (Retry-After 5s)", time.Minute, simcloud.Faults{ThrottleStorm: true, StormRetryAfter: scale(5*time.Second, f)}},
		{"outage", 2 * time.Minute, simcloud.Faults{Outage: true}},
	}
}

// Invariant names (keys of ChaosSide.Checks).
const (
	invWritesLost      = "writes_lost"
	invWritesDup       = "writes_duplicated"
	invWritesPhantom   = "writes_phantom"
	invStale           = "stale_reads_beyond_bound"
	invWrongDelete     = "nodes_wrongly_deleted"
	invLive404         = "live_node_deleted_after_404"
	invNegativeTTL     = "not_found_beyond_negative_ttl"
	invConverged       = "converged"
	invRemovedInBound  = "removed_node_deleted_late"
	invBreakerOpened   = "read_breaker_opened_in_outage"
	invBreakerRecovers = "read_breaker_closed_at_end"
)

// ChaosSide holds the chaos invariants of one column.
type ChaosSide struct {
	// WritesIssued and WritesFailed are the controllers' writes (recorder
	// above the provider) and those answered with an error.
	WritesIssued int64 `json:"writes_issued"`
	WritesFailed int64 `json:"writes_failed"`
	// WritesSent are the write requests on the wire (retries included);
	// WritesLanded those in the cloud's write log, of which
	// WritesAmbiguous were answered as failures.
	WritesSent      int64 `json:"writes_sent"`
	WritesLanded    int64 `json:"writes_landed"`
	WritesAmbiguous int64 `json:"writes_ambiguous_landed"`
	// WritesLost: a request answered 2xx whose request ID is not in the
	// write log. WritesDuplicated: a request ID in the write log again
	// with a change to the cloud's state (a same-ID retry that changed
	// nothing is not counted). WritesPhantom: controllers told "ok" more often than the cloud
	// answered 2xx. All must be 0.
	WritesLost       int64 `json:"writes_lost"`
	WritesDuplicated int64 `json:"writes_duplicated"`
	WritesPhantom    int64 `json:"writes_phantom"`
	// StaleReadsBeyondBound: InstanceExists said true for an instance
	// deleted longer ago than the column's bound (max TTL + staleIfError).
	StaleReadsBeyondBound int64 `json:"stale_reads_beyond_bound"`
	// NodesWronglyDeleted: Nodes deleted while their instance existed,
	// other than the one answered 404 once.
	NodesWronglyDeleted int64 `json:"nodes_wrongly_deleted"`
	// LiveDeletedAfter404: the live NotReady node whose instance the
	// cloud answered 404 once was deleted (expected 0 through cloudgate).
	LiveDeletedAfter404 int64 `json:"live_node_deleted_after_404"`
	// NotFoundBeyondTTL: a live instance answered 404 once was still
	// reported missing after negativeTTL.
	NotFoundBeyondTTL int64 `json:"not_found_beyond_negative_ttl"`
	// HiddenAnswers: 404s the cloud gave for live instances (simcloud's
	// counter; 0 means the one-shot 404 was never asked for).
	HiddenAnswers int64 `json:"hidden_404_answers"`
	// ConvergeSeconds from the end of the outage until quiescence (null:
	// not within the recovery).
	ConvergeSeconds *float64 `json:"converge_seconds"`
	// BreakerOpensInOutage counts cloudgate's read-breaker transitions to
	// open during the outage; BreakerStatesAtEnd each family's state.
	BreakerOpensInOutage *float64          `json:"breaker_opens_in_outage,omitempty"`
	BreakerStatesAtEnd   map[string]string `json:"breaker_states_at_end,omitempty"`
	// ConvergeDueSeconds: from the end of the outage until every condition
	// of quiescence held, with a removed instance's Node counted only once
	// its deletion is due: existsTTL + notFoundGuard.confirmAfter + two
	// node-monitor periods after max(the instance's removal, the outage's
	// end) for a column with the guard, at once otherwise (then it equals
	// ConvergeSeconds or comes before it). It separates the guard's
	// deliberate hold from the rest of the recovery.
	ConvergeDueSeconds *float64 `json:"converge_due_seconds"`
	// RemovedDeletedLate: Nodes of removed instances deleted after the
	// outage's end later than their due time (above); a guarded column
	// only, else unchecked.
	RemovedDeletedLate int64 `json:"removed_node_deleted_late"`
	// ConvergePerSeed is ConvergeSeconds of each seed (merged results).
	ConvergePerSeed    []*float64 `json:"converge_seconds_per_seed,omitempty"`
	ConvergeDuePerSeed []*float64 `json:"converge_due_seconds_per_seed,omitempty"`
	// Timeline (--chaos-timeline): what happened from the outage's start
	// to quiescence; Timelines holds one per seed in merged results.
	Timeline  *ChaosTimeline   `json:"timeline,omitempty"`
	Timelines []*ChaosTimeline `json:"timelines,omitempty"`
	// Zone: the zone-outage variant's figures (chaos-zone only); its
	// invariants' violations: a removed instance's Node held by the guard
	// at a check due to pass its "does not exist" on (ZoneHeldPast), or
	// never deleted (ZoneNeverGone).
	Zone          *ZoneFigures `json:"zone,omitempty"`
	ZoneHeldPast  int64        `json:"removed_held_past_confirm_after,omitempty"`
	ZoneNeverGone int64        `json:"removed_node_never_deleted,omitempty"`
	// Checks counts how often each invariant was checked; an invariant
	// checked 0 times is listed in Unchecked and fails the run. Merged
	// over seeds it is the least per seed, and ChecksTotal the sum (the
	// violations are summed).
	Checks      map[string]int64 `json:"checks"`
	ChecksTotal map[string]int64 `json:"checks_total_over_seeds,omitempty"`
	Unchecked   []string         `json:"unchecked,omitempty"`
	// Violated lists the invariants that failed.
	Violated []string `json:"violated,omitempty"`
}

// chaosSpec: ChaosNodes initialised nodes (5 NotReady with live
// instances), M services; during the fault phases every 30 s 2 nodes join,
// 2 leave and a service changes; one live NotReady and one live Ready
// instance are answered 404 once; then recovery without faults or churn,
// longer than every bound checked.
func chaosSpec(o *Options) scenarioSpec {
	phases := chaosFaultPhases(1)
	var faultLen time.Duration
	for _, p := range phases {
		faultLen += p.length
	}
	spec := scenarioSpec{
		name: ScenarioChaos, nodes: o.ChaosNodes, services: o.Services, workers: o.NodeWorkers,
	}
	spec.label = fmt.Sprintf("%d nodes, %d LB services; %v of faults (5xx, ambiguous writes, timeouts, spikes, throttle storm, 2m outage) "+
		"with churn and a one-shot 404 for two live instances, then recovery longer than every bound", o.ChaosNodes, o.Services, faultLen)
	spec.run = func(ctx context.Context, r *colRun) error { return runChaos(ctx, r, phases) }
	return spec
}

// staleBound is the longest a column may answer "exists" for a deleted
// instance: the longest instance TTL plus staleIfError (cloudgate), or a
// second of slack for an answer in flight (bare).
func staleBound(cfg *provider.Config) time.Duration {
	if cfg == nil {
		return 0
	}
	var ttl time.Duration
	for _, m := range []string{"InstanceExists", "InstanceShutdown", "InstanceMetadata"} {
		if mc, ok := cfg.Methods[m]; ok && mc.TTL != nil {
			ttl = max(ttl, mc.TTL.Duration)
		}
	}
	return ttl + cfg.Cache.StaleIfError.Duration
}

func runChaos(ctx context.Context, r *colRun, phases []chaosPhase) error {
	o, c := r.o, r.c
	base, err := c.AddNodes(o.ChaosNodes, true, true)
	if err != nil {
		return err
	}
	if err := c.AddServices(o.Services); err != nil {
		return err
	}
	slack := time.Second
	bound := staleBound(r.col.Config) + slack
	// Every column recovers as long: longer than the longest bound of any
	// cloudgate column (the default policy's, or the user's).
	longest := bound
	for _, col := range []string{ColBatch, ColConfig} {
		if col == ColConfig && o.ConfigFile == "" {
			continue
		}
		if cfg, err := o.cloudgateConfig(col); err == nil {
			longest = max(longest, staleBound(cfg)+cfg.Cache.NegativeTTL.Duration+slack)
		}
	}
	negTTL := slack
	if r.col.Config != nil {
		negTTL += r.col.Config.Cache.NegativeTTL.Duration
	}
	var (
		mu        sync.Mutex
		deletedAt = map[string]time.Time{} // node -> when its instance was deleted
		hiddenIDs = map[string]string{}    // node -> instance answered 404 once
		checks    = map[string]int64{}
		viol      = map[string]int64{}
	)
	check := func(inv string, bad bool) {
		mu.Lock()
		checks[inv]++
		if bad {
			viol[inv]++
		}
		mu.Unlock()
	}
	notReadyHidden := base[len(base)-5].NodeName // the first NotReady node
	// A removed instance's Node is due for deletion removalAllowance after
	// max(its removal, the outage's end).
	var removalAllowance time.Duration // real
	if cfg := r.col.Config; cfg != nil && (cfg.NotFoundGuard.Enabled == nil || *cfg.NotFoundGuard.Enabled) {
		var existsTTL time.Duration
		if mc, ok := cfg.Methods["InstanceExists"]; ok && mc.TTL != nil {
			existsTTL = mc.TTL.Duration
		}
		removalAllowance = existsTTL + cfg.NotFoundGuard.ConfirmAfter.Duration + 2*5*time.Second + slack
	}
	var outageEndAt time.Time // under mu
	dueAt := func(node string) time.Time {
		mu.Lock()
		defer mu.Unlock()
		d, ok := deletedAt[node]
		if !ok || outageEndAt.IsZero() {
			return time.Time{}
		}
		if d.Before(outageEndAt) {
			d = outageEndAt
		}
		return d.Add(removalAllowance)
	}
	var tl *timeline
	if o.ChaosTimeline {
		tl = newTimeline(r.col.Registry)
		c.rec.onCall = tl.call
		r.col.Wire.mu.Lock()
		r.col.Wire.onRequest = tl.upstream
		r.col.Wire.mu.Unlock()
	}
	c.rec.onExists = func(node *v1.Node, exists bool, err error) {
		if err != nil {
			return
		}
		if !exists {
			tl.add("call", "InstanceExists", "false for "+node.Name, false)
		}
		mu.Lock()
		at, gone := deletedAt[node.Name]
		id, hidden := hiddenIDs[node.Name]
		mu.Unlock()
		if gone {
			check(invStale, exists && time.Since(at) > bound)
		}
		hAt, served := r.srv.HiddenAnsweredAt(id)
		if hidden && served && time.Since(hAt) > negTTL {
			check(invNegativeTTL, !exists)
		}
		if hidden && served && node.Name == notReadyHidden {
			check(invLive404, false) // asked again after the 404: not deleted yet
		}
	}
	c.rec.onMetadata = func(node *v1.Node, err error) {
		mu.Lock()
		id, hidden := hiddenIDs[node.Name]
		mu.Unlock()
		if !hidden || (err != nil && !errors.Is(err, cloudprovider.InstanceNotFound)) {
			return
		}
		if hAt, served := r.srv.HiddenAnsweredAt(id); served && time.Since(hAt) > negTTL {
			check(invNegativeTTL, err != nil)
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
		_, exists := r.srv.InstanceByNodeName(n.Name)
		tl.add("delete", n.Name, map[bool]string{true: "(instance exists)", false: "(instance gone)"}[exists], false)
		if due := dueAt(n.Name); !exists && removalAllowance > 0 && !due.IsZero() {
			check(invRemovedInBound, time.Now().After(due))
		}
		if n.Name == notReadyHidden {
			check(invLive404, exists)
			return
		}
		check(invWrongDelete, exists)
	}}
	// 5 NotReady nodes keep their instances: the lifecycle controller asks
	// about them every 5 s, through every fault; they must never be deleted.
	notReady := base[len(base)-5:]
	for _, inst := range notReady {
		if err := c.SetReady(inst.NodeName, false); err != nil {
			return err
		}
	}
	leaving := base[:len(base)-6]
	readyHidden := base[len(base)-6]

	if err := r.startCluster(); err != nil {
		return err
	}
	step := 30 * time.Second
	svc := 0
	stopTimeline := func() {}
	var opensInOutage *float64
	for pi, p := range phases {
		if err := r.srv.SetFaults(p.faults); err != nil {
			return err
		}
		fmt.Fprintf(r.progress, "  %s: %s\n", r.label, p.name)
		var opensBefore float64
		if p.faults.Outage && r.col.Registry != nil {
			opensBefore = readBreakerOpens(r.col.Registry)
		}
		if p.faults.Outage && tl != nil {
			tl.begin()
			tctx, stop := context.WithCancel(ctx)
			defer stop()
			go tl.run(tctx, c)
			stopTimeline = stop
		}
		for t := time.Duration(0); t < p.length; t += step {
			if pi == 0 && t == step {
				// One live NotReady and one live Ready instance are
				// answered "not found" once.
				for _, inst := range []simcloud.Instance{notReady[0], readyHidden} {
					mu.Lock()
					hiddenIDs[inst.NodeName] = inst.ID
					mu.Unlock()
					r.srv.HideInstanceOnce(inst.ID)
				}
			}
			now := time.Now()
			insts, err := c.AddNodes(2, false, false)
			if err != nil {
				return err
			}
			for _, inst := range insts {
				r.w.expect(inst.NodeName, now)
			}
			for j := 0; j < 2 && len(leaving) > 0; j++ {
				inst := leaving[0]
				leaving = leaving[1:]
				mu.Lock()
				deletedAt[inst.NodeName] = time.Now()
				mu.Unlock()
				r.srv.DeleteInstance(inst.ID)
				if err := c.SetReady(inst.NodeName, false); err != nil {
					return err
				}
			}
			if o.Services > 0 {
				if err := c.TouchService(svc % o.Services); err != nil {
					return err
				}
				svc++
			}
			if err := r.sleep(ctx, min(step, p.length-t)); err != nil {
				return err
			}
		}
		if p.faults.Outage && r.col.Registry != nil {
			v := readBreakerOpens(r.col.Registry) - opensBefore
			opensInOutage = &v
		}
	}
	if err := r.srv.SetFaults(simcloud.Faults{}); err != nil {
		return err
	}
	// Recovery: longer than every bound checked after the last deletion.
	recovery := longest + time.Minute
	fmt.Fprintf(r.progress, "  %s: recovery for %v\n", r.label, recovery.Round(time.Second))
	outageEnd := time.Now()
	mu.Lock()
	outageEndAt = outageEnd
	mu.Unlock()
	tl.outageEnded(outageEnd)
	dueCtx, stopDue := context.WithCancel(ctx)
	dueDone := make(chan *float64, 1)
	go func() { dueDone <- r.watchDue(dueCtx, outageEnd, dueAt) }()
	converged, err := r.waitQuiescent(ctx, outageEnd, recovery)
	stopDue()
	convergeDue := <-dueDone
	if err != nil {
		return err
	}
	stopTimeline()
	var convergeSecs *float64
	if converged {
		convergeSecs = r.side.QuiesceSeconds
		if convergeDue == nil { // waitQuiescent saw it first: the same moment
			convergeDue = convergeSecs
		}
	}
	if rest := recovery - time.Since(outageEnd); rest > 0 {
		if err := r.sleep(ctx, rest); err != nil {
			return err
		}
	}

	r.fill()
	r.side.SimSeconds = r.simSince(r.start)
	rec := c.rec.snapshot()
	ch := &ChaosSide{
		WritesIssued: rec.WritesIssued, WritesFailed: rec.WritesFailed, ConvergeSeconds: convergeSecs, ConvergeDueSeconds: convergeDue,
		HiddenAnswers: r.srv.Counters().HiddenAnswers,
	}
	joinWrites(ch, r.col.Wire.snapshot(), r.srv.WriteLog())
	ch.WritesPhantom = max(0, (rec.WritesIssued-rec.WritesFailed)-okWrites(r.col.Wire.snapshot()))
	mu.Lock()
	ch.Checks = map[string]int64{
		invWritesLost: ch.WritesSent, invWritesDup: ch.WritesLanded, invWritesPhantom: rec.WritesIssued,
		invStale: checks[invStale], invWrongDelete: checks[invWrongDelete], invNegativeTTL: checks[invNegativeTTL],
		invLive404:   checks[invLive404],
		invConverged: 1,
	}
	if removalAllowance > 0 {
		ch.Checks[invRemovedInBound] = checks[invRemovedInBound]
		ch.RemovedDeletedLate = viol[invRemovedInBound]
	}
	ch.StaleReadsBeyondBound = viol[invStale]
	ch.NodesWronglyDeleted = viol[invWrongDelete]
	ch.LiveDeletedAfter404 = viol[invLive404]
	ch.NotFoundBeyondTTL = viol[invNegativeTTL]
	mu.Unlock()
	if r.col.Registry != nil {
		ch.BreakerOpensInOutage = opensInOutage
		ch.BreakerStatesAtEnd = breakerStates(r.col.Registry)
		ch.Checks[invBreakerOpened], ch.Checks[invBreakerRecovers] = 1, 1
	}
	ch.judge()
	if tl != nil {
		ch.Timeline = tl.result(r.side.TimeTo)
		fmt.Fprintf(r.progress, "  %s: timeline from the outage's end (simulated s):\n", r.label)
		for _, l := range ch.Timeline.Summary {
			fmt.Fprintf(r.progress, "    %s\n", l)
		}
	}
	r.side.ChaosSide = ch
	return nil
}

// judge lists the invariants checked 0 times and those violated.
func (ch *ChaosSide) judge() {
	ch.Unchecked, ch.Violated = nil, nil
	for _, inv := range slices.Sorted(mapsKeys(ch.Checks)) {
		if ch.Checks[inv] == 0 {
			ch.Unchecked = append(ch.Unchecked, inv)
		}
	}
	if ch.Zone != nil {
		ch.judgeZone()
		return
	}
	bad := map[string]bool{
		invWritesLost: ch.WritesLost > 0, invWritesDup: ch.WritesDuplicated > 0, invWritesPhantom: ch.WritesPhantom > 0,
		invStale: ch.StaleReadsBeyondBound > 0, invWrongDelete: ch.NodesWronglyDeleted > 0, invLive404: ch.LiveDeletedAfter404 > 0,
		invNegativeTTL: ch.NotFoundBeyondTTL > 0, invConverged: ch.ConvergeSeconds == nil,
	}
	if _, ok := ch.Checks[invRemovedInBound]; ok {
		bad[invRemovedInBound] = ch.RemovedDeletedLate > 0
	}
	if _, ok := ch.Checks[invBreakerOpened]; ok {
		bad[invBreakerOpened] = ch.BreakerOpensInOutage == nil || *ch.BreakerOpensInOutage < 1
		bad[invBreakerRecovers] = ch.BreakerStatesAtEnd["read"] != limiter.StateClosed.String()
	}
	for _, inv := range slices.Sorted(mapsKeys(bad)) {
		if bad[inv] {
			ch.Violated = append(ch.Violated, inv)
		}
	}
}

// judgeZone is judge for the zone-outage variant.
func (ch *ChaosSide) judgeZone() {
	bad := map[string]bool{
		invLive404: ch.LiveDeletedAfter404 > 0, invWrongDelete: ch.NodesWronglyDeleted > 0,
		invRemovedInBound: ch.RemovedDeletedLate > 0, invZoneNeverGone: ch.ZoneNeverGone > 0,
		invZoneHeldPast: ch.ZoneHeldPast > 0,
	}
	for _, inv := range slices.Sorted(mapsKeys(bad)) {
		if bad[inv] {
			ch.Violated = append(ch.Violated, inv)
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// joinWrites joins the wire's write requests with the cloud's write log on
// request IDs: lost = answered 2xx but never landed; duplicated = a
// request ID that landed again and changed the cloud's state again (a retry
// carrying the same request ID that only confirmed what its first landing
// did is what an idempotency token makes of it, not a duplicate; the same
// rule for every column); ambiguous = landed but answered as a failure.
func joinWrites(ch *ChaosSide, wire []wireEntry, log []simcloud.WriteRecord) {
	landed := map[string]int{}
	duplicated := map[string]bool{}
	for _, w := range log {
		landed[w.RequestID]++
		if landed[w.RequestID] > 1 && w.Changed && !duplicated[w.RequestID] {
			duplicated[w.RequestID] = true
			ch.WritesDuplicated++
		}
	}
	ch.WritesLanded = int64(len(log))
	ch.WritesSent = int64(len(wire))
	failedLanded := map[string]bool{}
	for _, e := range wire {
		ok := e.Status >= 200 && e.Status < 300
		switch {
		case ok && landed[e.RequestID] == 0:
			ch.WritesLost++
		case !ok && landed[e.RequestID] > 0 && !failedLanded[e.RequestID]:
			failedLanded[e.RequestID] = true
			ch.WritesAmbiguous++
		}
	}
}

func okWrites(wire []wireEntry) int64 {
	var n int64
	for _, e := range wire {
		if e.Status >= 200 && e.Status < 300 {
			n++
		}
	}
	return n
}

// mergeChaos combines seeds: violations summed, checks the least over
// seeds (an invariant unchecked in any seed stays unchecked) and their sum,
// convergence the median; the zone figures the most over seeds, and per
// seed.
func mergeChaos(runs []Side) *ChaosSide {
	out := &ChaosSide{Checks: map[string]int64{}, ChecksTotal: map[string]int64{}}
	var conv, due []float64
	for i, r := range runs {
		ch := r.ChaosSide
		if z := ch.Zone; z != nil {
			if out.Zone == nil {
				out.Zone = &ZoneFigures{NotReady: z.NotReady, Removed: z.Removed, Hidden: z.Hidden, RemovedDeleted: z.RemovedDeleted}
			}
			out.Zone.RemovedDeleted = min(out.Zone.RemovedDeleted, z.RemovedDeleted)
			out.Zone.DeleteAfterRemovalMax = max(out.Zone.DeleteAfterRemovalMax, z.DeleteAfterRemovalMax)
			out.Zone.RevisitGapMax = max(out.Zone.RevisitGapMax, z.RevisitGapMax)
			out.Zone.BoundMax = max(out.Zone.BoundMax, z.BoundMax)
			out.Zone.DeleteAfterRemovalPerSeed = append(out.Zone.DeleteAfterRemovalPerSeed, z.DeleteAfterRemovalMax)
			out.Zone.RevisitGapPerSeed = append(out.Zone.RevisitGapPerSeed, z.RevisitGapMax)
			out.ZoneHeldPast += ch.ZoneHeldPast
			out.ZoneNeverGone += ch.ZoneNeverGone
		}
		out.WritesIssued += ch.WritesIssued
		out.WritesFailed += ch.WritesFailed
		out.WritesSent += ch.WritesSent
		out.WritesLanded += ch.WritesLanded
		out.WritesAmbiguous += ch.WritesAmbiguous
		out.WritesLost += ch.WritesLost
		out.WritesDuplicated += ch.WritesDuplicated
		out.WritesPhantom += ch.WritesPhantom
		out.StaleReadsBeyondBound += ch.StaleReadsBeyondBound
		out.NodesWronglyDeleted += ch.NodesWronglyDeleted
		out.LiveDeletedAfter404 += ch.LiveDeletedAfter404
		out.NotFoundBeyondTTL += ch.NotFoundBeyondTTL
		out.HiddenAnswers += ch.HiddenAnswers
		if ch.ConvergeSeconds != nil {
			conv = append(conv, *ch.ConvergeSeconds)
		}
		out.ConvergePerSeed = append(out.ConvergePerSeed, ch.ConvergeSeconds)
		out.ConvergeDuePerSeed = append(out.ConvergeDuePerSeed, ch.ConvergeDueSeconds)
		out.RemovedDeletedLate += ch.RemovedDeletedLate
		if ch.ConvergeDueSeconds != nil {
			due = append(due, *ch.ConvergeDueSeconds)
		}
		if ch.Timeline != nil {
			out.Timelines = append(out.Timelines, ch.Timeline)
		}
		if ch.BreakerOpensInOutage != nil {
			v := *ch.BreakerOpensInOutage
			if out.BreakerOpensInOutage == nil || v < *out.BreakerOpensInOutage {
				out.BreakerOpensInOutage = &v
			}
		}
		if ch.BreakerStatesAtEnd != nil && (out.BreakerStatesAtEnd == nil || ch.BreakerStatesAtEnd["read"] != limiter.StateClosed.String()) {
			out.BreakerStatesAtEnd = ch.BreakerStatesAtEnd
		}
		for k, v := range ch.Checks {
			if i == 0 || v < out.Checks[k] {
				out.Checks[k] = v
			}
			out.ChecksTotal[k] += v
		}
	}
	if len(conv) == len(runs) {
		m := median(conv)
		out.ConvergeSeconds = &m
	}
	if len(due) == len(runs) {
		m := median(due)
		out.ConvergeDueSeconds = &m
	}
	out.judge()
	return out
}
