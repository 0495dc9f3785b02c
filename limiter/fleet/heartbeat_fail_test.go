package fleet_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
)

// TestHeartbeatsFailAdmissionsSucceed: a member whose heartbeat script
// fails (its membership hash holds a value of the wrong type) while its
// admission script still runs keeps its callers on the shared budget past
// awayLimit in failureMode closed: it neither falls back nor stops, since
// every call it admits is counted in Redis. The stop that would follow if
// its admissions failed too (lastOK + awayLimit, after which it stops at
// once) is reported soon after the first failed heartbeat, so the critical
// alert on cloudgate_fleet_stop_timestamp_seconds fires before any effect;
// it is withdrawn when a heartbeat is answered again.
func TestHeartbeatsFailAdmissionsSucceed(t *testing.T) {
	r := fleettest.Start(t)
	const (
		quota     = 200.0
		heartbeat = 50 * time.Millisecond
		forget    = 30 * heartbeat
	)
	account := "acct-hb-fail"
	m := newMemberOpts(t, r, account, 1, quota, local,
		func(c *fleet.Config) {
			c.Heartbeat = fleet.Duration{Duration: heartbeat}
			c.FailureMode = fleet.FailureClosed
			// Heartbeats alone never reach it: admissions in between
			// reset the count (a margin for -race on shared cores).
			c.FallbackAfter = 10
		},
		fleet.Options{MemberID: "member-a", ForgetAfter: forget})
	ctx := context.Background()
	eventually(t, "a registered", func() bool { return m.l.ShareQPS() > 0 })
	if !m.ev.lastStopAt().IsZero() {
		t.Fatalf("stop reported on the shared budget: %v", m.ev.lastStopAt())
	}

	// One caller all along, as a CCM's controllers would be.
	var mu sync.Mutex
	var calls int
	var callErr error
	cctx, stopCalls := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			wctx, cancel := context.WithTimeout(cctx, time.Second)
			err := m.l.Wait(wctx, limiter.PriorityNormal)
			cancel()
			mu.Lock()
			if err != nil && cctx.Err() == nil && callErr == nil {
				callErr = err
			}
			if err == nil {
				calls++
			}
			mu.Unlock()
		}
	}()

	// Break only the heartbeat: the membership hash (read and written by
	// the heartbeat script alone) becomes a string.
	key := "cloudgate:{" + account + "}:weights"
	if err := r.Admin().Set(ctx, key, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	broken := time.Now()
	eventually(t, "the coming stop reported", func() bool { return !m.ev.lastStopAt().IsZero() })
	reported := time.Now()
	stop := m.ev.lastStopAt()
	if !stop.After(reported) {
		t.Errorf("stop reported at %v for %v: want it ahead, before any effect", reported, stop)
	}
	if stop.After(broken.Add(forget)) {
		t.Errorf("stop %v later than forgetAfter (%v) after the heartbeats began to fail at %v", stop, forget, broken)
	}

	// Past awayLimit and forgetAfter, every call is still admitted from
	// the shared budget.
	time.Sleep(2*forget - time.Since(broken))
	stopCalls()
	<-done
	mu.Lock()
	n, err := calls, callErr
	mu.Unlock()
	if err != nil {
		t.Errorf("a call failed while the admissions reached Redis: %v", err)
	}
	if m.f.Fallback() {
		t.Error("member in fallback while its admissions reach Redis")
	}
	shared, fallback, transitions := m.ev.counts()
	if fallback != 0 || len(transitions) != 0 || shared == 0 {
		t.Errorf("admissions: %d shared, %d from the fallback bucket, transitions %v; want all shared, none", shared, fallback, transitions)
	}

	// Heartbeats answered again: the warning is withdrawn.
	if err := r.Admin().Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stop withdrawn", func() bool { return m.ev.lastStopAt().IsZero() })
	t.Logf("%d calls admitted over %v of failing heartbeats (awayLimit %v); stop reported %v after the first failure, %v ahead",
		n, 2*forget, forget-3*heartbeat, reported.Sub(broken).Round(time.Millisecond), stop.Sub(reported).Round(time.Millisecond))
}
