package fleet

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// The dispatcher of a Limiter on the shared budget: one goroutine asks Redis
// for tokens for the queued waiters, one round trip at a time, highest
// priority first.

func (l *Limiter) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run is the dispatcher: it asks Redis for tokens for the queued waiters,
// one round trip at a time, highest priority first.
func (l *Limiter) run() {
	defer close(l.done)
	var pause time.Duration // before the next round trip: Redis said to wait
	pauseClass := classBackground
	for {
		if pause > 0 && !l.sleep(pause, pauseClass) {
			return
		}
		pause = 0
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return
		}
		cls, n := l.headLocked()
		l.mu.Unlock()
		if n == 0 {
			select {
			case <-l.wake:
				continue
			case <-l.stop:
				return
			}
		}
		got, retry, err := l.admit(cls, n)
		if l.f.redisResult(err) || err != nil {
			if err != nil {
				// Served locally at once, whether or not this failure
				// switched the member to fallback (which moves them too).
				l.bridge()
			}
			continue
		}
		l.mu.Lock()
		l.grantLocked(cls, got)
		l.mu.Unlock()
		if got == 0 {
			pause, pauseClass = retry, cls
		}
	}
}

// sleep waits d, or less if a waiter of a higher class than cls arrives or
// the limiter falls back. It returns false when the limiter stops.
func (l *Limiter) sleep(d time.Duration, cls int) bool {
	t := l.f.clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return false
		case <-t.C():
			return true
		case <-l.wake:
			l.mu.Lock()
			head, n := l.headLocked()
			fb := l.fallback
			l.mu.Unlock()
			if fb || (n > 0 && head < cls) {
				return true
			}
		}
	}
}

// headLocked returns the class of the first waiters to serve and how many
// of that class are queued (at most maxBatch); 0 in fallback.
func (l *Limiter) headLocked() (cls, n int) {
	if l.fallback || l.closed {
		return 0, 0
	}
	for c := range l.queues {
		if n := l.queues[c].Len(); n > 0 {
			return c, min(n, maxBatch)
		}
	}
	return 0, 0
}

// grantLocked gives n tokens of class cls to the queued waiters of that
// class; tokens nobody is left to take are kept as credits.
func (l *Limiter) grantLocked(cls, n int) {
	if n == 0 {
		return
	}
	if l.fallback || l.closed {
		return // the waiters moved on; the tokens are lost, never over quota
	}
	q := &l.queues[cls]
	for ; n > 0 && q.Len() > 0; n-- {
		w := q.Remove(q.Front()).(*waiter)
		w.state = granted
		close(w.done)
	}
	if n > 0 {
		l.credits[cls] += n
		l.creditAt = l.f.clock.Now()
	}
}

// admit asks Redis for up to n tokens of class cls, charging first the
// class's debt. When the round trip fails, Redis may still have committed
// the tokens (and the debt): those tokens are lost, and the waiters are
// served locally and become a new debt, so a slow call can cost the fleet
// tokens it did not use but never lets it send more than its budget over
// time (the local bucket's burst at most, until the debt is charged).
func (l *Limiter) admit(cls, n int) (got int, retry time.Duration, err error) {
	l.mu.Lock()
	debt := l.debt[cls]
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.f.timeout)
	defer cancel()
	start := l.f.clock.Now()
	v, err := admitScript.Run(ctx, l.f.client, l.keys[:],
		l.quota, l.burst, l.reserve, l.bgShare, cls, n, debt).Slice()
	took := l.f.clock.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 4 {
		return 0, 0, fmt.Errorf("admit: unexpected reply %v", v)
	}
	l.fobs.RedisAdmission(took)
	g, _ := v[0].(int64)
	ra, err1 := strconv.ParseFloat(fmt.Sprint(v[1]), 64)
	rate, err2 := strconv.ParseFloat(fmt.Sprint(v[2]), 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("admit: unexpected reply %v", v)
	}
	l.mu.Lock()
	l.rate = rate
	l.debt[cls] -= debt
	l.mu.Unlock()
	return int(g), time.Duration(ra * float64(time.Second)), nil
}
