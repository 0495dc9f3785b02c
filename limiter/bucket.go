package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// ErrClosed is wrapped by the error Wait returns after Close.
var ErrClosed = errors.New("bucket closed")

// BucketConfig configures a Bucket. The zero values of MinQPS,
// DecreaseFactor and RecoveryQPSPerSecond select their documented defaults.
type BucketConfig struct {
	// QPS is the sustained rate in tokens per second; it must be > 0 and
	// finite.
	QPS float64
	// Burst is the bucket size: the most tokens that can be taken at once
	// after a quiet period. It must be >= 1. A new Bucket starts full.
	Burst int
	// Adaptive enables AIMD: OnThrottled multiplies the effective rate by
	// DecreaseFactor (not below MinQPS) and pauses admissions for
	// Retry-After; afterwards the rate grows back linearly by
	// RecoveryQPSPerSecond per second until QPS. See Bucket.OnThrottled.
	Adaptive bool
	// MinQPS is the floor of the effective rate; default QPS/100 when 0.
	// It must be <= QPS.
	MinQPS float64
	// DecreaseFactor multiplies the effective rate on each decrease; it
	// must be in (0,1); default 0.5 when 0.
	DecreaseFactor float64
	// RecoveryQPSPerSecond is how fast the effective rate grows back, in
	// QPS per second; default QPS/30 when 0 (full recovery in about 30 s
	// from zero).
	RecoveryQPSPerSecond float64
	// MaxRetryAfter caps the Retry-After that OnThrottled honours, so one
	// long answer cannot pause the bucket for hours; default 5 min when 0.
	// It must be >= 0.
	MaxRetryAfter time.Duration
}

// Validate reports the first invalid field, naming it, e.g.
// "qps must be > 0 (got 0)". Fields that only matter with Adaptive are
// validated regardless.
func (c BucketConfig) Validate() error {
	switch {
	case math.IsNaN(c.QPS) || math.IsInf(c.QPS, 0):
		return fmt.Errorf("qps must be a finite number > 0 (got %v)", c.QPS)
	case c.QPS <= 0:
		return fmt.Errorf("qps must be > 0 (got %v)", c.QPS)
	case c.Burst < 1:
		return fmt.Errorf("burst must be >= 1 (got %d)", c.Burst)
	case math.IsNaN(c.MinQPS) || math.IsInf(c.MinQPS, 0) || c.MinQPS < 0:
		return fmt.Errorf("minQPS must be >= 0 (got %v; 0 means qps/100)", c.MinQPS)
	case c.MinQPS > c.QPS:
		return fmt.Errorf("minQPS must be <= qps (got %v > %v)", c.MinQPS, c.QPS)
	case math.IsNaN(c.DecreaseFactor) || c.DecreaseFactor < 0 || c.DecreaseFactor >= 1:
		return fmt.Errorf("decreaseFactor must be in (0, 1) (got %v; 0 means 0.5)", c.DecreaseFactor)
	case math.IsNaN(c.RecoveryQPSPerSecond) || math.IsInf(c.RecoveryQPSPerSecond, 0) || c.RecoveryQPSPerSecond < 0:
		return fmt.Errorf("recoveryQPSPerSecond must be >= 0 (got %v; 0 means qps/30)", c.RecoveryQPSPerSecond)
	case c.MaxRetryAfter < 0:
		return fmt.Errorf("maxRetryAfter must be >= 0 (got %v; 0 means %v)", c.MaxRetryAfter, defaultMaxRetryAfter)
	}
	return nil
}

// withDefaults returns c with the zero-valued optional fields filled in.
func (c BucketConfig) withDefaults() BucketConfig {
	if c.MinQPS == 0 {
		c.MinQPS = c.QPS / 100
	}
	if c.DecreaseFactor == 0 {
		c.DecreaseFactor = 0.5
	}
	if c.RecoveryQPSPerSecond == 0 {
		c.RecoveryQPSPerSecond = c.QPS / 30
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = defaultMaxRetryAfter
	}
	return c
}

// defaultMaxRetryAfter is BucketConfig.MaxRetryAfter's default.
const defaultMaxRetryAfter = 5 * time.Minute

