package limiter

import "time"

// BucketObserver receives one bucket's events (NewBucket's obs); the
// metrics package implements it, one per bucket, as workqueue's
// MetricsProvider hands out one metric per queue.
//
// All methods must be cheap and must not block. RateChanged and Throttled
// may be called while the Bucket's internal lock is held (so that events
// arrive in the order they happened); they must not call back into the
// Bucket. WaitDone is called without any lock held.
//
// A nil BucketObserver passed to a constructor means "discard all events".
type BucketObserver interface {
	// WaitDone is called once per Bucket.Wait with how long the caller
	// waited (measured with the bucket's clock; 0 when a token was
	// available at once) and the result: nil, or the error Wait returned.
	WaitDone(p Priority, waited time.Duration, err error)
	// Throttled is called once per Bucket.OnThrottled with the Retry-After
	// honoured (0 if none).
	Throttled(retryAfter time.Duration)
	// RateChanged is called when the bucket's effective rate changes (AIMD):
	// on every multiplicative decrease that changes the rate, and during
	// recovery each time the bucket notices (lazily, when it is used or
	// queried) that one or more recovery steps have raised it, the last
	// time with the configured QPS.
	RateChanged(qps float64)
}

// BreakerObserver receives one breaker's transitions (NewBreaker's obs).
// StateChanged is called on every transition, possibly with the breaker's
// lock held; it must be cheap and must not call back into the Breaker. A
// nil BreakerObserver means "discard all events".
type BreakerObserver interface {
	StateChanged(from, to State)
}

// nopObserver discards a breaker's events. (A Bucket keeps a nil
// observer and skips the calls: one interface call less per admission.)
type nopObserver struct{}

func (nopObserver) StateChanged(State, State) {}
