package limiter

import (
	"context"
	"time"
)

// Admitter is what a caller of the cloud needs from a rate limiter: wait for
// permission to send one call, and report the cloud's throttling answers.
// *Bucket implements it (one process's quota), and so does the fleet-wide
// limiter of package limiter/fleet (one quota shared through Redis by many
// processes), so the provider can hold either.
type Admitter interface {
	// Wait blocks until the call may be sent (nil) or ctx is done or the
	// admitter is closed (an error).
	Wait(ctx context.Context, p Priority) error
	// OnThrottled reports a throttling answer and its Retry-After (0 if
	// none).
	OnThrottled(retryAfter time.Duration)
}

var _ Admitter = (*Bucket)(nil)

// Chain admits a call when every one of its Admitters has, asked in order:
// e.g. a method's own bucket, then the fleet-wide budget of its family. A
// token already taken from an earlier Admitter is spent even if a later one
// then fails (ctx ended, closed): that errs on the side of the quota.
// OnThrottled reaches every Admitter.
type Chain []Admitter

// Wait waits on each Admitter in order and returns the first error.
func (c Chain) Wait(ctx context.Context, p Priority) error {
	for _, a := range c {
		if err := a.Wait(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// OnThrottled reports the throttle to every Admitter.
func (c Chain) OnThrottled(retryAfter time.Duration) {
	for _, a := range c {
		a.OnThrottled(retryAfter)
	}
}
