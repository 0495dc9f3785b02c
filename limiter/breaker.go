package limiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// State is a circuit breaker state. Its values are exported as a metric;
// they must not change.
type State int

const (
	// StateClosed lets every call through and counts outcomes.
	StateClosed State = 0
	// StateHalfOpen lets BreakerConfig.HalfOpenRequests probe calls through.
	StateHalfOpen State = 1
	// StateOpen rejects every call until BreakerConfig.OpenTimeout passes.
	StateOpen State = 2
)

// String returns "closed", "half-open" or "open", or "State(n)".
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateHalfOpen:
		return "half-open"
	case StateOpen:
		return "open"
	default:
		return "State(" + strconv.Itoa(int(s)) + ")"
	}
}

// BreakerConfig configures a Breaker. All fields but MinOpenTimeout and
// Clock are required.
type BreakerConfig struct {
	// FailureRatio trips the breaker (closed -> open) when
	// failures/(successes+failures) >= FailureRatio in the current window;
	// in (0,1]. Calls still in flight and excluded outcomes do not count.
	FailureRatio float64
	// MinRequests is the least number of counted outcomes
	// (successes+failures) in the window before the breaker may trip.
	MinRequests uint32
	// Interval is the closed-state counting window: counts are cleared
	// every Interval (cyclic, not rolling: a window starts when the
	// previous one is found over, or when the breaker closes); > 0.
	Interval time.Duration
	// OpenTimeout is the longest the breaker stays open before it lets
	// probes through (open -> half-open); > 0. The first open interval is
	// MinOpenTimeout; each failed probe doubles it, up to OpenTimeout; a
	// recovery (closed) starts over. An operator must not pay for the
	// breaker after the cloud is back.
	OpenTimeout time.Duration
	// MinOpenTimeout is the first open interval; 0 means OpenTimeout/30.
	// It must be in [0, OpenTimeout].
	MinOpenTimeout time.Duration
	// HalfOpenRequests is the number of probe calls allowed in half-open;
	// >= 1. The breaker closes when that many probes have succeeded and
	// reopens on the first failed probe. A probe with an excluded outcome
	// frees its slot for another probe, and so does a probe that lapses:
	// one still unanswered OpenTimeout after it was sent, or the last open
	// interval after it was sent once the cloud has answered a call since
	// (CloudAnswered, or another call's success). A lapsed probe's outcome
	// still counts when it comes. So a probe that hangs — a caller's
	// context with no deadline — holds the breaker shut for at most
	// OpenTimeout.
	HalfOpenRequests uint32
	// Clock times the counting windows and the open intervals; nil is the
	// real clock.
	Clock clock.WithTickerAndDelayedExecution
}

// Validate reports the first invalid field, naming it, e.g.
// "failureRatio must be in (0, 1] (got 0)".
func (c BreakerConfig) Validate() error {
	switch {
	case math.IsNaN(c.FailureRatio) || c.FailureRatio <= 0 || c.FailureRatio > 1:
		return fmt.Errorf("failureRatio must be in (0, 1] (got %v)", c.FailureRatio)
	case c.Interval <= 0:
		return fmt.Errorf("interval must be > 0 (got %v)", c.Interval)
	case c.OpenTimeout <= 0:
		return fmt.Errorf("openTimeout must be > 0 (got %v)", c.OpenTimeout)
	case c.HalfOpenRequests < 1:
		return fmt.Errorf("halfOpenRequests must be >= 1 (got %d)", c.HalfOpenRequests)
	case c.MinOpenTimeout < 0 || c.MinOpenTimeout > c.OpenTimeout:
		return fmt.Errorf("minOpenTimeout must be in [0, openTimeout=%v] (got %v; 0 means openTimeout/30)", c.OpenTimeout, c.MinOpenTimeout)
	}
	return nil
}

