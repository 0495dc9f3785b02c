package cache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Regression tests; each failed before its fix.

// Item 2: callers that joined a flight retry only when the leader's own
// context ended, not on any context-type error (a hung upstream answers
// every call with a wrapped DeadlineExceeded while the caller is live).
func TestRegression_JoinersRetryOnlyWhenLeaderGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, obs := newTestCache(t, nil)
		release := make(chan struct{})
		var calls atomic.Int64
		fetch := func(context.Context) ([]string, error) {
			calls.Add(1)
			<-release
			return nil, fmt.Errorf("upstream: %w", context.DeadlineExceeded)
		}
		const n = 10
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() { _, _ = c.Get(context.Background(), "k", fetch) })
		}
		synctest.Wait() // every caller is in the flight, blocked on release
		obs.Lock()
		miss := obs.miss
		obs.Unlock()
		if miss != n {
			t.Fatalf("%d misses, want %d", miss, n)
		}
		close(release)
		wg.Wait()
		if got := calls.Load(); got != 1 {
			t.Fatalf("upstream fetches = %d for %d joined callers of one failed flight, want 1", got, n)
		}
	})
}

// Item 4: a Get that starts after Invalidate returned never joins a flight
// that started before it.
func TestRegression_ReadAfterInvalidateStartsFreshFlight(t *testing.T) {
	c, _, _ := newTestCache(t, nil)
	ctx := context.Background()
	inFetch, finish := make(chan struct{}), make(chan struct{})
	slow := func(context.Context) ([]string, error) {
		close(inFetch)
		<-finish
		return []string{"pre-write"}, nil
	}
	done := make(chan struct{})
	go func() { defer close(done); _, _ = c.Get(ctx, "lb", slow) }()
	<-inFetch
	c.Invalidate("lb") // the write returned
	got := make(chan []string, 1)
	go func() {
		v, _ := c.Get(ctx, "lb", func(context.Context) ([]string, error) { return []string{"post-write"}, nil })
		got <- v
	}()
	select {
	case v := <-got:
		if v[0] != "post-write" {
			t.Fatalf("got %v", v)
		}
	case <-time.After(100 * time.Millisecond):
		close(finish)
		t.Fatalf("a Get after Invalidate joined the pre-write flight and got %v", <-got)
	}
	close(finish)
	<-done
}

// Item 1: a successful answer that says "does not exist" is negative: it
// lives NegativeTTL and is never served stale.
func TestRegression_NegativeValueIsNegative(t *testing.T) {
	c, clk, _ := newTestCache(t, func(cfg *Config[string, []string]) {
		cfg.NegativeValue = func(v []string) bool { return len(v) == 0 }
	})
	ctx := context.Background()
	f := &fetcher{value: []string{}}
	_, _ = c.Get(ctx, "k", f.fetch)
	clk.Step(11 * time.Second) // past NegativeTTL (10s), within TTL (1m)
	if _, _, ok := c.Fresh("k"); ok {
		t.Fatal("a negative value was fresh past NegativeTTL")
	}
	if _, ok := c.Stale("k", time.Hour); ok {
		t.Fatal("a negative value was served stale")
	}
	c.Put("p", []string{})
	if _, ok := c.Stale("p", time.Hour); ok {
		t.Fatal("Stale served a negative value")
	}
}

// Item 9: keys that are no identity are never cached.
func TestRegression_ShortLivedKeys(t *testing.T) {
	c, clk, _ := newTestCache(t, func(cfg *Config[string, []string]) {
		cfg.ShortLived = func(k string) bool { return k == "name" }
	})
	f := &fetcher{value: []string{"v"}}
	_, _ = c.Get(context.Background(), "name", f.fetch)
	_, _ = c.Get(context.Background(), "id", f.fetch)
	clk.Step(11 * time.Second)
	if _, _, ok := c.Fresh("name"); ok {
		t.Fatal("a short-lived key outlived NegativeTTL")
	}
	if _, ok := c.Stale("name", time.Hour); ok {
		t.Fatal("a short-lived key was served stale")
	}
	if _, _, ok := c.Fresh("id"); !ok {
		t.Fatal("an ordinary key expired early")
	}
}
