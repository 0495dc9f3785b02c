package provider

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/limiter"
)

// instances wraps the upstream's Instances (v1): every read cached by node
// name or provider ID; AddSSHKeyToAllInstances is a write.
type instances struct {
	g  *enforcer
	up cloudprovider.Instances
}

var _ cloudprovider.Instances = (*instances)(nil)

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

func (i *instances) NodeAddresses(ctx context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	c := keyed(i.g.inst.nodeAddresses, string(name))
	prio := firstSight(c, string(name), i.g.m.nodeAddresses.priority)
	return cachedReadPrio(ctx, i.g, i.g.m.nodeAddresses, c, string(name), prio, func(ctx context.Context) ([]v1.NodeAddress, error) {
		return i.up.NodeAddresses(ctx, name)
	})
}

func (i *instances) NodeAddressesByProviderID(ctx context.Context, providerID string) ([]v1.NodeAddress, error) {
	c := keyed(i.g.inst.nodeAddressesByProviderID, providerID)
	prio := firstSight(c, providerID, i.g.m.nodeAddressesByProviderID.priority)
	return cachedReadPrio(ctx, i.g, i.g.m.nodeAddressesByProviderID, c, providerID, prio, func(ctx context.Context) ([]v1.NodeAddress, error) {
		return i.up.NodeAddressesByProviderID(ctx, providerID)
	})
}

// InstanceID is guarded as InstanceExistsByProviderID is: for a Node
// without a provider ID (every new Node until it is initialised) the
// lifecycle controller asks it through cloudprovider.GetInstanceProviderID
// and deletes the Node on InstanceNotFound.
func (i *instances) InstanceID(ctx context.Context, nodeName types.NodeName) (string, error) {
	read := func() (string, error) {
		return cachedRead(ctx, i.g, i.g.m.instanceID, keyed(i.g.inst.instanceID, string(nodeName)), string(nodeName), func(ctx context.Context) (string, error) {
			return i.up.InstanceID(ctx, nodeName)
		})
	}
	id, err := read()
	if i.g.nf == nil || (err != nil && !errors.Is(err, cloudprovider.InstanceNotFound)) {
		return id, err
	}
	key := nodeKey{id: string(nodeName)}
	exists, err := i.g.nf.check(key, i.g.nodeCreated(key), err == nil, nil, func() (bool, error) {
		invalidate(i.g.inst.instanceID, string(nodeName))
		id, err = read()
		if errors.Is(err, cloudprovider.InstanceNotFound) {
			return false, nil
		}
		return err == nil, err
	})
	switch {
	case err != nil:
		return "", err
	case !exists:
		return "", cloudprovider.InstanceNotFound
	}
	return id, nil
}

func (i *instances) InstanceType(ctx context.Context, name types.NodeName) (string, error) {
	return cachedRead(ctx, i.g, i.g.m.instanceType, keyed(i.g.inst.instanceType, string(name)), string(name), func(ctx context.Context) (string, error) {
		return i.up.InstanceType(ctx, name)
	})
}

func (i *instances) InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error) {
	return cachedRead(ctx, i.g, i.g.m.instanceTypeByProviderID, keyed(i.g.inst.instanceTypeByProviderID, providerID), providerID, func(ctx context.Context) (string, error) {
		return i.up.InstanceTypeByProviderID(ctx, providerID)
	})
}

func (i *instances) AddSSHKeyToAllInstances(ctx context.Context, user string, keyData []byte) error {
	return write(ctx, i.g, i.g.m.addSSHKeyToAllInstances, func(ctx context.Context) error {
		return i.up.AddSSHKeyToAllInstances(ctx, user, keyData)
	}, nil)
}

func (i *instances) CurrentNodeName(ctx context.Context, hostname string) (types.NodeName, error) {
	return cachedRead(ctx, i.g, i.g.m.currentNodeName, keyed(i.g.inst.currentNodeName, hostname), hostname, func(ctx context.Context) (types.NodeName, error) {
		return i.up.CurrentNodeName(ctx, hostname)
	})
}

func (i *instances) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	read := func() (bool, error) {
		return cachedRead(ctx, i.g, i.g.m.instanceExistsByProviderID, keyed(i.g.inst.existsByProviderID, providerID), providerID, func(ctx context.Context) (bool, error) {
			return i.up.InstanceExistsByProviderID(ctx, providerID)
		})
	}
	exists, err := read()
	if exists || err != nil || i.g.nf == nil {
		if exists {
			i.g.nf.refute(nodeKey{byProviderID: true, id: providerID}) // an "exists" answer ends a hold
		}
		return exists, err
	}
	// v1 calls carry no Node: its creation time (the grace period) comes
	// from the node informer, when the CCM handed it over.
	key := nodeKey{byProviderID: true, id: providerID}
	return i.g.nf.check(key, i.g.nodeCreated(key), exists, err, func() (bool, error) {
		invalidate(i.g.inst.existsByProviderID, providerID)
		return read()
	})
}

func (i *instances) InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error) {
	return cachedRead(ctx, i.g, i.g.m.instanceShutdownByProviderID, keyed(i.g.inst.shutdownByProviderID, providerID), providerID, func(ctx context.Context) (bool, error) {
		return i.up.InstanceShutdownByProviderID(ctx, providerID)
	})
}
