package awsbench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/cloudgate/cloudgate/bench/measure"
)

// cycleRoundsPerHour is the status rounds per hour of a run's cycles:
// lookups / N over the cycle window (NaN when the cycles stayed open).
func cycleRoundsPerHour(r SteadyRun) float64 {
	if r.CycleOpen || !(r.Window > 0) || r.Nodes == 0 {
		return math.NaN()
	}
	return float64(r.Lookups) / float64(r.Nodes) * time.Hour.Seconds() / r.Window
}

// cycleThrottledPerHour is RequestLimitExceeded per hour over the cycles.
func cycleThrottledPerHour(r SteadyRun) float64 {
	if r.CycleOpen || !(r.Window > 0) {
		return math.NaN()
	}
	return float64(r.Throttled) * time.Hour.Seconds() / r.Window
}

func hourOf(f func(*HourRun) float64) func(SteadyRun) float64 {
	return func(s SteadyRun) float64 {
		if s.Hour == nil {
			return math.NaN()
		}
		return f(s.Hour)
	}
}

// ratio is a/b, NaN when b is not positive.
func ratio(a, b float64) float64 {
	if !(b > 0) {
		return math.NaN()
	}
	return a / b
}

// writeHour is the table of -hour: the window measured after the warm-up
// next to the derivation from the same run's whole status cycles (and the
// paper loop fed with its measured round), with their ratios.
func (r *Result) writeHour(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "\n**Steady hour, measured** (the same runs: each column counted over %v of real time from %v after its controllers' start; "+
		"every size and column side by side: %s; medians [min–max] over seeds):\n\n", o.Hour, o.Warmup, r.sideBySide())
	tab := measure.NewTable("nodes", "column", "window (s)", "status rounds in it", "**rounds / h, measured**", "rounds / h, cycles",
		"**DescribeInstances / h, measured**", "DescribeInstances / h, cycles", "measured / cycles", "DescribeInstances / h, paper loop on the measured round", "measured / paper",
		"**RequestLimitExceeded / h, measured**", "RequestLimitExceeded / h, cycles", "share of bucket, measured")
	for _, n := range r.sortedSizes() {
		for _, col := range o.Columns {
			runs := r.Steady[col]
			if !slices.ContainsFunc(runs, func(s SteadyRun) bool { return s.Nodes == n }) {
				continue
			}
			of := func(f func(SteadyRun) float64) measure.Spread { return steadyOf(runs, n, f) }
			reads := hourOf(func(h *HourRun) float64 { return h.perHour(h.Describe) })
			m := of(reads)
			share := m.Map(r.shareOfBucket)
			tab.Row(fmt.Sprint(n), col,
				of(hourOf(func(h *HourRun) float64 { return h.Window })).Format("%.0f"),
				of(hourOf(func(h *HourRun) float64 { return h.rounds(n) })).Format("%.2f"),
				"**"+of(hourOf(func(h *HourRun) float64 { return h.perHour(h.Lookups) / float64(n) })).Format("%.2f")+"**",
				of(cycleRoundsPerHour).Format("%.2f"),
				"**"+m.Format("%.0f")+"**",
				of(measuredPerHour).Format("%.0f"),
				of(func(s SteadyRun) float64 { return ratio(reads(s), measuredPerHour(s)) }).Format("%.3f"),
				of(func(s SteadyRun) float64 { return roundPerHour(col, s) }).Format("%.0f"),
				of(func(s SteadyRun) float64 { return ratio(reads(s), roundPerHour(col, s)) }).Format("%.3f"),
				"**"+of(hourOf(func(h *HourRun) float64 { return h.perHour(h.Throttled) })).Format("%.0f")+"**",
				of(cycleThrottledPerHour).Format("%.0f"),
				share.Format("%.2f %%"))
		}
	}
	tab.Write(w)
	fmt.Fprintln(w)
	if len(r.LoadSamples) > 0 {
		s := measure.SpreadOf(r.LoadSamples)
		sum := 0.0
		for _, l := range r.LoadSamples {
			sum += l
		}
		fmt.Fprintf(w, "Load average (1 min) sampled every minute while the steady runs went: %d samples, mean %.2f, median %.2f, min %.2f, max %.2f.\n\n",
			len(r.LoadSamples), sum/float64(len(r.LoadSamples)), s.Median, s.Min, s.Max)
	}
	fmt.Fprintln(w, "- **measured**: ec2sim's counters (and the status lookups) at the window's end minus those at its start, × 3600 s / window; "+
		"rounds = status lookups / N, so a round cut by the window's edges counts its part.")
	fmt.Fprintln(w, "- **cycles**: the same run's whole status cycles (the table above), scaled to 3600 s; \"—\" when the cycles had not ended by the window's end.")
	fmt.Fprintln(w, "- **paper loop on the measured round**: `missesPerHour` fed with N / the first round's measured duration and the DescribeInstances per lookup of the "+
		"first "+o.DeriveWindow.String()+"; for the adapter, (1 h / listInterval) × the pages of one list refresh.")
	fmt.Fprintln(w, "- One hour holds a whole number of status cycles plus a part: the part's lookups depend on where the window starts in a cycle, "+
		"so a measured hour can differ from the cycles' rate by up to the lookups of that part (a window of several hours narrows it).")
}

// sideBySide says what ran at once.
func (r *Result) sideBySide() string {
	o := r.Options
	if o.SizesParallel {
		return fmt.Sprintf("%d worlds at once (%d size(s) × %d column(s), each its own ec2sim and cluster)", len(o.Sizes)*len(o.Columns), len(o.Sizes), len(o.Columns))
	}
	return fmt.Sprintf("the %d columns of a size at once, the sizes one after the other", len(o.Columns))
}
