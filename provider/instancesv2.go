package provider

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/limiter"
)

// instanceCaches are the caches of the Instances and InstancesV2 reads.
type instanceCaches struct {
	exists                    *cache.Cache[nodeKey, bool]
	shutdown                  *cache.Cache[nodeKey, bool]
	metadata                  *cache.Cache[nodeKey, *cloudprovider.InstanceMetadata]
	nodeAddresses             *cache.Cache[string, []v1.NodeAddress]
	nodeAddressesByProviderID *cache.Cache[string, []v1.NodeAddress]
	instanceID                *cache.Cache[string, string]
	instanceType              *cache.Cache[string, string]
	instanceTypeByProviderID  *cache.Cache[string, string]
	currentNodeName           *cache.Cache[string, types.NodeName]
	existsByProviderID        *cache.Cache[string, bool]
	shutdownByProviderID      *cache.Cache[string, bool]
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

// instancesV2 wraps the upstream's InstancesV2. With batching on, a miss
// joins a batch (one upstream call for many nodes) instead of a call of its
// own; a batch answer fills all three caches for every node in it.
type instancesV2 struct {
	g  *enforcer
	up cloudprovider.InstancesV2
}

var _ cloudprovider.InstancesV2 = (*instancesV2)(nil)

func (i *instancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	i.g.notePeer(node) // only the lifecycle controller asks (NotReady Nodes): peers.go
	exists, err := nodeRead(ctx, i, i.g.m.instanceExists, i.g.inst.exists, node, existsOf, cloudprovider.InstancesV2.InstanceExists)
	if exists || err != nil || i.g.nf == nil {
		if exists {
			i.g.nf.refute(keyOfNode(node)) // an "exists" answer ends a hold
		}
		return exists, err
	}
	key := keyOfNode(node)
	return i.g.nf.check(key, node.CreationTimestamp.Time, exists, err, func() (bool, error) {
		invalidate(i.g.inst.exists, key)
		return nodeRead(ctx, i, i.g.m.instanceExists, i.g.inst.exists, node, existsOf, cloudprovider.InstancesV2.InstanceExists)
	})
}

func (i *instancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	i.g.notePeer(node)
	return nodeRead(ctx, i, i.g.m.instanceShutdown, i.g.inst.shutdown, node, shutdownOf, cloudprovider.InstancesV2.InstanceShutdown)
}

func (i *instancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return nodeRead(ctx, i, i.g.m.instanceMetadata, i.g.inst.metadata, node, metadataOf, cloudprovider.InstancesV2.InstanceMetadata)
}

// nodeRead is the shape of the three InstancesV2 reads: keyed by the node's
// instance, answered from the cache, else from a batch (of picks the
// method's answer from the node's InstanceStatus), else by a call of its
// own. of and call are static functions, so a cache hit allocates nothing
// but the caller's copy.
func nodeRead[V any](ctx context.Context, i *instancesV2, m *method, c *cache.Cache[nodeKey, V], node *v1.Node,
	of func(InstanceStatus) (V, error), call func(cloudprovider.InstancesV2, context.Context, *v1.Node) (V, error)) (V, error) {
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
	if c != nil && prio != limiter.PriorityCritical && i.g.awaitFirstList(ctx) {
		if v, err, ok := fresh(m, c, key); ok {
			return v, err
		}
	}
	return read(ctx, i.g, m, c, key, func(ctx context.Context) (V, error) {
		if b := i.g.batcher(); b != nil && key.id != "" {
			st, err := b.Add(ctx, nodeRequest{node, prio})
			if err != nil {
				var zero V
				return zero, err
			}
			return of(st)
		}
		return invoke(ctx, i.g, m, prio, func(ctx context.Context) (V, error) {
			return call(i.up, ctx, node)
		})
	})
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