const (
	// tokenEpsilon absorbs floating-point error: a waiter woken exactly when
	// its token is due must find it there.
	tokenEpsilon = 1e-9
	// decreaseCooldown is the shortest interval between two multiplicative
	// decreases (see OnThrottled).
	decreaseCooldown = time.Second
	// maxDuration is the largest time.Duration.
	maxDuration = time.Duration(math.MaxInt64)
)

// Bucket is a token bucket with priority-ordered, context-aware waiting.
//
// Tokens accrue continuously at the effective rate (EffectiveQPS) up to
// Burst; each successful Wait takes one. Waiters are granted tokens one at a
// time as they accrue: highest priority first, FIFO within a priority. A
// caller that finds a token available and nobody queued takes it without
// queueing or allocating.
//
// All methods are safe for concurrent use. A Bucket has no background
// goroutine: queued waiters drive its timer themselves.
type Bucket struct {
	name string
	clk  clock.Clock
	obs  Observer
	base time.Time // all times below are offsets from base on clk

	qps      float64
	burst    float64
	adaptive bool
	minQPS   float64
	decrease float64
	recovery float64
	maxPause time.Duration

	mu     sync.Mutex
	closed bool
	last   time.Duration // time tokens and rate were brought up to date
	tokens float64       // tokens available at last

	// The effective rate at time t is rateBase for t <= recStart and
	// min(qps, rateBase + recovery*(t-recStart)) after it while recovering;
	// it is qps when not recovering.
	rateBase     float64
	recStart     time.Duration
	recovering   bool
	reportedQPS  float64       // last rate sent to RateChanged
	pausedUntil  time.Duration // no tokens accrue or are granted before this
	nextDecrease time.Duration // earliest time of the next multiplicative decrease

	queues  [numPriorities]waitQueue
	waiting int
	timer   clock.Timer   // fires when the head waiter's token is due; nil if none
	timerAt time.Duration // when timer fires
	watcher *waiter       // the waiter told to receive from timer
}

// NewBucket returns a full bucket named name (the name appears in errors and
// Observer events). clk nil means the real clock; obs nil discards events.
// If cfg is invalid it returns an error wrapping cfg.Validate's, e.g.
// `cloudgate: bucket "read": qps must be > 0 (got 0)`.
func NewBucket(name string, cfg BucketConfig, clk clock.Clock, obs Observer) (*Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cloudgate: bucket %q: %w", name, err)
	}
	cfg = cfg.withDefaults()
	if clk == nil {
		clk = clock.RealClock{}
	}
	b := &Bucket{
		name:        name,
		clk:         clk,
		obs:         observerOrNop(obs),
		base:        clk.Now(),
		qps:         cfg.QPS,
		burst:       float64(cfg.Burst),
		adaptive:    cfg.Adaptive,
		minQPS:      cfg.MinQPS,
		decrease:    cfg.DecreaseFactor,
		recovery:    cfg.RecoveryQPSPerSecond,
		maxPause:    cfg.MaxRetryAfter,
		tokens:      float64(cfg.Burst),
		rateBase:    cfg.QPS,
		reportedQPS: cfg.QPS,
	}
	return b, nil
}

// Name returns the name the bucket was created with.
func (b *Bucket) Name() string { return b.name }

// ConfiguredQPS returns BucketConfig.QPS.
func (b *Bucket) ConfiguredQPS() float64 { return b.qps }

// EffectiveQPS returns the current rate at which tokens accrue: the
// configured QPS, or less after OnThrottled decreased it on an adaptive
// bucket and it has not yet fully recovered. During a Retry-After pause it
// returns the rate that will apply when the pause ends (no tokens accrue
// during the pause).
func (b *Bucket) EffectiveQPS() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.advanceLocked(now)
	return b.rateAtLocked(now)
}

// Tokens returns the number of tokens available now, between 0 and Burst
// (tokens are granted to waiters as they accrue, never reserved ahead, so it
// is not negative). Tokens held during a Retry-After pause cannot be taken
// until the pause ends.
func (b *Bucket) Tokens() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.advanceLocked(b.now())
	return b.tokens
}

