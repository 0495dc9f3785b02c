package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/limiter"
)

// instances wraps the upstream's Instances (v1): every read cached by node
// name or provider ID; AddSSHKeyToAllInstances is a write.
type instances struct {
	g  *gate
	up cloudprovider.Instances
}

var _ cloudprovider.Instances = (*instances)(nil)

// cachedRead is the common shape of the Instances reads: one key, one call.
func cachedRead[V any](ctx context.Context, g *gate, name string, c *cache.Cache[string, V], key string, call func(context.Context) (V, error)) (V, error) {
	return cachedReadPrio(ctx, g, name, c, key, g.methods[name].priority, call)
}

func cachedReadPrio[V any](ctx context.Context, g *gate, name string, c *cache.Cache[string, V], key string, prio limiter.Priority, call func(context.Context) (V, error)) (V, error) {
	m := g.methods[name]
	return read(ctx, g, name, c, key, func(ctx context.Context) (V, error) {
		return invoke(ctx, g, m, prio, call)
	})
}

// firstSight raises a v1 NodeAddresses* read above the periodic resync
// when cloudgate holds nothing for its key: the v1 calls carry no Node whose
// uninitialized taint could say so, and a node never seen is most likely
// being initialised (nothing can be scheduled on it until it is).
func firstSight[V any](c *cache.Cache[string, V], key string, fallback limiter.Priority) limiter.Priority {
	if c != nil && !c.Has(key) {
		return limiter.PriorityCritical
	}
	return fallback
}

// keyed returns c, or nil when key is empty: an empty provider ID or node
// name identifies nothing, so such calls are neither cached nor merged
// (every node without a provider ID would share one answer).
func keyed[V any](c *cache.Cache[string, V], key string) *cache.Cache[string, V] {
	if key == "" {
		return nil
	}
	return c
}

func (i *instances) NodeAddresses(ctx context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	c := keyed(i.g.inst.nodeAddresses, string(name))
	prio := firstSight(c, string(name), i.g.methods["NodeAddresses"].priority)
	return cachedReadPrio(ctx, i.g, "NodeAddresses", c, string(name), prio, func(ctx context.Context) ([]v1.NodeAddress, error) {
		return i.up.NodeAddresses(ctx, name)
	})
}

func (i *instances) NodeAddressesByProviderID(ctx context.Context, providerID string) ([]v1.NodeAddress, error) {
	c := keyed(i.g.inst.nodeAddressesByProviderID, providerID)
	prio := firstSight(c, providerID, i.g.methods["NodeAddressesByProviderID"].priority)
	return cachedReadPrio(ctx, i.g, "NodeAddressesByProviderID", c, providerID, prio, func(ctx context.Context) ([]v1.NodeAddress, error) {
		return i.up.NodeAddressesByProviderID(ctx, providerID)
	})
}

func (i *instances) InstanceID(ctx context.Context, nodeName types.NodeName) (string, error) {
	return cachedRead(ctx, i.g, "InstanceID", keyed(i.g.inst.instanceID, string(nodeName)), string(nodeName), func(ctx context.Context) (string, error) {
		return i.up.InstanceID(ctx, nodeName)
	})
}

func (i *instances) InstanceType(ctx context.Context, name types.NodeName) (string, error) {
	return cachedRead(ctx, i.g, "InstanceType", keyed(i.g.inst.instanceType, string(name)), string(name), func(ctx context.Context) (string, error) {
		return i.up.InstanceType(ctx, name)
	})
}

func (i *instances) InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error) {
	return cachedRead(ctx, i.g, "InstanceTypeByProviderID", keyed(i.g.inst.instanceTypeByProviderID, providerID), providerID, func(ctx context.Context) (string, error) {
		return i.up.InstanceTypeByProviderID(ctx, providerID)
	})
}

func (i *instances) AddSSHKeyToAllInstances(ctx context.Context, user string, keyData []byte) error {
	return write(ctx, i.g, "AddSSHKeyToAllInstances", func(ctx context.Context) error {
		return i.up.AddSSHKeyToAllInstances(ctx, user, keyData)
	}, nil)
}

func (i *instances) CurrentNodeName(ctx context.Context, hostname string) (types.NodeName, error) {
	return cachedRead(ctx, i.g, "CurrentNodeName", keyed(i.g.inst.currentNodeName, hostname), hostname, func(ctx context.Context) (types.NodeName, error) {
		return i.up.CurrentNodeName(ctx, hostname)
	})
}

func (i *instances) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	return cachedRead(ctx, i.g, "InstanceExistsByProviderID", keyed(i.g.inst.existsByProviderID, providerID), providerID, func(ctx context.Context) (bool, error) {
		return i.up.InstanceExistsByProviderID(ctx, providerID)
	})
}

func (i *instances) InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error) {
	return cachedRead(ctx, i.g, "InstanceShutdownByProviderID", keyed(i.g.inst.shutdownByProviderID, providerID), providerID, func(ctx context.Context) (bool, error) {
		return i.up.InstanceShutdownByProviderID(ctx, providerID)
	})
}
