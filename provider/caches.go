package provider

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
)

// buildCaches creates one cache per cached read method, observed by observe.
func (g *gate) buildCaches(observe func(name string) cache.Observer) (err error) {
	type nk = cacheOpts[nodeKey, bool]
	nodeKeyString := func(k nodeKey) string { return k.String() }
	notExists := func(exists bool) bool { return !exists }
	byName := func(k nodeKey) bool { return !k.byProviderID }
	str := func() cacheOpts[string, string] { return cacheOpts[string, string]{keyString: stringKey} }
	zone := cacheOpts[string, cloudprovider.Zone]{keyString: stringKey}
	// Identity answers keyed by a node name: a VM re-created under the same
	// name is another instance, and the node controller writes the answer
	// into the immutable spec.providerID. They live at most negativeTTL.
	always := func(string) bool { return true }
	byNameStr := func() cacheOpts[string, string] {
		return cacheOpts[string, string]{keyString: stringKey, shortLived: always}
	}
	g.inst.exists = newCache(g, observe, &err, g.m.instanceExists, nk{keyString: nodeKeyString, negativeValue: notExists, shortLived: byName})
	g.inst.shutdown = newCache(g, observe, &err, g.m.instanceShutdown, nk{keyString: nodeKeyString, shortLived: byName})
	g.inst.metadata = newCache(g, observe, &err, g.m.instanceMetadata, cacheOpts[nodeKey, *cloudprovider.InstanceMetadata]{clone: cloneMetadata, keyString: nodeKeyString, shortLived: byName})
	// NodeAddresses is keyed by node name: a re-created VM may reuse it.
	g.inst.nodeAddresses = newCache(g, observe, &err, g.m.nodeAddresses, cacheOpts[string, []v1.NodeAddress]{clone: cloneAddresses, keyString: stringKey, shortLived: always})
	g.inst.nodeAddressesByProviderID = newCache(g, observe, &err, g.m.nodeAddressesByProviderID, cacheOpts[string, []v1.NodeAddress]{clone: cloneAddresses, keyString: stringKey})
	g.inst.instanceID = newCache(g, observe, &err, g.m.instanceID, byNameStr())
	g.inst.instanceType = newCache(g, observe, &err, g.m.instanceType, byNameStr())
	g.inst.instanceTypeByProviderID = newCache(g, observe, &err, g.m.instanceTypeByProviderID, str())
	g.inst.currentNodeName = newCache(g, observe, &err, g.m.currentNodeName, cacheOpts[string, types.NodeName]{keyString: stringKey})
	g.inst.existsByProviderID = newCache(g, observe, &err, g.m.instanceExistsByProviderID, cacheOpts[string, bool]{keyString: stringKey, negativeValue: notExists})
	g.inst.shutdownByProviderID = newCache(g, observe, &err, g.m.instanceShutdownByProviderID, cacheOpts[string, bool]{keyString: stringKey})
	g.zn.local = newCache(g, observe, &err, g.m.getZone, zone)
	g.zn.byProviderID = newCache(g, observe, &err, g.m.getZoneByProviderID, zone)
	g.zn.byNodeName = newCache(g, observe, &err, g.m.getZoneByNodeName, cacheOpts[string, cloudprovider.Zone]{keyString: stringKey, shortLived: always})
	// exists=false is "does not exist": negativeTTL, never stale (the
	// service controller skips EnsureLoadBalancerDeleted on it).
	g.lb.get = newCache(g, observe, &err, g.m.getLoadBalancer, cacheOpts[lbKey, lbAnswer]{clone: cloneLBAnswer, keyString: func(k lbKey) string { return k.String() },
		negativeValue: func(a lbAnswer) bool { return !a.exists }})
	g.rt.list = newCache(g, observe, &err, g.m.listRoutes, cacheOpts[string, []*cloudprovider.Route]{clone: cloneRoutes, keyString: stringKey})
	g.cl.list = newCache(g, observe, &err, g.m.listClusters, cacheOpts[string, []string]{clone: cloneStrings, keyString: stringKey})
	g.cl.master = newCache(g, observe, &err, g.m.master, str())
	return err
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
