package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// ErrClosed is wrapped by the error Wait returns after Close.
var ErrClosed = errors.New("bucket closed")

// BucketConfig configures a Bucket. The zero values of MinQPS,
// DecreaseFactor, RecoveryQPSPerSecond and MaxRetryAfter select their
// documented defaults.
type BucketConfig struct {
	// QPS is the sustained rate in tokens per second; it must be > 0 and
	// finite.
	QPS float64
	// Burst is the bucket size: the most tokens that can be taken at once
	// after a quiet period. It must be >= 1. A new Bucket starts full.
	Burst int
	// Adaptive enables AIMD: OnThrottled multiplies the effective rate by
	// DecreaseFactor (not below MinQPS); afterwards the rate grows back by
	// RecoveryQPSPerSecond once a second until QPS. See Bucket.OnThrottled.
	// Retry-After is honoured with or without Adaptive.
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
	// RecoveryStep is how often the rate grows (by RecoveryQPSPerSecond ×
	// RecoveryStep), and the shortest interval between two decreases (one
	// wave of throttling answers is one signal); default 1 s when 0. It
	// must be >= 0.
	RecoveryStep time.Duration
	// Clock times the refill and the waits; nil is the real clock.
	Clock clock.WithTickerAndDelayedExecution
	// MaxRetryAfter caps the pause a Retry-After can impose, so that one
	// answer cannot stop a bucket for long; default 5 minutes when 0. It
	// must be >= 0.
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
	case c.RecoveryStep < 0:
		return fmt.Errorf("recoveryStep must be >= 0 (got %v; 0 means %v)", c.RecoveryStep, defaultRecoveryStep)
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
	if c.RecoveryStep == 0 {
		c.RecoveryStep = defaultRecoveryStep
	}
	return c
}

// Bucket is a token bucket with priority-ordered, context-aware waiting and
// a rate that adapts to the cloud's throttling.
//
// The tokens are kept by a golang.org/x/time/rate.Limiter, behind the
// bucket's one mutex. A caller that finds a token available and nobody
// queued takes it without queueing or allocating. Otherwise it queues, and queued callers are granted tokens one
// at a time as they accrue: highest priority first, FIFO within a priority.
//
// All methods are safe for concurrent use. A Bucket has no background
// goroutine: queued waiters drive its timer themselves.
type Bucket struct {
	name  string
	clk   clock.WithTickerAndDelayedExecution
	obs   BucketObserver // nil: events are discarded
	qps   float64
	burst int
	lim   *rate.Limiter

	mu       sync.Mutex
	closed   bool
	policy   aimd
	reported float64 // last rate sent to BucketObserver.RateChanged
	queue    waitQueue
	// res is the token reserved for whoever is at the head of the queue
	// when it is due; nil if none. A higher-priority arrival takes it over.
	res     *rate.Reservation
	timer   clock.Timer // fires at timerAt; nil if not armed
	timerAt time.Time
	watcher *waiter // the waiter told to receive from timer
}

// NewBucket returns a full bucket named name (the name appears in errors); obs nil discards events.
// If cfg is invalid it returns an error wrapping cfg.Validate's, e.g.
// `limiter: bucket "read": qps must be > 0 (got 0)`.
func NewBucket(name string, cfg BucketConfig, obs BucketObserver) (*Bucket, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("limiter: bucket %q: %w", name, err)
	}
	cfg = cfg.withDefaults()
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	b := &Bucket{
		name:     name,
		clk:      clk,
		obs:      obs,
		qps:      cfg.QPS,
		burst:    cfg.Burst,
		lim:      rate.NewLimiter(rate.Limit(cfg.QPS), cfg.Burst),
		policy:   newAIMD(cfg),
		reported: cfg.QPS,
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
	b.advanceLocked(b.now())
	return b.policy.rate
}

// Tokens returns the number of tokens available now, between 0 and Burst
// (never negative: the token reserved for the queue's head is not counted).
// It is 0 while callers are queued, except during a Retry-After pause, when
// it is the token (at most one) held for when the pause ends.
func (b *Bucket) Tokens() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.advanceLocked(now)
	return max(0, b.lim.TokensAt(now))
}

// Waiting returns the number of callers currently queued in Wait.
func (b *Bucket) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queue.len()
}

// Wait blocks until a token is granted (it returns nil) or ctx is done.
//
// Waiters are served highest priority first, FIFO within a priority. Wait
// never rejects a caller because tokens are short; it returns early only for
// ctx or Close. If ctx is already done it returns at once without taking a
// token. A waiter whose ctx ends before its token is due never consumes one:
// the token goes to the next waiter, or back to the bucket. A token due by
// the time the waiter sees its ctx end is its own, and Wait returns nil.
// (Wait does not compare ctx's deadline with the expected wait: the
// deadline is on the real clock while the bucket may run on another, and
// higher-priority arrivals or rate changes change the wait anyway.)
//
// The error satisfies errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded) as ctx.Err() does, or
// errors.Is(err, ErrClosed) after Close, and its message names the bucket:
// `limiter: waiting for a "read" token: context deadline exceeded`.
func (b *Bucket) Wait(ctx context.Context, p Priority) error {
	if err := ctx.Err(); err != nil {
		err = b.ctxError(ctx, err)
		b.waitDone(p, 0, err)
		return err
	}
	b.mu.Lock()
	start := b.now()
	b.syncLocked(start)
	switch {
	case b.closed:
		b.mu.Unlock()
		err := b.closedError()
		b.waitDone(p, 0, err)
		return err
	case b.queue.len() == 0 && !b.policy.paused && b.lim.AllowN(start, 1):
		b.mu.Unlock()
		b.waitDone(p, 0, nil)
		return nil
	}
	w := newWaiter(p)
	b.queue.push(w)
	b.dispatchLocked(start)
	err := b.await(ctx, w) // unlocks b.mu
	b.waitDone(p, b.now().Sub(start), err)
	return err
}

