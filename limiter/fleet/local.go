package fleet

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
)

// The local side of a Limiter: the bucket at this member's static share that
// serves callers in fallback (or after a failed admission round trip), its
// retirement when the share changes, and going away (no local admission)
// once the member has been cut from Redis for the fleet's awayLimit.

// waitLocal waits on the local bucket. A call admitted there while the
// member is on the shared budget (bridged: its admission round trip failed)
// is a debt charged to the shared budget by the next admission of its class
// that reaches Redis. A token the bucket grants once the member has been
// away from Redis for the fleet's awayLimit is not used (the others may have
// freed this member's claim): the member goes away and the caller starts
// over (and parks); so does a caller whose bucket goAway closed.
func (l *Limiter) waitLocal(ctx context.Context, lb *limiter.Bucket, p limiter.Priority, bridged bool, start time.Time) (again bool, err error) {
	err = lb.Wait(ctx, p)
	l.mu.Lock()
	l.unhandLocked(lb)
	retired := l.away && !l.closed
	l.mu.Unlock()
	if err == nil && !l.f.open() && l.f.awayTooLong() {
		// failureMode closed. In open, a token of the claim's bucket granted
		// between awayLimit and the heartbeat that goes away (within a
		// heartbeat, before the others may forget the claim) is used.
		l.f.goAway()
		return true, nil
	}
	if err != nil && errors.Is(err, limiter.ErrClosed) && retired {
		return true, nil
	}
	if err == nil {
		l.fobs.Admitted(true)
		if bridged {
			l.mu.Lock()
			l.debt[classOf(p)]++
			l.mu.Unlock()
		}
	}
	return false, l.done1(p, start, err)
}

// localLocked returns the local bucket at the current static share, making
// it on first use or when the share changed (the old one is retired while
// callers still wait on it); the buckets it returns must be closed by the
// caller outside the lock.
func (l *Limiter) localLocked() (lb *limiter.Bucket, closing []*limiter.Bucket) {
	if l.lb != nil && l.lbShare == l.fraction {
		return l.lb, nil
	}
	kept := l.retired[:0]
	for _, b := range append(l.retired, l.lb) {
		switch {
		case b == nil:
		case b.Waiting() > 0 || l.handed[b] > 0:
			kept = append(kept, b)
		default:
			closing = append(closing, b)
		}
	}
	l.retired = kept
	fraction := l.fraction
	if fraction <= 0 {
		fraction = l.f.cfg.MinShare // no share known yet
	}
	cfg := l.local
	cfg.QPS = fraction * l.quota
	cfg.Burst = max(1, int(math.Round(float64(l.local.Burst)*fraction)))
	cfg.MinQPS = min(l.local.MinQPS*fraction, cfg.QPS)
	cfg.RecoveryQPSPerSecond = l.local.RecoveryQPSPerSecond * fraction
	// The bucket reports Throttled and RateChanged; WaitDone is reported by
	// waitLocal, once per call, since a call may move between buckets.
	obs := localObserver{l.bobs}
	cfg.Clock = l.f.clock
	b, err := limiter.NewBucket(l.family, cfg, obs)
	if err != nil {
		// Not expected (l.local is valid and fraction is in (0, 1]); a
		// plain bucket at the share is always valid.
		b, _ = limiter.NewBucket(l.family, limiter.BucketConfig{QPS: cfg.QPS, Burst: cfg.Burst, Clock: l.f.clock}, obs)
	}
	l.lb, l.lbShare = b, l.fraction
	return b, closing
}

// unhandLocked counts one caller handed lb as gone.
func (l *Limiter) unhandLocked(lb *limiter.Bucket) {
	if l.handed[lb]--; l.handed[lb] <= 0 {
		delete(l.handed, lb)
	}
}

func closeAll(bs []*limiter.Bucket) {
	for _, b := range bs {
		b.Close()
	}
}

// localThrottled gives a throttling answer to the local bucket.
func (l *Limiter) localThrottled(retryAfter time.Duration) {
	l.mu.Lock()
	if l.closed || (l.away && l.fraction <= 0) {
		l.mu.Unlock()
		l.bobs.Throttled(retryAfter)
		return
	}
	lb, closing := l.localLocked()
	l.mu.Unlock()
	closeAll(closing)
	lb.OnThrottled(retryAfter)
}

// enterFallback switches to the local bucket at the static share and hands
// it the queued waiters.
func (l *Limiter) enterFallback(fraction float64, members int) {
	l.setShare(fraction, members)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.fallback = true
	lb, closing := l.localLocked()
	l.credits = [numClasses]int{}
	l.releaseLocked(toLocal, lb, false)
	l.mu.Unlock()
	closeAll(closing)
	l.signal()
}

// bridge hands the queued waiters to the local bucket after a failed
// admission round trip, without leaving the shared budget.
func (l *Limiter) bridge() {
	l.mu.Lock()
	if l.closed || l.fallback {
		l.mu.Unlock()
		return
	}
	lb, closing := l.localLocked()
	l.releaseLocked(toLocal, lb, true)
	l.mu.Unlock()
	closeAll(closing)
}

// leaveFallback returns to the shared budget. Callers already waiting on the
// local bucket finish there; parked ones (away) start over.
func (l *Limiter) leaveFallback() {
	l.mu.Lock()
	l.fallback = false
	if l.away {
		l.away = false
		if l.unpark != nil {
			close(l.unpark)
			l.unpark = nil
		}
	}
	l.mu.Unlock()
	l.signal()
}

// goAway stops serving the claim (see Fleet.goAway): the share becomes
// floor (failureMode open) or 0 (closed), the local buckets are closed
// (their waiters start over, as do the queued ones) and callers wait on a
// new bucket at the floor, or park until the member rejoins.
func (l *Limiter) goAway(members int, floor float64) {
	l.mu.Lock()
	if l.closed || l.away {
		l.mu.Unlock()
		return
	}
	l.away, l.fallback = true, true
	l.fraction, l.members = max(floor, 0), members
	closing := l.retired
	if l.lb != nil {
		closing = append(closing, l.lb)
	}
	l.lb, l.lbShare, l.retired = nil, 0, nil
	l.credits = [numClasses]int{}
	if floor > 0 {
		lb, _ := l.localLocked()
		l.releaseLocked(toLocal, lb, false)
	} else {
		l.unpark = make(chan struct{})
		l.releaseLocked(toLocal, nil, false)
	}
	l.mu.Unlock()
	closeAll(closing)
	l.fobs.ShareChanged(l.shareQPS(), members)
	l.signal()
}

// localObserver is the local buckets' observer: it forwards Throttled and
// RateChanged and drops WaitDone, which waitLocal reports.
type localObserver struct{ limiter.BucketObserver }

func (localObserver) WaitDone(limiter.Priority, time.Duration, error) {}
