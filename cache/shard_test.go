package cache

import (
	"context"
	"fmt"
	"testing"
)

// TestShardedCacheHoldsSizeEntries: a sharded cache holds exactly Size
// entries however unevenly keys fall on its shards, evicts only past Size,
// and counts each eviction.
func TestShardedCacheHoldsSizeEntries(t *testing.T) {
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