func (b *Bucket) waitDone(p Priority, waited time.Duration, err error) {
	if b.obs != nil {
		b.obs.WaitDone(p, waited, err)
	}
}

// OnThrottled tells the bucket the cloud throttled a call.
//
// retryAfter > 0 pauses all admissions until now+min(retryAfter,
// MaxRetryAfter) (a later pause already in effect is kept). While paused no
// tokens accrue and none are granted; tokens held when the pause begins are
// capped at 1, so when it ends one call goes out at once and the rest follow
// at the effective rate. retryAfter <= 0 means no pause.
//
// On an adaptive bucket it also applies the multiplicative decrease: the
// effective rate becomes max(MinQPS, rate*DecreaseFactor), tokens above 1
// are discarded, and the recovery restarts from the new rate: it grows by
// RecoveryQPSPerSecond a second after the decrease (or after the pause, if
// any) and every second after that, up to QPS. One wave of requests sent at
// the old rate typically comes back as a burst of throttling errors, which
// must count as one signal, so a decrease is applied at most once per
// max(1s, 1/newRate) after the previous one, and not at all while a
// Retry-After pause is in effect; throttles inside that window only honour
// their Retry-After.
//
// Without Adaptive OnThrottled only honours retryAfter.
func (b *Bucket) OnThrottled(retryAfter time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		if b.obs != nil {
			b.obs.Throttled(min(max(retryAfter, 0), b.policy.maxPause))
		}
		return
	}
	now := b.now()
	b.syncLocked(now)
	honoured, reset := b.policy.throttled(now, retryAfter)
	if b.obs != nil {
		b.obs.Throttled(honoured)
	}
	if reset {
		b.releaseLocked(now)
		b.setLimiterAt(now, true)
		b.reportLocked()
	}
	// Re-plan: the head's token at the new rate, or the end of the pause.
	b.dispatchLocked(now)
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
	for w := b.queue.head(); w != nil; w = b.queue.head() {
		b.queue.remove(w)
		w.closed = true
		w.signal()
	}
	b.releaseLocked(b.now())
	b.res = nil
	b.stopTimerLocked()
}

// now reads the bucket's clock.
func (b *Bucket) now() time.Time { return b.clk.Now() }

func (b *Bucket) ctxError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("limiter: waiting for a %q token: %w (cause: %w)", b.name, err, cause)
	}
	return fmt.Errorf("limiter: waiting for a %q token: %w", b.name, err)
}

func (b *Bucket) closedError() error {
	return fmt.Errorf("limiter: waiting for a %q token: %w", b.name, ErrClosed)
}

// syncLocked applies the policy's changes due by now (the end of a pause,
// recovery steps) to the limiter, each at its own time, so tokens accrue at
// the rate in force at each moment however rarely the bucket is used.
func (b *Bucket) syncLocked(now time.Time) {
	if b.policy.next().IsZero() {
		return
	}
	for {
		at, ok := b.policy.advance(now)
		if !ok {
			break
		}
		b.releaseLocked(at)
		b.setLimiterAt(at, false)
		if !b.policy.paused && b.lim.TokensAt(now) >= float64(b.burst) {
			// Full by now even at this step's rate, so the steps still
			// due make no difference to the tokens: take them at once.
			b.policy.catchUp(now)
			b.setLimiterAt(now, false)
			break
		}
	}
	b.reportLocked()
}

// advanceLocked brings the bucket up to date at now: the policy's changes
// due, then the grants due.
func (b *Bucket) advanceLocked(now time.Time) {
	b.syncLocked(now)
	if b.queue.len() > 0 {
		b.dispatchLocked(now)
	}
}

// setLimiterAt makes the limiter run, from t on, as the policy says: at
// rate with the configured burst, or paused (rate 0, burst 1). capAtOne
// first discards tokens above one. A reservation still held must be due
// (releaseLocked keeps only those).
func (b *Bucket) setLimiterAt(t time.Time, capAtOne bool) {
	limit, burst := rate.Limit(b.policy.rate), b.burst
	if b.policy.paused {
		limit, burst = 0, 1
	}
	if capAtOne && burst > 1 {
		// The limiter caps its tokens at its burst when it next advances.
		b.lim.SetBurstAt(t, 1)
		b.lim.SetLimitAt(t, limit)
	}
	b.lim.SetBurstAt(t, burst)
	b.lim.SetLimitAt(t, limit)
}

// reportLocked sends the effective rate to RateChanged if it differs from
// the last report.
func (b *Bucket) reportLocked() {
	if r := b.policy.rate; r != b.reported {
		b.reported = r
		if b.obs != nil {
			b.obs.RateChanged(r)
		}
	}
}
