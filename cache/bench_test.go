package cache

import (
	"context"
	"hash/maphash"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

type nodeKey struct {
	byProviderID bool
	id           string
}

func hashNodeKey(s maphash.Seed, k nodeKey) uint64 { return maphash.String(s, k.id) }

// BenchmarkCacheHit is a fresh hit on a node key, hashed as the provider
// hashes it (by its string), from one goroutine.
func BenchmarkCacheHit(b *testing.B) {
	c, err := New(Config[nodeKey, int]{Name: "bench", Size: 1024, TTL: time.Hour, Hash: hashNodeKey})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	k := nodeKey{true, "simcloud://zone-a/i-0001"}
	fetch := func(context.Context) (int, error) { return 1, nil }
	_, _ = c.Get(ctx, k, fetch)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Get(ctx, k, fetch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheMissSingleflight measures a miss that goes through the
// in-flight de-duplication to a (free) fetch.
func BenchmarkCacheMissSingleflight(b *testing.B) {
	c, err := New(Config[int, int]{Name: "bench", Size: 1 << 20, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	fetch := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Get(ctx, i, fetch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheParallelMixed: 5,000 keys, ~90% hits, from all Ps at once.
func BenchmarkCacheParallelMixed(b *testing.B) {
	const keys = 5000
	c, err := New(Config[string, int]{Name: "bench", Size: keys * 9 / 10, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, keys)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i)
	}
	ctx := context.Background()
	fetch := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i = (i*7 + 13) % keys
			if _, err := c.Get(ctx, names[i], fetch); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCacheHitParallel: fresh hits on 1,024 keys from all Ps; run
// with -cpu 1,2 to see how reads scale, next to BenchmarkControlParallel.
// Each goroutine walks the keys from its own starting point, as
// controllers' workers read different nodes.
func BenchmarkCacheHitParallel(b *testing.B) {
	const keys = 1024
	c, err := New(Config[string, int]{Name: "bench", Size: keys, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	names := benchKeys(keys)
	ctx := context.Background()
	fetch := func(context.Context) (int, error) { return 1, nil }
	for _, k := range names {
		_, _ = c.Get(ctx, k, fetch)
	}
	var start atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(start.Add(1)) * 509
		for pb.Next() {
			i = (i + 7) % keys
			if _, err := c.Get(ctx, names[i], fetch); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkControlParallel is the control for the parallel benchmarks: the
// same walk over the same keys, each goroutine hashing the key and looking
// it up in a map of its own, so nothing is shared. Its -cpu 1,2 scaling is
// what the machine allows in the same run.
func BenchmarkControlParallel(b *testing.B) {
	const keys = 1024
	names := benchKeys(keys)
	var start atomic.Int64
	var sink atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		own := make(map[string]int, keys)
		for j, k := range names {
			own[k] = j
		}
		i, sum := int(start.Add(1))*509, 0
		for pb.Next() {
			i = (i + 7) % keys
			sum += own[names[i]]
		}
		sink.Add(int64(sum))
	})
}

func benchKeys(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i)
	}
	return names
}
