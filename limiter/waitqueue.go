package limiter

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
