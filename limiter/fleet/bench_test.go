package fleet_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
)

// BenchmarkSharedAdmission measures one admission in shared mode against a
// real redis-server on 127.0.0.1: Wait with tokens available (the quota is
// far above what the benchmark asks), i.e. queueing plus one Redis round
// trip. It reports the p50 and p99 of Wait (wait-p50-ns, wait-p99-ns) and of
// the Redis round trip alone (redis-p50-ns, redis-p99-ns).
func BenchmarkSharedAdmission(b *testing.B) {
	l, f, rt := benchLimiter(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := l.Wait(ctx, limiter.PriorityNormal); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	if f.Fallback() {
		b.Fatal("the member fell back during the benchmark: the numbers would not be Redis round trips")
	}
	report(b, "wait", lat)
	report(b, "redis", rt.all())
}

// BenchmarkSharedAdmissionParallel: 32 callers per GOMAXPROCS at once; one
// round trip admits a batch of queued callers, so ns/op (per admission) is
// well below a round trip.
func BenchmarkSharedAdmissionParallel(b *testing.B) {
	l, f, rt := benchLimiter(b)
	ctx := context.Background()
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			start := time.Now()
			if err := l.Wait(ctx, limiter.PriorityNormal); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	if f.Fallback() {
		b.Fatal("the member fell back during the benchmark: the numbers would not be Redis round trips")
	}
	report(b, "wait", lat)
	report(b, "redis", rt.all())
}

// benchLimiter starts a redis-server and a member whose quota is far above
// what a benchmark asks, warmed up (connection, script cache).
func benchLimiter(b *testing.B) (*fleet.Limiter, *fleet.Fleet, *rtRecorder) {
	b.Helper()
	r := fleettest.Start(b)
	rt := &rtRecorder{}
	cfg := r.Config("bench")
	// Far above the round trip even on a loaded machine: the benchmark
	// measures round trips, and a fallback would end it.
	cfg.RedisTimeout = fleet.Duration{Duration: 2 * time.Second}
	f, err := fleet.New(cfg, fleet.Options{Observer: rt, Logf: b.Logf})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Close)
	l, err := f.Limiter("read", 1e9, limiter.BucketConfig{QPS: 1e9, Burst: 1e6}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for range 100 {
		if err := l.Wait(context.Background(), limiter.PriorityNormal); err != nil {
			b.Fatal(err)
		}
	}
	rt.reset()
	return l, f, rt
}

// report adds the p50 and p99 of d as metrics named prefix-p50-ns, prefix-p99-ns.
func report(b *testing.B, prefix string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	q := func(p float64) float64 { return float64(d[min(len(d)-1, int(p*float64(len(d))))].Nanoseconds()) }
	b.ReportMetric(q(0.50), prefix+"-p50-ns")
	b.ReportMetric(q(0.99), prefix+"-p99-ns")
}

// rtRecorder records the Redis admission round trips.
type rtRecorder struct {
	events
	mu sync.Mutex
	rt []time.Duration
}

func (r *rtRecorder) Family(string) fleet.FamilyObserver { return r }

func (r *rtRecorder) RedisAdmission(took time.Duration) {
	r.mu.Lock()
	r.rt = append(r.rt, took)
	r.mu.Unlock()
}

func (r *rtRecorder) reset() {
	r.mu.Lock()
	r.rt = r.rt[:0]
	r.mu.Unlock()
}

func (r *rtRecorder) all() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.rt...)
}
