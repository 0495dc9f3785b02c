package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/bench/simcloud"
)

// The chaos zone-outage variant: a third of the cluster's
// Nodes go NotReady at once (their zone lost its network), the instances
// of a third of those are terminated, and a few live ones are answered
// "not found" once. The real node lifecycle controller then checks
// hundreds of NotReady Nodes every pass, one after the other, so each
// Node is revisited only every pass (seconds to minutes): the terminated
// instances' Nodes must still go within the not-found guard's bound, and
// no live Node may go on the one-shot 404.

// Invariant names of the zone variant (keys of ChaosSide.Checks).
const (
	invZoneHeldPast  = "removed_held_past_confirm_after"
	invZoneNeverGone = "removed_node_never_deleted"
)

// zoneWarmUp is the time before the zone goes down: longer than the
// guard's gracePeriod (2 m), so the Nodes are past it, as in a real
// cluster whose zone fails.
const zoneWarmUp = 3 * time.Minute

// zoneWindow is how long the run goes on after the zone went down: longer
// than existsTTL + confirmAfter + two lifecycle passes over every NotReady
// Node in every column.
const zoneWindow = 10 * time.Minute

// ZoneFigures are the zone variant's figures of one column (merged: the
// most over seeds for the times, per seed in the slices).
type ZoneFigures struct {
	// NotReady Nodes in the zone, Removed of them (instances terminated),
	// Hidden live ones answered 404 once; RemovedDeleted: Removed Nodes
	// deleted by the end.
	NotReady       int `json:"not_ready"`
	Removed        int `json:"removed"`
	Hidden         int `json:"hidden"`
	RemovedDeleted int `json:"removed_deleted"`
	// DeleteAfterRemovalMax: the longest time from an instance's removal
	// to its Node's deletion (simulated s); RevisitGapMax: the longest gap
	// between two lifecycle checks of a removed Node (the first from the
	// removal) until its deletion;
	// BoundMax: the largest per-Node bound it was judged against (see
	// zoneBound).
	DeleteAfterRemovalMax float64 `json:"delete_after_removal_max_s"`
	RevisitGapMax         float64 `json:"revisit_gap_max_s"`
	BoundMax              float64 `json:"bound_max_s"`
	// Per seed (merged results).
	DeleteAfterRemovalPerSeed []float64 `json:"delete_after_removal_max_s_per_seed,omitempty"`
	RevisitGapPerSeed         []float64 `json:"revisit_gap_max_s_per_seed,omitempty"`
}

// chaosZoneSpec: ChaosZoneNodes initialised Ready nodes; after zoneWarmUp
// a third go NotReady, the instances of a third of those are terminated,
// and a few live ones are answered 404 once; the run goes on zoneWindow.
func chaosZoneSpec(o *Options) scenarioSpec {
	n := o.ChaosZoneNodes
	zone := n / 3
	spec := scenarioSpec{name: ScenarioChaosZone, nodes: n, workers: o.NodeWorkers}
	spec.label = fmt.Sprintf("%d nodes; after %v a zone goes down: %d Nodes NotReady at once, the instances of %d of them terminated, %d live ones answered 404 once; then %v",
		n, zoneWarmUp, zone, zone/3, zoneHidden(zone), zoneWindow)
	spec.run = runChaosZone
	return spec
}

// zoneHidden is how many live zone instances are answered 404 once.
func zoneHidden(zone int) int { return max(2, zone/30) }

// zoneNode is what the run observes of one removed or hidden zone Node.
type zoneNode struct {
	id        string
	removed   bool
	created   time.Time
	lastCheck time.Time
	maxGap    time.Duration
	firstNeg  time.Time // first "does not exist" or guard hold after the removal
	deletedAt time.Time
}

