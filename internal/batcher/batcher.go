// Package batcher coalesces concurrent requests into batch calls, after
// the AWS cloud provider's batcher.Batcher: a batch is sent when it holds
// MaxItems distinct requests, when IdleTimeout passed without a new one, or
// MaxTimeout after its first, whichever comes first — or, with SendAtOnce,
// at once when no batch is being sent, so that batching adds no latency
// when there is nothing to batch. Every caller gets the answer to its own
// request. It knows nothing of what it batches: it calls one interface,
// the Executor that sends its batches (and, if it is an Admitter, admits
// them first).
package batcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Options configures a Batcher. Zero values are documented per field.
type Options struct {
	// Name identifies the batcher in errors.
	Name string
	// IdleTimeout sends the open batch when no request joined it for this
	// long. 0: no idle flush.
	IdleTimeout time.Duration
	// MaxTimeout sends the open batch this long after its first request
	// joined (> 0).
	MaxTimeout time.Duration
	// MaxItems sends the open batch when it holds this many distinct
	// requests (>= 1); a batch never holds more.
	MaxItems int
	// SendAtOnce sends a request at once, in a batch of its own, when no
	// batch is being sent (and the Admitter, if any, admits it at once);
	// requests arriving while one is being sent, or while Admit blocks,
	// accumulate in the open batch, which is sent when the last batch in
	// flight returns (or when Admit returns, or when full, or at
	// MaxTimeout, whichever is first). Batching then adds no latency when
	// there is nothing to batch, and still forms large batches under load.
	// false: every batch waits for MaxItems, IdleTimeout or MaxTimeout.
	SendAtOnce bool
	// AdmitTimeout bounds, with an Admitter, how long a batch waits to be
	// admitted in all: from when it is first due (closed, or picked for
	// Admit while open) across every Admit called for it, preemptions
	// included. When it runs out while Admit runs for the batch, Admit's
	// context is cancelled with cause ErrAdmitTimeout; while the batch waits
	// behind another batch's Admit, it is sent at once with Flush.Err
	// ErrAdmitTimeout, without Admit. 0: no bound but Admit's own.
	AdmitTimeout time.Duration
	// Clock is the time source of the timeouts; nil is the real clock.
	Clock clock.WithTickerAndDelayedExecution
}

// Executor sends a Batcher's batches: the one thing a Batcher calls. It
// may also be an Admitter.
type Executor[In, Out any] interface {
	// Send answers a batch: one Out per request, in order. It runs on a
	// goroutine of its own with a context that no caller can cancel (a
	// batch outlives the callers that left it); f says why the batch was
	// sent, its priority and how Admit answered. It may hand item i its
	// answer early with answer(i, out) — its caller returns at once, while
	// Send goes on with the others (e.g. splitting a failed call); an item
	// answered early keeps that answer, whatever the returned slice holds
	// for it.
	Send(ctx context.Context, items []In, f Flush, answer func(i int, out Out)) []Out
}

// Admitter is an Executor that admits each batch before it is sent.
type Admitter[In, Out any] interface {
	Executor[In, Out]
	// Admit is called before each batch is sent and may block until it
	// may go (e.g. for a rate limiter's token, at the batch's priority
	// prio). The batch it is called for stays open while it blocks, if it
	// was open: requests arriving meanwhile join it (up to MaxItems) and go
	// with it, so a token is spent on as many requests as waited for it.
	// Full and timed-out batches are closed, and admitted in their turn,
	// first (unless a more urgent batch is due). The most urgent batch due
	// is admitted first (the oldest among equals), and with SendAtOnce the
	// open batch is due too while closed batches wait for Admit (it may be
	// more urgent than they are). One Admit runs at a time, on a goroutine
	// of its own; pending is a copy of the batch's requests when it was
	// called. It reports whether it admitted the batch (false: Send must
	// wait itself, e.g. Admit saw an open breaker and took no token) and
	// its error, which Send gets in Flush.Err. ctx is cancelled (cause
	// ErrPreempted) when a more urgent batch is due — a request joins it,
	// or joins the batch being admitted, more urgent than the one Admit
	// runs for: Admit should then give up without taking anything, and is
	// called again for that batch; if it admits all the same, the
	// admission goes to the most urgent batch due. It is cancelled with
	// cause ErrAdmitTimeout when the batch's Options.AdmitTimeout runs out;
	// an error Admit returns then (or any error not caused by preemption)
	// goes to the batch Admit ran for. No caller can cancel ctx.
	Admit(ctx context.Context, prio int, pending []In) (admitted bool, err error)
}

