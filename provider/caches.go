package provider

import (
	"errors"
	"fmt"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
)

// buildCaches creates the read path of every read method, with its cache
// (nil when its TTL turns caching off), observed by observe. Each wrapper's
// file builds its own methods' paths.
func (g *gate) buildCaches(observe func(name string) cache.Observer) (err error) {
	b := pathBuilder{g: g, observe: observe, err: &err}
	g.inst.buildV2(b)
	g.inst.buildV1(b)
	g.zn.build(b)
	g.lb.build(b)
	g.rt.build(b)
	g.cl.build(b)
	return err
}

// pathBuilder builds read paths; the first error is kept in *err, so the
// paths can all be built and checked once.
type pathBuilder struct {
	g       *gate
	observe func(name string) cache.Observer
	err     *error
}

// The cache rules the wrappers' paths share.
func notExists(exists bool) bool { return !exists }
func nodeByName(k nodeKey) bool  { return !k.byProviderID }

// always: identity answers keyed by a node name: a VM re-created under the
// same name is another instance, and the node controller writes the answer
// into the immutable spec.providerID. They live at most negativeTTL.
func always(string) bool { return true }

// bind sets the mode that runs the path: chosen once, when the mode is
// built, so that no call asks which mode it is in.
func (p *readPath[K, V]) bind(r runner) {
	switch r := r.(type) {
	case *enforcer:
		p.run = enforceRead[K, V]{r}
	case *shadow:
		p.run = shadowRead[K, V]{r}
	}
}

func (p *nodePath[V]) bind(r runner) {
	switch r := r.(type) {
	case *enforcer:
		p.run = enforceNodeRead[V]{r}
	case *shadow:
		p.run = shadowNodeRead[V]{r}
	}
}

// bind hands every read path to the mode r.
func (g *gate) bind(r runner) {
	for _, p := range g.paths {
		p.bind(r)
	}
}

// newPath builds the read path of the method named name, with its cache.
func newPath[K comparable, V any](b pathBuilder, name string, o cacheOpts[K, V]) *readPath[K, V] {
	m := b.g.methods[name]
	p := &readPath[K, V]{m: m, c: newCache(b.g, b.observe, b.err, m, o)}
	b.g.paths = append(b.g.paths, p)
	return p
}

// newNodePath builds the read path of the InstancesV2 method named name,
// with its cache.
func newNodePath[V any](b pathBuilder, name string, of func(InstanceStatus) (V, error), o cacheOpts[nodeKey, V]) *nodePath[V] {
	m := b.g.methods[name]
	p := &nodePath[V]{m: m, c: newCache(b.g, b.observe, b.err, m, o), of: of, clone: o.clone}
	b.g.paths = append(b.g.paths, p)
	return p
}

// invalidate drops key's entry from c (nil: uncached).
func invalidate[K comparable, V any](c *cache.Cache[K, V], key K) {
	if c != nil {
		c.Invalidate(key)
	}
}

// cacheOpts are the per-method parts of a cache's configuration.
type cacheOpts[K comparable, V any] struct {
	// clone copies a value: what is stored, and what each caller gets.
	clone     func(V) V
	keyString func(K) string
	// negativeValue: a value that says "does not exist" (InstanceExists
	// false): negativeTTL, never stale.
	negativeValue func(V) bool
	// shortLived: keys (node names) that a re-created instance may reuse;
	// their answers live at most negativeTTL and are never served stale.
	shortLived func(K) bool
}

// newCache builds the cache of read method m, or returns nil when the
// method's TTL turns caching off. The first error is kept in *errp, so a
// caller can build every cache and check once.
func newCache[K comparable, V any](g *gate, observe func(name string) cache.Observer, errp *error, m *method, o cacheOpts[K, V]) *cache.Cache[K, V] {
	name, ttl := m.name, m.ttl
	if ttl <= 0 || *errp != nil {
		return nil
	}
	c, err := cache.New(cache.Config[K, V]{
		Name:          name,
		Size:          g.cfg.Cache.Size,
		TTL:           ttl,
		NegativeTTL:   g.cfg.Cache.NegativeTTL.Duration,
		StaleIfError:  g.cfg.Cache.StaleIfError.Duration,
		IsNegative:    func(err error) bool { return errors.Is(err, cloudprovider.InstanceNotFound) },
		NegativeValue: o.negativeValue,
		ShortLived:    o.shortLived,
		Clone:         o.clone,
		KeyString:     o.keyString,
		Hash:          keyHash[K](),
		Clock:         g.clock,
		Observer:      observe(name),
	})
	if err != nil {
		*errp = fmt.Errorf("cloudgate config: methods.%s: %w", name, err)
		return nil
	}
	g.caches = append(g.caches, c)
	return c
}
