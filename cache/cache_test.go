package cache

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errNotFound = errors.New("not found")

type counts struct {
	sync.Mutex
	hit, neg, miss, dedup, stale, evicted int
}

func (c *counts) Hit()          { c.Lock(); c.hit++; c.Unlock() }
func (c *counts) NegativeHit()  { c.Lock(); c.neg++; c.Unlock() }
func (c *counts) Miss()         { c.Lock(); c.miss++; c.Unlock() }
func (c *counts) Deduplicated() { c.Lock(); c.dedup++; c.Unlock() }
func (c *counts) StaleServed()  { c.Lock(); c.stale++; c.Unlock() }
func (c *counts) Evicted()      { c.Lock(); c.evicted++; c.Unlock() }

func newTestCache(t *testing.T, mutate func(*Config[string, []string])) (*Cache[string, []string], *clocktesting.FakeClock, *counts) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	obs := &counts{}
	cfg := Config[string, []string]{
		Name: "test", Size: 4096, TTL: time.Minute, // 16 epoch slots
		NegativeTTL: 10 * time.Second, StaleIfError: 5 * time.Minute,
		IsNegative: func(err error) bool { return err == errNotFound },
		Clone:      func(v []string) []string { return append([]string(nil), v...) },
		Clock:      clk, Observer: obs,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, clk, obs
}

// fetcher counts calls and answers from a script.
type fetcher struct {
	calls atomic.Int64
	value []string
	err   error
}

func (f *fetcher) fetch(context.Context) ([]string, error) {
	f.calls.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	return append([]string(nil), f.value...), nil
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config[string, int]
		want string
	}{
		{"size", Config[string, int]{Name: "x", TTL: time.Second}, "size must be >= 1"},
		{"ttl", Config[string, int]{Name: "x", Size: 1}, "ttl must be > 0"},
		{"negative ttl", Config[string, int]{Name: "x", Size: 1, TTL: 1, NegativeTTL: -1}, "negativeTTL must be >= 0"},
		{"stale", Config[string, int]{Name: "x", Size: 1, TTL: 1, StaleIfError: -1}, "staleIfError must be >= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestHitMissAndTTL(t *testing.T) {
	c, clk, obs := newTestCache(t, nil)
	f := &fetcher{value: []string{"a"}}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		v, err := c.Get(ctx, "k", f.fetch)
		if err != nil || len(v) != 1 || v[0] != "a" {
			t.Fatalf("Get = %v, %v", v, err)
		}
	}
	if f.calls.Load() != 1 || obs.miss != 1 || obs.hit != 2 {
		t.Fatalf("calls=%d miss=%d hit=%d, want 1/1/2", f.calls.Load(), obs.miss, obs.hit)
	}
	clk.Step(time.Minute - time.Nanosecond)
	_, _ = c.Get(ctx, "k", f.fetch)
	if f.calls.Load() != 1 {
		t.Fatalf("refetched before TTL")
	}
	clk.Step(time.Nanosecond)
	_, _ = c.Get(ctx, "k", f.fetch)
	if f.calls.Load() != 2 {
		t.Fatalf("calls = %d after TTL, want 2", f.calls.Load())
	}
	// A different key never shares the entry.
	_, _ = c.Get(ctx, "k2", f.fetch)
	if f.calls.Load() != 3 {
		t.Fatalf("calls = %d for a second key, want 3", f.calls.Load())
	}
}

func TestNegativeEntriesAndUncachedErrors(t *testing.T) {
	c, clk, obs := newTestCache(t, nil)
	ctx := context.Background()
	nf := &fetcher{err: errNotFound}
	for i := 0; i < 3; i++ {
		if _, err := c.Get(ctx, "gone", nf.fetch); err != errNotFound {
			t.Fatalf("err = %v, want the exact sentinel", err)
		}
	}
	if nf.calls.Load() != 1 || obs.neg != 2 {
		t.Fatalf("calls=%d negHits=%d, want 1/2", nf.calls.Load(), obs.neg)
	}
	clk.Step(10 * time.Second)
	_, _ = c.Get(ctx, "gone", nf.fetch)
	if nf.calls.Load() != 2 {
		t.Fatalf("negative entry outlived NegativeTTL")
	}

	boom := fmt.Errorf("wrapped: %w", errors.New("500"))
	ef := &fetcher{err: boom}
	for i := 0; i < 3; i++ {
		if _, err := c.Get(ctx, "flaky", ef.fetch); err != boom {
			t.Fatalf("err = %v, want %v unchanged", err, boom)
		}
	}
	if ef.calls.Load() != 3 {
		t.Fatalf("other errors must not be cached: calls = %d", ef.calls.Load())
	}
	if _, ok := c.Stale("gone", time.Hour); ok {
		t.Fatalf("a negative entry must never be served stale")
	}
}

func TestValuesAreCopies(t *testing.T) {
	c, _, _ := newTestCache(t, nil)
	f := &fetcher{value: []string{"a", "b"}}
	v, _ := c.Get(context.Background(), "k", f.fetch)
	v[0] = "corrupted"
	w, _ := c.Get(context.Background(), "k", f.fetch)
	if w[0] != "a" {
		t.Fatalf("a caller's mutation leaked into the cache: %v", w)
	}
}

