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
// binding limit: a straight line extrapolated from two small counts
// overestimates what the simulation makes.
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
				if plan, err = RunPlan(ctx, o, sizes, PlanConfig{ScaleupNodes: 500}, testWriter{t}); err != nil {
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

// TestBinding: the limit each point names, from its figures, and a setting
// to change with it. At 5,000 Nodes with list prefetch 1.9 of 4.5
// reads/min were lifecycle batches while the plan named the cache TTL: the
// purposes of the reads now decide.
func TestBinding(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	plan := &Plan{QuotaRead: 20, NodeWorkers: 1, Supports: SupportsNone, ScaleupNodes: 500}
	aws := &Plan{QuotaRead: 20, NodeWorkers: 1, Supports: SupportsList, ListQPS: 10, ScaleupNodes: 500}
	for _, tc := range []struct {
		p       *Plan
		pt      PlanPoint
		want    string
		setting string
	}{
		{plan, PlanPoint{ReadsPerMin: 1150}, LimitQuota, "the read quota"},
		{plan, PlanPoint{ReadsPerMin: 10, Throttled: 3}, LimitQuota, "the read quota"},
		{plan, PlanPoint{ReadsPerMin: 667, SweepSeconds: f(683)}, LimitWorkers, "--concurrent-node-syncs: from 1 to 5"},
		// No sweep ended twice (20,000 Nodes, 1 % NotReady): the status
		// loop's rate names the workers, not the period.
		{plan, PlanPoint{Nodes: 20000, ReadsPerMin: 997, StatusCallsPerMin: 540, CacheHitRatio: f(0.3)}, LimitWorkers, "--concurrent-node-syncs"},
		{plan, PlanPoint{Nodes: 1000, ReadsPerMin: 200, StatusCallsPerMin: 190, CacheHitRatio: f(0.1)}, LimitPeriod, "methods.InstanceMetadata.ttl"},
		{plan, PlanPoint{ReadsPerMin: 10, CallsPerMin: map[string]float64{"ListInstances": 8}, SweepSeconds: f(3)}, LimitList, "batch.listInterval"},
		{plan, PlanPoint{ReadsPerMin: 100, CacheHitRatio: f(0.5), SweepSeconds: f(60)}, LimitTTL, "methods.InstanceMetadata.ttl"},
		{plan, PlanPoint{ReadsPerMin: 200, CacheHitRatio: f(0.1), SweepSeconds: f(60)}, LimitPeriod, "methods.InstanceMetadata.ttl"},
		// The reads' purposes decide: lifecycle batches over list pages
		// over a high hit ratio.
		{aws, PlanPoint{Nodes: 5000, ReadsPerMin: 4.5, CacheHitRatio: f(1), SweepSeconds: f(60),
			ReadsPerMinByPurpose: map[string]float64{PurposeLifecycle: 1.9, PurposeList: 1.7, PurposeRoutes: 0.9}}, LimitLifecycle, "methods.InstanceExists.ttl"},
		{aws, PlanPoint{Nodes: 20000, ReadsPerMin: 11, CacheHitRatio: f(1), SweepSeconds: f(60),
			ReadsPerMinByPurpose: map[string]float64{PurposeLifecycle: 3, PurposeList: 6.6, PurposeRoutes: 0.9}}, LimitList, "batch.listInterval"},
		{aws, PlanPoint{Nodes: 1000, ReadsPerMin: 3, CacheHitRatio: f(0.9), SweepSeconds: f(60),
			ReadsPerMinByPurpose: map[string]float64{PurposeLifecycle: 1, PurposeStatus: 1.2, PurposeRoutes: 0.8}}, LimitTTL, "methods.InstanceMetadata.ttl"},
		{aws, PlanPoint{Nodes: 1000, ReadsPerMin: 3, SweepSeconds: f(60),
			ReadsPerMinByPurpose: map[string]float64{PurposeRoutes: 2, PurposeStatus: 1}}, LimitRoutes, "methods.ListRoutes.ttl"},
		// List pages beyond EC2's unfiltered-DescribeInstances bucket
		// (10/s) bind before the read bucket does.
		{aws, PlanPoint{Nodes: 100000, ReadsPerMin: 600, SweepSeconds: f(60),
			ReadsPerMinByPurpose: map[string]float64{PurposeList: 590, PurposeRoutes: 10}}, LimitQuota, "batch.listInterval"},
	} {
		got, why, setting := binding(&tc.pt, tc.p)
		if got != tc.want || why == "" || !strings.Contains(setting, tc.setting) {
			t.Errorf("%+v: %q (%s; change %s), want %q (change %s)", tc.pt, got, why, setting, tc.want, tc.setting)
		}
	}
}

// TestForecastScaleup: the quota a K-Node scale-up needs is the steady
// reads plus the lookups beyond the burst over the least time the kube
// client (three requests per Node) or the node workers allow; an upstream
// that batches needs ceil(K/B) lookups.
func TestForecastScaleup(t *testing.T) {
	o := DefaultOptions() // kube 20 QPS / burst 30, 1 worker, 20 reads/s burst 20, batches of 500, RTT 50 ms
	pt := PlanPoint{NeedSteady: 2}
	forecastScaleup(&pt, o, 500, SupportsNone)
	wantT := float64(3*500-1-30) / 20 // the Synced Event of the last Node follows it
	if math.Abs(pt.ScaleupSeconds-wantT) > 1e-9 || pt.ScaleupReads != 500 {
		t.Fatalf("cache: T %.3f s, lookups %.0f; want %.3f s, 500", pt.ScaleupSeconds, pt.ScaleupReads, wantT)
	}
	if want := 2 + (500.0-20)/(wantT-0.05); math.Abs(pt.NeedScaleup-want) > 1e-9 {
		t.Errorf("cache: needs %.3f reads/s, want %.3f", pt.NeedScaleup, want)
	}
	forecastScaleup(&pt, o, 500, SupportsBatch)
	if pt.ScaleupReads != 1 || pt.NeedScaleup != 2 {
		t.Errorf("batch: %.0f lookups, needs %.3f reads/s; want 1 (within the burst), the steady 2", pt.ScaleupReads, pt.NeedScaleup)
	}
	// 100 workers and a kube client that does not hold them: the workers'
	// round trips set T.
	o.NodeWorkers, o.KubeQPS, o.KubeBurst = 100, 1e6, 1e6
	forecastScaleup(&pt, o, 5000, SupportsNone)
	if want := 50 * 0.05; math.Abs(pt.ScaleupSeconds-want) > 1e-9 {
		t.Errorf("100 workers: T %.3f s, want %.3f (50 round trips each)", pt.ScaleupSeconds, want)
	}
}

// TestApplyCloud: the aws profile is EC2's documented buckets and pages.
func TestApplyCloud(t *testing.T) {
	o := DefaultOptions()
	c, err := ApplyCloud(o, "aws")
	if err != nil {
		t.Fatal(err)
	}
	if o.ReadQPS != 20 || o.ReadBurst != 100 || o.CloudListPage != 1000 || c.ListQPS != 10 || c.ListBurst != 50 {
		t.Errorf("aws: read %g/%d, page %d, list %g/%d; want 20/100, 1000, 10/50", o.ReadQPS, o.ReadBurst, o.CloudListPage, c.ListQPS, c.ListBurst)
	}
	if _, err := ApplyCloud(o, "azure"); err == nil || !strings.Contains(err.Error(), "--cloud") {
		t.Errorf("unknown profile: %v, want an error naming --cloud", err)
	}
}
