package provider

import "context"

// write sends a write upstream: never cached, never de-duplicated, always
// sent or answered with an error. invalidate runs after the call whatever
// its outcome (a failed write may have changed state too).
func write(ctx context.Context, g *enforcer, m *method, fn func(context.Context) error, invalidate func()) error {
	_, err := invoke(ctx, g, m, m.priority, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	})
	if invalidate != nil {
		invalidate()
	}
	m.requests.Observe(err)
	return err
}
