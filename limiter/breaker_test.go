package limiter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

var (
	errBoom     = errors.New("boom")
	errNotFound = errors.New("instance not found")
)

func isNotFoundOrCanceled(err error) bool {
	return errors.Is(err, errNotFound) || errors.Is(err, context.Canceled)
}

func newTestBreaker(t *testing.T, cfg BreakerConfig, obs BreakerObserver) *Breaker {
	t.Helper()
	b, err := NewBreaker("read", cfg, isNotFoundOrCanceled, obs)
	if err != nil {
		t.Fatalf("NewBreaker: %v", err)
	}
	return b
}

// call makes one call through b with the given outcome.
func call(t *testing.T, b *Breaker, outcome error) {
	t.Helper()
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("Allow: %v", err)
	}
	done(outcome)
}

// waitHalfOpen steps clk, b's clock, past b's open interval and checks
// that b is half-open.
func waitHalfOpen(t *testing.T, b *Breaker, clk *clocktesting.FakeClock) {
	t.Helper()
	clk.SetTime(clk.Now().Add(b.openTimeout))
	if got := b.State(); got != StateHalfOpen {
		t.Fatalf("State() after the open interval = %v, want half-open", got)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{StateClosed: "closed", StateHalfOpen: "half-open", StateOpen: "open", 5: "State(5)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(s), got, want)
		}
	}
	if StateClosed != 0 || StateHalfOpen != 1 || StateOpen != 2 {
		t.Fatal("State values changed; they are exported as a metric")
	}
}

func TestBreakerConfigValidate(t *testing.T) {
	valid := BreakerConfig{FailureRatio: 0.5, MinRequests: 10, Interval: time.Minute, OpenTimeout: time.Second, HalfOpenRequests: 1}
	tests := []struct {
		name    string
		mutate  func(*BreakerConfig)
		wantErr string
	}{
		{"valid", func(*BreakerConfig) {}, ""},
		{"ratio 1", func(c *BreakerConfig) { c.FailureRatio = 1 }, ""},
		{"zero MinRequests", func(c *BreakerConfig) { c.MinRequests = 0 }, ""},
		{"ratio 0", func(c *BreakerConfig) { c.FailureRatio = 0 }, "failureRatio must be in (0, 1] (got 0)"},
		{"ratio above 1", func(c *BreakerConfig) { c.FailureRatio = 1.5 }, "failureRatio must be in (0, 1] (got 1.5)"},
		{"no interval", func(c *BreakerConfig) { c.Interval = 0 }, "interval must be > 0"},
		{"no open timeout", func(c *BreakerConfig) { c.OpenTimeout = -time.Second }, "openTimeout must be > 0"},
		{"no probes", func(c *BreakerConfig) { c.HalfOpenRequests = 0 }, "halfOpenRequests must be >= 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.mutate(&cfg)
			err := cfg.Validate()
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.wantErr)
			}
			if _, err := NewBreaker("b", cfg, nil, nil); (err == nil) != (tt.wantErr == "") {
				t.Fatalf("NewBreaker error = %v", err)
			}
		})
	}
}

