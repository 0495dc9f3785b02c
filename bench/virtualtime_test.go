package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync/atomic"
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

// runVirtual runs o inside a synctest bubble, with a watchdog outside it.
func runVirtual(t *testing.T, o *Options) *Report {
	t.Helper()
	var simNow atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		last, since := int64(0), time.Now()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			if v := simNow.Load(); v != last {
				last, since = v, time.Now()
				continue
			}
			if time.Since(since) > 20*time.Second {
				f, _ := os.Create("/tmp/vt/stall.txt")
				pprof.Lookup("goroutine").WriteTo(f, 2)
				f.Close()
				fmt.Fprintln(os.Stderr, "STALL dumped")
				since = time.Now().Add(time.Hour)
			}
		}
	}()
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for ctx.Err() == nil {
				simNow.Store(time.Now().UnixNano())
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
		var err error
		rep, err = Run(ctx, o, testWriter{t})
		cancel()
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
