package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// planTestNodes are the node counts TestPlanPredictsRun checks: 1,000 and
// 5,000 (~10 min of CPU on a loaded 2-core machine), 1,000 alone under
// -race (several times slower); CLOUDGATE_PLAN_NODES overrides them (make
// bench-plan checks 1,000, 5,000 and 20,000, too heavy for make test).
func planTestNodes(t *testing.T) []int {
	v := os.Getenv("CLOUDGATE_PLAN_NODES")
	if v == "" && raceEnabled {
		return []int{1000}
	}
	if v == "" {
		return []int{1000, 5000}
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			t.Fatalf("CLOUDGATE_PLAN_NODES: %q is not a node count", s)
		}
		out = append(out, n)
	}
	return out
}

// TestPlanPredictsRun: the plan's reads per minute at each node count it
// reports are within 10 % of a steady run of the benchmark (Run, the
// command's default path) at that count, for each column the plan
// measures (cloudgate:cache, :batch, :list), and every point names a
// binding limit. The plan before issue 32 extrapolated a straight line
// from two small counts: 501 reads/min at 5,000 nodes where the
// simulation makes 334 (+50 %).
func TestPlanPredictsRun(t *testing.T) {
	sizes := planTestNodes(t)
	for _, supports := range []string{SupportsNone, SupportsBatch, SupportsList} {
		t.Run(supports, func(t *testing.T) {
			o := DefaultOptions()
			o.Services = 0
			o.SteadyWindow = 30 * time.Minute
			o.UpstreamSupports = supports
			col := planColumn(o)
			var plan *Plan
			runs := map[int]*Report{}
			_ = runVirtualFn(t, func(ctx context.Context) error {
				var err error
				if plan, err = RunPlan(ctx, o, sizes, testWriter{t}); err != nil {
					return err
				}
				for _, n := range sizes {
					ro := DefaultOptions()
					ro.Services, ro.SteadyWindow, ro.Nodes = 0, o.SteadyWindow, n
					ro.Scenarios, ro.Columns = []string{ScenarioSteady}, []string{col}
					if runs[n], err = Run(ctx, ro, testWriter{t}); err != nil {
						return err
					}
				}
				return nil
			})
			if len(plan.Points) != len(sizes) {
				t.Fatalf("plan has %d points, want %d (one per count)", len(plan.Points), len(sizes))
			}
			var table strings.Builder
			plan.WriteTable(&table)
			t.Logf("plan:\n%s", table.String())
			for i, n := range sizes {
				pt := plan.Points[i]
				got := runs[n].Scenarios[0].Columns[col].Steady.ReadsPerHour / 60
				t.Logf("%s at %d nodes: plan %.1f reads/min (%s: %s); simulated run %.1f", col, n, pt.ReadsPerMin, pt.Binding, pt.Why, got)
				if pt.Nodes != n || math.Abs(got-pt.ReadsPerMin) > 0.10*got {
					t.Errorf("%s: the plan says %.1f reads/min at %d nodes, a simulated run made %.1f: more than 10 %% apart", col, pt.ReadsPerMin, pt.Nodes, got)
				}
				if pt.Binding == "" || !strings.Contains(table.String(), fmt.Sprintf("%d nodes: %s", n, pt.Binding)) {
					t.Errorf("%d nodes: no binding limit printed", n)
				}
			}
		})
	}
}

// TestRunsOut: the plan names a run-out only at a simulated count.
func TestRunsOut(t *testing.T) {
	reads := func(p PlanPoint) float64 { return p.ReadsPerMin }
	pts := []PlanPoint{{Nodes: 1000, ReadsPerMin: 100}, {Nodes: 2000, ReadsPerMin: 200}}
	if n := runsOut(pts, reads, 1200, true); n != nil {
		t.Errorf("growing reads below the quota run out at %d: want none (no extrapolation)", *n)
	}
	pts = append(pts, PlanPoint{Nodes: 5000, ReadsPerMin: 300, Throttled: 1})
	if n := runsOut(pts, reads, 1200, true); n == nil || *n != 5000 {
		t.Errorf("throttled at 5000: runs out at %v, want 5000", n)
	}
	pts = []PlanPoint{{Nodes: 1000, ReadsPerMin: 100}, {Nodes: 8000, ReadsPerMin: 1150}}
	if n := runsOut(pts, reads, 1200, true); n == nil || *n != 8000 {
		t.Errorf("95 %% of the quota at 8000: runs out at %v, want 8000", n)
	}
	var p Plan
	p.Points, p.KubeQPS = []PlanPoint{{Nodes: 1000, ReadsPerMin: 100, ReadHeadroom: 100.0 / 1200}}, 20
	p.ReadRunsOutAt = runsOut(p.Points, reads, 1200, true)
	var b strings.Builder
	p.WriteTable(&b)
	if !strings.Contains(b.String(), "read quota: holds at every simulated count") || strings.Contains(b.String(), "near") {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestBinding: the limit each point names, from its figures.
func TestBinding(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		pt   PlanPoint
		want string
	}{
		{PlanPoint{ReadsPerMin: 1150}, LimitQuota},
		{PlanPoint{ReadsPerMin: 10, Throttled: 3}, LimitQuota},
		{PlanPoint{ReadsPerMin: 667, SweepSeconds: f(683)}, LimitWorkers},
		// No sweep ended twice (20,000 Nodes, 1 % NotReady): the status
		// loop's rate names the workers, not the period.
		{PlanPoint{Nodes: 20000, ReadsPerMin: 997, StatusCallsPerMin: 540, CacheHitRatio: f(0.3)}, LimitWorkers},
		{PlanPoint{Nodes: 1000, ReadsPerMin: 200, StatusCallsPerMin: 190, CacheHitRatio: f(0.1)}, LimitPeriod},
		{PlanPoint{ReadsPerMin: 10, CallsPerMin: map[string]float64{"ListInstances": 8}, SweepSeconds: f(3)}, LimitList},
		{PlanPoint{ReadsPerMin: 100, CacheHitRatio: f(0.5), SweepSeconds: f(60)}, LimitTTL},
		{PlanPoint{ReadsPerMin: 200, CacheHitRatio: f(0.1), SweepSeconds: f(60)}, LimitPeriod},
	} {
		if got, why := binding(&tc.pt, 20); got != tc.want || why == "" {
			t.Errorf("%+v: %q (%s), want %q", tc.pt, got, why, tc.want)
		}
	}
}