// Why a batch was sent (Flush.Reason).
const (
	FlushFull    = "size"
	FlushIdle    = "idle"
	FlushTimeout = "wait"
	// FlushNow: sent at once, nothing being sent (Options.SendAtOnce), or
	// as soon as Admit let it go.
	FlushNow = "now"
	// FlushReturned: sent when the batches in flight returned (SendAtOnce).
	FlushReturned = "returned"
)

// ErrPreempted is the cause with which Admit's context is cancelled when a
// more urgent batch is due.
var ErrPreempted = errors.New("batcher: a more urgent batch is due")

// ErrAdmitTimeout is the cause with which Admit's context is cancelled, and
// the Flush.Err of a batch sent without Admit, when the batch's
// Options.AdmitTimeout ran out.
var ErrAdmitTimeout = errors.New("batcher: the batch was not admitted within its admit timeout")

// Flush is what Send is told about its batch.
type Flush struct {
	// Reason is why the batch was sent: FlushFull, FlushIdle, FlushTimeout,
	// FlushNow or FlushReturned.
	Reason string
	// Priority is the batch's: its most urgent request's (lower is more
	// urgent).
	Priority int
	// Admitted: Admit admitted the batch (e.g. took its token).
	Admitted bool
	// Err is Admit's error: Send should answer every request with it and
	// send nothing.
	Err error
}

// Batcher coalesces requests into batches; safe for concurrent use.
type Batcher[In, Out any] struct {
	opts  Options
	exec  Executor[In, Out]
	admit Admitter[In, Out] // exec, if it is one; nil otherwise
	clock clock.WithTickerAndDelayedExecution

	mu      sync.Mutex
	open    *batch[In, Out]
	sending int // batches being sent
	// With an Admitter: closed batches waiting for Admit, oldest first, and
	// whether the goroutine that calls it is running; while Admit runs,
	// the batch it runs for, its urgency then and the cancel of its context.
	ready       []*batch[In, Out]
	admitting   bool
	admitFor    *batch[In, Out]
	admitPrio   int
	cancelAdmit context.CancelCauseFunc
	wg          sync.WaitGroup // batches being sent, and the Admit goroutine
}

// batch is one batch being filled or sent.
type batch[In, Out any] struct {
	// reason it is sent for, unless full or timed out: FlushNow, or
	// FlushReturned once it waited for the batches in flight.
	reason string
	items  []In
	prio   int            // the most urgent of its requests' priorities
	index  map[string]int // slot of each key
	last   time.Time      // when a request last joined (IdleTimeout)
	// due: its AdmitTimeout runs (it was due for admission once); expired:
	// it ran out while Admit ran for the batch.
	due, expired bool
	// answered[i] is closed once results[i] is set (or the executor left
	// it unanswered: short[i]).
	answered []chan struct{}

	mu      sync.Mutex // results and short, while the batch is being sent
	results []Out
	short   []bool
}

// New returns a Batcher sending its batches through exec, or an error
// naming the invalid option.
func New[In, Out any](opts Options, exec Executor[In, Out]) (*Batcher[In, Out], error) {
	switch {
	case opts.MaxItems < 1:
		return nil, fmt.Errorf("batcher %q: MaxItems must be >= 1 (got %d)", opts.Name, opts.MaxItems)
	case opts.MaxTimeout <= 0:
		return nil, fmt.Errorf("batcher %q: MaxTimeout must be > 0 (got %s)", opts.Name, opts.MaxTimeout)
	case opts.IdleTimeout < 0:
		return nil, fmt.Errorf("batcher %q: IdleTimeout must be >= 0 (got %s)", opts.Name, opts.IdleTimeout)
	case exec == nil:
		return nil, fmt.Errorf("batcher %q: the Executor is nil", opts.Name)
	}
	b := &Batcher[In, Out]{opts: opts, exec: exec, clock: opts.Clock}
	b.admit, _ = exec.(Admitter[In, Out])
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	return b, nil
}

