package awsbench

import (
	"context"
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// HourRun is one column's steady window measured after the warm-up
// (Options.Hour): EC2's counters and the status lookups over it.
type HourRun struct {
	Start, Window              float64 // seconds from the controllers' start; real seconds
	Describe, Throttled, Other int64
	Lookups                    int64
}

// newHourRun is the difference of two snapshots.
func newHourRun(start time.Time, from, to snapshot) *HourRun {
	return &HourRun{Start: from.at.Sub(start).Seconds(), Window: to.at.Sub(from.at).Seconds(),
		Describe: to.describe - from.describe, Throttled: to.throttled - from.throttled,
		Other: to.other - from.other, Lookups: to.lookups - from.lookups}
}

// perHour scales a count of the window to 3600 s.
func (h *HourRun) perHour(v int64) float64 {
	if h == nil || !(h.Window > 0) {
		return math.NaN()
	}
	return float64(v) * time.Hour.Seconds() / h.Window
}

// rounds are the status rounds the window held: lookups / N (fractional,
// so a round cut by the window's edge counts its part).
func (h *HourRun) rounds(n int) float64 {
	if h == nil || n == 0 {
		return math.NaN()
	}
	return float64(h.Lookups) / float64(n)
}

// runSteadies runs the steady groups of every size and seed, one after
// the other or (SizesParallel) side by side, and appends their runs and
// node-state checks to res in size and seed order.
func runSteadies(ctx context.Context, o *Options, res *Result, progress io.Writer) error {
	type job struct {
		n    int
		seed int64
		runs []*SteadyRun
		err  error
	}
	var jobs []*job
	for _, n := range o.Sizes {
		for s := range o.seedsFor(n) {
			jobs = append(jobs, &job{n: n, seed: o.Seed + int64(s)})
		}
	}
	one := func(j *job) {
		if o.Parallel {
			j.runs, j.err = runSteadyGroup(ctx, o, j.n, j.seed, progress)
			if j.err != nil {
				j.err = fmt.Errorf("steady %d seed %d: %w", j.n, j.seed, j.err)
			}
			return
		}
		for _, col := range o.Columns {
			r, err := runSteady(ctx, o, col, j.n, j.seed, progress)
			if err != nil {
				j.err = fmt.Errorf("steady %d/%s seed %d: %w", j.n, col, j.seed, err)
				return
			}
			j.runs = append(j.runs, r)
		}
	}
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	if o.Hour > 0 && len(jobs) > 0 {
		sampler.Go(func() { res.LoadSamples = sampleLoad(stop, time.Minute) })
	}
	if o.SizesParallel {
		// The groups share the progress writer.
		progress = &lockedWriter{w: progress}
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Go(func() { one(j) })
		}
		wg.Wait()
	} else {
		for _, j := range jobs {
			if one(j); j.err != nil {
				break
			}
		}
	}
	close(stop)
	sampler.Wait()
	for _, j := range jobs {
		if j.err != nil {
			return j.err
		}
	}
	for _, j := range jobs {
		states := map[string]map[string]nodeState{}
		for i, col := range o.Columns {
			states[col] = j.runs[i].state
			res.Steady[col] = append(res.Steady[col], *j.runs[i])
		}
		res.StateChecks = append(res.StateChecks, compareStates(fmt.Sprintf("steady/%d", j.n), j.seed, o.Columns, states))
	}
	return nil
}

// sampleLoad reads the 1-min load average every period until stop.
func sampleLoad(stop <-chan struct{}, period time.Duration) []float64 {
	var out []float64
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
			var l float64
			if _, err := fmt.Sscan(uptime(), &l); err == nil {
				out = append(out, l)
			}
		}
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
