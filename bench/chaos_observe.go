package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloudgate/cloudgate/limiter"
)

// What the chaos scenario observes besides the controllers' calls
// (cloudgate's breaker metrics, quiescence with removals counted once due),
// and its report rows.

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

// watchDue polls from the outage's end until ctx ends and returns the
// first time (simulated seconds since from) at which every condition of
// quiescence held, a removed instance's Node counting only once due
// (dueAt; zero: due at once); nil if never.
func (r *colRun) watchDue(ctx context.Context, from time.Time, dueAt func(node string) time.Time) *float64 {
	// A removed instance's Node held before it is due is left out of
	// every condition: its Node, route and LB host are the guard's
	// deliberate hold, not a late recovery.
	held := func(node string) bool {
		_, ok := r.srv.InstanceByNodeName(node)
		return !ok && time.Now().Before(dueAt(node))
	}
	for {
		q, err := r.c.QuiescenceExcept(held)
		if err == nil && q.All() {
			v := time.Since(from).Seconds()
			return &v
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// chaosChecks prints an invariant's violations with its check count: one
// run's, or merged over seeds the violations summed over all seeds next
// to the checks summed and the least in one seed.
func chaosChecks(x Side, inv string, v int64) string {
	if x.ChecksTotal != nil && x.Seeds > 1 {
		return fmt.Sprintf("%d (%d checks; >= %d per seed)", v, x.ChecksTotal[inv], x.Checks[inv])
	}
	return fmt.Sprintf("%d (%d checks)", v, x.Checks[inv])
}

// writeChaosRows adds the chaos invariants, each with its check count
// (chaosChecks); zone: the zone-outage variant's rows instead.
func writeChaosRows(row func(name string, cell func(Side) string), zone bool) {
	ck := chaosChecks
	if zone {
		writeZoneRows(row, ck)
		return
	}
	row("writes issued/failed (controllers)", func(x Side) string { return fmt.Sprintf("%d/%d", x.WritesIssued, x.WritesFailed) })
	row("writes sent/landed (wire/cloud)", func(x Side) string { return fmt.Sprintf("%d/%d", x.WritesSent, x.WritesLanded) })
	row("landed but answered failure", func(x Side) string { return d(x.WritesAmbiguous) })
	row("writes lost (request-ID join)", func(x Side) string { return ck(x, invWritesLost, x.WritesLost) })
	row("writes duplicated (request-ID join)", func(x Side) string { return ck(x, invWritesDup, x.WritesDuplicated) })
	row("ok to controllers beyond 2xx", func(x Side) string { return ck(x, invWritesPhantom, x.WritesPhantom) })
	row("stale reads beyond bound", func(x Side) string { return ck(x, invStale, x.StaleReadsBeyondBound) })
	row("nodes wrongly deleted", func(x Side) string { return ck(x, invWrongDelete, x.NodesWronglyDeleted) })
	row("404 for a live instance (answers)", func(x Side) string { return d(x.HiddenAnswers) })
	row("live node deleted after the 404", func(x Side) string { return ck(x, invLive404, x.LiveDeletedAfter404) })
	row("not found beyond negativeTTL", func(x Side) string { return ck(x, invNegativeTTL, x.NotFoundBeyondTTL) })
	row("converge after outage (s)", func(x Side) string { return secs(x.ConvergeSeconds, true) })
	row("  per seed (s)", func(x Side) string {
		var out []string
		for _, v := range x.ConvergePerSeed {
			out = append(out, secs(v, true))
		}
		return strings.Join(out, " ")
	})
	row("converge, removals when due (s)", func(x Side) string { return secs(x.ConvergeDueSeconds, true) })
	row("  per seed (s) ", func(x Side) string {
		var out []string
		for _, v := range x.ConvergeDuePerSeed {
			out = append(out, secs(v, true))
		}
		return strings.Join(out, " ")
	})
	row("removed node deleted late", func(x Side) string {
		if _, ok := x.Checks[invRemovedInBound]; !ok {
			return "-"
		}
		return ck(x, invRemovedInBound, x.RemovedDeletedLate)
	})
	row("read breaker opens in outage", func(x Side) string { return secs(x.BreakerOpensInOutage, false) })
	row("breakers at end (read/write)", func(x Side) string {
		if x.BreakerStatesAtEnd == nil {
			return "-"
		}
		return x.BreakerStatesAtEnd["read"] + "/" + x.BreakerStatesAtEnd["write"]
	})
	row("invariants violated", func(x Side) string { return listOrNone(x.Violated) })
	row("invariants unchecked", func(x Side) string { return listOrNone(x.Unchecked) })
}

func listOrNone(v []string) string {
	if len(v) == 0 {
		return "none"
	}
	return fmt.Sprint(v)
}
