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