// Waiting returns the number of callers currently queued in Wait.
func (b *Bucket) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiting
}

// Wait blocks until a token is granted (it returns nil) or ctx is done.
//
// Waiters are served highest priority first, FIFO within a priority. Wait
// never rejects a caller because tokens are short; it returns early only for
// ctx or Close. If ctx is already done it returns at once without taking a
// token. A waiter that gives up never consumes a token: a token granted to
// it concurrently with its ctx ending is returned to the bucket for the next
// waiter. (Wait does not compare ctx's deadline with the expected wait:
// the deadline is on the real clock while the bucket may run on another, and
// higher-priority arrivals or rate recovery change the wait anyway.)
//
// The error satisfies errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded) as ctx.Err() does, or
// errors.Is(err, ErrClosed) after Close, and its message names the bucket:
// `cloudgate: waiting for a "read" token: context deadline exceeded`.
func (b *Bucket) Wait(ctx context.Context, p Priority) error {
	if err := ctx.Err(); err != nil {
		err = b.ctxError(ctx, err)
		b.obs.WaitDone(b.name, p, 0, err)
		return err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		err := b.closedError()
		b.obs.WaitDone(b.name, p, 0, err)
		return err
	}
	now := b.now()
	b.advanceLocked(now)
	if b.waiting == 0 && now >= b.pausedUntil && b.tokens >= 1-tokenEpsilon {
		b.tokens--
		b.mu.Unlock()
		b.obs.WaitDone(b.name, p, 0, nil)
		return nil
	}
	err := b.waitSlow(ctx, p, now) // unlocks b.mu
	b.obs.WaitDone(b.name, p, b.clk.Since(b.base)-now, err)
	return err
}

// waitSlow queues the caller and waits for a grant, ctx or Close. It is
// called with b.mu held and returns with it released.
func (b *Bucket) waitSlow(ctx context.Context, p Priority, now time.Duration) error {
	w := &waiter{prio: p.index(), wake: make(chan struct{}, 1)}
	b.queues[w.prio].pushBack(w)
	b.waiting++
	b.dispatchLocked(now)
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
			now := b.now()
			b.advanceLocked(now)
			b.dispatchLocked(now)
		case <-ctx.Done():
			b.mu.Lock()
			now := b.now()
			b.advanceLocked(now)
			switch {
			case w.granted:
				// Granted while ctx ended: hand the token on.
				b.tokens = min(b.burst, b.tokens+1)
			case !w.closed:
				b.removeLocked(w)
			}
			if !b.closed {
				b.dispatchLocked(now)
			}
			b.mu.Unlock()
			return b.ctxError(ctx, ctx.Err())
		}
	}
}

// OnThrottled tells the bucket the cloud throttled a call.
//
// retryAfter > 0 pauses all admissions until now+retryAfter (a later pause
// already in effect is kept). While paused no tokens accrue and none are
// granted; tokens held when the pause begins are capped at 1, so when it
// ends one call goes out at once and the rest follow at the effective rate.
// retryAfter <= 0 means no pause; retryAfter is capped at MaxRetryAfter.
//
// On an adaptive bucket it also applies the multiplicative decrease: the
// effective rate becomes max(MinQPS, rate*DecreaseFactor), tokens above 1
// are discarded, and the linear recovery restarts from the new rate once any
// pause is over. One wave of requests sent at the old rate typically comes
// back as a burst of throttling errors, which must count as one signal, so
// a decrease is applied at most once per max(1s, 1/newRate) after the
// previous one, and not at all while a Retry-After pause is in effect;
// throttles inside that window only honour their Retry-After.
//
// Without Adaptive OnThrottled only honours retryAfter.
func (b *Bucket) OnThrottled(retryAfter time.Duration) {
	retryAfter = min(max(retryAfter, 0), b.maxPause)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.obs.Throttled(b.name, retryAfter)
	if b.closed {
		return
	}
	now := b.now()
	b.advanceLocked(now)

	if b.adaptive && now >= b.nextDecrease && now >= b.pausedUntil {
		old := b.rateAtLocked(now)
		rate := max(b.minQPS, old*b.decrease)
		b.rateBase, b.recStart = rate, now
		b.recovering = rate < b.qps
		b.nextDecrease = satAdd(now, max(decreaseCooldown, durationFromSeconds(1/rate)))
		b.tokens = min(b.tokens, 1)
		b.reportLocked(rate)
	}
	if retryAfter > 0 {
		if until := satAdd(now, retryAfter); until > b.pausedUntil {
			b.pausedUntil = until
			b.tokens = min(b.tokens, 1)
		}
		if b.recovering && b.recStart < b.pausedUntil {
			// The rate is constant before recStart: recovery waits for
			// the pause to end.
			b.recStart = b.pausedUntil
		}
	}
	if b.waiting > 0 {
		b.dispatchLocked(now)
	}
}

