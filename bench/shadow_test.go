package bench

import (
	"context"
	"math"
	"testing"
)

// TestShadowPredictsEnforcing runs one workload (steady and scaleup, a few
// hundred nodes) in five columns on fresh simulated clouds with the same
// seed: bare; cloudgate:cache and cloudgate:batch enforcing; and the same
// two in mode: shadow. A shadow column's live upstream calls must be the
// bare column's (the same controllers, unhindered: equal up to the
// controllers' own timing, within 5 %), and the calls it predicts within
// 10 % of what its enforcing twin measured — over the same window: steady
// runs equal windows; scaleup runs each column until quiescence, and the
// enforcing one gets there sooner (no 429 storm of route writes), so the
// prediction is read from the shadow column's series at the enforcing
// column's quiescence time.
func TestShadowPredictsEnforcing(t *testing.T) {
	o := smallOptions()
	o.Nodes, o.ScaleupNodes = 300, 300
	o.NotReadyPct = 2
	o.Scenarios = []string{ScenarioSteady, ScenarioScaleup}
	// bare first and last: the two show how much the real-time compressed
	// run alone moves a column's calls (CPU load stretches the controllers'
	// simulated periods).
	o.Columns = []string{ColBare, ColShadowCache, ColCache, ColShadow, ColBatch, ColBare}
	rep, err := Run(context.Background(), o, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	within := func(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }
	for _, s := range rep.Scenarios {
		side := func(col string) Side { return s.runs[col][0] }
		bare := side(ColBare)
		if b2 := s.runs[ColBare][1]; true {
			t.Logf("%s: bare run twice: %d and %d calls (%v, %v)", s.Scenario, bare.UpstreamCalls, b2.UpstreamCalls, bare.CallsByMethod, b2.CallsByMethod)
		}
		for _, p := range [][2]string{{ColShadowCache, ColCache}, {ColShadow, ColBatch}} {
			sh, enf := side(p[0]), side(p[1])
			if s.Scenario == ScenarioScaleup && sh.Series != nil {
				full := sh.ShadowCalls
				for _, pt := range sh.Series.Points {
					if pt.T <= enf.SimSeconds {
						sh.ShadowCalls = pt.ShadowCalls
					}
				}
				t.Logf("%s: %s predicted %.0f calls in the enforcing column's %.0f s, %.0f in its own %.0f s", s.Scenario, p[0], sh.ShadowCalls, enf.SimSeconds, full, sh.SimSeconds)
			}
			t.Logf("%s: %s live %d calls (bare %d), predicted %.0f; %s measured %d (predicted/measured %.3f)",
				s.Scenario, p[0], sh.UpstreamCalls, bare.UpstreamCalls, sh.ShadowCalls, p[1], enf.UpstreamCalls, sh.ShadowCalls/float64(enf.UpstreamCalls))
			t.Logf("  by method: %s %v, bare %v, %s %v", p[0], sh.CallsByMethod, bare.CallsByMethod, p[1], enf.CallsByMethod)
			if !within(float64(sh.UpstreamCalls), float64(bare.UpstreamCalls), 0.05) {
				t.Errorf("%s: %s sent %d calls upstream, bare %d: want the bare column's", s.Scenario, p[0], sh.UpstreamCalls, bare.UpstreamCalls)
			}
			if !within(sh.ShadowCalls, float64(enf.UpstreamCalls), 0.10) {
				t.Errorf("%s: %s predicted %.0f calls, %s measured %d: want within 10 %%", s.Scenario, p[0], sh.ShadowCalls, p[1], enf.UpstreamCalls)
			}
			if sh.Throttled > bare.Throttled+bare.Throttled/10+5 {
				t.Errorf("%s: %s throttled %d, bare %d", s.Scenario, p[0], sh.Throttled, bare.Throttled)
			}
		}
	}
}
