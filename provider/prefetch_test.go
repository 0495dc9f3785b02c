package provider

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
)

// flakyListCloud lists one instance, or fails while down.
type flakyListCloud struct {
	*fake.Cloud
	down  atomic.Bool
	lists atomic.Int64
}

func (l *flakyListCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }

func (l *flakyListCloud) ListInstances(context.Context, string) ([]InstanceRecord, string, error) {
	l.lists.Add(1)
	if l.down.Load() {
		return nil, "", errors.New("503 service unavailable")
	}
	return []InstanceRecord{{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a"}}}, "", nil
}

// Issue 21 item 2: a list refresh that failed (an outage) is retried as
// soon as the cloud answers another call — after interval/30 at the
// earliest — not a whole listInterval later.
func TestListRefreshRetriedWhenCloudAnswers(t *testing.T) {
	for _, answer := range []bool{true, false} {
		up := &flakyListCloud{Cloud: &fake.Cloud{Provider: "fake"}}
		up.down.Store(true)
		clk := newFakeClock()
		cfg := testConfig(clk)
		cfg.Batch.ListPrefetch = true
		cfg.Batch.ListInterval = dur(5 * time.Minute)
		c := mustNew(t, up, cfg)
		g := enf(c)
		stop := make(chan struct{})
		c.Initialize(nil, stop)
		waitUntil(t, "the failed list", func() bool { return g.listFailed.Load() })
		up.down.Store(false)
		if answer { // the outage ends: a node read is answered
			if _, err := v2(t, c).InstanceMetadata(context.Background(), testNode("b", "fake://b")); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "the retry timer", clk.HasWaiters)
		clk.Step(10 * time.Second) // interval/30
		if answer {
			waitUntil(t, "a second list once the cloud answered", func() bool { return up.lists.Load() == 2 })
		} else {
			time.Sleep(20 * time.Millisecond)
			if n := up.lists.Load(); n != 1 {
				t.Fatalf("%d lists 10 s after the failure with no answer from the cloud; want 1 (the next at the interval)", n)
			}
		}
		close(stop)
		_ = c.(interface{ Close() error }).Close()
	}
}

// Every wait between list refreshes lies in [interval, interval × 1.1), and
// the waits differ, so clusters started together do not refresh in lockstep.
func TestListRefreshJitter(t *testing.T) {
	const interval = 5 * time.Minute
	hi := interval + time.Duration(listJitter*float64(interval))
	seen := map[time.Duration]bool{}
	lo, top := hi, time.Duration(0)
	j := newJitterSource(time.Now())
	for range 1000 {
		d := j.next(interval)
		if d < interval || d >= hi {
			t.Fatalf("refresh wait %v outside [%v, %v)", d, interval, hi)
		}
		seen[d] = true
		lo, top = min(lo, d), max(top, d)
	}
	if len(seen) < 900 {
		t.Fatalf("only %d distinct waits in 1000 draws: not jittered", len(seen))
	}
	// The draws spread over most of the 30 s window.
	if spread := top - lo; spread < 25*time.Second {
		t.Fatalf("waits spread over %v only, want most of %v", spread, hi-interval)
	}
	// Gates made apart draw apart; a gate made at the same instant of a
	// virtual clock (a simulation's run of one seed) draws the same waits.
	at := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b, a2 := newJitterSource(at), newJitterSource(at.Add(time.Nanosecond)), newJitterSource(at)
	for range 10 {
		da, db, da2 := a.next(interval), b.next(interval), a2.next(interval)
		if da == db {
			t.Fatalf("gates made 1 ns apart drew the same wait %v", da)
		}
		if da != da2 {
			t.Fatalf("two gates made at %v drew %v and %v", at, da, da2)
		}
	}
}

// listingBatchCloud answers batches and lists; its first list blocks
// until release is closed.
type listingBatchCloud struct {
	*batchCloud
	release chan struct{}
	lists   atomic.Int64
}

func (l *listingBatchCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }

func (l *listingBatchCloud) ListInstances(ctx context.Context, _ string) ([]InstanceRecord, string, error) {
	if l.lists.Add(1) == 1 {
		select {
		case <-l.release:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	return []InstanceRecord{{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a", Zone: "listed"}}}, "", nil
}

// TestLookupWaitsForFirstList: a lookup that misses while the first list
// refresh is in flight waits for it instead of a call of its own (behind
// the AWS adapter, the status loop's first round raced the first list and
// cost more DescribeInstances than the AWS provider alone).
func TestLookupWaitsForFirstList(t *testing.T) {
	up := &listingBatchCloud{batchCloud: &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}}, release: make(chan struct{})}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	defer func() { _ = c.(interface{ Close() error }).Close() }()
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	waitUntil(t, "the first list in flight", func() bool { return up.lists.Load() == 1 })
	type answer struct {
		zone string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		md, err := v2(t, c).InstanceMetadata(context.Background(), testNode("a", "fake://a"))
		if err != nil {
			done <- answer{"", err}
			return
		}
		done <- answer{md.Zone, nil}
	}()
	// Without the wait the lookup is sent at once, in a batch of its own,
	// and answers zone-a before the list ends; give it the chance (a
	// bounded poll, no timing asserted).
	for k := 0; k < 100 && len(up.batchSizes()) == 0; k++ {
		time.Sleep(time.Millisecond)
	}
	close(up.release)
	a := <-done
	if a.err != nil || a.zone != "listed" {
		t.Fatalf("InstanceMetadata = zone %q, %v; want the listed answer", a.zone, a.err)
	}
	if got := up.batchSizes(); len(got) != 0 {
		t.Fatalf("batch calls %v while the first list was in flight, want none", got)
	}
}

// listOnlyCloud's InstancesV2 lists instances but cannot answer batches.
type listOnlyCloud struct {
	*fake.Cloud
	lists atomic.Int64
}

func (l *listOnlyCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }

func (l *listOnlyCloud) ListInstances(context.Context, string) ([]InstanceRecord, string, error) {
	l.lists.Add(1)
	return []InstanceRecord{{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a", Zone: "listed"}}}, "", nil
}

// Item 10: list prefetch needs only InstanceLister, not BatchInstances.
func TestListPrefetchWithoutBatching(t *testing.T) {
	up := &listOnlyCloud{Cloud: &fake.Cloud{Provider: "fake"}}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	waitUntil(t, "a list call", func() bool { return up.lists.Load() >= 1 })
	waitUntil(t, "the cache filled", func() bool {
		_, _, ok := enf(c).inst.metadata.c.Fresh(nodeKey{byProviderID: true, id: "fake://a"})
		return ok
	})
	md, err := v2(t, c).InstanceMetadata(context.Background(), testNode("a", "fake://a"))
	if err != nil || md.Zone != "listed" {
		t.Fatalf("InstanceMetadata = %+v, %v; want the listed answer", md, err)
	}
	_ = c.(interface{ Close() error }).Close()
}

// Item 10: Initialize twice (leader migration) runs one prefetch loop.
func TestInitializeTwiceOneLoop(t *testing.T) {
	up := &listOnlyCloud{Cloud: &fake.Cloud{Provider: "fake"}}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	c.Initialize(nil, stop)
	g := enf(c)
	waitUntil(t, "one loop", func() bool { return g.prefetchLoops.Load() == 1 })
	time.Sleep(20 * time.Millisecond)
	if n := g.prefetchLoops.Load(); n != 1 {
		t.Fatalf("%d prefetch loops after Initialize twice, want 1", n)
	}
	if err := c.(interface{ Close() error }).Close(); err != nil {
		t.Fatal(err)
	}
	if n := g.prefetchLoops.Load(); n != 0 {
		t.Fatalf("%d prefetch loops after Close", n)
	}
}

// Item 10: Close stops cloudgate's goroutines.
func TestCloseStopsGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	up := &listOnlyCloud{Cloud: &fake.Cloud{Provider: "fake"}}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	c.Initialize(nil, make(chan struct{})) // never closed
	waitUntil(t, "a list call", func() bool { return up.lists.Load() >= 1 })
	if err := c.(interface{ Close() error }).Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, before)
}

// recreatedCloud lists one VM re-created under the same name: the live
// record first, the Deleted one (the old VM) last.
type recreatedCloud struct {
	*fake.Cloud
	lists atomic.Int64
}

func (l *recreatedCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }

func (l *recreatedCloud) ListInstances(context.Context, string) ([]InstanceRecord, string, error) {
	l.lists.Add(1)
	return []InstanceRecord{
		{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a-new"}},
		{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a-old"}, Deleted: true},
	}, "", nil
}

// Issue 24 item 6: a Deleted list record does not answer by-name reads.
func TestPrefetchDeletedRecordNotByName(t *testing.T) {
	up := &recreatedCloud{Cloud: &fake.Cloud{Provider: "fake"}}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	g := enf(c)
	waitUntil(t, "the cache filled", func() bool {
		_, _, ok := g.inst.exists.c.Fresh(nodeKey{byProviderID: true, id: "fake://a-old"})
		return ok
	})
	ok, err := v2(t, c).InstanceExists(context.Background(), testNode("a", ""))
	if err != nil || !ok {
		t.Fatalf("InstanceExists(node a without provider ID) = %v, %v; want true (a live VM has that name)", ok, err)
	}
	_ = c.(interface{ Close() error }).Close()
}

// pagedListCloud lists two pages; while throttled the second page is
// throttled (the quota is short), while down every page fails (an outage).
type pagedListCloud struct {
	*batchCloud
	throttled, down atomic.Bool
	firstPages      atomic.Int64 // lists started from page 1
	failed          atomic.Int64 // pages that failed
}

func (l *pagedListCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }

func (l *pagedListCloud) ListInstances(_ context.Context, token string) ([]InstanceRecord, string, error) {
	if token == "" {
		l.firstPages.Add(1)
	}
	switch {
	case l.down.Load():
		l.failed.Add(1)
		return nil, "", errors.New("HTTP 503 service unavailable")
	case token == "":
		return []InstanceRecord{{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a"}}}, "p2", nil
	case l.throttled.Load():
		l.failed.Add(1)
		return nil, "", errors.New("RequestLimitExceeded: Request limit exceeded.")
	}
	return []InstanceRecord{{NodeName: "b", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://b"}}}, "", nil
}

// Issue 30 section 3, suspected item (c), verdict: real. A list refresh
// that failed was retried from page 1 as soon as any call was answered —
// after interval/30, doubling up to the interval — and a throttled call
// counted as answered. When the quota is short (the list's own page
// throttled, other calls still answered) that restarted the list from page
// 1 at 10, 20, 40, 80, 160 s, spending the pages again exactly when tokens
// are scarce; and after an outage a throttled answer was taken for its
// end. Now a list that failed for want of quota waits for its interval,
// and only an answer that is not throttling brings a failed list forward.
func TestThrottledListNotRestartedEarly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      func(*pagedListCloud)
		answerErr error // the lookup the cloud answers after the list failed
	}{
		{"list throttled, lookups answered", func(l *pagedListCloud) { l.throttled.Store(true) }, nil},
		{"list failed, lookups throttled", func(l *pagedListCloud) { l.down.Store(true) }, errors.New("RequestLimitExceeded: Request limit exceeded.")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up := &pagedListCloud{batchCloud: &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}}}
				tc.fail(up)
				clk := newFakeClock()
				cfg := testConfig(clk)
				cfg.Batch.ListPrefetch = true
				cfg.Batch.ListInterval = dur(5 * time.Minute)
				cfg.NotFoundGuard.Enabled = boolp(false)
				c := mustNew(t, up, cfg)
				stop := make(chan struct{})
				defer func() {
					close(stop)
					_ = c.(interface{ Close() error }).Close()
					synctest.Wait()
				}()
				c.Initialize(nil, stop)
				synctest.Wait()
				if up.failed.Load() != 1 || up.firstPages.Load() != 1 {
					t.Fatalf("%d pages failed in %d lists; want the first list failed", up.failed.Load(), up.firstPages.Load())
				}
				up.mu.Lock()
				up.batchErr = tc.answerErr
				up.mu.Unlock()
				_, err := v2(t, c).InstanceMetadata(context.Background(), testNode("n", "fake://n"))
				if (err == nil) != (tc.answerErr == nil) {
					t.Fatalf("the lookup after the failed list: %v, want %v", err, tc.answerErr)
				}
				for s := 10; s < 300; s += 10 { // up to the interval: no new list
					clk.Step(10 * time.Second)
					synctest.Wait()
				}
				if n := up.firstPages.Load(); n != 1 {
					t.Errorf("%d lists from page 1 within the 5 m interval after a list failed for want of quota or with only throttled answers; want 1", n)
				}
				up.throttled.Store(false)
				up.down.Store(false)
				// The interval and its jitter (< 10 %) pass. After a failure
				// that is not for want of quota, the interval's timer starts
				// only once the shortest retry gap (interval/30 = 10 s) has
				// passed: the next list comes by 10 s + 330 s.
				for range 6 {
					clk.Step(10 * time.Second)
					synctest.Wait()
				}
				if n := up.firstPages.Load(); n != 2 {
					t.Errorf("%d lists from page 1 once the interval passed; want 2", n)
				}
			})
		})
	}
}
