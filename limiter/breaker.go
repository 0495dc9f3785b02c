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

	"github.com/sony/gobreaker/v2"
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

// stateOf converts a gobreaker state.
func stateOf(s gobreaker.State) State {
	switch s {
	case gobreaker.StateHalfOpen:
		return StateHalfOpen
	case gobreaker.StateOpen:
		return StateOpen
	default:
		return StateClosed
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
	// every Interval (cyclic, not rolling); > 0.
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
	// frees its slot for another probe.
	HalfOpenRequests uint32
	// Clock times the open intervals; nil is the real clock. (The closed
	// state's Interval is gobreaker's, on the real clock.)
	Clock clock.PassiveClock
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

// Breaker is a circuit breaker for one API family, built on gobreaker's
// TwoStepCircuitBreaker. gobreaker counts outcomes and runs the
// closed/open/half-open machine; its own open timeout is fixed and on the
// real clock, so Breaker holds the open state itself for an interval that
// grows with consecutive failed probes (set from gobreaker's OnStateChange)
// and that any sign of the cloud answering ends (CloudAnswered). It is safe
// for concurrent use.
type Breaker struct {
	name        string
	minOpen     time.Duration
	openTimeout time.Duration
	isExcluded  func(error) bool
	obs         BreakerObserver
	clock       clock.PassiveClock
	cb          *gobreaker.TwoStepCircuitBreaker[struct{}]

	// mu is taken inside gobreaker's OnStateChange (under gobreaker's
	// lock), so it is never held while calling into gobreaker.
	mu        sync.Mutex
	lastErr   error         // last failure reported to done
	holdUntil time.Time     // open: no probe before this
	interval  time.Duration // the current open interval
	streak    int           // consecutive failed probes since the breaker last closed
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

// errReleased frees a probe slot taken by an Allow that raced with the
// breaker opening: excluded, neither success nor failure.
var errReleased = errors.New("limiter: breaker slot released")

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
	ratio, minRequests := cfg.FailureRatio, cfg.MinRequests
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: cfg.HalfOpenRequests,
		Interval:    cfg.Interval,
		// Breaker holds the open state (holdUntil); gobreaker's own timeout
		// only has to be over when the hold is.
		Timeout: time.Nanosecond,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			counted := c.TotalSuccesses + c.TotalFailures
			return counted > 0 && counted >= minRequests &&
				float64(c.TotalFailures)/float64(counted) >= ratio
		},
		IsExcluded: func(err error) bool { return err == errReleased || isExcluded(err) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			// Called with gobreaker's lock held.
			b.mu.Lock()
			switch to {
			case gobreaker.StateOpen:
				if from == gobreaker.StateHalfOpen {
					b.streak++
				}
				b.interval = b.minOpen
				for i := 0; i < b.streak && b.interval < b.openTimeout; i++ {
					b.interval *= 2
				}
				b.interval = min(b.interval, b.openTimeout)
				b.holdUntil = b.clock.Now().Add(b.interval)
				b.cancelOpened()
				b.opened, b.cancelOpened = context.WithCancel(context.Background())
			case gobreaker.StateClosed:
				b.streak = 0
			}
			b.signalChangedLocked()
			b.mu.Unlock()
			b.obs.StateChanged(stateOf(from), stateOf(to))
		},
	})
	return b, nil
}

// Name returns the name the breaker was created with.
func (b *Breaker) Name() string { return b.name }

// held reports how long the breaker still holds the open state (0: not).
func (b *Breaker) held() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.holdUntil.Sub(b.clock.Now()); d > 0 {
		return d
	}
	return 0
}

// State returns the current state. An open breaker whose open interval has
// passed becomes half-open when State, or Allow, looks at it.
func (b *Breaker) State() State {
	if b.held() > 0 {
		return StateOpen
	}
	return stateOf(b.cb.State())
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
	return b.openError(false, b.held())
}

// CloudAnswered tells an open breaker that the cloud answered a call
// (another family's, or one admitted before the breaker opened): its open
// interval ends now, and the next call is a probe.
func (b *Breaker) CloudAnswered() {
	b.mu.Lock()
	if b.holdUntil.After(b.clock.Now()) {
		b.holdUntil = time.Time{}
		b.signalChangedLocked()
	}
	b.mu.Unlock()
}

// Allow asks to make one call. If allowed, the caller must make the call and
// then call done(err) with its result exactly once (later calls are
// ignored). If not allowed — the breaker is open, or half-open with all its
// probes in flight — done is nil and err is a *OpenError.
func (b *Breaker) Allow() (done func(err error), err error) {
	if d := b.held(); d > 0 {
		return nil, b.openError(false, d)
	}
	inner, err := b.cb.Allow()
	if err != nil {
		return nil, b.openError(errors.Is(err, gobreaker.ErrTooManyRequests), b.held())
	}
	if d := b.held(); d > 0 {
		// The breaker opened between the check and gobreaker's Allow.
		inner(errReleased)
		return nil, b.openError(false, d)
	}
	var called atomic.Bool
	return func(err error) {
		if called.Swap(true) {
			return
		}
		if err != nil && !b.isExcluded(err) {
			b.mu.Lock()
			b.lastErr = err
			b.mu.Unlock()
		}
		if err == nil {
			// A call admitted before the breaker opened succeeded: the
			// cloud answers, probe now.
			b.CloudAnswered()
		}
		inner(err)
	}, nil
}

func (b *Breaker) openError(halfOpen bool, retryIn time.Duration) *OpenError {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := &OpenError{Breaker: b.name, LastErr: b.lastErr, halfOpen: halfOpen}
	if !halfOpen {
		e.RetryIn = retryIn
	}
	return e
}

// OpenError is returned by Breaker.Allow when the breaker rejects a call.
type OpenError struct {
	// Breaker is the breaker's name.
	Breaker string
	// LastErr is the last failure the breaker recorded (may be nil).
	LastErr error
	// RetryIn is how long until the breaker lets a probe through; 0 when it
	// is half-open and its probes are in flight (the next probe depends on
	// their outcome).
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
