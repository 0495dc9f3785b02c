package limiter

import "time"

// Observer receives limiter events; the metrics package implements it.
//
// All methods must be cheap and must not block. RateChanged, Throttled and
// BreakerStateChanged may be called while the Bucket's or Breaker's internal
// lock is held (so that events about one bucket or breaker arrive in the
// order they happened); they must not call back into the Bucket or Breaker
// that reported them. WaitDone is called without any lock held.
//
// A nil Observer passed to a constructor means "discard all events".
type Observer interface {
	// WaitDone is called once per Bucket.Wait with how long the caller
	// waited (measured with the bucket's clock; 0 when a token was
	// available at once) and the result: nil, or the error Wait returned.
	WaitDone(bucket string, p Priority, waited time.Duration, err error)
	// Throttled is called once per Bucket.OnThrottled with the Retry-After
	// honoured (0 if none).
	Throttled(bucket string, retryAfter time.Duration)
	// RateChanged is called when a bucket's effective rate changes (AIMD):
	// on every multiplicative decrease that changes the rate, and during
	// recovery each time the bucket notices (lazily, when it is used or
	// queried) that one or more recovery steps have raised it, the last
	// time with the configured QPS.
	RateChanged(bucket string, qps float64)
	// BreakerStateChanged is called on every breaker transition.
	BreakerStateChanged(breaker string, from, to State)
}

// nopObserver discards all events.
type nopObserver struct{}

func (nopObserver) WaitDone(string, Priority, time.Duration, error) {}
func (nopObserver) Throttled(string, time.Duration)                 {}
func (nopObserver) RateChanged(string, float64)                     {}
func (nopObserver) BreakerStateChanged(string, State, State)        {}

// observerOrNop returns obs, or an Observer that discards events when obs is
// nil.
func observerOrNop(obs Observer) Observer {
	if obs == nil {
		return nopObserver{}
	}
	return obs
}