// Breaker is a circuit breaker for one API family: a small state machine
// of its own (closed → open → half-open → closed or open again), in the
// shape of sony/gobreaker's TwoStepCircuitBreaker, with two things
// gobreaker does not do: the open interval grows with consecutive failed
// probes (MinOpenTimeout doubling up to OpenTimeout), and any sign of the
// cloud answering ends it early (CloudAnswered); and all of its time comes
// from one injected clock, so tests drive it with a fake one. It is safe
// for concurrent use.
//
// Closed: every call is let through; outcomes are counted per Interval
// window, and the breaker opens when a window holds at least MinRequests
// counted outcomes of which at least FailureRatio failed. Open: every call
// is rejected until the open interval has passed. Half-open:
// HalfOpenRequests probes are let through at a time; that many successes
// close the breaker, one failure opens it again. Every transition starts a
// new generation: outcomes of calls admitted in an earlier one are not
// counted.
type Breaker struct {
	name        string
	ratio       float64
	minRequests uint32
	window      time.Duration
	probes      uint32
	minOpen     time.Duration
	openTimeout time.Duration
	isExcluded  func(error) bool
	obs         BreakerObserver
	clock       clock.WithTickerAndDelayedExecution

	mu         sync.Mutex
	state      State
	generation uint64
	counts     counts
	windowEnd  time.Time     // closed: when the counting window ends
	holdUntil  time.Time     // open: no probe before this
	interval   time.Duration // the current open interval
	streak     int           // consecutive failed probes since the breaker last closed
	lastErr    error         // last failure reported to done
	// probesOut are the half-open generation's probes still in flight, in
	// the order they were sent (see probe).
	probesOut []*probe
	// answeredAt is when the cloud was last seen answering (CloudAnswered,
	// a success): a probe sent before it that is still out may be hung.
	answeredAt time.Time
	// opened is cancelled when the breaker next opens (then replaced): see
	// Opened.
	opened       context.Context
	cancelOpened context.CancelFunc
	// changed is cancelled at the next state transition, or when
	// CloudAnswered ends the open interval early (then replaced): see
	// Changed.
	changed       context.Context
	cancelChanged context.CancelFunc
}

// counts are the outcomes of one generation. lapsed: half-open probes whose
// slots were freed because they stayed out too long (see probe).
type counts struct {
	requests, successes, failures, excluded, lapsed, consecutiveSuccesses uint32
}

// probe is one call admitted while half-open, until its outcome comes.
type probe struct {
	sent   time.Time
	lapsed bool // its slot was freed (counts.lapsed)
}

// NewBreaker returns a closed breaker named name (the name appears in
// errors and OpenError). The outcome err passed to done counts as:
// excluded — neither success nor failure — when isExcluded(err) is true (the
// provider passes InstanceNotFound, NotImplemented, a caller that gave up,
// throttling and per-request answers such as *api.RetryError and 4xx;
// isExcluded may be nil); success when err is nil; failure otherwise. obs
// nil discards events. If cfg is invalid it returns an error wrapping
// cfg.Validate's.
func NewBreaker(name string, cfg BreakerConfig, isExcluded func(error) bool, obs BreakerObserver) (*Breaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("limiter: breaker %q: %w", name, err)
	}
	if isExcluded == nil {
		isExcluded = func(error) bool { return false }
	}
	b := &Breaker{
		name:        name,
		ratio:       cfg.FailureRatio,
		minRequests: cfg.MinRequests,
		window:      cfg.Interval,
		probes:      cfg.HalfOpenRequests,
		minOpen:     cfg.MinOpenTimeout,
		openTimeout: cfg.OpenTimeout,
		isExcluded:  isExcluded,
		obs:         obs,
		clock:       cfg.Clock,
	}
	if b.obs == nil {
		b.obs = nopObserver{}
	}
	if b.minOpen == 0 {
		b.minOpen = max(cfg.OpenTimeout/30, time.Nanosecond)
	}
	if b.clock == nil {
		b.clock = clock.RealClock{}
	}
	b.opened, b.cancelOpened = context.WithCancel(context.Background())
	b.changed, b.cancelChanged = context.WithCancel(context.Background())
	b.windowEnd = b.clock.Now().Add(b.window)
	return b, nil
}

// Name returns the name the breaker was created with.
func (b *Breaker) Name() string { return b.name }

// currentLocked brings the state up to now: a closed breaker whose window
// is over starts a new one; an open breaker whose interval has passed
// becomes half-open. b.mu must be held.
func (b *Breaker) currentLocked(now time.Time) {
	switch b.state {
	case StateClosed:
		if b.windowEnd.Before(now) {
			b.generation++
			b.counts = counts{}
			b.windowEnd = now.Add(b.window)
		}
	case StateOpen:
		if !now.Before(b.holdUntil) {
			b.setStateLocked(StateHalfOpen, now)
		}
	case StateHalfOpen:
		b.lapseLocked(now)
	}
}

