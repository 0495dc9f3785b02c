package cache

import (
	"testing"
	"time"
)

// TestPutSinceSkipsAfterInvalidate: an answer read after a Mark is stored
// by PutSince and PutNegativeSince unless its key was invalidated since the
// Mark — as a Get's fetch that an Invalidate overtook stores nothing — so a
// batch or list answer read before the change behind an invalidation cannot
// land after it.
func TestPutSinceSkipsAfterInvalidate(t *testing.T) {
	c, _, _ := newTestCache(t, nil)
	m := c.Mark()
	c.PutSince("a", []string{"x"}, m)
	c.PutNegativeSince("n", errNotFound, m)
	if v, err, ok := c.Fresh("a"); !ok || err != nil || len(v) != 1 || v[0] != "x" {
		t.Errorf("a: %v %v %v, want [x] stored (no invalidation since the mark)", v, err, ok)
	}
	if _, err, ok := c.Fresh("n"); !ok || err != errNotFound {
		t.Errorf("n: %v %v, want the negative answer stored", err, ok)
	}

	m = c.Mark()
	c.Invalidate("a")
	c.Invalidate("n")
	c.PutSince("a", []string{"old"}, m)
	c.PutNegativeSince("n", errNotFound, m)
	if c.Has("a") || c.Has("n") {
		t.Errorf("an answer read before an invalidation of its key was stored after it")
	}

	// A mark taken after the invalidation stores again.
	m = c.Mark()
	c.PutSince("a", []string{"new"}, m)
	if v, _, ok := c.Fresh("a"); !ok || v[0] != "new" {
		t.Errorf("a: %v %v, want [new] stored after a later mark", v, ok)
	}
}

// TestPutSinceFor: an answer stored with a shorter freshness is fresh that
// long (and kept for Stale as much less long); a longer one keeps the TTL.
func TestPutSinceFor(t *testing.T) {
	c, clk, _ := newTestCache(t, nil) // TTL 1 m, StaleIfError 5 m
	m := c.Mark()
	c.PutSinceFor("short", []string{"x"}, m, 20*time.Second)
	c.PutSinceFor("long", []string{"y"}, m, time.Hour)
	clk.Step(20 * time.Second)
	if _, _, ok := c.Fresh("short"); ok {
		t.Error("short: fresh after its 20 s")
	}
	if _, _, ok := c.Fresh("long"); !ok {
		t.Error("long: not fresh after 20 s (its TTL is 1 m)")
	}
	if _, ok := c.Stale("short", 2*time.Hour); !ok {
		t.Error("short: not kept for Stale within 20 s + StaleIfError")
	}
	clk.Step(5 * time.Minute)
	if _, ok := c.Stale("short", 2*time.Hour); ok {
		t.Error("short: kept for Stale past 20 s + StaleIfError")
	}
	if _, ok := c.Stale("long", 2*time.Hour); !ok {
		t.Error("long: not kept for Stale within TTL + StaleIfError")
	}
}

// TestPutSinceForAt: an answer read earlier and stored only now is as old as
// when it was read: its TTL, maxFresh and negative TTL count from then; and it
// does not replace an entry stored after it was read.
func TestPutSinceForAt(t *testing.T) {
	c, clk, _ := newTestCache(t, nil) // TTL 1 m, NegativeTTL 10 s
	read := clk.Now()
	m := c.Mark()
	clk.Step(40 * time.Second)
	c.PutSinceForAt("ttl", []string{"x"}, m, 0, read)
	c.PutSinceForAt("cut", []string{"x"}, m, 50*time.Second, read)
	c.PutNegativeSinceAt("neg", errNotFound, m, read)
	c.PutSince("newer", []string{"new"}, m)
	c.PutSinceForAt("newer", []string{"old"}, m, 0, read)
	if _, _, ok := c.Fresh("neg"); ok {
		t.Error("neg: fresh 40 s after it was read (NegativeTTL 10 s)")
	}
	if v, _, ok := c.Fresh("newer"); !ok || v[0] != "new" {
		t.Errorf("newer: %v %v, want the entry stored after the old answer was read", v, ok)
	}
	for _, k := range []string{"ttl", "cut"} {
		if _, _, ok := c.Fresh(k); !ok {
			t.Errorf("%s: not fresh 40 s after it was read", k)
		}
	}
	clk.Step(10 * time.Second) // 50 s after the read
	if _, _, ok := c.Fresh("cut"); ok {
		t.Error("cut: fresh 50 s after it was read (maxFresh 50 s)")
	}
	clk.Step(10 * time.Second) // 60 s
	if _, _, ok := c.Fresh("ttl"); ok {
		t.Error("ttl: fresh 60 s after it was read (TTL 1 m)")
	}
}
