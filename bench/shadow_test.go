package bench

import (
	"math"
	"testing"
	"time"
)

// TestShadowPredictsEnforcing runs one steady workload (300 nodes, 2 %
// NotReady) in five columns on fresh simulated clouds with the same seed:
// bare; cloudgate:cache and cloudgate:batch enforcing; and the same two in
// mode: shadow. A shadow column's live upstream calls must be the bare
// column's (the same controllers, unhindered: equal up to the run's own
// timing, within 5 %), and the calls it predicts within 10 % of what its
// enforcing twin measured over the same window. It runs in virtual time, so
// batch.maxWait is the configured 100 ms exactly and the machine's load
// cannot move a count.
func TestShadowPredictsEnforcing(t *testing.T) {
	o := smallOptions()
	o.Nodes = 300
	o.NotReadyPct = 2
	o.SteadyWindow = 10 * time.Minute
	o.Scenarios = []string{ScenarioSteady}
	o.Columns = []string{ColBare, ColShadowCache, ColCache, ColShadow, ColBatch}
	rep := runVirtual(t, o)
	within := func(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }
	for _, s := range rep.Scenarios {
		side := func(col string) Side { return s.runs[col][0] }
		bare := side(ColBare)
		for _, p := range [][2]string{{ColShadowCache, ColCache}, {ColShadow, ColBatch}} {
			sh, enf := side(p[0]), side(p[1])
			t.Logf("%s: %s live %d calls (bare %d), predicted %.0f; %s measured %d (predicted/measured %.3f)",
				s.Scenario, p[0], sh.UpstreamCalls, bare.UpstreamCalls, sh.ShadowCalls, p[1], enf.UpstreamCalls, sh.ShadowCalls/float64(enf.UpstreamCalls))
			t.Logf("  by method: %s %v, bare %v, %s %v", p[0], sh.CallsByMethod, bare.CallsByMethod, p[1], enf.CallsByMethod)
			if !within(float64(sh.UpstreamCalls), float64(bare.UpstreamCalls), 0.05) {
				t.Errorf("%s: %s sent %d calls upstream, bare %d: want the bare column's", s.Scenario, p[0], sh.UpstreamCalls, bare.UpstreamCalls)
			}
			// With NotReady Nodes the batch column's calls are mostly the
			// lifecycle peers' (provider/batching.go), which the shadow models.
			if !within(sh.ShadowCalls, float64(enf.UpstreamCalls), 0.10) {
				t.Errorf("%s: %s predicted %.0f calls, %s measured %d: want within 10 %%", s.Scenario, p[0], sh.ShadowCalls, p[1], enf.UpstreamCalls)
			}
		}
	}
}