func TestBreakerTrips(t *testing.T) {
	const (
		S = iota // success
		F        // failure
		X        // excluded
	)
	outcome := map[int]error{S: nil, F: errBoom, X: errNotFound}
	tests := []struct {
		name        string
		ratio       float64
		minRequests uint32
		calls       []int
		want        State
	}{
		{"below MinRequests", 0.5, 4, []int{F, F, F}, StateClosed},
		{"ratio reached at MinRequests", 0.5, 4, []int{S, F, S, F}, StateOpen},
		{"ratio not reached", 0.5, 4, []int{S, S, S, F}, StateClosed},
		{"ratio reached later", 0.5, 4, []int{S, S, S, F, F, F}, StateOpen},
		{"excluded do not count", 0.5, 4, []int{F, X, X, X, F}, StateClosed},
		{"excluded do not dilute", 0.5, 2, []int{X, X, X, X, F, F}, StateOpen},
		{"ratio 1 needs all failures", 1, 3, []int{F, F, S, F, F}, StateClosed},
		{"ratio 1", 1, 3, []int{F, F, F}, StateOpen},
		{"successes only", 0.1, 1, []int{S, S, S}, StateClosed},
		{"context canceled is excluded", 0.5, 1, []int{X}, StateClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBreaker(t, BreakerConfig{FailureRatio: tt.ratio, MinRequests: tt.minRequests, Interval: time.Hour, OpenTimeout: time.Hour, HalfOpenRequests: 1}, nil)
			for _, c := range tt.calls {
				call(t, b, outcome[c])
			}
			if got := b.State(); got != tt.want {
				t.Fatalf("State() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBreakerOpenError(t *testing.T) {
	rec := &recorder{}
	b := newTestBreaker(t, BreakerConfig{FailureRatio: 0.5, MinRequests: 2, Interval: time.Hour, OpenTimeout: time.Minute, HalfOpenRequests: 1}, rec)
	call(t, b, fmt.Errorf("describe instances: %w", errBoom))
	call(t, b, errNotFound) // excluded: not recorded as the last error
	call(t, b, fmt.Errorf("describe instances: %w", errBoom))
	if b.State() != StateOpen {
		t.Fatalf("State() = %v, want open", b.State())
	}
	done, err := b.Allow()
	if done != nil {
		t.Fatal("Allow returned done with an error")
	}
	var oe *OpenError
	if !errors.As(err, &oe) || !IsOpen(err) || !IsOpen(fmt.Errorf("ctx: %w", err)) {
		t.Fatalf("Allow error %v is not an *OpenError", err)
	}
	if !errors.Is(err, errBoom) {
		t.Fatalf("errors.Is(%v, errBoom) = false, want true through Unwrap", err)
	}
	if oe.Breaker != "read" || oe.RetryIn <= 0 || oe.RetryIn > time.Minute {
		t.Fatalf("OpenError = %+v, want breaker read, 0 < RetryIn <= 1m", oe)
	}
	// RetryIn is just under a minute; rounded to the second it reads 1m0s.
	want := `cloudgate: circuit breaker "read" is open (last upstream error: describe instances: boom); retry in `
	if got := err.Error(); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "s") {
		t.Fatalf("Error() = %q, want %q followed by a duration", got, want)
	}
	if IsOpen(errBoom) || IsOpen(nil) {
		t.Fatal("IsOpen true for a non-OpenError")
	}
	if got := rec.snapshot().transitions; len(got) != 1 || got[0] != [2]State{StateClosed, StateOpen} {
		t.Fatalf("transitions = %v, want [closed->open]", got)
	}
}

func TestOpenErrorMessage(t *testing.T) {
	tests := []struct {
		err  *OpenError
		want string
	}{
		{&OpenError{Breaker: "write", RetryIn: 11600 * time.Millisecond}, `cloudgate: circuit breaker "write" is open; retry in 12s`},
		{&OpenError{Breaker: "write", RetryIn: 1234567 * time.Microsecond / 10}, `cloudgate: circuit breaker "write" is open; retry in 123ms`},
		{&OpenError{Breaker: "w", LastErr: errBoom, halfOpen: true}, `cloudgate: circuit breaker "w" is open (half-open, probes in flight) (last upstream error: boom)`},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	if (&OpenError{}).Unwrap() != nil {
		t.Error("Unwrap of an OpenError without LastErr is not nil")
	}
}

func TestBreakerHalfOpen(t *testing.T) {
	tests := []struct {
		name   string
		probes []error // outcomes of the probes, in order
		want   State
		trans  [][2]State
	}{
		{
			name:   "successful probe closes",
			probes: []error{nil},
			want:   StateClosed,
			trans:  [][2]State{{StateClosed, StateOpen}, {StateOpen, StateHalfOpen}, {StateHalfOpen, StateClosed}},
		},
		{
			name:   "failed probe reopens",
			probes: []error{errBoom},
			want:   StateOpen,
			trans:  [][2]State{{StateClosed, StateOpen}, {StateOpen, StateHalfOpen}, {StateHalfOpen, StateOpen}},
		},
		{
			name:   "excluded probe frees its slot",
			probes: []error{errNotFound, nil},
			want:   StateClosed,
			trans:  [][2]State{{StateClosed, StateOpen}, {StateOpen, StateHalfOpen}, {StateHalfOpen, StateClosed}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			b := newTestBreaker(t, BreakerConfig{FailureRatio: 1, MinRequests: 1, Interval: time.Hour, OpenTimeout: 20 * time.Millisecond, HalfOpenRequests: 1, Clock: clk}, rec)
			call(t, b, errBoom)
			waitHalfOpen(t, b, clk)
			for i, outcome := range tt.probes {
				done, err := b.Allow()
				if err != nil {
					t.Fatalf("probe %d: Allow: %v", i, err)
				}
				// The only probe slot is taken, until the probe lapses
				// (OpenTimeout after it was sent).
				_, err = b.Allow()
				var oe *OpenError
				if !errors.As(err, &oe) || oe.RetryIn != 20*time.Millisecond || !errors.Is(err, errBoom) {
					t.Fatalf("probe %d: second Allow = %v, want *OpenError with RetryIn 20ms (the probe's lapse) wrapping boom", i, err)
				}
				done(outcome)
			}
			if got := b.State(); got != tt.want {
				t.Fatalf("State() = %v, want %v", got, tt.want)
			}
			if got := rec.snapshot().transitions; fmt.Sprint(got) != fmt.Sprint(tt.trans) {
				t.Fatalf("transitions = %v, want %v", got, tt.trans)
			}
		})
	}
}

func TestBreakerAllProbesMustSucceed(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	b := newTestBreaker(t, BreakerConfig{FailureRatio: 1, MinRequests: 1, Interval: time.Hour, OpenTimeout: 20 * time.Millisecond, HalfOpenRequests: 2, Clock: clk}, nil)
	call(t, b, errBoom)
	waitHalfOpen(t, b, clk)
	done1, err1 := b.Allow()
	done2, err2 := b.Allow()
	if err1 != nil || err2 != nil {
		t.Fatalf("Allow in half-open: %v, %v", err1, err2)
	}
	if _, err := b.Allow(); !IsOpen(err) {
		t.Fatalf("third Allow in half-open = %v, want *OpenError", err)
	}
	done1(nil)
	if got := b.State(); got != StateHalfOpen {
		t.Fatalf("after one successful probe: State() = %v, want half-open", got)
	}
	done2(nil)
	if got := b.State(); got != StateClosed {
		t.Fatalf("after both probes: State() = %v, want closed", got)
	}
}

func TestBreakerDoneTwiceCountsOnce(t *testing.T) {
	b := newTestBreaker(t, BreakerConfig{FailureRatio: 1, MinRequests: 2, Interval: time.Hour, OpenTimeout: time.Hour, HalfOpenRequests: 1}, nil)
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errBoom)
	done(errBoom)
	if got := b.State(); got != StateClosed {
		t.Fatalf("State() = %v, want closed (second done ignored)", got)
	}
	if b.Name() != "read" {
		t.Fatalf("Name() = %q", b.Name())
	}
}

func TestBreakerNilExcluded(t *testing.T) {
	b, err := NewBreaker("w", BreakerConfig{FailureRatio: 1, MinRequests: 1, Interval: time.Hour, OpenTimeout: time.Hour, HalfOpenRequests: 1}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	call(t, b, errNotFound)
	if got := b.State(); got != StateOpen {
		t.Fatalf("State() = %v, want open (nothing excluded)", got)
	}
}

// TestBreakerOpened: the context Opened returns ends when the breaker next
// opens, from closed and from half-open (a failed probe), and not before;
// Rejection is the open breaker's error.
func TestBreakerOpened(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	cfg := BreakerConfig{FailureRatio: 0.5, MinRequests: 1, Interval: time.Hour, OpenTimeout: 20 * time.Millisecond, HalfOpenRequests: 1, Clock: clk}
	b := newTestBreaker(t, cfg, nil)
	closed := b.Opened()
	call(t, b, nil)
	if closed.Err() != nil {
		t.Fatal("Opened ended while the breaker stayed closed")
	}
	done, err := b.Allow() // admitted while closed, e.g. still waiting for a token
	if err != nil {
		t.Fatal(err)
	}
	call(t, b, errBoom)
	if closed.Err() == nil {
		t.Fatal("Opened did not end when the breaker opened")
	}
	done(context.Canceled) // the early caller gives up: excluded
	var oe *OpenError
	if err := b.Rejection(); !errors.As(error(err), &oe) || oe.RetryIn <= 0 || !errors.Is(err, errBoom) {
		t.Fatalf("Rejection() = %v, want the open breaker's *OpenError wrapping boom with a RetryIn", err)
	}
	waitHalfOpen(t, b, clk)
	halfOpen := b.Opened()
	if halfOpen.Err() != nil {
		t.Fatal("the Opened of the half-open breaker is already done")
	}
	call(t, b, errBoom) // the probe fails: open again
	if halfOpen.Err() == nil {
		t.Fatal("Opened did not end when a failed probe reopened the breaker")
	}
}

// Changed ends at every transition and when CloudAnswered ends the open
// interval early, so a caller waiting for the next probe wakes then.
func TestBreakerChanged(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	cfg := BreakerConfig{FailureRatio: 0.5, MinRequests: 1, Interval: time.Hour, OpenTimeout: time.Hour, MinOpenTimeout: time.Hour, HalfOpenRequests: 1, Clock: clk}
	b := newTestBreaker(t, cfg, nil)
	closed := b.Changed()
	call(t, b, nil)
	if closed.Err() != nil {
		t.Fatal("Changed ended while the breaker stayed closed")
	}
	call(t, b, errBoom) // closed -> open
	if closed.Err() == nil {
		t.Fatal("Changed did not end when the breaker opened")
	}
	open := b.Changed()
	if _, err := b.Allow(); err == nil {
		t.Fatal("the open breaker admitted a call")
	}
	if open.Err() != nil {
		t.Fatal("Changed ended on a rejection")
	}
	b.CloudAnswered() // the open interval ends early
	if open.Err() == nil {
		t.Fatal("Changed did not end when CloudAnswered ended the open interval")
	}
	held := b.Changed()
	done, err := b.Allow() // open -> half-open: this call is the probe
	if err != nil {
		t.Fatalf("no probe after CloudAnswered: %v", err)
	}
	if held.Err() == nil {
		t.Fatal("Changed did not end when the breaker went half-open")
	}
	halfOpen := b.Changed()
	done(nil) // half-open -> closed
	if halfOpen.Err() == nil || b.State() != StateClosed {
		t.Fatalf("Changed did not end when the probe closed the breaker (state %v)", b.State())
	}
}

// TestBreakerWindowOnItsClock: the closed state's counting window runs on
// the breaker's clock: failures of an earlier window do not count towards
// tripping, and an outcome of a call admitted in an earlier window is not
// counted in the next.
func TestBreakerWindowOnItsClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	b := newTestBreaker(t, BreakerConfig{FailureRatio: 1, MinRequests: 2, Interval: time.Minute, OpenTimeout: time.Hour, HalfOpenRequests: 1, Clock: clk}, nil)
	call(t, b, errBoom)
	late, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(time.Minute + time.Nanosecond)) // a new window
	late(errBoom)                                             // admitted in the old one: not counted
	call(t, b, errBoom)
	if got := b.State(); got != StateClosed {
		t.Fatalf("State() = %v after one failure in each of two windows, want closed", got)
	}
	call(t, b, errBoom)
	if got := b.State(); got != StateOpen {
		t.Fatalf("State() = %v after two failures in one window, want open", got)
	}
}