func runChaosZone(ctx context.Context, r *colRun) error {
	o, c := r.o, r.c
	n := o.ChaosZoneNodes
	base, err := c.AddNodes(n, true, true)
	if err != nil {
		return err
	}
	zone := n / 3
	// The zone is a seeded choice of Nodes; its first third is terminated,
	// the next few are hidden once.
	rng := rand.New(rand.NewSource(r.side.Seed ^ 0x20e))
	perm := rng.Perm(n)
	zoneInsts := make([]simcloud.Instance, zone)
	for i := range zoneInsts {
		zoneInsts[i] = base[perm[i]]
	}
	removed := zoneInsts[:zone/3]
	hidden := zoneInsts[zone/3 : zone/3+zoneHidden(zone)]

	// The guard's parameters (zero: no guard, the bare columns).
	var existsTTL, confirmAfter, grace time.Duration
	if cfg := r.col.Config; cfg != nil && (cfg.NotFoundGuard.Enabled == nil || *cfg.NotFoundGuard.Enabled) {
		if mc, ok := cfg.Methods["InstanceExists"]; ok && mc.TTL != nil {
			existsTTL = mc.TTL.Duration
		}
		confirmAfter, grace = cfg.NotFoundGuard.ConfirmAfter.Duration, cfg.NotFoundGuard.GracePeriod.Duration
	}
	const slack = time.Second
	var (
		mu     sync.Mutex
		nodes  = map[string]*zoneNode{}
		checks = map[string]int64{}
		viol   = map[string]int64{}
		down   time.Time // when the zone went down (under mu)
	)
	check := func(inv string, bad bool) {
		checks[inv]++
		if bad {
			viol[inv]++
		}
	}
	for _, inst := range removed {
		nodes[inst.NodeName] = &zoneNode{id: inst.ID, removed: true}
	}
	for _, inst := range hidden {
		nodes[inst.NodeName] = &zoneNode{id: inst.ID}
	}
	c.rec.onExists = func(node *v1.Node, exists bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		zn := nodes[node.Name]
		if zn == nil || down.IsZero() {
			return
		}
		now := time.Now()
		if !zn.removed {
			if _, served := r.srv.HiddenAnsweredAt(zn.id); served {
				check(invLive404, false) // asked again after the 404: not deleted yet
			}
			return
		}
		zn.created = node.CreationTimestamp.Time
		zn.maxGap = max(zn.maxGap, now.Sub(zn.lastCheck))
		zn.lastCheck = now
		held := guardHeld(err)
		neg := err == nil && !exists
		// A check at least confirmAfter after the first "does not exist"
		// (and past gracePeriod) is due: the guard re-reads, and holds
		// again only if the cloud said "exists" meanwhile (it never does).
		if !zn.firstNeg.IsZero() && now.Sub(zn.firstNeg) >= confirmAfter && now.Sub(zn.created) >= grace && (held || neg) {
			check(invZoneHeldPast, held)
		}
		if zn.firstNeg.IsZero() && (held || neg) {
			zn.firstNeg = now
		}
	}
	c.nodeHandler = cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		nd, ok := obj.(*v1.Node)
		if !ok {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				nd, _ = t.Obj.(*v1.Node)
			}
		}
		if nd == nil {
			return
		}
		_, exists := r.srv.InstanceByNodeName(nd.Name)
		mu.Lock()
		defer mu.Unlock()
		zn := nodes[nd.Name]
		switch {
		case zn != nil && zn.removed:
			zn.deletedAt = time.Now()
			check(invWrongDelete, exists)
		case zn != nil:
			check(invLive404, exists)
		default:
			check(invWrongDelete, exists)
		}
	}}
	if err := r.startCluster(); err != nil {
		return err
	}
	fmt.Fprintf(r.progress, "  %s: warm-up for %v\n", r.label, zoneWarmUp)
	if err := r.sleep(ctx, zoneWarmUp); err != nil {
		return err
	}
	fmt.Fprintf(r.progress, "  %s: zone down: %d Nodes NotReady, %d instances terminated, %d answered 404 once\n", r.label, zone, len(removed), len(hidden))
	for _, inst := range zoneInsts {
		if err := c.SetReady(inst.NodeName, false); err != nil {
			return err
		}
	}
	mu.Lock()
	down = time.Now()
	for _, zn := range nodes {
		zn.lastCheck = down // the first gap runs from the removal
	}
	mu.Unlock()
	for _, inst := range removed {
		r.srv.DeleteInstance(inst.ID)
	}
	// The one-shot 404s come while the lifecycle controller goes through
	// the zone: half at once, half a minute later (after existsTTL's
	// cached answers from before the outage ran out).
	for i, inst := range hidden {
		if i == len(hidden)/2 {
			if err := r.sleep(ctx, time.Minute); err != nil {
				return err
			}
		}
		r.srv.HideInstanceOnce(inst.ID)
	}
	if err := r.sleep(ctx, zoneWindow-time.Since(down)); err != nil {
		return err
	}

	r.fill()
	r.side.SimSeconds = r.simSince(r.start)
	mu.Lock()
	defer mu.Unlock()
	z := &ZoneFigures{NotReady: zone, Removed: len(removed), Hidden: len(hidden)}
	for _, zn := range nodes {
		if !zn.removed {
			continue
		}
		if zn.deletedAt.IsZero() {
			check(invZoneNeverGone, true)
			continue
		}
		check(invZoneNeverGone, false)
		z.RemovedDeleted++
		took := zn.deletedAt.Sub(down)
		bound := zoneBound(down, zn.created, existsTTL, confirmAfter, grace, zn.maxGap) + slack
		check(invRemovedInBound, took > bound)
		z.DeleteAfterRemovalMax = max(z.DeleteAfterRemovalMax, took.Seconds())
		z.RevisitGapMax = max(z.RevisitGapMax, zn.maxGap.Seconds())
		z.BoundMax = max(z.BoundMax, bound.Seconds())
	}
	ch := &ChaosSide{Zone: z, HiddenAnswers: r.srv.Counters().HiddenAnswers}
	ch.Checks = map[string]int64{
		invLive404: checks[invLive404], invWrongDelete: checks[invWrongDelete],
		invRemovedInBound: checks[invRemovedInBound], invZoneNeverGone: checks[invZoneNeverGone],
	}
	if confirmAfter > 0 {
		ch.Checks[invZoneHeldPast] = checks[invZoneHeldPast]
	}
	ch.LiveDeletedAfter404 = viol[invLive404]
	ch.NodesWronglyDeleted = viol[invWrongDelete]
	ch.RemovedDeletedLate = viol[invRemovedInBound]
	ch.ZoneHeldPast = viol[invZoneHeldPast]
	ch.ZoneNeverGone = viol[invZoneNeverGone]
	ch.judge()
	r.side.ChaosSide = ch
	return nil
}

