package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/limiter"
)

// The pipeline of mode: enforce (shadow mode's: shadow.go): every read
// method's path runs enforceRead or enforceNodeRead, every write write.

// enforceRead runs a read path in enforce mode: cache, breaker, token,
// upstream.
type enforceRead[K comparable, V any] struct{ e *enforcer }

func (r enforceRead[K, V]) read(ctx context.Context, m *method, c *cache.Cache[K, V], key K, prio limiter.Priority, call func(context.Context) (V, error)) (V, error) {
	return read(ctx, r.e, m, c, key, func(ctx context.Context) (V, error) {
		return invoke(ctx, r.e, m, prio, call)
	})
}

// enforceNodeRead runs an InstancesV2 read in enforce mode: keyed by the
// node's instance, answered from the cache, else from a batch (p.of picks
// the method's answer from the node's InstanceStatus), else by a call of
// its own. p.of and call are static functions, so a cache hit allocates
// nothing but the caller's copy.
type enforceNodeRead[V any] struct{ e *enforcer }

func (r enforceNodeRead[V]) nodeRead(ctx context.Context, p *nodePath[V], up cloudprovider.InstancesV2, node *v1.Node, call nodeCall[V]) (V, error) {
	e, m, c := r.e, p.m, p.c
	key := keyOfNode(node)
	if key.id == "" {
		c = nil // no identity: neither cached nor merged
	}
	if v, err, ok := fresh(m, c, key); ok {
		return v, err
	}
	prio := nodePriority(node, m.priority)
	// A Node being initialised does not wait for the first list: its pages
	// are background reads, each waiting for a token, and a critical
	// lookup goes first (a batch or a call of its own at its priority).
	if c != nil && prio != limiter.PriorityCritical && e.awaitFirstList(ctx) {
		if v, err, ok := fresh(m, c, key); ok {
			return v, err
		}
	}
	return read(ctx, e, m, c, key, func(ctx context.Context) (V, error) {
		if b := e.batcher(); b != nil && key.id != "" {
			st, err := b.Add(ctx, nodeRequest{node, prio})
			if err != nil {
				var zero V
				return zero, err
			}
			return p.of(st)
		}
		return invoke(ctx, e, m, prio, func(ctx context.Context) (V, error) {
			return call(up, ctx, node)
		})
	})
}

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

// fresh answers a read from a fresh cache entry, if there is one. It is
// asked before the fetch closure is built, which would otherwise be
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

// write sends a write upstream: never cached, never de-duplicated, always
// sent or answered with an error. invalidate runs after the call whatever
// its outcome (a failed write may have changed state too).
func (e *enforcer) write(ctx context.Context, m *method, fn func(context.Context) error, invalidate func()) error {
	_, err := invoke(ctx, e, m, m.priority, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	})
	if invalidate != nil {
		invalidate()
	}
	m.requests.Observe(err)
	return err
}
