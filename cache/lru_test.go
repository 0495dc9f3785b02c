package cache

import (
	"context"
	"fmt"
	"testing"
)

// TestCacheHoldsSizeEntries: a cache holds exactly Size entries, evicts
// only past Size, and counts each eviction.
func TestCacheHoldsSizeEntries(t *testing.T) {
	for _, size := range []int{255, 256, 1000, 4096} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c, _, obs := newTestCache(t, func(cfg *Config[string, []string]) { cfg.Size = size })
			f := &fetcher{value: []string{"v"}}
			ctx := context.Background()
			for i := range size {
				if _, err := c.Get(ctx, fmt.Sprint("k", i), f.fetch); err != nil {
					t.Fatal(err)
				}
			}
			if c.Len() != size || obs.evicted != 0 {
				t.Fatalf("after %d keys: len=%d evicted=%d, want %d/0", size, c.Len(), obs.evicted, size)
			}
			for i := range size {
				if !c.Has(fmt.Sprint("k", i)) {
					t.Fatalf("k%d evicted below Size", i)
				}
			}
			for i := range size {
				_, _ = c.Get(ctx, fmt.Sprint("new", i), f.fetch)
			}
			if c.Len() != size || obs.evicted != size {
				t.Fatalf("after %d more: len=%d evicted=%d, want %d/%d", size, c.Len(), obs.evicted, size, size)
			}
			for i := range size {
				c.Invalidate(fmt.Sprint("new", i))
				c.Invalidate(fmt.Sprint("k", i))
			}
			if c.Len() != 0 {
				t.Fatalf("len=%d after invalidating every key", c.Len())
			}
		})
	}
}

// TestCacheKeepsWhatIsRead: a hit counts as a use: the oldest entry, read
// once, outlives the entries stored after it that were never read, as in
// an LRU, and an evicted key is a miss.
func TestCacheKeepsWhatIsRead(t *testing.T) {
	const size = 1024
	c, _, _ := newTestCache(t, func(cfg *Config[string, []string]) { cfg.Size = size })
	f := &fetcher{value: []string{"v"}}
	ctx := context.Background()
	keys := make([]string, size)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
		if _, err := c.Get(ctx, keys[i], f.fetch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Get(ctx, keys[0], f.fetch); err != nil || f.calls.Load() != size {
		t.Fatalf("keys[0] was not a hit: %v, %d calls", err, f.calls.Load())
	}
	// One new key evicts the least recently used: keys[1], not keys[0].
	if _, err := c.Get(ctx, "new", f.fetch); err != nil {
		t.Fatal(err)
	}
	if !c.Has(keys[0]) || c.Has(keys[1]) {
		t.Fatalf("has keys[0]=%v keys[1]=%v, want true/false", c.Has(keys[0]), c.Has(keys[1]))
	}
	calls := f.calls.Load()
	if _, err := c.Get(ctx, keys[1], f.fetch); err != nil || f.calls.Load() != calls+1 {
		t.Fatalf("evicted key answered without a fetch (%v)", err)
	}
}
