package cache

import (
	"context"
	"fmt"
	"testing"
	"unsafe"
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

// TestShardedCacheKeepsWhatIsRead: in a sharded cache, a hit answered from
// the lock-free index still counts as a use: the oldest entry of a shard,
// read once the shard has turned over, outlives the entries stored after
// it that were never read, as in an LRU.
func TestShardedCacheKeepsWhatIsRead(t *testing.T) {
	const size = 1024 // 8 shards of 128
	c, _, _ := newTestCache(t, func(cfg *Config[string, []string]) { cfg.Size = size })
	if len(c.shards) != 8 || c.index == nil {
		t.Fatalf("%d shards, index %v: want 8 shards and an index", len(c.shards), c.index != nil)
	}
	f := &fetcher{value: []string{"v"}}
	ctx := context.Background()
	keys := make([]string, size)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
		if _, err := c.Get(ctx, keys[i], f.fetch); err != nil {
			t.Fatal(err)
		}
	}
	// keys[0] is the oldest of its shard; next is the one stored after it
	// in the same shard.
	var next string
	for _, k := range keys[1:] {
		if c.shard(k) == c.shard(keys[0]) {
			next = k
			break
		}
	}
	if _, err := c.Get(ctx, keys[0], f.fetch); err != nil || f.calls.Load() != size {
		t.Fatalf("keys[0] was not a hit: %v, %d calls", err, f.calls.Load())
	}
	// Store new keys until the shard of keys[0] evicted next.
	for i := 0; c.Has(next); i++ {
		if i == 4*size {
			t.Fatal("no eviction in the shard after 4*Size new keys")
		}
		if _, err := c.Get(ctx, fmt.Sprint("new", i), f.fetch); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Has(keys[0]) {
		t.Fatal("the entry read was evicted before an older-used entry of its shard")
	}
	// The index follows the LRU: an evicted key is a miss.
	calls := f.calls.Load()
	if _, err := c.Get(ctx, next, f.fetch); err != nil || f.calls.Load() != calls+1 {
		t.Fatalf("evicted key answered without a fetch (%v)", err)
	}
}

// TestShardSize: a shard fills whole cache lines, so that two CPUs working
// on two shards share no cache line.
func TestShardSize(t *testing.T) {
	if n := unsafe.Sizeof(shard[string, int]{}); n%64 != 0 {
		t.Fatalf("shard is %d bytes, want a multiple of 64", n)
	}
}
