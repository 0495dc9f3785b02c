package provider

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/limiter"
)

// TestLogLimiter: the first logBurst lines are logged, then one per
// logWindow, which says how many were suppressed (in a synctest bubble:
// rate.Sometimes reads the real clock).
func TestLogLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLogLimiter()
		allow := func() (ok bool, suppressed int) {
			l.do(func(n int) { ok, suppressed = true, n })
			return ok, suppressed
		}
		for i := range logBurst {
			if ok, _ := allow(); !ok {
				t.Fatalf("line %d of the burst suppressed", i+1)
			}
		}
		for range 3 {
			if ok, _ := allow(); ok {
				t.Fatal("line beyond the burst logged")
			}
		}
		time.Sleep(logWindow - time.Nanosecond)
		if ok, _ := allow(); ok {
			t.Fatal("line logged before the window passed")
		}
		time.Sleep(time.Nanosecond)
		if ok, s := allow(); !ok || s != 4 {
			t.Fatalf("after the window: allow = %v, suppressed %d; want true, 4", ok, s)
		}
		if ok, _ := allow(); ok {
			t.Fatal("second line in one window logged")
		}
	})
}

type countBreakerObs struct{ n int }

func (c *countBreakerObs) StateChanged(from, to limiter.State) { c.n++ }

// Breaker transitions and AIMD cuts and recoveries reach the log at default
// verbosity (and the metrics observer still gets every event).
func TestTransitionsLogged(t *testing.T) {
	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	defer func() {
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	}()
	next := &countBreakerObs{}
	br := newBreakerLog("read", next)
	br.StateChanged(limiter.StateClosed, limiter.StateOpen)
	br.StateChanged(limiter.StateOpen, limiter.StateHalfOpen)
	br.StateChanged(limiter.StateHalfOpen, limiter.StateClosed)
	bl := newBucketLog("read", nil)
	bl.RateChanged(5)
	bl.RateChanged(7.5)
	klog.Flush()
	log := buf.String()
	if next.n != 3 {
		t.Fatalf("metrics observer got %d transitions, want 3", next.n)
	}
	for _, want := range []string{
		`"cloudgate: breaker state changed" family="read" from="closed" to="open"`,
		`from="open" to="half-open"`,
		`from="half-open" to="closed"`,
		`"cloudgate: rate cut after throttling (AIMD)" bucket="read" qps=5`,
		`"cloudgate: rate recovering (AIMD)" bucket="read" qps=7.5`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
}