// Close releases all queued waiters with an error wrapping ErrClosed and
// makes every later Wait fail the same way. It stops the bucket's timer; the
// bucket has no goroutine of its own. Close is idempotent; the other methods
// keep working.
func (b *Bucket) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for i := range b.queues {
		for w := b.queues[i].head; w != nil; {
			next := w.next
			b.queues[i].remove(w)
			w.closed = true
			w.signal()
			w = next
		}
	}
	b.waiting = 0
	b.stopTimerLocked()
}

// now returns the bucket's current time as an offset from b.base.
func (b *Bucket) now() time.Duration { return b.clk.Since(b.base) }

func (b *Bucket) ctxError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("cloudgate: waiting for a %q token: %w (cause: %w)", b.name, err, cause)
	}
	return fmt.Errorf("cloudgate: waiting for a %q token: %w", b.name, err)
}

func (b *Bucket) closedError() error {
	return fmt.Errorf("cloudgate: waiting for a %q token: %w", b.name, ErrClosed)
}

// advanceLocked brings tokens and the rate up to date at now. Times before
// the last update are treated as the last update.
func (b *Bucket) advanceLocked(now time.Duration) {
	if now <= b.last {
		return
	}
	if from := max(b.last, b.pausedUntil); now > from && b.tokens < b.burst {
		b.tokens = min(b.burst, b.tokens+b.accruedLocked(from, now))
	}
	b.last = now
	if !b.recovering || now <= b.recStart {
		return
	}
	// Rebase the linear recovery at now so the numbers stay small.
	rate := b.rateAtLocked(now)
	if rate >= b.qps*(1-tokenEpsilon) {
		rate = b.qps
		b.recovering = false
	}
	b.rateBase, b.recStart = rate, now
	if rate == b.qps || rate-b.reportedQPS >= b.qps/100 {
		b.reportLocked(rate)
	}
}

// reportLocked sends rate to RateChanged if it differs from the last report.
func (b *Bucket) reportLocked(rate float64) {
	if rate != b.reportedQPS {
		b.reportedQPS = rate
		b.obs.RateChanged(b.name, rate)
	}
}

// rateAtLocked returns the effective rate at t >= b.last.
func (b *Bucket) rateAtLocked(t time.Duration) float64 {
	if !b.recovering || t <= b.recStart {
		return b.rateBase
	}
	return min(b.qps, b.rateBase+b.recovery*seconds(t-b.recStart))
}

// cumulativeLocked returns the integral of the effective rate from recStart
// to recStart+x (x in seconds, may be negative).
func (b *Bucket) cumulativeLocked(x float64) float64 {
	if !b.recovering || x <= 0 {
		return b.rateBase * x
	}
	xc := (b.qps - b.rateBase) / b.recovery // seconds to full recovery
	if x <= xc {
		return b.rateBase*x + 0.5*b.recovery*x*x
	}
	return b.rateBase*xc + 0.5*b.recovery*xc*xc + b.qps*(x-xc)
}

// inverseCumulativeLocked returns the x at which cumulativeLocked(x) == y.
func (b *Bucket) inverseCumulativeLocked(y float64) float64 {
	if !b.recovering || y <= 0 {
		return y / b.rateBase
	}
	xc := (b.qps - b.rateBase) / b.recovery
	yc := b.rateBase*xc + 0.5*b.recovery*xc*xc
	if y >= yc {
		return xc + (y-yc)/b.qps
	}
	// rateBase*x + recovery/2*x² = y, in the cancellation-free form.
	return 2 * y / (b.rateBase + math.Sqrt(b.rateBase*b.rateBase+2*b.recovery*y))
}

