package provider

import (
	"context"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/limiter"
)

// The read pipeline every wrapped read is built from (writes: write.go),
// in mode: enforce (shadow mode: shadow.go).

// read answers a read method from its cache (nil: uncached), calling fetch
// (which goes upstream through invoke, or through the batcher) on a miss.
// While the family's breaker is open it serves a positive answer the
// upstream gave at most TTL+cache.staleIfError ago, else the breaker's
// error — after waiting for the breaker's next probe (whileOpen). Negative
// answers are never served stale.
func read[K comparable, V any](ctx context.Context, g *enforcer, m *method, c *cache.Cache[K, V], key K, fetch func(context.Context) (V, error)) (V, error) {
	if c == nil {
		v, err := whileOpen(ctx, g, m, func() (V, error) { return fetch(ctx) })
		m.requests.Observe(err)
		return v, err
	}
	v, err := whileOpen(ctx, g, m, func() (V, error) {
		v, err := c.Get(ctx, key, fetch)
		if err != nil && limiter.IsOpen(err) {
			if stale, ok := c.Stale(key, m.ttl+g.cfg.Cache.StaleIfError.Duration); ok {
				return stale, nil
			}
		}
		return v, err
	})
	m.requests.Observe(err)
	return v, err
}

// fresh answers a read from a fresh cache entry, if there is one. Methods
// call it before building their fetch closure, which would otherwise be
// allocated on every call, hits included.
func fresh[K comparable, V any](m *method, c *cache.Cache[K, V], key K) (V, error, bool) {
	if c == nil {
		var zero V
		return zero, nil, false
	}
	v, err, ok := c.Fresh(key)
	if ok {
		m.requests.Observe(err)
	}
	return v, err, ok
}

// cachedRead is the common shape of the Instances reads: one key, one call.
func cachedRead[V any](ctx context.Context, g *enforcer, m *method, c *cache.Cache[string, V], key string, call func(context.Context) (V, error)) (V, error) {
	return cachedReadPrio(ctx, g, m, c, key, m.priority, call)
}

func cachedReadPrio[V any](ctx context.Context, g *enforcer, m *method, c *cache.Cache[string, V], key string, prio limiter.Priority, call func(context.Context) (V, error)) (V, error) {
	return read(ctx, g, m, c, key, func(ctx context.Context) (V, error) {
		return invoke(ctx, g, m, prio, call)
	})
}