// zoneBound is the time from the removal of an instance within which its
// Node must be deleted: a cached "exists" lives existsTTL; the first check
// after it (within one revisit gap) gets the first "does not exist" and is
// held; the first check at least confirmAfter later (within another gap)
// re-reads and passes it on, and the lifecycle controller deletes the Node
// — but not before the Node is gracePeriod old (README: "within
// confirmAfter + one revisit interval of the first 'does not exist'"). gap
// is the longest time between two lifecycle checks of that Node, measured.
// Without the guard (bare) existsTTL and confirmAfter are 0: two gaps.
func zoneBound(removedAt, created time.Time, existsTTL, confirmAfter, grace, gap time.Duration) time.Duration {
	b := existsTTL + confirmAfter + 2*gap
	if g := created.Add(grace).Add(gap).Sub(removedAt); g > b {
		b = g
	}
	return b
}

// guardHeld reports an answer held by cloudgate's not-found guard (a
// retryable *api.RetryError naming it).
func guardHeld(err error) bool {
	var re *cloudproviderapi.RetryError
	return errors.As(err, &re) && strings.Contains(err.Error(), "(notFoundGuard)")
}

// writeZoneRows adds the zone variant's figures and invariants.
func writeZoneRows(row func(name string, cell func(Side) string), ck func(x Side, inv string, v int64) string) {
	zf := func(f func(*ZoneFigures) string) func(Side) string {
		return func(x Side) string {
			if x.ChaosSide == nil || x.Zone == nil {
				return "-"
			}
			return f(x.Zone)
		}
	}
	row("zone NotReady / terminated / 404 once", zf(func(z *ZoneFigures) string { return fmt.Sprintf("%d/%d/%d", z.NotReady, z.Removed, z.Hidden) }))
	row("terminated nodes deleted", zf(func(z *ZoneFigures) string { return fmt.Sprintf("%d/%d", z.RemovedDeleted, z.Removed) }))
	row("removal to deletion, max (s)", zf(func(z *ZoneFigures) string { return fmt.Sprintf("%.1f", z.DeleteAfterRemovalMax) }))
	row("  per seed (s)", zf(func(z *ZoneFigures) string { return joinFloats(z.DeleteAfterRemovalPerSeed, z.DeleteAfterRemovalMax) }))
	row("revisit gap, max (s)", zf(func(z *ZoneFigures) string { return fmt.Sprintf("%.1f", z.RevisitGapMax) }))
	row("  per seed (s) ", zf(func(z *ZoneFigures) string { return joinFloats(z.RevisitGapPerSeed, z.RevisitGapMax) }))
	row("bound, max (s)", zf(func(z *ZoneFigures) string { return fmt.Sprintf("%.1f", z.BoundMax) }))
	row("removed node deleted late", func(x Side) string { return ck(x, invRemovedInBound, x.RemovedDeletedLate) })
	row("removed node never deleted", func(x Side) string { return ck(x, invZoneNeverGone, x.ZoneNeverGone) })
	row("held past confirmAfter", func(x Side) string {
		if _, ok := x.Checks[invZoneHeldPast]; !ok {
			return "-"
		}
		return ck(x, invZoneHeldPast, x.ZoneHeldPast)
	})
	row("404 for a live instance (answers)", func(x Side) string { return d(x.HiddenAnswers) })
	row("live node deleted after the 404", func(x Side) string { return ck(x, invLive404, x.LiveDeletedAfter404) })
	row("nodes wrongly deleted", func(x Side) string { return ck(x, invWrongDelete, x.NodesWronglyDeleted) })
	row("invariants violated", func(x Side) string { return listOrNone(x.Violated) })
	row("invariants unchecked", func(x Side) string { return listOrNone(x.Unchecked) })
}

// joinFloats prints per-seed values (one run: one, one).
func joinFloats(v []float64, one float64) string {
	if len(v) == 0 {
		v = []float64{one}
	}
	var out []string
	for _, f := range v {
		out = append(out, fmt.Sprintf("%.1f", f))
	}
	return strings.Join(out, " ")
}
