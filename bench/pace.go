package bench

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Equal work: every column must run the controllers at the pace a real
// CCM would. The node controller's status loop (wait.UntilWithContext)
// sweeps every Node with InstanceMetadata, then sleeps one status period,
// so a round takes period + sweep; with the bare provider the sweep is
// ceil(N / workers) cloud round trips. The benchmark measures the rounds
// from the controllers' calls, and a run whose bare pace differs from that
// model by more than paceTolerance fails: its columns would not be doing
// a real CCM's work.

// paceTolerance is the largest accepted |measured/model − 1| of bare's
// status rounds per hour.
const paceTolerance = 0.05

// statusCall is one InstanceMetadata call of the controllers.
type statusCall struct{ start, end time.Time }

// statusPace splits the controllers' InstanceMetadata calls that start at
// or after from into sweeps (a gap longer than half a status period starts
// a new one) and returns the rounds per hour (from the sweeps' starts;
// nil with fewer than two sweeps) and the mean time of one sweep, first
// call to last answer (nil without a complete sweep: the last may be cut
// by the window's end).
func statusPace(calls []statusCall, from time.Time, period time.Duration) (roundsPerHour, sweepSeconds *float64, sweeps int) {
	var cs []statusCall
	for _, c := range calls {
		if !c.start.Before(from) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil, nil, 0
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].start.Before(cs[j].start) })
	type sweep struct{ start, end time.Time }
	var ss []sweep
	for _, c := range cs {
		if n := len(ss); n > 0 && c.start.Sub(ss[n-1].end) <= period/2 {
			if c.end.After(ss[n-1].end) {
				ss[n-1].end = c.end
			}
			continue
		}
		ss = append(ss, sweep{c.start, c.end})
	}
	if len(ss) >= 2 {
		cycle := ss[len(ss)-1].start.Sub(ss[0].start).Seconds() / float64(len(ss)-1)
		v := 3600 / cycle
		roundsPerHour = &v
		var sum float64
		for _, s := range ss[:len(ss)-1] {
			sum += s.end.Sub(s.start).Seconds()
		}
		w := sum / float64(len(ss)-1)
		sweepSeconds = &w
	}
	return roundsPerHour, sweepSeconds, len(ss)
}

// modelPace is a real CCM's status pace with the bare provider: rounds per
// hour = 3600 / (period + ceil(N/workers) × mean round trip), the mean
// round trip being the base latency plus half the (uniform) jitter.
func modelPace(o *Options, n, workers int) (roundsPerHour, sweepSeconds float64, formula string) {
	rtt := (o.Latency + o.Jitter/2).Seconds()
	sweepSeconds = math.Ceil(float64(n)/float64(workers)) * rtt
	period := o.statusPeriod()
	roundsPerHour = 3600 / (period.Seconds() + sweepSeconds)
	formula = fmt.Sprintf("3600 / (period + ceil(N/workers) x (latency + jitter/2)) = 3600 / (%v + ceil(%d/%d) x %.3fs) = %.3f rounds/h (sweep %.1fs)",
		period, n, workers, rtt, roundsPerHour, sweepSeconds)
	return roundsPerHour, sweepSeconds, formula
}

// checkPace returns an error when bare's measured status pace in a steady
// scenario differs from modelPace by more than paceTolerance.
func checkPace(s *ScenarioResult) error {
	if s.PaceModel == nil {
		return nil
	}
	for _, x := range s.runs[ColBare] {
		if x.StatusRoundsPerHour == nil {
			continue
		}
		if d := *x.StatusRoundsPerHour / s.PaceModel.RoundsPerHour; math.Abs(d-1) > paceTolerance {
			return fmt.Errorf("%s seed %d: the bare CCM's status loop ran %.3f rounds/h, a real CCM's %s: off by %+.1f %% (> %.0f %%); "+
				"the columns would not do a real CCM's work, so no table is printed", s.Scenario, x.Seed, *x.StatusRoundsPerHour, s.PaceModel.Formula, (d-1)*100, paceTolerance*100)
		}
	}
	return nil
}

// PaceModel is a real CCM's status pace on the scenario's cluster.
type PaceModel struct {
	RoundsPerHour float64 `json:"rounds_per_hour"`
	SweepSeconds  float64 `json:"sweep_seconds"`
	Formula       string  `json:"formula"`
}
