package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/cloudgate/cloudgate/bench/measure"
)

// The fleet report: medians over seeds, its checks, JSON and Markdown.

// medianFleet is the median of each figure over runs, and the spreads.
func medianFleet(runs []FleetSide) (*FleetSide, map[string][2]float64) {
	out := &FleetSide{Seeds: len(runs), MemberQPS: runs[0].MemberQPS}
	spread := map[string][2]float64{}
	med := func(name string, get func(FleetSide) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		sp := measure.SpreadOf(v)
		spread[name] = [2]float64{sp.Min, sp.Max}
		return sp.Median
	}
	medPtr := func(name string, get func(FleetSide) *float64) *float64 {
		v := make([]float64, 0, len(runs))
		for _, r := range runs {
			p := get(r)
			if p == nil {
				return nil // not reached in some seed
			}
			v = append(v, *p)
		}
		m := med(name, func(s FleetSide) float64 { return *get(s) })
		return &m
	}
	i64 := func(name string, get func(FleetSide) int64) int64 {
		return int64(math.Round(med(name, func(s FleetSide) float64 { return float64(get(s)) })))
	}
	out.ThrottledWarmup = i64("throttled_warmup", func(s FleetSide) int64 { return s.ThrottledWarmup })
	out.Throttled = i64("throttled", func(s FleetSide) int64 { return s.Throttled })
	out.ThrottledBackground = i64("throttled_background", func(s FleetSide) int64 { return s.ThrottledBackground })
	for i := range runs[0].SteadyReadsPerSec {
		out.SteadyReadsPerSec = append(out.SteadyReadsPerSec, med(fmt.Sprintf("steady_reads_%d", i+1), func(s FleetSide) float64 { return s.SteadyReadsPerSec[i] }))
	}
	out.BackgroundPerSec = med("background_reads", func(s FleetSide) float64 { return s.BackgroundPerSec })
	out.SteadyUtilization = med("steady_utilization", func(s FleetSide) float64 { return s.SteadyUtilization })
	out.OthersScaleupPerSec = med("others_scaleup", func(s FleetSide) float64 { return s.OthersScaleupPerSec })
	out.OwnOtherScaleupPerSec = med("own_other_scaleup", func(s FleetSide) float64 { return s.OwnOtherScaleupPerSec })
	out.ScaleupUtilization = med("scaleup_utilization", func(s FleetSide) float64 { return s.ScaleupUtilization })
	out.InitSeconds = medPtr("init_seconds", func(s FleetSide) *float64 { return s.InitSeconds })
	out.QuiesceSeconds = medPtr("quiesce_seconds", func(s FleetSide) *float64 { return s.QuiesceSeconds })
	out.OverBound = medPtr("over_bound", func(s FleetSide) *float64 { return s.OverBound })
	if b := medPtr("bound_seconds", func(s FleetSide) *float64 {
		if s.Bound == nil {
			return nil
		}
		return &s.Bound.Seconds
	}); b != nil {
		out.Bound = &Bound{Seconds: *b, Formula: "median over seeds; per seed: " + runs[0].Bound.Formula}
	}
	if b := medPtr("bound_all_others_seconds", func(s FleetSide) *float64 {
		if s.BoundAllOthers == nil {
			return nil
		}
		return &s.BoundAllOthers.Seconds
	}); b != nil {
		out.BoundAllOthers = &Bound{Seconds: *b, Formula: "median over seeds; per seed: " + runs[0].BoundAllOthers.Formula}
		out.OverBoundAllOthers = medPtr("over_bound_all_others", func(s FleetSide) *float64 { return s.OverBoundAllOthers })
	}
	out.NodesInitialized = int(i64("nodes_initialized", func(s FleetSide) int64 { return int64(s.NodesInitialized) }))
	for _, r := range runs {
		out.TimedOut = out.TimedOut || r.TimedOut
	}
	out.WritesSent = i64("writes_sent", func(s FleetSide) int64 { return s.WritesSent })
	out.WritesLanded = i64("writes_landed", func(s FleetSide) int64 { return s.WritesLanded })
	// Violations are summed over seeds, never hidden by a median.
	for _, r := range runs {
		out.WritesLost += r.WritesLost
		out.WritesDuplicated += r.WritesDuplicated
	}
	out.FallbackTransitions = med("fallback_transitions", func(s FleetSide) float64 { return s.FallbackTransitions })
	out.RedisErrors = med("redis_errors", func(s FleetSide) float64 { return s.RedisErrors })
	if runs[0].Chaos != nil {
		c := &FleetChaos{FallbackBound: runs[0].Chaos.FallbackBound, MembersFellBack: len(runs[0].SteadyReadsPerSec), MembersRejoined: len(runs[0].SteadyReadsPerSec)}
		var rej []float64
		for _, r := range runs {
			// The least over seeds: one seed where a member did not fall
			// back or rejoin shows.
			c.MembersFellBack = min(c.MembersFellBack, r.Chaos.MembersFellBack)
			c.MembersRejoined = min(c.MembersRejoined, r.Chaos.MembersRejoined)
			c.ThrottledAroundOutage = max(c.ThrottledAroundOutage, r.Chaos.ThrottledAroundOutage)
			if r.Chaos.RejoinSeconds != nil {
				rej = append(rej, *r.Chaos.RejoinSeconds)
			}
		}
		c.KilledAt = med("chaos_killed_at", func(s FleetSide) float64 { return s.Chaos.KilledAt })
		c.RestartedAt = med("chaos_restarted_at", func(s FleetSide) float64 { return s.Chaos.RestartedAt })
		c.OutageReadsPerSec = med("chaos_outage_reads", func(s FleetSide) float64 { return s.Chaos.OutageReadsPerSec })
		spread["chaos_throttled"] = [2]float64{float64(slices.MinFunc(runs, func(a, b FleetSide) int { return int(a.Chaos.ThrottledAroundOutage - b.Chaos.ThrottledAroundOutage) }).Chaos.ThrottledAroundOutage), float64(c.ThrottledAroundOutage)}
		if len(rej) == len(runs) {
			m := med("chaos_rejoin", func(s FleetSide) float64 { return *s.Chaos.RejoinSeconds })
			c.RejoinSeconds = &m
		}
		out.Chaos = c
	}
	return out, spread
}

