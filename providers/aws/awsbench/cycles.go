package awsbench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cloudgate/cloudgate/providers/aws/awsbatch"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

// validLatency checks the latency model's durations (ec2sim checks them
// too, but only when a rig starts).
func validLatency(l ec2sim.Latency) error {
	for name, a := range l.Actions {
		if a.Base < 0 || a.Jitter < 0 || a.PerItem < 0 {
			return fmt.Errorf("-latency: %s: base, jitter and per-item cost must be >= 0", name)
		}
	}
	if a := l.Default; a.Base < 0 || a.Jitter < 0 || a.PerItem < 0 {
		return fmt.Errorf("-latency: base, jitter and per-item cost must be >= 0")
	}
	return nil
}

// commit is $CLOUDGATE_COMMIT (bench/aws-results.sh sets it), else the
// vcs.revision the binary was built from, with "+dirty" when the tree had
// changes; "" unknown.
func commit() string {
	if c := os.Getenv("CLOUDGATE_COMMIT"); c != "" {
		return c
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + dirty
}

// snapshot is a column's counters at one moment.
type snapshot struct {
	at                         time.Time
	describe, throttled, other int64
	lookups                    int64
}

func (r *rig) snapshot() snapshot {
	s := snapshot{at: time.Now(), lookups: r.count.lookups.Load()}
	s.describe, s.throttled, s.other = r.ec2Counts()
	return s
}

// runSteadyGroup runs every column at n nodes side by side, each on its
// own ec2sim (its own account: own buckets, own counters) and cluster, and
// returns their runs in o.Columns order.
//
// Fixed window (Cycles 0): every column is counted over Window from its
// controllers' start. Cycles mode: a column other than the adapter is
// counted from its start to its (Cycles×n+1)-th status lookup, taken just
// before that lookup goes to the provider, i.e. over Cycles whole status
// cycles; the adapter column over the longest of those windows. The
// counters at DeriveWindow are kept too (Early), for the derivation the
// table printed before. Hour > 0: each column's counters are also taken
// Warmup and Warmup+Hour after its start (SteadyRun.Hour), and the run ends
// then; cycles still open at that moment are marked CycleOpen.
func runSteadyGroup(ctx context.Context, o *Options, n int, seed int64, progress io.Writer) ([]*SteadyRun, error) {
	rigs := make([]*rig, len(o.Columns))
	defer func() {
		for _, r := range rigs {
			if r != nil {
				r.close()
			}
		}
	}()
	ends := make([]snapshot, len(o.Columns))
	// endsMu orders a cycle's end (a controller's goroutine) against an
	// -hour run that ends first and closes the cycles still open.
	var endsMu sync.Mutex
	closed := make([]bool, len(o.Columns))
	for i, col := range o.Columns {
		r, err := newRig(o, col, seed)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", col, err)
		}
		rigs[i] = r
		if _, err := r.cluster.AddNodes(n, true, false); err != nil {
			return nil, fmt.Errorf("%s: %w", col, err)
		}
		r.sim.ResetStats()
		r.count.nodes = int64(n)
		if o.Cycles > 0 && col != ColAdapter {
			r.count.stopAt = int64(o.Cycles)*int64(n) + 1
			r.count.onStop = func() {
				endsMu.Lock()
				defer endsMu.Unlock()
				if !closed[i] {
					ends[i] = r.snapshot()
				}
			}
		}
	}
	starts := make([]time.Time, len(rigs))
	for i, r := range rigs {
		if err := r.cluster.Start(); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Columns[i], err)
		}
		starts[i] = time.Now()
		r.count.setStart(starts[i])
	}
	early := make([]snapshot, len(rigs))
	haveEarly := false
	deadline := starts[0].Add(o.Window)
	// -hour: each column's window from Warmup to Warmup+Hour after its start.
	hourFrom, hourTo := make([]snapshot, len(rigs)), make([]snapshot, len(rigs))
	hourDone, cyclesEnded := 0, false
	label := fmt.Sprintf("steady %d seed %d", n, seed)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastPrint := time.Now()
	for {
		now := time.Now()
		if o.Cycles > 0 && !haveEarly && now.Sub(starts[len(starts)-1]) >= o.DeriveWindow {
			for i, r := range rigs {
				early[i] = r.snapshot()
			}
			haveEarly = true
		}
		if o.Cycles == 0 && !now.Before(deadline) {
			break
		}
		if o.Hour > 0 {
			for i, r := range rigs {
				el := now.Sub(starts[i])
				if hourFrom[i].at.IsZero() && el >= o.Warmup {
					hourFrom[i] = r.snapshot()
				}
				if hourTo[i].at.IsZero() && el >= o.Warmup+o.Hour {
					hourTo[i] = r.snapshot()
					hourDone++
				}
			}
			if hourDone == len(rigs) && haveEarly {
				break
			}
		}
		if o.Cycles > 0 && !cyclesEnded {
			open := 0
			for i, r := range rigs {
				if r.count.stopAt == 0 {
					continue
				}
				select {
				case <-r.count.done:
				default:
					open++
					if now.After(deadline) && o.Hour == 0 {
						return nil, fmt.Errorf("%s: %d whole status cycles did not end within -table-window %v (%d of %d lookups); raise -table-window",
							o.Columns[i], o.Cycles, o.Window, r.count.lookups.Load(), r.count.stopAt)
					}
				}
			}
			if open == 0 && haveEarly {
				// The columns without a cycle end (the adapter) end
				// with the last of the others.
				cyclesEnded = true
				for i, r := range rigs {
					if r.count.stopAt == 0 {
						ends[i] = r.snapshot()
					}
				}
				if o.Hour == 0 {
					break
				}
			}
		}
		if now.Sub(lastPrint) >= 10*time.Second {
			lastPrint = now
			for i, r := range rigs {
				d, t, _ := r.ec2Counts()
				fmt.Fprintf(progress, "  %s/%s: t=%.0fs, %d lookups, %d DescribeInstances, %d throttled\n",
					label, o.Columns[i], now.Sub(starts[i]).Seconds(), r.count.lookups.Load(), d, t)
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	// The columns without a cycle end (the adapter; every column with a
	// fixed window) end now unless the cycles ended; an -hour run that
	// ended first leaves the cycles open.
	endsMu.Lock()
	for i, r := range rigs {
		if r.count.stopAt == 0 {
			if !cyclesEnded {
				ends[i] = r.snapshot()
				closed[i] = o.Cycles > 0
			}
			continue
		}
		select {
		case <-r.count.done:
		default:
			closed[i] = true
			ends[i] = r.snapshot()
		}
	}
	endsMu.Unlock()
	runs := make([]*SteadyRun, len(rigs))
	for i, r := range rigs {
		col := o.Columns[i]
		e := ends[i]
		res := &SteadyRun{Nodes: n, Seed: seed, Window: e.at.Sub(starts[i]).Seconds(), Cycles: o.Cycles,
			Describe: e.describe, Throttled: e.throttled, Other: e.other, Lookups: e.lookups, CycleOpen: closed[i]}
		if o.Hour > 0 {
			res.Hour = newHourRun(starts[i], hourFrom[i], hourTo[i])
		}
		r.count.mu.Lock()
		for _, t := range r.count.roundEnds {
			if !t.After(e.at) {
				res.RoundEnds = append(res.RoundEnds, t.Sub(starts[i]).Seconds())
			}
		}
		r.count.mu.Unlock()
		if len(res.RoundEnds) > 0 {
			// The first round's lookups all reach the provider (the cache
			// is cold): its pace is the paper loop's miss rate.
			res.LookupRate = float64(n) / res.RoundEnds[0]
		} else {
			// No round ended (a fixed window shorter than one): the rate
			// from the start to the last lookup, as one column alone.
			_, res.LookupRate = r.count.rate()
		}
		if haveEarly {
			ea := early[i]
			w := ea.at.Sub(starts[i]).Seconds()
			res.Early = &SteadyRun{Nodes: n, Seed: seed, Window: w, Describe: ea.describe, Throttled: ea.throttled,
				Other: ea.other, Lookups: ea.lookups, LookupRate: float64(ea.lookups) / w}
		}
		if r.lister != nil {
			pages, err := listPagesPerRefresh(ctx, r)
			if err != nil {
				return nil, err
			}
			res.ListPages = pages
			if res.Early != nil {
				res.Early.ListPages = pages
			}
		}
		var err error
		if res.state, err = nodeStates(r.cluster); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "%s/%s: %d DescribeInstances, %d throttled, %d lookups, %d rounds in %.1fs\n",
			label, col, res.Describe, res.Throttled, res.Lookups, len(res.RoundEnds), res.Window)
		if h := res.Hour; h != nil {
			fmt.Fprintf(progress, "%s/%s: measured window from %.0fs for %.1fs: %d DescribeInstances, %d throttled, %d lookups\n",
				label, col, h.Start, h.Window, h.Describe, h.Throttled, h.Lookups)
		}
		runs[i] = res
	}
	return runs, nil
}

// listPagesPerRefresh runs awsbatch.LegacyRecheck list refreshes of the
// adapter (exactly one of them reads the legacy-tag page) and returns the
// DescribeInstances they took per refresh: one per ListInstances call (the
// simulator's counter would also count the controllers' lookups meanwhile).
func listPagesPerRefresh(ctx context.Context, r *rig) (float64, error) {
	pages := 0
	for range awsbatch.LegacyRecheck {
		for tok := ""; ; {
			_, next, err := r.lister.ListInstances(ctx, tok)
			if err != nil {
				return 0, fmt.Errorf("a list refresh: %w", err)
			}
			pages++
			if tok = next; tok == "" {
				break
			}
		}
	}
	return float64(pages) / awsbatch.LegacyRecheck, nil
}

// runScaleups runs the scale-up of one seed in every column, side by side
// with Parallel, and returns the runs in o.Columns order.
func runScaleups(ctx context.Context, o *Options, seed int64, progress io.Writer) ([]*ScaleupRun, error) {
	runs := make([]*ScaleupRun, len(o.Columns))
	errs := make([]error, len(o.Columns))
	var wg sync.WaitGroup
	for i, col := range o.Columns {
		run := func() {
			r, err := runScaleup(ctx, o, col, seed, progress)
			if err != nil {
				err = fmt.Errorf("scaleup/%s seed %d: %w", col, seed, err)
			}
			runs[i], errs[i] = r, err
		}
		if !o.Parallel {
			run()
			if errs[i] != nil {
				return nil, errs[i]
			}
			continue
		}
		wg.Go(run)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// measuredPerHour is a run's DescribeInstances per hour over its window.
func measuredPerHour(r SteadyRun) float64 {
	if r.CycleOpen {
		return math.NaN()
	}
	if !(r.Window > 0) {
		return 0
	}
	return float64(r.Describe) * time.Hour.Seconds() / r.Window
}

// earlyPerHour is the hour derived from the first DeriveWindow (the
// previous method), NaN without it.
func earlyPerHour(col string, r SteadyRun) float64 {
	if r.Early == nil {
		return math.NaN()
	}
	return perHour(col, *r.Early)
}
