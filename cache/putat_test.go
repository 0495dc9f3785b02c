package cache

import (
	"errors"
	"testing"
	"time"
)

// TestPutAt: an answer stored with the time it was given is fresh until
// that time + TTL (NegativeTTL for a negative one), not TTL from now;
// one already expired, or an error that is no answer, stores nothing.
func TestPutAt(t *testing.T) {
	c, clk, _ := newTestCache(t, nil)
	given := clk.Now()
	clk.Step(40 * time.Second)
	c.PutAt("a", []string{"x"}, nil, given) // TTL 1 m: fresh for 20 s more
	c.PutAt("n", nil, errNotFound, given)   // NegativeTTL 10 s: already expired
	c.PutAt("e", []string{"y"}, errors.New("boom"), clk.Now())
	if v, err, ok := c.Fresh("a"); !ok || err != nil || len(v) != 1 || v[0] != "x" {
		t.Errorf("a: %v %v %v, want [x] fresh", v, err, ok)
	}
	if c.Has("n") || c.Has("e") {
		t.Errorf("an expired negative answer or a failure was stored")
	}
	c.PutAt("n", nil, errNotFound, clk.Now().Add(-5*time.Second))
	if _, err, ok := c.Fresh("n"); !ok || err != errNotFound {
		t.Errorf("n: %v %v, want the negative answer, fresh", err, ok)
	}
	clk.Step(21 * time.Second)
	if _, _, ok := c.Fresh("a"); ok {
		t.Errorf("a is fresh 61 s after it was given; TTL is 1 m")
	}
}