// Check returns an error naming every fleet invariant the run broke: a
// write lost or duplicated, a scale-up below its bound (the bound would be
// wrong), a column that did not finish; in chaos, a member that did not fall
// back or rejoin, or throttling beyond the fallback bound.
func (r *FleetReport) Check() error {
	var bad []string
	for _, col := range FleetColumns {
		runs := r.Runs[col]
		for _, s := range runs {
			if s.WritesLost > 0 || s.WritesDuplicated > 0 {
				bad = append(bad, fmt.Sprintf("%s seed %d: %d writes lost, %d duplicated", col, s.Seed, s.WritesLost, s.WritesDuplicated))
			}
			if s.WritesSent == 0 {
				bad = append(bad, fmt.Sprintf("%s seed %d: no write sent: the writes-lost check was not exercised", col, s.Seed))
			}
			if s.TimedOut || s.InitSeconds == nil {
				bad = append(bad, fmt.Sprintf("%s seed %d: scale-up not done within the timeout", col, s.Seed))
			}
			if s.OverBound != nil && *s.OverBound < 1 {
				bad = append(bad, fmt.Sprintf("%s seed %d: scale-up %.1fs beat its bound %.1fs: the bound is wrong", col, s.Seed, *s.InitSeconds, s.Bound.Seconds))
			}
			if c := s.Chaos; c != nil {
				n := len(s.SteadyReadsPerSec)
				if c.MembersFellBack != n || c.MembersRejoined != n {
					bad = append(bad, fmt.Sprintf("%s seed %d: %d/%d members fell back, %d/%d rejoined", col, s.Seed, c.MembersFellBack, n, c.MembersRejoined, n))
				}
				if c.ThrottledAroundOutage > c.FallbackBound {
					bad = append(bad, fmt.Sprintf("%s seed %d: %d throttled answers around the outage, over the fallback bound %d", col, s.Seed, c.ThrottledAroundOutage, c.FallbackBound))
				}
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("fleet invariants broken:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

// WriteJSON writes the report to path.
func (r *FleetReport) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteMarkdown writes the table: one row per figure, one column per
// fleet column, medians with [min–max] over seeds.
func (r *FleetReport) WriteMarkdown(w io.Writer) {
	var cols []string
	for _, c := range FleetColumns {
		if _, ok := r.Columns[c]; ok {
			cols = append(cols, c)
		}
	}
	fmt.Fprintf(w, "Conditions: %s. Seeds %d..%d; median [min–max] over %d seed(s).\n\n", r.Conditions, r.Options.Seed, r.Options.Seed+int64(r.Options.Seeds)-1, r.Options.Seeds)
	tab := measure.NewTable(append([]string{""}, cols...)...)
	row := func(name string, cell func(col string, s *FleetSide, sp map[string][2]float64) string) {
		cells := []string{name}
		for _, c := range cols {
			cells = append(cells, cell(c, r.Columns[c], r.Spread[c]))
		}
		tab.Row(cells...)
	}
	withSpread := func(v float64, sp [2]float64, format string, seeds int) string {
		s := fmt.Sprintf(format, v)
		if seeds > 1 {
			s += fmt.Sprintf(" ["+format+"–"+format+"]", sp[0], sp[1])
		}
		return s
	}
	seeds := r.Options.Seeds
	row("limits.read.qps of each member", func(_ string, s *FleetSide, _ map[string][2]float64) string {
		return fmt.Sprintf("%.3g", s.MemberQPS)
	})
	row("throttled answers, steady window + scale-up (simcloud)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return "**" + withSpread(float64(s.Throttled), sp["throttled"], "%.0f", seeds) + "**"
	})
	row("… of which the background client's", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(float64(s.ThrottledBackground), sp["throttled_background"], "%.0f", seeds)
	})
	row("throttled answers in the cold start (all clusters sweep at once)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(float64(s.ThrottledWarmup), sp["throttled_warmup"], "%.0f", seeds)
	})
	row("steady reads/s per cluster (served)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		var parts []string
		for _, v := range s.SteadyReadsPerSec {
			parts = append(parts, fmt.Sprintf("%.2f", v))
		}
		return strings.Join(parts, " / ")
	})
	row("steady quota utilisation (all clusters + background)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(100*s.SteadyUtilization, [2]float64{100 * sp["steady_utilization"][0], 100 * sp["steady_utilization"][1]}, "%.0f%%", seeds)
	})
	row("others' reads/s during the scale-up (measured)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(s.OthersScaleupPerSec, sp["others_scaleup"], "%.2f", seeds)
	})
	row("… and the scaling cluster's reads/s of its existing nodes", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(s.OwnOtherScaleupPerSec, sp["own_other_scaleup"], "%.2f", seeds)
	})
	row(fmt.Sprintf("scale-up: %d nodes initialised (s)", r.Options.ScaleupNodes), func(_ string, s *FleetSide, sp map[string][2]float64) string {
		if s.InitSeconds == nil {
			return "not reached"
		}
		return "**" + withSpread(*s.InitSeconds, sp["init_seconds"], "%.0f", seeds) + "**"
	})
	row("bound, Q = quota − the background client's reads (s)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		if s.Bound == nil {
			return "-"
		}
		return withSpread(s.Bound.Seconds, sp["bound_seconds"], "%.0f", seeds)
	})
	row("measured / bound", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		if s.OverBound == nil {
			return "-"
		}
		return "**" + withSpread(*s.OverBound, sp["over_bound"], "%.2f", seeds) + "×**"
	})
	row("(a reading, not a bound: Q = quota − every other read measured meanwhile, incl. the clusters' own) (s)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		if s.BoundAllOthers == nil {
			return "-"
		}
		return withSpread(s.BoundAllOthers.Seconds, sp["bound_all_others_seconds"], "%.0f", seeds)
	})
	row("(measured / that reading; not a bound)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		if s.OverBoundAllOthers == nil {
			return "-"
		}
		return withSpread(*s.OverBoundAllOthers, sp["over_bound_all_others"], "%.2f", seeds) + "×"
	})
	row("quota utilisation during the scale-up", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(100*s.ScaleupUtilization, [2]float64{100 * sp["scaleup_utilization"][0], 100 * sp["scaleup_utilization"][1]}, "%.0f%%", seeds)
	})
	row("scaling cluster quiescent (routes written) (s)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		if s.QuiesceSeconds == nil {
			return "not reached"
		}
		return withSpread(*s.QuiesceSeconds, sp["quiesce_seconds"], "%.0f", seeds)
	})
	row("writes sent / landed / lost (request-ID join; lost summed over seeds)", func(_ string, s *FleetSide, _ map[string][2]float64) string {
		return fmt.Sprintf("%d / %d / **%d**", s.WritesSent, s.WritesLanded, s.WritesLost)
	})
	row("Redis fallback transitions (all members)", func(col string, s *FleetSide, sp map[string][2]float64) string {
		if col != FleetShared {
			return "-"
		}
		return withSpread(s.FallbackTransitions, sp["fallback_transitions"], "%.0f", seeds)
	})
	row("Redis calls failed or over redisTimeout (served locally; all members)", func(col string, s *FleetSide, sp map[string][2]float64) string {
		if col != FleetShared {
			return "-"
		}
		return withSpread(s.RedisErrors, sp["redis_errors"], "%.0f", seeds)
	})
	tab.Write(w)
	if c := r.Columns[FleetShared]; c != nil && c.Chaos != nil {
		ch := c.Chaos
		clock := "real time" // seconds as the run's clock counts them
		if r.Options.TimeFactor > 1 {
			clock = "simulated"
		}
		fmt.Fprintf(w, "\nChaos (shared): Redis killed at %.0fs of the scale-up, restarted at %.0fs (%s). "+
			"Members in fallback during the outage: %d/%d (least over seeds); rejoined after the restart: %d/%d, the last after %s s (%s; the heartbeat is 1 s). "+
			"Throttled answers from the kill until a minute after the rejoin: %d (most over seeds) against the fallback bound %d "+
			"(2 × (read burst + write burst): the members' local bursts at the switch, then the fresh fleet burst at the rejoin). "+
			"Reads served by the members during the outage: %.2f/s against their shares' sum %.3g/s.\n",
			ch.KilledAt, ch.RestartedAt, clock, ch.MembersFellBack, r.Options.Clusters, ch.MembersRejoined, r.Options.Clusters,
			secs(ch.RejoinSeconds, false), clock, ch.ThrottledAroundOutage, ch.FallbackBound, ch.OutageReadsPerSec, c.MemberQPS)
	}
	if c := r.Columns[FleetShared]; c != nil && c.Bound != nil {
		fmt.Fprintf(w, "\nBound (shared): %s.\n", c.Bound.Formula)
		if c.BoundAllOthers != nil {
			fmt.Fprintf(w, "\nReading beside it, not a bound (shared): %s.\n", c.BoundAllOthers.Formula)
		}
	}
	r.writeSeeds(w, cols)
}