// errShortAnswer is returned to callers whose slot the executor left
// unanswered.
var errShortAnswer = errors.New("batcher: the batch executor returned fewer answers than requests")

// Add joins in to the open batch (opening one if none) and waits for its
// answer. Requests with the same key are one request: a request joining
// the slot of one with its key shares that slot (whose request stays the
// first one) and its answer, and makes the batch as urgent as itself.
// prio ranks requests for an Admitter: lower is more urgent, and a batch
// is as urgent as its most urgent request. When ctx ends first, Add
// returns ctx's error and in stays in its batch, which is sent for the
// others.
func (b *Batcher[In, Out]) Add(ctx context.Context, key string, prio int, in In) (Out, error) {
	var zero Out
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	b.mu.Lock()
	bt := b.open
	opened := bt == nil
	if opened {
		bt = &batch[In, Out]{index: map[string]int{}, reason: FlushNow}
		if b.sending > 0 {
			bt.reason = FlushReturned
		}
		b.open = bt
	}
	slot, joined := bt.index[key]
	if !joined {
		slot = len(bt.items)
		bt.items = append(bt.items, in)
		bt.answered = append(bt.answered, make(chan struct{}))
		bt.index[key] = slot
	}
	if (len(bt.items) == 1 && !joined) || prio < bt.prio {
		bt.prio = prio // the first request sets it
	}
	answered := bt.answered[slot]
	bt.last = b.clock.Now()
	// A full batch leaves b.open under the same lock that filled it, so no
	// request can join it past MaxItems.
	full := len(bt.items) >= b.opts.MaxItems
	admit := b.admit != nil
	now := !full && !admit && b.opts.SendAtOnce && b.sending == 0
	arm := false
	switch {
	case full && admit:
		b.open = nil
		bt.reason = FlushFull
		b.ready = append(b.ready, bt)
		arm = b.dueLocked(bt)
	case full || now:
		b.claimOpenLocked()
	}
	if admit {
		b.startAdmitLocked()
	}
	b.mu.Unlock()

	// Timers are set, and never stopped, outside b.mu: a fake clock runs
	// callbacks under its own lock, so its Step must not wait for b.mu. A
	// timer firing for a batch already sent does nothing.
	if opened && !full && !now {
		b.after(b.opts.MaxTimeout, func() { b.flush(bt, FlushTimeout) })
		if b.opts.IdleTimeout > 0 {
			b.after(b.opts.IdleTimeout, func() { b.idle(bt) })
		}
	}
	b.arm(bt, arm)
	switch {
	case admit:
	case full:
		go b.send(bt, Flush{Reason: FlushFull})
	case now:
		go b.send(bt, Flush{Reason: FlushNow})
	}
	select {
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-answered:
		bt.mu.Lock()
		defer bt.mu.Unlock()
		if bt.short[slot] {
			return zero, errShortAnswer
		}
		return bt.results[slot], nil
	}
}

// Pending returns the number of distinct requests in the batch being
// filled (0: none open).
func (b *Batcher[In, Out]) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		return 0
	}
	return len(b.open.items)
}

// Wait waits for the batches being sent.
func (b *Batcher[In, Out]) Wait() { b.wg.Wait() }

// after runs f on its own goroutine after d on the batcher's clock.
func (b *Batcher[In, Out]) after(d time.Duration, f func()) {
	b.clock.AfterFunc(d, func() { go f() })
}

