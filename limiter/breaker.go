package limiter

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
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

// BreakerConfig configures a Breaker. All fields are required.
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
	// OpenTimeout is how long the breaker stays open before it lets probes
	// through (open -> half-open); > 0.
	OpenTimeout time.Duration
	// HalfOpenRequests is the number of probe calls allowed in half-open;
	// >= 1. The breaker closes when that many probes have succeeded and
	// reopens on the first failed probe. A probe with an excluded outcome
	// frees its slot for another probe.
	HalfOpenRequests uint32
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
	}
	return nil
}

// Breaker is a circuit breaker for one API family, built on gobreaker's
// TwoStepCircuitBreaker. It uses the real clock. It is safe for concurrent
// use.
type Breaker struct {
	name        string
	openTimeout time.Duration
	isExcluded  func(error) bool
	obs         Observer
	cb          *gobreaker.TwoStepCircuitBreaker[struct{}]

	mu       sync.Mutex
	lastErr  error     // last failure reported to done
	openedAt time.Time // when the breaker last opened
}

// NewBreaker returns a closed breaker named name (the name appears in
// OpenError and Observer events). The outcome err passed to done counts as:
// excluded — neither success nor failure — when isExcluded(err) is true (the
// provider passes InstanceNotFound, NotImplemented, context cancellation and
// throttling; isExcluded may be nil); success when err is nil; failure
// otherwise. obs nil discards events. If cfg is invalid it returns an error
// wrapping cfg.Validate's.
func NewBreaker(name string, cfg BreakerConfig, isExcluded func(error) bool, obs Observer) (*Breaker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cloudgate: breaker %q: %w", name, err)
	}
	if isExcluded == nil {
		isExcluded = func(error) bool { return false }
	}
	b := &Breaker{
		name:        name,
		openTimeout: cfg.OpenTimeout,
		isExcluded:  isExcluded,
		obs:         observerOrNop(obs),
	}
	ratio, minRequests := cfg.FailureRatio, cfg.MinRequests
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: cfg.HalfOpenRequests,
		Interval:    cfg.Interval,
		Timeout:     cfg.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			counted := c.TotalSuccesses + c.TotalFailures
			return counted > 0 && counted >= minRequests &&
				float64(c.TotalFailures)/float64(counted) >= ratio
		},
		IsExcluded: isExcluded,
		OnStateChange: func(_ string, from, to gobreaker.State) {
			// Called with gobreaker's lock held.
			if to == gobreaker.StateOpen {
				b.mu.Lock()
				b.openedAt = time.Now()
				b.mu.Unlock()
			}
			b.obs.BreakerStateChanged(name, stateOf(from), stateOf(to))
		},
	})
	return b, nil
}

// Name returns the name the breaker was created with.
func (b *Breaker) Name() string { return b.name }

// State returns the current state. An open breaker whose OpenTimeout has
// passed becomes half-open when State, or Allow, looks at it.
func (b *Breaker) State() State { return stateOf(b.cb.State()) }

// Allow asks to make one call. If allowed, the caller must make the call and
// then call done(err) with its result exactly once (later calls are
// ignored). If not allowed — the breaker is open, or half-open with all its
// probes in flight — done is nil and err is a *OpenError.
func (b *Breaker) Allow() (done func(err error), err error) {
	inner, err := b.cb.Allow()
	if err != nil {
		return nil, b.openError(errors.Is(err, gobreaker.ErrTooManyRequests))
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
		inner(err)
	}, nil
}

func (b *Breaker) openError(halfOpen bool) *OpenError {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := &OpenError{Breaker: b.name, LastErr: b.lastErr, halfOpen: halfOpen}
	if !halfOpen {
		e.RetryIn = max(time.Until(b.openedAt.Add(b.openTimeout)), 0)
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
