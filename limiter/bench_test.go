package limiter

import (
	"context"
	"testing"
	"time"
)

// benchBucket returns a bucket that never runs out of tokens during a
// benchmark, so Wait never queues.
func benchBucket(b *testing.B) *Bucket {
	b.Helper()
	bk, err := NewBucket("bench", BucketConfig{QPS: 1e12, Burst: 1 << 40}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(bk.Close)
	return bk
}

// BenchmarkBucketWaitUncontended is admission with a token available and
// nobody queued: the bucket's lock, a clock read and one
// rate.Limiter.AllowN.
func BenchmarkBucketWaitUncontended(b *testing.B) {
	bk := benchBucket(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := bk.Wait(ctx, PriorityNormal); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBucketWaitParallel(b *testing.B) {
	bk := benchBucket(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := bk.Wait(ctx, PriorityNormal); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkBucketWaitUncontendedObserved(b *testing.B) {
	bk, err := NewBucket("bench", BucketConfig{QPS: 1e12, Burst: 1 << 40}, &recorderNoAlloc{})
	if err != nil {
		b.Fatal(err)
	}
	defer bk.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := bk.Wait(ctx, PriorityNormal); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkThrottleClassify(b *testing.B) {
	c, err := NewThrottleClassifier(nil)
	if err != nil {
		b.Fatal(err)
	}
	err = errBoom
	b.ReportAllocs()
	for b.Loop() {
		c.Classify(err)
	}
}

func BenchmarkBreakerAllow(b *testing.B) {
	br, err := NewBreaker("bench", BreakerConfig{FailureRatio: 0.5, MinRequests: 10, Interval: 60e9, OpenTimeout: 1e9, HalfOpenRequests: 1}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil)
	}
}

// recorderNoAlloc is a BucketObserver that only counts, like a metrics counter.
type recorderNoAlloc struct{ waits int64 }

func (r *recorderNoAlloc) WaitDone(Priority, time.Duration, error) { r.waits++ }
func (*recorderNoAlloc) Throttled(time.Duration)                   {}
func (*recorderNoAlloc) RateChanged(float64)                       {}