func TestSingleflightManyGoroutines(t *testing.T) {
	c, _, obs := newTestCache(t, nil)
	release := make(chan struct{})
	var calls atomic.Int64
	fetch := func(context.Context) ([]string, error) {
		calls.Add(1)
		<-release
		return []string{"v"}, nil
	}
	const n = 64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := c.Get(context.Background(), "k", fetch)
			if err == nil && (len(v) != 1 || v[0] != "v") {
				err = fmt.Errorf("got %v", v)
			}
			errs <- err
		}()
	}
	waitFor(t, func() bool { obs.Lock(); defer obs.Unlock(); return obs.miss == n })
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("upstream calls = %d, want 1", calls.Load())
	}
	if obs.dedup != n-1 {
		t.Fatalf("deduplicated = %d, want %d", obs.dedup, n-1)
	}
}

func TestLeaderCancellationDoesNotFailFollowers(t *testing.T) {
	c, _, obs := newTestCache(t, nil)
	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	started := make(chan struct{})
	var calls atomic.Int64
	fetch := func(ctx context.Context) ([]string, error) {
		if calls.Add(1) == 1 {
			close(started)
			<-ctx.Done() // the first fetch waits (e.g. for a token) until its caller leaves
			return nil, ctx.Err()
		}
		return []string{"ok"}, nil
	}
	leaderErr := make(chan error, 1)
	go func() {
		_, err := c.Get(leaderCtx, "k", fetch)
		leaderErr <- err
	}()
	<-started
	followerDone := make(chan error, 1)
	go func() {
		v, err := c.Get(context.Background(), "k", fetch)
		if err == nil && v[0] != "ok" {
			err = fmt.Errorf("got %v", v)
		}
		followerDone <- err
	}()
	waitFor(t, func() bool { obs.Lock(); defer obs.Unlock(); return obs.miss == 2 })
	cancelLeader()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader err = %v", err)
	}
	if err := <-followerDone; err != nil {
		t.Fatalf("follower inherited the leader's cancellation: %v", err)
	}
}

func TestCancelledContextReturnsWithoutFetching(t *testing.T) {
	c, _, _ := newTestCache(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &fetcher{value: []string{"a"}}
	if _, err := c.Get(ctx, "k", f.fetch); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if f.calls.Load() != 0 {
		t.Fatalf("fetched with a cancelled context")
	}
}

func TestInvalidateDropsEntryAndInFlightStore(t *testing.T) {
	c, _, _ := newTestCache(t, nil)
	ctx := context.Background()
	f := &fetcher{value: []string{"old"}}
	_, _ = c.Get(ctx, "lb", f.fetch)
	c.Invalidate("lb")
	f.value = []string{"new"}
	if v, _ := c.Get(ctx, "lb", f.fetch); v[0] != "new" {
		t.Fatalf("got %v after invalidation", v)
	}

	// A read that began before a write must not store its pre-write answer.
	inFetch, finish := make(chan struct{}), make(chan struct{})
	slow := func(context.Context) ([]string, error) {
		close(inFetch)
		<-finish
		return []string{"pre-write"}, nil
	}
	c.Invalidate("lb")
	done := make(chan struct{})
	go func() { defer close(done); _, _ = c.Get(ctx, "lb", slow) }()
	<-inFetch
	c.Invalidate("lb") // the write lands while the read is in flight
	close(finish)
	<-done
	if _, _, ok := c.Fresh("lb"); ok {
		t.Fatalf("an answer fetched before the invalidation was stored")
	}
}

func TestStaleBounds(t *testing.T) {
	c, clk, obs := newTestCache(t, nil)
	f := &fetcher{value: []string{"v"}}
	_, _ = c.Get(context.Background(), "k", f.fetch)
	clk.Step(2 * time.Minute) // past TTL (1m), within StaleIfError (5m)
	if _, _, ok := c.Fresh("k"); ok {
		t.Fatal("expired entry reported fresh")
	}
	if _, ok := c.Stale("k", 90*time.Second); ok {
		t.Fatal("served an entry older than maxAge")
	}
	if v, ok := c.Stale("k", 3*time.Minute); !ok || v[0] != "v" || obs.stale != 1 {
		t.Fatalf("Stale = %v, %v (stale served %d)", v, ok, obs.stale)
	}
	clk.Step(5 * time.Minute) // past TTL+StaleIfError: gone whatever maxAge says
	if _, ok := c.Stale("k", time.Hour); ok {
		t.Fatal("served an entry past TTL+StaleIfError")
	}
}

func TestEvictionIsBounded(t *testing.T) {
	c, _, obs := newTestCache(t, func(cfg *Config[string, []string]) { cfg.Size = 10 })
	f := &fetcher{value: []string{"v"}}
	for i := 0; i < 25; i++ {
		_, _ = c.Get(context.Background(), fmt.Sprint(i), f.fetch)
	}
	if c.Len() != 10 || obs.evicted != 15 {
		t.Fatalf("len=%d evicted=%d, want 10/15", c.Len(), obs.evicted)
	}
}

func TestStructKeysDoNotCollide(t *testing.T) {
	type key struct{ a, b string }
	c, err := New(Config[key, string]{Name: "k", Size: 10, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	get := func(k key) string {
		v, _ := c.Get(context.Background(), k, func(context.Context) (string, error) { return k.a + "|" + k.b, nil })
		return v
	}
	if get(key{"x/", "y"}) == get(key{"x", "/y"}) {
		t.Fatal("distinct keys shared an entry")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