// lapseLocked frees the slots of the half-open probes that have been out
// too long at now — OpenTimeout, or the last open interval when the cloud
// has answered a call since the probe was sent — and returns how long until
// the next probe in flight lapses (0: none is out, or one lapsed now).
// b.mu must be held.
func (b *Breaker) lapseLocked(now time.Time) (next time.Duration) {
	freed := false
	for _, p := range b.probesOut {
		if p.lapsed {
			continue
		}
		due := p.sent.Add(b.openTimeout)
		if b.answeredAt.After(p.sent) {
			due = minTime(due, maxTime(p.sent.Add(b.interval), b.answeredAt))
		}
		if !now.Before(due) {
			p.lapsed = true
			b.counts.lapsed++
			freed = true
			continue
		}
		if d := due.Sub(now); next == 0 || d < next {
			next = d
		}
	}
	if freed {
		b.signalChangedLocked()
		return 0
	}
	return next
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// setStateLocked moves the breaker to state to, starting a new generation,
// and reports the transition. b.mu must be held (the observer is called
// under it, as gobreaker calls OnStateChange under its lock).
func (b *Breaker) setStateLocked(to State, now time.Time) {
	from := b.state
	if from == to {
		return
	}
	b.state = to
	b.generation++
	b.counts = counts{}
	b.probesOut = nil
	switch to {
	case StateClosed:
		b.streak = 0
		b.windowEnd = now.Add(b.window)
	case StateOpen:
		if from == StateHalfOpen {
			b.streak++
		}
		b.interval = b.minOpen
		for i := 0; i < b.streak && b.interval < b.openTimeout; i++ {
			b.interval *= 2
		}
		b.interval = min(b.interval, b.openTimeout)
		b.holdUntil = now.Add(b.interval)
		b.cancelOpened()
		b.opened, b.cancelOpened = context.WithCancel(context.Background())
	}
	b.signalChangedLocked()
	b.obs.StateChanged(from, to)
}

// heldLocked reports how long the breaker still holds the open state at now
// (0: not open). b.mu must be held.
func (b *Breaker) heldLocked(now time.Time) time.Duration {
	if b.state != StateOpen {
		return 0
	}
	return max(b.holdUntil.Sub(now), 0)
}

// State returns the current state. An open breaker whose open interval has
// passed becomes half-open when State, or Allow, looks at it.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.currentLocked(b.clock.Now())
	return b.state
}

// Opened returns a context that is cancelled when the breaker next opens
// (closed or half-open → open). A caller that Allow admitted and that still
// waits for something else (a token) should give up then with Rejection, as
// a caller arriving then would be rejected: otherwise the callers admitted
// before the breaker opened keep their places in the token queue, and the
// probes of the half-open breaker wait behind them while every new call is
// rejected. Take it before Allow, so that an opening in between is seen.
func (b *Breaker) Opened() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opened
}

// Changed returns a context that is cancelled at the breaker's next
// change: a state transition, or CloudAnswered ending the open interval
// early. A caller that Allow rejected and that waits for the breaker's next
// probe (rather than failing at once) takes it before Allow and waits on it.
func (b *Breaker) Changed() context.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// signalChangedLocked cancels and replaces changed; b.mu must be held.
func (b *Breaker) signalChangedLocked() {
	b.cancelChanged()
	b.changed, b.cancelChanged = context.WithCancel(context.Background())
}

// Rejection is the error Allow returns while the breaker is open: for a
// caller admitted before it opened that gives up waiting (see Opened).
func (b *Breaker) Rejection() *OpenError {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openErrorLocked(false, b.heldLocked(b.clock.Now()))
}

// CloudAnswered tells the breaker that the cloud answered a call (another
// family's, or one admitted before the breaker opened): an open interval
// ends now, and the next call is a probe; a half-open probe sent before it
// that has been out the last open interval lapses (HalfOpenRequests), so a
// hung probe does not hold the breaker shut once the cloud answers.
func (b *Breaker) CloudAnswered() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cloudAnsweredLocked(b.clock.Now())
}

func (b *Breaker) cloudAnsweredLocked(now time.Time) {
	b.answeredAt = now
	switch {
	case b.state == StateOpen && b.holdUntil.After(now):
		b.holdUntil = now
		b.signalChangedLocked()
	case b.state == StateHalfOpen:
		b.lapseLocked(now) // a probe out since before the answer may be hung
	}
}

