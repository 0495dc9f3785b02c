package cache

import "testing"

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
