package bench

import (
	"context"
	"time"
)

// Wait sleeps d (real time) or until ctx ends, calling progress every 5 s
// meanwhile (long scenario phases print where they are).
func Wait(ctx context.Context, d time.Duration, progress func()) error {
	return waitEvery(ctx, d, 5*time.Second, progress)
}

func waitEvery(ctx context.Context, d, every time.Duration, progress func()) error {
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		case <-tick.C:
			progress()
		}
	}
}
