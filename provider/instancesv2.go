package provider

import (
	"context"

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
	g  *gate
	up cloudprovider.InstancesV2
}

var _ cloudprovider.InstancesV2 = (*instancesV2)(nil)

func (i *instancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	const name = "InstanceExists"
	key := keyOfNode(node)
	c := i.g.inst.exists
	if key.id == "" {
		c = nil // no identity: neither cached nor merged
	}
	if v, err, ok := fresh(i.g, name, c, key); ok {
		return v, err
	}
	prio := nodePriority(node, methodSpecs[name].priority)
	return read(ctx, i.g, name, c, key, func(ctx context.Context) (bool, error) {
		if b := i.g.batcher(); b != nil && key.id != "" {
			st, err := b.lookup(ctx, node, prio)
			if err != nil {
				return false, err
			}
			switch {
			case st.Err == cloudprovider.InstanceNotFound:
				return false, nil
			case st.Err != nil:
				return false, st.Err
			}
			return !st.Deleted, nil
		}
		return invoke(ctx, i.g, i.g.methods[name], prio, func(ctx context.Context) (bool, error) {
			return i.up.InstanceExists(ctx, node)
		})
	})
}

func (i *instancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	const name = "InstanceShutdown"
	key := keyOfNode(node)
	c := i.g.inst.shutdown
	if key.id == "" {
		c = nil // no identity: neither cached nor merged
	}
	if v, err, ok := fresh(i.g, name, c, key); ok {
		return v, err
	}
	prio := nodePriority(node, methodSpecs[name].priority)
	return read(ctx, i.g, name, c, key, func(ctx context.Context) (bool, error) {
		if b := i.g.batcher(); b != nil && key.id != "" {
			st, err := b.lookup(ctx, node, prio)
			if err != nil {
				return false, err
			}
			return st.Shutdown, st.Err
		}
		return invoke(ctx, i.g, i.g.methods[name], prio, func(ctx context.Context) (bool, error) {
			return i.up.InstanceShutdown(ctx, node)
		})
	})
}

func (i *instancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	const name = "InstanceMetadata"
	key := keyOfNode(node)
	c := i.g.inst.metadata
	if key.id == "" {
		c = nil // no identity: neither cached nor merged
	}
	if v, err, ok := fresh(i.g, name, c, key); ok {
		return v, err
	}
	prio := nodePriority(node, methodSpecs[name].priority)
	return read(ctx, i.g, name, c, key, func(ctx context.Context) (*cloudprovider.InstanceMetadata, error) {
		if b := i.g.batcher(); b != nil && key.id != "" {
			st, err := b.lookup(ctx, node, prio)
			if err != nil {
				return nil, err
			}
			return st.Metadata, st.Err
		}
		return invoke(ctx, i.g, i.g.methods[name], prio, func(ctx context.Context) (*cloudprovider.InstanceMetadata, error) {
			return i.up.InstanceMetadata(ctx, node)
		})
	})
}
