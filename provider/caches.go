package provider

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
)

// buildCaches creates one cache per cached read method.
func (g *gate) buildCaches() (err error) {
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
	g.inst.exists = newCache(g, &err, "InstanceExists", nk{keyString: nodeKeyString, negativeValue: notExists, shortLived: byName})
	g.inst.shutdown = newCache(g, &err, "InstanceShutdown", nk{keyString: nodeKeyString, shortLived: byName})
	g.inst.metadata = newCache(g, &err, "InstanceMetadata", cacheOpts[nodeKey, *cloudprovider.InstanceMetadata]{clone: cloneMetadata, keyString: nodeKeyString, shortLived: byName})
	g.inst.nodeAddresses = newCache(g, &err, "NodeAddresses", cacheOpts[string, []v1.NodeAddress]{clone: cloneAddresses, keyString: stringKey})
	g.inst.nodeAddressesByProviderID = newCache(g, &err, "NodeAddressesByProviderID", cacheOpts[string, []v1.NodeAddress]{clone: cloneAddresses, keyString: stringKey})
	g.inst.instanceID = newCache(g, &err, "InstanceID", byNameStr())
	g.inst.instanceType = newCache(g, &err, "InstanceType", byNameStr())
	g.inst.instanceTypeByProviderID = newCache(g, &err, "InstanceTypeByProviderID", str())
	g.inst.currentNodeName = newCache(g, &err, "CurrentNodeName", cacheOpts[string, types.NodeName]{keyString: stringKey})
	g.inst.existsByProviderID = newCache(g, &err, "InstanceExistsByProviderID", cacheOpts[string, bool]{keyString: stringKey, negativeValue: notExists})
	g.inst.shutdownByProviderID = newCache(g, &err, "InstanceShutdownByProviderID", cacheOpts[string, bool]{keyString: stringKey})
	g.zn.local = newCache(g, &err, "GetZone", zone)
	g.zn.byProviderID = newCache(g, &err, "GetZoneByProviderID", zone)
	g.zn.byNodeName = newCache(g, &err, "GetZoneByNodeName", cacheOpts[string, cloudprovider.Zone]{keyString: stringKey, shortLived: always})
	g.lb.get = newCache(g, &err, "GetLoadBalancer", cacheOpts[lbKey, lbAnswer]{clone: cloneLBAnswer, keyString: func(k lbKey) string { return k.String() }})
	g.rt.list = newCache(g, &err, "ListRoutes", cacheOpts[string, []*cloudprovider.Route]{clone: cloneRoutes, keyString: stringKey})
	g.cl.list = newCache(g, &err, "ListClusters", cacheOpts[string, []string]{clone: cloneStrings, keyString: stringKey})
	g.cl.master = newCache(g, &err, "Master", str())
	return err
}

// put and putNegative fill a cache that may be off (nil).
func put[K comparable, V any](c *cache.Cache[K, V], key K, v V) {
	if c != nil {
		c.Put(key, v)
	}
}

func putNegative[K comparable, V any](c *cache.Cache[K, V], key K, err error) {
	if c != nil {
		c.PutNegative(key, err)
	}
}