// writeSeeds prints one row per seed: the scale-up's time, measured/bound
// and throttled answers by method (shared: fallback transitions and failed
// Redis calls).
func (r *FleetReport) writeSeeds(w io.Writer, cols []string) {
	if r.Options.Seeds < 2 {
		return
	}
	fmt.Fprintf(w, "\nPer seed (scale-up initialised, measured/bound, throttled answers in the steady window + scale-up by method):\n\n")
	tab := measure.NewTable(append([]string{"seed"}, cols...)...)
	for i := 0; i < r.Options.Seeds; i++ {
		cells := []string{fmt.Sprint(r.Options.Seed + int64(i))}
		for _, c := range cols {
			if i >= len(r.Runs[c]) {
				cells = append(cells, "-")
				continue
			}
			s := r.Runs[c][i]
			cell := secs(s.InitSeconds, false) + " s"
			if s.OverBound != nil {
				cell += fmt.Sprintf(", %.2f×", *s.OverBound)
			}
			cell += fmt.Sprintf(", %d throttled", s.Throttled)
			if len(s.ThrottledByMethod) > 0 {
				var ms []string
				for _, m := range slices.Sorted(maps.Keys(s.ThrottledByMethod)) {
					ms = append(ms, fmt.Sprintf("%s %d", m, s.ThrottledByMethod[m]))
				}
				cell += " (" + strings.Join(ms, ", ") + ")"
			}
			if c == FleetShared {
				cell += fmt.Sprintf("; %.0f transitions, %.0f Redis errors", s.FallbackTransitions, s.RedisErrors)
			}
			cells = append(cells, cell)
		}
		tab.Row(cells...)
	}
	tab.Write(w)
}

// fleetClock says how the fleet scenario's time runs: in real time (its
// limiter runs on a real redis-server's clock, so it cannot run in
// virtual time like the other scenarios), compressed or not.
func fleetClock(f float64) string {
	if f == 1 {
		return "real time, uncompressed (the limiter runs on redis-server's clock; not virtual time like the other scenarios)"
	}
	return fmt.Sprintf("real time compressed × %g (the limiter runs on redis-server's clock; simulated seconds reported; the machine's load enters the figures)", f)
}
