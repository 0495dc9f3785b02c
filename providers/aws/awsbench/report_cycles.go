package awsbench

import (
	"fmt"
	"io"
	"math"

	"github.com/cloudgate/cloudgate/bench/measure"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

// describeLatency is the latency model in words, for the header.
func (r *Result) describeLatency() string {
	l := r.Options.Latency
	if l.Default == (ec2sim.ActionLatency{}) && len(l.Actions) == 0 {
		return "no latency (every answer at once)"
	}
	d := l.Default
	s := fmt.Sprintf("every answer waits %v + U[0, %v)", d.Base, d.Jitter)
	if d.PerItem > 0 {
		s += fmt.Sprintf(" + %v per instance returned", d.PerItem)
	}
	s += ", drawn from a PCG source seeded with the run's seed — an assumption: AWS publishes no EC2 API latency figures"
	return s
}

// writeMeasured is the steady table of cycles mode: the measured hour next
// to the two derivations.
func (r *Result) writeMeasured(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "**Steady state, measured** (N initialised Ready nodes; the columns side by side, each on its own simulated account; "+
		"each column other than the adapter counted over %d whole status cycle(s) of its own — from the controllers' start to the first lookup of round %d — "+
		"and the adapter column over the longest of those windows; medians [min–max] over seeds):\n\n", o.Cycles, o.Cycles+1)
	tab := measure.NewTable("nodes", "column", "seeds", "window (s)", "first round (s)", "status lookups", "DescribeInstances", "RequestLimitExceeded",
		"**DescribeInstances / h, measured**", "share of bucket", "derived / h from the first "+o.DeriveWindow.String()+" (previous method)", "derived / h from the measured round")
	for _, n := range r.sortedSizes() {
		for _, col := range o.Columns {
			runs := r.Steady[col]
			seeds := 0
			for _, s := range runs {
				if s.Nodes == n {
					seeds++
				}
			}
			if seeds == 0 {
				continue
			}
			of := func(f func(SteadyRun) float64) measure.Spread { return steadyOf(runs, n, f) }
			m := of(measuredPerHour)
			share := m.Map(r.shareOfBucket)
			tab.Row(fmt.Sprint(n), col, fmt.Sprint(seeds),
				of(cycleWindow).Format("%.0f"),
				of(firstRound).Format("%.1f"),
				of(func(s SteadyRun) float64 { return float64(s.Lookups) }).Format("%.0f"),
				of(func(s SteadyRun) float64 { return float64(s.Describe) }).Format("%.0f"),
				of(func(s SteadyRun) float64 { return float64(s.Throttled) }).Format("%.0f"),
				"**"+m.Format("%.0f")+"**", share.Format("%.2f %%"),
				of(func(s SteadyRun) float64 { return earlyPerHour(col, s) }).Format("%.0f"),
				of(func(s SteadyRun) float64 { return roundPerHour(col, s) }).Format("%.0f"))
		}
	}
	tab.Write(w)
	fmt.Fprintln(w)
	for _, n := range r.sortedSizes() {
		a := steadyOf(r.Steady[ColAWS], n, measuredPerHour).Median
		g := steadyOf(r.Steady[ColAdapter], n, measuredPerHour).Median
		ae := steadyOf(r.Steady[ColAWS], n, func(s SteadyRun) float64 { return earlyPerHour(ColAWS, s) }).Median
		ge := steadyOf(r.Steady[ColAdapter], n, func(s SteadyRun) float64 { return earlyPerHour(ColAdapter, s) }).Median
		if a > 0 && g > 0 {
			fmt.Fprintf(w, "- %d nodes: aws alone / with the adapter, measured = %.0f / %.0f = **%.0f× fewer** DescribeInstances per hour", n, a, g, a/g)
			if ae > 0 && ge > 0 {
				fmt.Fprintf(w, " (the previous derivation from %v: %.0f / %.0f = %.0f×; measured aws alone differs from it by %+.0f %%)", o.DeriveWindow, ae, ge, ae/ge, math.Round(100*(a/ae-1))+0)
			}
			fmt.Fprintln(w, ".")
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "How the three per-hour columns are computed:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "- **measured**: DescribeInstances counted by ec2sim in the window × 3600 s / window. Over whole status cycles this is the steady rate "+
		"of a loop that repeats every cycle (aws alone); for aws+cloudgate the cycles alternate when a round is shorter than the cache TTL minus the period, "+
		"so one cycle holds only its cold round and overstates it (use -cycles 2 or a one-hour -table-window).")
	fmt.Fprintf(w, "- **derived from the first %v** (what this table printed before): the status loop on paper (`missesPerHour`) fed with the lookup rate and "+
		"DescribeInstances per lookup of the window's first %v; for the adapter, (1 h / listInterval) × the pages of one list refresh.\n", o.DeriveWindow, o.DeriveWindow)
	fmt.Fprintln(w, "- **derived from the measured round**: the same paper loop fed with N / the first round's measured duration (a cold round: every lookup reaches the provider) "+
		"and the DescribeInstances per lookup of the first "+o.DeriveWindow.String()+" (all misses).")
}

// roundPerHour is the paper loop fed with the measured first round's pace
// and the DescribeInstances per lookup of the cold start (the early window:
// every lookup a miss), not the whole window's, whose cache hits would
// count against misses a second time.
func roundPerHour(col string, r SteadyRun) float64 {
	if r.Early != nil {
		r.Describe, r.Lookups = r.Early.Describe, r.Early.Lookups
	}
	return perHour(col, r)
}

func firstRound(s SteadyRun) float64 {
	if len(s.RoundEnds) == 0 {
		return math.NaN()
	}
	return s.RoundEnds[0]
}

// cycleWindow is the cycles' window, NaN when they stayed open.
func cycleWindow(s SteadyRun) float64 {
	if s.CycleOpen {
		return math.NaN()
	}
	return s.Window
}
