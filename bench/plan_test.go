package bench

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestPlanPredictsRun: the planner's prediction for a node count it did
// not simulate (extrapolated from 250 and 500 nodes, as `plan` does) is
// within 10 % of a simulated steady run at that count (1,000 nodes), for
// each column: cloudgate:cache and cloudgate:batch (one worker: one node
// per batch, linear in N; 100.8 predicted, 100.8 simulated) and
// cloudgate:list (1.2 and 1.2: a refresh costs ceil(N/500) list pages,
// which the planner models; a straight line through 250 and 500 nodes
// predicted 0.9).
func TestPlanPredictsRun(t *testing.T) {
	for _, supports := range []string{SupportsNone, SupportsBatch, SupportsList} {
		t.Run(supports, func(t *testing.T) {
			o := DefaultOptions()
			o.Services = 0
			o.SteadyWindow = 30 * time.Minute
			o.UpstreamSupports = supports
			var plan *Plan
			var run *Report
			_ = runVirtualFn(t, func(ctx context.Context) error {
				var err error
				if plan, err = RunPlan(ctx, o, []int{250, 500}, testWriter{t}); err != nil {
					return err
				}
				ro := DefaultOptions()
				ro.Services, ro.SteadyWindow, ro.Nodes = 0, o.SteadyWindow, 1000
				ro.Scenarios, ro.Columns = []string{ScenarioSteady}, []string{planColumn(o)}
				run, err = Run(ctx, ro, testWriter{t})
				return err
			})
			want, ok := plan.ReadsPerMinAt(1000)
			if !ok {
				t.Fatal("no prediction")
			}
			got := run.Scenarios[0].Columns[planColumn(o)].Steady.ReadsPerHour / 60
			t.Logf("%s: predicted %.1f reads/min at 1,000 nodes from %+v; simulated %.1f", planColumn(o), want, plan.Points, got)
			if math.Abs(got-want) > 0.10*got {
				t.Errorf("%s: the plan predicts %.1f reads/min at 1,000 nodes, the simulated run made %.1f: more than 10 %% apart", planColumn(o), want, got)
			}
		})
	}
}
