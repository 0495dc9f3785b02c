package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// instancesV2 wraps the upstream's InstancesV2. In enforce mode a miss
// joins a batch (one upstream call for many nodes) when batching is on,
// instead of a call of its own; a batch answer fills all three caches for
// every node in it.
type instancesV2 struct {
	g  *gate
	r  runner
	up cloudprovider.InstancesV2
}

var _ cloudprovider.InstancesV2 = (*instancesV2)(nil)

func (i *instancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	i.r.notePeer(node) // only the lifecycle controller asks (NotReady Nodes): peers.go
	p := i.g.inst.exists
	exists, err := p.read(ctx, i.up, node, cloudprovider.InstancesV2.InstanceExists)
	nf := i.r.guard()
	if exists || err != nil || nf == nil {
		if exists {
			nf.refute(keyOfNode(node)) // an "exists" answer ends a hold
		}
		return exists, err
	}
	key := keyOfNode(node)
	return nf.check(key, node.CreationTimestamp.Time, exists, err, func() (bool, error) {
		invalidate(p.c, key)
		return p.read(ctx, i.up, node, cloudprovider.InstancesV2.InstanceExists)
	})
}

func (i *instancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	i.r.notePeer(node)
	return i.g.inst.shutdown.read(ctx, i.up, node, cloudprovider.InstancesV2.InstanceShutdown)
}

func (i *instancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return i.g.inst.metadata.read(ctx, i.up, node, cloudprovider.InstancesV2.InstanceMetadata)
}

// buildV2 builds the InstancesV2 reads' paths.
func (c *instanceCaches) buildV2(b pathBuilder) {
	type nk = cacheOpts[nodeKey, bool]
	c.exists = newNodePath(b, "InstanceExists", existsOf, nk{keyString: nodeKey.String, negativeValue: notExists, shortLived: nodeByName})
	c.shutdown = newNodePath(b, "InstanceShutdown", shutdownOf, nk{keyString: nodeKey.String, shortLived: nodeByName})
	c.metadata = newNodePath(b, "InstanceMetadata", metadataOf, cacheOpts[nodeKey, *cloudprovider.InstanceMetadata]{clone: cloneMetadata, keyString: nodeKey.String, shortLived: nodeByName})
}
