package bench

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// virtualOptions is a small cluster run in virtual time: no compression,
// the simulated cloud in memory, the whole world inside a synctest bubble.
func virtualOptions() *Options {
	o := smallOptions()
	o.Nodes = 100
	o.ScaleupNodes = 60
	o.ChurnNodes = 60
	o.ChurnRate = 3
	o.ChurnDuration = time.Minute
	o.SteadyWindow = 10 * time.Minute
	o.TimeFactor, o.ScaleupTimeFactor = 1, 1
	o.InMemory = true
	return o
}

// runVirtual runs o inside a synctest bubble.
func runVirtual(t *testing.T, o *Options) *Report {
	t.Helper()
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		var err error
		rep, err = Run(context.Background(), o, testWriter{t})
		if err != nil {
			t.Fatal(err)
		}
	})
	return rep
}

// TestVirtualTimeSteady: the steady scenario runs in virtual time.
func TestVirtualTimeSteady(t *testing.T) {
	o := virtualOptions()
	o.Scenarios = []string{ScenarioSteady}
	o.Columns = []string{ColBare, ColList}
	rep := runVirtual(t, o)
	for col, side := range rep.Scenarios[0].Columns {
		t.Logf("%s: %d upstream calls, %.0f simulated s", col, side.UpstreamCalls, side.SimSeconds)
	}
}
