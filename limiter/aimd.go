package limiter

import (
	"math"
	"time"
)

const (
	// defaultRecoveryStep is BucketConfig.RecoveryStep's default.
	defaultRecoveryStep = time.Second
	// defaultMaxRetryAfter caps a Retry-After pause when
	// BucketConfig.MaxRetryAfter is 0.
	defaultMaxRetryAfter = 5 * time.Minute
)

// aimd is a bucket's throttling policy: the multiplicative decrease on
// throttling, the stepwise additive recovery to the configured rate, and the
// Retry-After pause. It only decides the rate; the Bucket applies it to its
// rate.Limiter. It is a plain state machine: every method takes the time,
// and it is not safe for concurrent use (the Bucket's mutex guards it).
//
// Outside a pause the limiter runs at rate. During a pause it runs at 0
// with a burst of 1: no tokens accrue and at most one is held, so when the
// pause ends one call goes out at once and the rest follow at rate.
type aimd struct {
	qps      float64 // configured rate, the ceiling of recovery
	minQPS   float64
	factor   float64
	recovery float64       // QPS added per step
	step     time.Duration // interval of the recovery steps and shortest interval between two decreases
	adaptive bool
	maxPause time.Duration

	rate         float64   // effective rate, also during a pause (it applies when the pause ends)
	paused       bool      // a pause is in effect
	pausedUntil  time.Time // end of the current pause; meaningful while paused
	stepBase     float64   // rate when recovery (re)started
	steps        int       // recovery steps taken since then
	nextStep     time.Time // time of the next recovery step; zero when rate == qps
	nextDecrease time.Time // earliest time of the next decrease
}

// newAIMD returns the policy for cfg, which must be valid and have its
// defaults filled in.
func newAIMD(cfg BucketConfig) aimd {
	return aimd{
		qps:      cfg.QPS,
		minQPS:   cfg.MinQPS,
		factor:   cfg.DecreaseFactor,
		recovery: cfg.RecoveryQPSPerSecond * cfg.RecoveryStep.Seconds(),
		step:     cfg.RecoveryStep,
		adaptive: cfg.Adaptive,
		maxPause: cfg.MaxRetryAfter,
		rate:     cfg.QPS,
	}
}

// throttled records a throttling answer at now that asked for retryAfter
// (<= 0: none). It returns the pause honoured (retryAfter capped at
// maxPause) and whether the limiter must be reset (rate decreased or a
// pause began); both also cap the tokens held at one. The policy must have
// been advanced to now.
func (a *aimd) throttled(now time.Time, retryAfter time.Duration) (honoured time.Duration, reset bool) {
	honoured = min(max(retryAfter, 0), a.maxPause)
	// One wave of requests sent at the old rate comes back as a burst of
	// throttling answers: count it as one signal.
	if a.adaptive && !a.paused && !now.Before(a.nextDecrease) {
		a.rate = max(a.minQPS, a.rate*a.factor)
		a.nextDecrease = now.Add(max(a.step, secondsToDuration(1/a.rate)))
		a.stepBase, a.steps, a.nextStep = a.rate, 0, time.Time{}
		if a.rate < a.qps {
			a.nextStep = now.Add(a.step)
		}
		reset = true
	}
	if honoured > 0 {
		if until := now.Add(honoured); !a.paused || until.After(a.pausedUntil) {
			reset = reset || !a.paused
			a.paused, a.pausedUntil = true, until
		}
		// The rate stays constant during a pause; recovery resumes a
		// step after it.
		if !a.nextStep.IsZero() && a.nextStep.Before(a.pausedUntil.Add(a.step)) {
			a.nextStep = a.pausedUntil.Add(a.step)
		}
	}
	return honoured, reset
}

// next returns the time of the next scheduled change: the end of the pause,
// or the next recovery step. It is zero if none is scheduled.
func (a *aimd) next() time.Time {
	if a.paused {
		return a.pausedUntil
	}
	return a.nextStep
}

// advance makes the next scheduled change if it is due at now, and returns
// its time; ok is false if none is due. Callers loop until !ok, applying
// each change at its own time.
func (a *aimd) advance(now time.Time) (at time.Time, ok bool) {
	at = a.next()
	if at.IsZero() || now.Before(at) {
		return time.Time{}, false
	}
	if a.paused {
		a.paused = false
		return at, true
	}
	a.steps++
	a.rate = a.stepBase + float64(a.steps)*a.recovery
	a.nextStep = at.Add(a.step)
	if a.rate >= a.qps*(1-1e-9) {
		a.rate, a.nextStep = a.qps, time.Time{}
	}
	return at, true
}

// catchUp takes at once every recovery step due at now. It is for a bucket
// that is full anyway, where the steps' times do not matter.
func (a *aimd) catchUp(now time.Time) {
	if a.paused || a.nextStep.IsZero() || now.Before(a.nextStep) {
		return
	}
	n := int(now.Sub(a.nextStep)/a.step) + 1
	a.nextStep = a.nextStep.Add(time.Duration(n-1) * a.step)
	a.steps += n - 1
	a.advance(a.nextStep)
}

// secondsToDuration converts s >= 0 seconds to a Duration, saturating.
func secondsToDuration(s float64) time.Duration {
	ns := math.Ceil(s * 1e9)
	if ns >= math.MaxInt64 || math.IsNaN(ns) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ns)
}
