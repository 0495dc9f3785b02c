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
	set := func(e error) {
		if err == nil {
			err = e
		}
	}
	var e error
	g.inst.exists, e = newCache[nodeKey, bool](g, "InstanceExists", nil, nodeKeyString)
	set(e)
	g.inst.shutdown, e = newCache[nodeKey, bool](g, "InstanceShutdown", nil, nodeKeyString)
	set(e)
	g.inst.metadata, e = newCache(g, "InstanceMetadata", cloneMetadata, nodeKeyString)
	set(e)
	g.inst.nodeAddresses, e = newCache(g, "NodeAddresses", cloneAddresses, stringKey)
	set(e)
	g.inst.nodeAddressesByProviderID, e = newCache(g, "NodeAddressesByProviderID", cloneAddresses, stringKey)
	set(e)
	g.inst.instanceID, e = newCache[string, string](g, "InstanceID", nil, stringKey)
	set(e)
	g.inst.instanceType, e = newCache[string, string](g, "InstanceType", nil, stringKey)
	set(e)
	g.inst.instanceTypeByProviderID, e = newCache[string, string](g, "InstanceTypeByProviderID", nil, stringKey)
	set(e)
	g.inst.currentNodeName, e = newCache[string, types.NodeName](g, "CurrentNodeName", nil, stringKey)
	set(e)
	g.inst.existsByProviderID, e = newCache[string, bool](g, "InstanceExistsByProviderID", nil, stringKey)
	set(e)
	g.inst.shutdownByProviderID, e = newCache[string, bool](g, "InstanceShutdownByProviderID", nil, stringKey)
	set(e)
	g.zn.local, e = newCache[string, cloudprovider.Zone](g, "GetZone", nil, stringKey)
	set(e)
	g.zn.byProviderID, e = newCache[string, cloudprovider.Zone](g, "GetZoneByProviderID", nil, stringKey)
	set(e)
	g.zn.byNodeName, e = newCache[string, cloudprovider.Zone](g, "GetZoneByNodeName", nil, stringKey)
	set(e)
	g.lb.get, e = newCache(g, "GetLoadBalancer", cloneLBAnswer, lbKeyString)
	set(e)
	g.rt.list, e = newCache(g, "ListRoutes", cloneRoutes, stringKey)
	set(e)
	g.cl.list, e = newCache(g, "ListClusters", cloneStrings, stringKey)
	set(e)
	g.cl.master, e = newCache[string, string](g, "Master", nil, stringKey)
	set(e)
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