// Allow asks to make one call. If allowed, the caller must make the call and
// then call done(err) with its result exactly once (later calls are
// ignored). If not allowed — the breaker is open, or half-open with all its
// probes in flight — done is nil and err is a *OpenError.
func (b *Breaker) Allow() (done func(err error), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	b.currentLocked(now)
	switch {
	case b.state == StateOpen:
		return nil, b.openErrorLocked(false, b.heldLocked(now))
	case b.state == StateHalfOpen && b.counts.requests-min(b.counts.excluded+b.counts.lapsed, b.counts.requests) >= b.probes:
		return nil, b.openErrorLocked(true, b.lapseLocked(now))
	}
	b.counts.requests++
	generation := b.generation
	var p *probe
	if b.state == StateHalfOpen {
		p = &probe{sent: now}
		b.probesOut = append(b.probesOut, p)
	}
	var called atomic.Bool
	return func(err error) {
		if called.Swap(true) {
			return
		}
		b.done(generation, p, err)
	}, nil
}

// done records the outcome of a call Allow admitted in generation (p: as a
// half-open probe, else nil).
func (b *Breaker) done(generation uint64, p *probe, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	excluded := err != nil && b.isExcluded(err)
	if err != nil && !excluded {
		b.lastErr = err
	}
	if p != nil {
		for i, q := range b.probesOut {
			if q == p {
				b.probesOut = append(b.probesOut[:i], b.probesOut[i+1:]...)
				break
			}
		}
	}
	if err == nil {
		// A call admitted before the breaker opened succeeded: the cloud
		// answers, probe now.
		b.cloudAnsweredLocked(now)
	}
	b.currentLocked(now)
	if generation != b.generation {
		return
	}
	switch {
	case excluded:
		if p == nil || !p.lapsed {
			b.counts.excluded++ // frees a half-open probe's slot (a lapsed one's is free)
		}
	case err == nil:
		b.counts.successes++
		b.counts.consecutiveSuccesses++
		if b.state == StateHalfOpen && b.counts.consecutiveSuccesses >= b.probes {
			b.setStateLocked(StateClosed, now)
		}
	default:
		b.counts.failures++
		b.counts.consecutiveSuccesses = 0
		if b.state == StateHalfOpen || b.readyToTripLocked() {
			b.setStateLocked(StateOpen, now)
		}
	}
}

// readyToTripLocked: the closed window holds enough counted outcomes, and
// enough of them failed.
func (b *Breaker) readyToTripLocked() bool {
	counted := b.counts.successes + b.counts.failures
	return counted > 0 && counted >= b.minRequests &&
		float64(b.counts.failures)/float64(counted) >= b.ratio
}

func (b *Breaker) openErrorLocked(halfOpen bool, retryIn time.Duration) *OpenError {
	return &OpenError{Breaker: b.name, LastErr: b.lastErr, halfOpen: halfOpen, RetryIn: retryIn}
}

// OpenError is returned by Breaker.Allow when the breaker rejects a call.
type OpenError struct {
	// Breaker is the breaker's name.
	Breaker string
	// LastErr is the last failure the breaker recorded (may be nil).
	LastErr error
	// RetryIn is how long until the breaker lets a probe through: the rest
	// of the open interval, or, half-open with its probes in flight, until
	// the first of them lapses (see BreakerConfig.HalfOpenRequests; a probe's
	// outcome may let calls through sooner).
	RetryIn time.Duration

	halfOpen bool
}

// Error returns e.g.
// `cloudgate: circuit breaker "read" is open (last upstream error: ...); retry in 12s`.
func (e *OpenError) Error() string {
	var sb []byte
	sb = fmt.Appendf(sb, "cloudgate: circuit breaker %q is open", e.Breaker)
	if e.halfOpen {
		sb = append(sb, " (half-open, probes in flight)"...)
	}
	if e.LastErr != nil {
		sb = append(sb, " (last upstream error: "...)
		sb = append(sb, e.LastErr.Error()...)
		sb = append(sb, ')')
	}
	if !e.halfOpen {
		d := e.RetryIn
		if d >= time.Second {
			d = d.Round(time.Second)
		} else {
			d = d.Round(time.Millisecond)
		}
		sb = append(sb, "; retry in "...)
		sb = append(sb, d.String()...)
	}
	return string(sb)
}

// Unwrap returns LastErr, so errors.Is/As see the upstream failure.
func (e *OpenError) Unwrap() error { return e.LastErr }

// IsOpen reports whether err, or an error it wraps, is an *OpenError.
func IsOpen(err error) bool {
	var oe *OpenError
	return errors.As(err, &oe)
}