// idle sends bt if no request joined it for IdleTimeout, else looks again
// when that will be the case.
func (b *Batcher[In, Out]) idle(bt *batch[In, Out]) {
	b.mu.Lock()
	if b.open != bt {
		b.mu.Unlock()
		return
	}
	wait := b.opts.IdleTimeout - b.clock.Since(bt.last)
	b.mu.Unlock()
	if wait > 0 {
		b.after(wait, func() { b.idle(bt) })
		return
	}
	b.flush(bt, FlushIdle)
}

// flush sends bt unless it was sent already (with an Admitter: closes it,
// and it is sent once admitted).
func (b *Batcher[In, Out]) flush(bt *batch[In, Out], reason string) {
	b.mu.Lock()
	if b.open != bt {
		b.mu.Unlock()
		return
	}
	if b.admit != nil {
		b.open = nil
		bt.reason = reason
		b.ready = append(b.ready, bt)
		arm := b.dueLocked(bt)
		b.startAdmitLocked()
		b.mu.Unlock()
		b.arm(bt, arm)
		return
	}
	b.claimOpenLocked()
	b.mu.Unlock()
	b.send(bt, Flush{Reason: reason})
}

// claimOpenLocked takes the open batch out for sending: no request joins it
// any more, and it counts as in flight. The caller holds b.mu.
func (b *Batcher[In, Out]) claimOpenLocked() {
	b.open = nil
	b.wg.Add(1)
	b.sending++
}

// sent notes that a batch returned; with SendAtOnce the requests that
// accumulated meanwhile are sent together once none is in flight.
func (b *Batcher[In, Out]) sent() {
	b.mu.Lock()
	b.sending--
	if b.admit != nil {
		if b.open != nil && b.sending == 0 {
			b.open.reason = FlushReturned // it waited for the batches in flight
		}
		b.startAdmitLocked()
		b.mu.Unlock()
		return
	}
	bt := b.open
	if !b.opts.SendAtOnce || b.sending > 0 || bt == nil {
		b.mu.Unlock()
		return
	}
	b.claimOpenLocked()
	b.mu.Unlock()
	go b.send(bt, Flush{Reason: FlushReturned})
}

// nextLocked is the batch to admit next: the most urgent due one, the
// oldest among equals. Closed batches are due; with SendAtOnce so is the
// open one when none is in flight, or when closed ones wait (it goes
// after them unless more urgent). nil if none is due. The caller holds
// b.mu.
func (b *Batcher[In, Out]) nextLocked() *batch[In, Out] {
	var next *batch[In, Out]
	for _, bt := range b.ready {
		if next == nil || bt.prio < next.prio {
			next = bt
		}
	}
	if bt := b.open; bt != nil && b.opts.SendAtOnce && (b.sending == 0 || len(b.ready) > 0) &&
		(next == nil || bt.prio < next.prio) {
		next = bt
	}
	return next
}

// startAdmitLocked starts the Admit goroutine if a batch is due and it is
// not running; if it is running for a less urgent batch than one due now,
// it preempts it. The caller holds b.mu.
func (b *Batcher[In, Out]) startAdmitLocked() {
	next := b.nextLocked()
	switch {
	case next == nil:
	case !b.admitting:
		b.admitting = true
		b.wg.Add(1)
		go b.admitLoop()
	case b.cancelAdmit != nil && next.prio < b.admitPrio:
		b.cancelAdmit(ErrPreempted)
		b.cancelAdmit = nil
	}
}

// dueLocked notes that bt is due for admission and reports whether its
// AdmitTimeout is to start now (arm). The caller holds b.mu.
func (b *Batcher[In, Out]) dueLocked(bt *batch[In, Out]) bool {
	if bt.due || b.opts.AdmitTimeout <= 0 {
		return false
	}
	bt.due = true
	return true
}

// arm starts bt's AdmitTimeout when dueLocked said to; called without b.mu
// (see Add).
func (b *Batcher[In, Out]) arm(bt *batch[In, Out], arm bool) {
	if arm {
		b.after(b.opts.AdmitTimeout, func() { b.expire(bt) })
	}
}

