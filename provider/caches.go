package provider

import (
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
)

// buildCaches creates one cache per cached read method.
func (g *gate) buildCaches() (err error) {
	nodeKeyString := func(k nodeKey) string { return k.String() }
	lbKeyString := func(k lbKey) string { return k.String() }
	g.inst.exists = newCache[nodeKey, bool](g, &err, "InstanceExists", nil, nodeKeyString)
	g.inst.shutdown = newCache[nodeKey, bool](g, &err, "InstanceShutdown", nil, nodeKeyString)
	g.inst.metadata = newCache(g, &err, "InstanceMetadata", cloneMetadata, nodeKeyString)
	g.inst.nodeAddresses = newCache(g, &err, "NodeAddresses", cloneAddresses, stringKey)
	g.inst.nodeAddressesByProviderID = newCache(g, &err, "NodeAddressesByProviderID", cloneAddresses, stringKey)
	g.inst.instanceID = newCache[string, string](g, &err, "InstanceID", nil, stringKey)
	g.inst.instanceType = newCache[string, string](g, &err, "InstanceType", nil, stringKey)
	g.inst.instanceTypeByProviderID = newCache[string, string](g, &err, "InstanceTypeByProviderID", nil, stringKey)
	g.inst.currentNodeName = newCache[string, types.NodeName](g, &err, "CurrentNodeName", nil, stringKey)
	g.inst.existsByProviderID = newCache[string, bool](g, &err, "InstanceExistsByProviderID", nil, stringKey)
	g.inst.shutdownByProviderID = newCache[string, bool](g, &err, "InstanceShutdownByProviderID", nil, stringKey)
	g.zn.local = newCache[string, cloudprovider.Zone](g, &err, "GetZone", nil, stringKey)
	g.zn.byProviderID = newCache[string, cloudprovider.Zone](g, &err, "GetZoneByProviderID", nil, stringKey)
	g.zn.byNodeName = newCache[string, cloudprovider.Zone](g, &err, "GetZoneByNodeName", nil, stringKey)
	g.lb.get = newCache(g, &err, "GetLoadBalancer", cloneLBAnswer, lbKeyString)
	g.rt.list = newCache(g, &err, "ListRoutes", cloneRoutes, stringKey)
	g.cl.list = newCache(g, &err, "ListClusters", cloneStrings, stringKey)
	g.cl.master = newCache[string, string](g, &err, "Master", nil, stringKey)
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