// accruedLocked returns the tokens that accrue between from and to
// (from <= to), ignoring Burst and pauses.
func (b *Bucket) accruedLocked(from, to time.Duration) float64 {
	if !b.recovering {
		return b.rateBase * seconds(to-from)
	}
	return b.cumulativeLocked(seconds(to-b.recStart)) - b.cumulativeLocked(seconds(from-b.recStart))
}

// readyAtLocked returns when the next token can be granted; the bucket must
// be advanced to now.
func (b *Bucket) readyAtLocked(now time.Duration) time.Duration {
	start := max(now, b.pausedUntil)
	need := 1 - b.tokens
	if need <= tokenEpsilon {
		return start
	}
	if !b.recovering {
		return satAdd(start, durationFromSeconds(need/b.rateBase))
	}
	x0 := seconds(start - b.recStart)
	x := b.inverseCumulativeLocked(b.cumulativeLocked(x0) + need)
	return satAdd(b.recStart, durationFromSeconds(x))
}

// dispatchLocked grants available tokens to queued waiters in priority
// order, then arms the timer for the head waiter, if any, and makes sure the
// head is watching it.
func (b *Bucket) dispatchLocked(now time.Duration) {
	for {
		w := b.headLocked()
		if w == nil {
			b.stopTimerLocked()
			return
		}
		if now < b.pausedUntil || b.tokens < 1-tokenEpsilon {
			at := b.readyAtLocked(now)
			if at <= now {
				at = now + 1
			}
			rearmed := false
			if b.timer == nil || b.timerAt != at {
				b.stopTimerLocked()
				b.timer = b.clk.NewTimer(at - now)
				b.timerAt = at
				rearmed = true
			}
			if rearmed || b.watcher != w {
				b.watcher = w
				w.signal()
			}
			return
		}
		b.tokens = max(b.tokens-1, 0)
		b.removeLocked(w)
		w.granted = true
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

// headLocked returns the next waiter to serve, or nil.
func (b *Bucket) headLocked() *waiter {
	for i := range b.queues {
		if w := b.queues[i].head; w != nil {
			return w
		}
	}
	return nil
}

func (b *Bucket) removeLocked(w *waiter) {
	b.queues[w.prio].remove(w)
	b.waiting--
	if b.watcher == w {
		b.watcher = nil
	}
}

// waiter is one caller queued in Wait. Its fields other than wake are
// guarded by the bucket's mutex.
type waiter struct {
	prio       int
	prev, next *waiter
	wake       chan struct{} // capacity 1: "re-check your state"
	granted    bool          // a token was taken for this waiter
	closed     bool          // the bucket was closed
}

// signal wakes w's goroutine without blocking.
func (w *waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// waitQueue is an intrusive FIFO list of waiters.
type waitQueue struct {
	head, tail *waiter
}

func (q *waitQueue) pushBack(w *waiter) {
	w.prev, w.next = q.tail, nil
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
}

func (q *waitQueue) remove(w *waiter) {
	if w.prev == nil {
		q.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		q.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
}

// seconds converts d to seconds. Unlike time.Duration.Seconds it needs no
// integer division, which matters on Wait's fast path; it is exact for the
// durations a bucket deals with.
func seconds(d time.Duration) float64 { return float64(d) / 1e9 }

// durationFromSeconds converts s >= 0 seconds to a Duration, rounding up so
// that the token is really there at the end of it, and saturating.
func durationFromSeconds(s float64) time.Duration {
	ns := math.Ceil(s * 1e9)
	if ns >= math.MaxInt64 || math.IsNaN(ns) {
		return maxDuration
	}
	return time.Duration(ns)
}

// satAdd returns t+d (d >= 0) without overflowing.
func satAdd(t, d time.Duration) time.Duration {
	if t > maxDuration-d {
		return maxDuration
	}
	return t + d
}