// expire ends bt's wait for admission when its AdmitTimeout ran out: Admit
// running for it is cancelled (ErrAdmitTimeout), and a batch waiting behind
// another's Admit is sent at once with that error. A batch sent already is
// left alone.
func (b *Batcher[In, Out]) expire(bt *batch[In, Out]) {
	b.mu.Lock()
	if b.admitFor == bt {
		bt.expired = true // seen by admitLoop even if Admit was preempted already
		if b.cancelAdmit != nil {
			b.cancelAdmit(ErrAdmitTimeout)
			b.cancelAdmit = nil
		}
		b.mu.Unlock()
		return
	}
	if i := slices.Index(b.ready, bt); i >= 0 {
		b.ready = slices.Delete(b.ready, i, i+1)
	} else if b.open == bt {
		b.open = nil
	} else {
		b.mu.Unlock()
		return
	}
	b.wg.Add(1)
	b.sending++
	b.mu.Unlock()
	go b.send(bt, Flush{Reason: bt.reason, Err: ErrAdmitTimeout})
}

// admitLoop admits the due batches one at a time, the most urgent first,
// and sends each as soon as Admit returns, with whatever joined it
// meanwhile.
func (b *Batcher[In, Out]) admitLoop() {
	defer b.wg.Done()
	for {
		b.mu.Lock()
		bt := b.nextLocked()
		if bt == nil {
			b.admitting = false
			b.mu.Unlock()
			return
		}
		pending, prio := append([]In(nil), bt.items...), bt.prio
		ctx, cancel := context.WithCancelCause(context.Background())
		b.admitFor, b.admitPrio, b.cancelAdmit = bt, bt.prio, cancel
		arm := b.dueLocked(bt)
		b.mu.Unlock()
		b.arm(bt, arm)
		admitted, err := b.admit.Admit(ctx, prio, pending)
		b.mu.Lock()
		cause := context.Cause(ctx)
		cancel(nil)
		b.admitFor, b.cancelAdmit = nil, nil
		switch {
		case cause == ErrPreempted && err != nil && !bt.expired:
			b.mu.Unlock()
			continue // the more urgent batch is admitted first
		case err != nil:
			// An error (the batch's AdmitTimeout ran out, or Admit's own)
			// is the answer of the batch Admit ran for, which is still due:
			// nothing but this loop sends a batch while Admit runs for it.
			if cause == ErrPreempted { // and its AdmitTimeout ran out meanwhile
				err = ErrAdmitTimeout
			}
		default:
			// Admitted, or left to Send: the most urgent batch due now gets
			// the admission.
			if next := b.nextLocked(); next != nil {
				bt = next
			} else if b.open != nil {
				bt = b.open
			}
		}
		if i := slices.Index(b.ready, bt); i >= 0 {
			b.ready = slices.Delete(b.ready, i, i+1)
		} else if b.open == bt {
			b.open = nil
		}
		b.wg.Add(1)
		b.sending++
		b.mu.Unlock()
		go b.send(bt, Flush{Reason: bt.reason, Admitted: admitted, Err: err})
	}
}

func (b *Batcher[In, Out]) send(bt *batch[In, Out], f Flush) {
	defer b.wg.Done()
	defer b.sent()
	n := len(bt.items)
	bt.mu.Lock()
	bt.results, bt.short = make([]Out, n), make([]bool, n)
	bt.mu.Unlock()
	done := make([]bool, n) // only the executor's goroutine touches it
	answer := func(i int, out Out) {
		if i < 0 || i >= n || done[i] {
			return
		}
		done[i] = true
		bt.mu.Lock()
		bt.results[i] = out
		bt.mu.Unlock()
		close(bt.answered[i])
	}
	f.Priority = bt.prio // no request joins it any more
	rest := b.exec.Send(context.Background(), bt.items, f, answer)
	for i := range n {
		if done[i] {
			continue
		}
		if i < len(rest) {
			answer(i, rest[i])
			continue
		}
		done[i] = true
		bt.mu.Lock()
		bt.short[i] = true
		bt.mu.Unlock()
		close(bt.answered[i])
	}
}
