package provider

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/limiter"
)

// The read path every wrapped read goes through, and mode enforce's
// pipeline behind it (shadow mode's: shadow.go): every read method's path
// runs enforceRead or enforceNodeRead, every write enforcer.write.

// A read path is one read method's pipeline: its policy, its cache, and
// the mode that runs it (set once by bind when the mode is built: enforce's
// cache-batch-breaker-token-upstream, or shadow's live call and model).
type readPath[K comparable, V any] struct {
	m   *method
	c   *cache.Cache[K, V] // nil: uncached
	run readRun[K, V]
}

// readRun is a mode's read: answer key from c (nil: uncached), calling
// the upstream through call as the mode does.
type readRun[K comparable, V any] interface {
	read(ctx context.Context, m *method, c *cache.Cache[K, V], key K, prio limiter.Priority, call func(context.Context) (V, error)) (V, error)
}

// nodePath is the read path of an InstancesV2 read, keyed by the node's
// instance: of answers it from a batched InstanceStatus.
type nodePath[V any] struct {
	m   *method
	c   *cache.Cache[nodeKey, V]
	of  func(InstanceStatus) (V, error)
	run nodeRun[V]
}

// nodeRun is a mode's InstancesV2 read; call is the upstream's own method,
// a static function, so that a cache hit allocates nothing.
type nodeRun[V any] interface {
	nodeRead(ctx context.Context, p *nodePath[V], up cloudprovider.InstancesV2, node *v1.Node, call nodeCall[V]) (V, error)
}

type nodeCall[V any] func(cloudprovider.InstancesV2, context.Context, *v1.Node) (V, error)

// read answers key, cached whatever it is.
func (p *readPath[K, V]) read(ctx context.Context, key K, call func(context.Context) (V, error)) (V, error) {
	return p.run.read(ctx, p.m, p.c, key, p.m.priority, call)
}

// readID answers key, an identity (a node name, a provider ID, a host
// name): an empty one identifies nothing, so it is neither cached nor
// merged (every node without a provider ID would share one answer).
func (p *readPath[K, V]) readID(ctx context.Context, key K, call func(context.Context) (V, error)) (V, error) {
	return p.run.read(ctx, p.m, p.identified(key), key, p.m.priority, call)
}

// readFirstSight is readID raised above the periodic resync when nothing is
// held for key: the v1 calls carry no Node whose uninitialized taint could
// say so, and a node never seen is most likely being initialised (nothing
// can be scheduled on it until it is).
func (p *readPath[K, V]) readFirstSight(ctx context.Context, key K, call func(context.Context) (V, error)) (V, error) {
	c, prio := p.identified(key), p.m.priority
	if c != nil && !c.Has(key) {
		prio = limiter.PriorityCritical
	}
	return p.run.read(ctx, p.m, c, key, prio, call)
}

func (p *readPath[K, V]) identified(key K) *cache.Cache[K, V] {
	var none K
	if key == none {
		return nil
	}
	return p.c
}

// invalidate drops key's cached answer.
func (p *readPath[K, V]) invalidate(key K) { invalidate(p.c, key) }

func (p *nodePath[V]) read(ctx context.Context, up cloudprovider.InstancesV2, node *v1.Node, call nodeCall[V]) (V, error) {
	return p.run.nodeRead(ctx, p, up, node, call)
}

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
	if f := e.firstList.Load(); f != nil && c != nil && prio != limiter.PriorityCritical && f.await(ctx) {
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

// nodePriority raises reads for nodes that are still being initialised
// above the periodic resync of initialised ones: while a node carries the
// uninitialized taint nothing can be scheduled on it.
func nodePriority(node *v1.Node, fallback limiter.Priority) limiter.Priority {
	for _, t := range node.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return limiter.PriorityCritical
		}
	}
	return fallback
}

// existsOf, shutdownOf and metadataOf answer each InstancesV2 method from a
// node's batched InstanceStatus as the upstream's own method would.
func existsOf(st InstanceStatus) (bool, error) {
	switch {
	case errors.Is(st.Err, cloudprovider.InstanceNotFound):
		return false, nil
	case st.Err != nil:
		return false, st.Err
	}
	return !st.Deleted, nil
}

func shutdownOf(st InstanceStatus) (bool, error) { return st.Shutdown, st.Err }

// metadataOf copies: callers that joined one batch slot share st, and each
// must get an InstanceMetadata of its own.
func metadataOf(st InstanceStatus) (*cloudprovider.InstanceMetadata, error) {
	return cloneMetadata(st.Metadata), st.Err
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

// whileOpen runs the read op and, while m's breaker rejects it (an
// *OpenError), waits for the breaker's next change — its open interval
// ending, the cloud answering another call, its probes settling — and runs
// op again, as a provider's client retries with backoff
// (breaker.waitForProbe). It returns the rejection when a probe failed
// after the first try (the cloud is still down), when ctx ends, or
// 2 × openTimeout after the first try. Only reads wait: a write held here
// could be overtaken by a newer write of the same object and land last.
func whileOpen[T any](ctx context.Context, g *enforcer, m *method, op func() (T, error)) (T, error) {
	v, err := op()
	if !*g.cfg.Breaker.WaitForProbe || !limiter.IsOpen(err) || ctx.Err() != nil {
		return v, err // the usual path: nothing more than op
	}
	reopened := m.breaker.Opened() // cancelled when a probe fails from now on
	deadline := g.clock.Now().Add(2 * g.cfg.Breaker.OpenTimeout.Duration)
	for {
		// Changed is taken before op, so a change between the two ends the
		// wait at once; the first op here repeats the rejected one for that.
		changed := m.breaker.Changed()
		v, err = op()
		var oe *limiter.OpenError
		if !errors.As(err, &oe) || ctx.Err() != nil || reopened.Err() != nil {
			return v, err
		}
		wait := deadline.Sub(g.clock.Now())
		if oe.RetryIn > 0 {
			wait = min(wait, oe.RetryIn)
		}
		if wait <= 0 || !g.sleep(ctx, wait, changed) || reopened.Err() != nil {
			return v, err
		}
	}
}

// sleep waits d on the gate's clock, or until wake ends; it reports false
// when ctx ended first.
func (g *enforcer) sleep(ctx context.Context, d time.Duration, wake context.Context) bool {
	timer, cancel := context.WithCancel(wake)
	defer cancel()
	stop := stoppableAfterFunc(g.clock, d, cancel)
	defer stop()
	select {
	case <-timer.Done():
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
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
