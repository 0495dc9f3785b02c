package provider

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// instances wraps the upstream's Instances (v1): every read cached by node
// name or provider ID; AddSSHKeyToAllInstances is a write.
type instances struct {
	g  *gate
	r  runner
	up cloudprovider.Instances
}

var _ cloudprovider.Instances = (*instances)(nil)

func (i *instances) NodeAddresses(ctx context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	return i.g.inst.nodeAddresses.readFirstSight(ctx, string(name), func(ctx context.Context) ([]v1.NodeAddress, error) {
		return i.up.NodeAddresses(ctx, name)
	})
}

func (i *instances) NodeAddressesByProviderID(ctx context.Context, providerID string) ([]v1.NodeAddress, error) {
	return i.g.inst.nodeAddressesByProviderID.readFirstSight(ctx, providerID, func(ctx context.Context) ([]v1.NodeAddress, error) {
		return i.up.NodeAddressesByProviderID(ctx, providerID)
	})
}

// InstanceID is guarded as InstanceExistsByProviderID is: for a Node
// without a provider ID (every new Node until it is initialised) the
// lifecycle controller asks it through cloudprovider.GetInstanceProviderID
// and deletes the Node on InstanceNotFound.
func (i *instances) InstanceID(ctx context.Context, nodeName types.NodeName) (string, error) {
	p := i.g.inst.instanceID
	read := func() (string, error) {
		return p.readID(ctx, string(nodeName), func(ctx context.Context) (string, error) {
			return i.up.InstanceID(ctx, nodeName)
		})
	}
	id, err := read()
	nf := i.r.guard()
	if nf == nil || (err != nil && !errors.Is(err, cloudprovider.InstanceNotFound)) {
		return id, err
	}
	key := nodeKey{id: string(nodeName)}
	exists, err := nf.check(key, nf.nodeCreated(key), err == nil, nil, func() (bool, error) {
		p.invalidate(string(nodeName))
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
	return i.g.inst.instanceType.readID(ctx, string(name), func(ctx context.Context) (string, error) {
		return i.up.InstanceType(ctx, name)
	})
}

func (i *instances) InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error) {
	return i.g.inst.instanceTypeByProviderID.readID(ctx, providerID, func(ctx context.Context) (string, error) {
		return i.up.InstanceTypeByProviderID(ctx, providerID)
	})
}

func (i *instances) AddSSHKeyToAllInstances(ctx context.Context, user string, keyData []byte) error {
	return i.r.write(ctx, i.g.m.addSSHKeyToAllInstances, func(ctx context.Context) error {
		return i.up.AddSSHKeyToAllInstances(ctx, user, keyData)
	}, nil)
}

func (i *instances) CurrentNodeName(ctx context.Context, hostname string) (types.NodeName, error) {
	return i.g.inst.currentNodeName.readID(ctx, hostname, func(ctx context.Context) (types.NodeName, error) {
		return i.up.CurrentNodeName(ctx, hostname)
	})
}

func (i *instances) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	p := i.g.inst.existsByProviderID
	read := func() (bool, error) {
		return p.readID(ctx, providerID, func(ctx context.Context) (bool, error) {
			return i.up.InstanceExistsByProviderID(ctx, providerID)
		})
	}
	exists, err := read()
	nf := i.r.guard()
	if exists || err != nil || nf == nil {
		if exists {
			nf.refute(nodeKey{byProviderID: true, id: providerID}) // an "exists" answer ends a hold
		}
		return exists, err
	}
	// v1 calls carry no Node: its creation time (the grace period) comes
	// from the node informer, when the CCM handed it over.
	key := nodeKey{byProviderID: true, id: providerID}
	return nf.check(key, nf.nodeCreated(key), exists, err, func() (bool, error) {
		p.invalidate(providerID)
		return read()
	})
}

func (i *instances) InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error) {
	return i.g.inst.shutdownByProviderID.readID(ctx, providerID, func(ctx context.Context) (bool, error) {
		return i.up.InstanceShutdownByProviderID(ctx, providerID)
	})
}

// buildV1 builds the Instances reads' paths.
func (c *instanceCaches) buildV1(b pathBuilder) {
	str := cacheOpts[string, string]{keyString: stringKey}
	byName := cacheOpts[string, string]{keyString: stringKey, shortLived: always}
	// NodeAddresses is keyed by node name: a re-created VM may reuse it.
	c.nodeAddresses = newPath(b, "NodeAddresses", cacheOpts[string, []v1.NodeAddress]{clone: cloneAddresses, keyString: stringKey, shortLived: always})
	c.nodeAddressesByProviderID = newPath(b, "NodeAddressesByProviderID", cacheOpts[string, []v1.NodeAddress]{clone: cloneAddresses, keyString: stringKey})
	c.instanceID = newPath(b, "InstanceID", byName)
	c.instanceType = newPath(b, "InstanceType", byName)
	c.instanceTypeByProviderID = newPath(b, "InstanceTypeByProviderID", str)
	c.currentNodeName = newPath(b, "CurrentNodeName", cacheOpts[string, types.NodeName]{keyString: stringKey})
	c.existsByProviderID = newPath(b, "InstanceExistsByProviderID", cacheOpts[string, bool]{keyString: stringKey, negativeValue: notExists})
	c.shutdownByProviderID = newPath(b, "InstanceShutdownByProviderID", cacheOpts[string, bool]{keyString: stringKey})
}

// instanceCaches are the read paths of the Instances and InstancesV2 reads.
type instanceCaches struct {
	exists                    *nodePath[bool]
	shutdown                  *nodePath[bool]
	metadata                  *nodePath[*cloudprovider.InstanceMetadata]
	nodeAddresses             *readPath[string, []v1.NodeAddress]
	nodeAddressesByProviderID *readPath[string, []v1.NodeAddress]
	instanceID                *readPath[string, string]
	instanceType              *readPath[string, string]
	instanceTypeByProviderID  *readPath[string, string]
	currentNodeName           *readPath[string, types.NodeName]
	existsByProviderID        *readPath[string, bool]
	shutdownByProviderID      *readPath[string, bool]
}
