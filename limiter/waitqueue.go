package limiter

import (
	"context"
	"time"
)

// waiter is one caller queued in Bucket.Wait. Its fields other than wake
// are guarded by the bucket's mutex.
type waiter struct {
	prio       int
	prev, next *waiter
	wake       chan struct{} // capacity 1: "re-check your state"
	granted    bool          // a token was taken for this waiter
	closed     bool          // the bucket was closed
}

func newWaiter(p Priority) *waiter {
	return &waiter{prio: p.index(), wake: make(chan struct{}, 1)}
}

// signal wakes w's goroutine without blocking.
func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// waitQueue holds waiters in service order: highest priority first, FIFO
// within a priority. It is an intrusive list per priority, so pushing and
// removing allocate nothing. It is not safe for concurrent use; the Bucket's
// mutex guards it.
type waitQueue struct {
	lists [numPriorities]struct{ head, tail *waiter }
	n     int
}

// len returns the number of queued waiters.
func (q *waitQueue) len() int { return q.n }

// head returns the waiter to serve next, or nil if the queue is empty.
func (q *waitQueue) head() *waiter {
	for i := range q.lists {
		if w := q.lists[i].head; w != nil {
			return w
		}
	}
	return nil
}

// push queues w behind every waiter of its priority.
func (q *waitQueue) push(w *waiter) {
	l := &q.lists[w.prio]
	w.prev, w.next = l.tail, nil
	if l.tail == nil {
		l.head = w
	} else {
		l.tail.next = w
	}
	l.tail = w
	q.n++
}

// remove takes w, which must be queued, out of the queue.
func (q *waitQueue) remove(w *waiter) {
	l := &q.lists[w.prio]
	if w.prev == nil {
		l.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		l.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	q.n--
}

// Serving the queue. The bucket reserves one token at a time from its
// limiter, for whoever is at the head of the queue when it is due, and a
// timer watched by the head wakes the queue then.

// await waits for w to be granted a token, ctx to end or Close. It is
// called with b.mu held and returns with it released.
func (b *Bucket) await(ctx context.Context, w *waiter) error {
	for {
		switch {
		case w.granted:
			b.mu.Unlock()
			return nil
		case w.closed:
			b.mu.Unlock()
			return b.closedError()
		}
		var timerC <-chan time.Time
		if b.watcher == w && b.timer != nil {
			timerC = b.timer.C()
		}
		b.mu.Unlock()

		select {
		case <-w.wake:
			b.mu.Lock()
		case <-timerC:
			b.mu.Lock()
			if b.timer != nil && b.timer.C() == timerC {
				b.timer = nil // it fired
			}
			b.advanceLocked(b.now())
		case <-ctx.Done():
			b.mu.Lock()
			if !w.closed {
				// Grant what is due first: if that is w's token, it is
				// w's to use.
				now := b.now()
				b.advanceLocked(now)
				if w.granted {
					b.mu.Unlock()
					return nil
				}
				b.queue.remove(w)
				if b.watcher == w {
					b.watcher = nil
				}
				b.dispatchLocked(now)
			}
			b.mu.Unlock()
			return b.ctxError(ctx, ctx.Err())
		}
	}
}

// releaseLocked gives the token reserved for the head back to the limiter as
// of t, unless it is due by then (it will be granted to the head).
func (b *Bucket) releaseLocked(t time.Time) {
	if b.res != nil && b.res.DelayFrom(t) > 0 {
		b.res.CancelAt(t)
		b.res = nil
	}
}

// dispatchLocked grants due tokens to queued waiters in priority order,
// then arms the timer for the next event (the head's token, the end of the
// pause or the next recovery step) and makes sure the head is watching it.
// The policy must have been advanced to now.
func (b *Bucket) dispatchLocked(now time.Time) {
	for {
		w := b.queue.head()
		if w == nil {
			b.releaseLocked(now)
			b.stopTimerLocked()
			return
		}
		if b.res == nil {
			if b.policy.paused {
				b.armLocked(now, b.policy.pausedUntil, w)
				return
			}
			b.res = b.lim.ReserveN(now, 1) // OK: Burst >= 1 outside a pause
		}
		if d := b.res.DelayFrom(now); d > 0 {
			at := now.Add(d)
			if next := b.policy.next(); !next.IsZero() && next.Before(at) {
				at = next // re-plan at the new rate then
			}
			b.armLocked(now, at, w)
			return
		}
		b.res = nil
		b.queue.remove(w)
		w.granted = true
		w.signal()
	}
}

// armLocked makes the timer fire at at (> now) and w watch it.
func (b *Bucket) armLocked(now, at time.Time, w *waiter) {
	rearmed := false
	if b.timer == nil || !b.timerAt.Equal(at) {
		b.stopTimerLocked()
		b.timer = b.clk.NewTimer(at.Sub(now))
		b.timerAt = at
		rearmed = true
	}
	if rearmed || b.watcher != w {
		b.watcher = w
		w.signal()
	}
}

func (b *Bucket) stopTimerLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.watcher = nil
}
