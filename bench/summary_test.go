package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cloudgate/cloudgate/provider"
)

// TestWriteSummary: at most five lines after the blank one, with the fair
// baseline's figures, the default install's, the staleness and the report.
func TestWriteSummary(t *testing.T) {
	init := 73.6
	r := &Report{FirstSeed: 1, Seeds: 1}
	steady := func(reads float64) Side { return Side{Steady: &Steady{ReadsPerHour: reads}} }
	for _, sc := range []string{ScenarioSteady, ScenarioScaleup, ScenarioSteady, ScenarioChurn} {
		res := ScenarioResult{Scenario: sc, Nodes: 1000, Columns: map[string]Side{
			ColBareClient: steady(20000), ColCache: steady(8000), ColList: steady(200),
		}}
		if sc == ScenarioScaleup {
			res.Columns = map[string]Side{
				ColBareClient: {InitSeconds: &init, UpstreamCalls: 1218, Throttled: 4},
				ColList:       {InitSeconds: &init, UpstreamCalls: 1034},
			}
		}
		r.Scenarios = append(r.Scenarios, res)
	}
	var b bytes.Buffer
	r.WriteSummary(&b, "bench/out/report.html")
	lines := strings.Split(strings.TrimPrefix(strings.TrimSuffix(b.String(), "\n"), "\n"), "\n")
	if len(lines) > 5 {
		t.Errorf("%d lines, want at most 5:\n%s", len(lines), b.String())
	}
	for _, want := range []string{
		"bare+client", "seed 1",
		"cloud reads/h 20000 -> 200 (-99 %); 8000 (-60 %)",
		"initialised in 73.6 s (bare+client 73.6 s), upstream calls 1218 -> 1034, throttled 4 -> 0",
		"at most " + minutes(provider.DefaultTTLs()["InstanceMetadata"]) + " old",
		// While the cloud fails: TTL + staleIfError (README and docs/semantics.md say the same).
		"(" + minutes(provider.DefaultTTLs()["InstanceMetadata"]+provider.DefaultConfig().Cache.StaleIfError.Duration) + " while the cloud fails)",
		"HTML report: bench/out/report.html",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
