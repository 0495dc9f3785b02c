package provider

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// nodeIndex finds Nodes in the CCM's node informer, for the v1 calls: they
// name an instance (a node name, a provider ID) but carry no Node, so the
// not-found guard learns the Node's creation time (its grace period) here.
type nodeIndex struct {
	informer toolscache.SharedIndexInformer
	// byProviderID: the provider-ID index could be added (it can only be
	// before the informer starts).
	byProviderID bool
}

// nodeProviderIDIndex indexes the node informer by spec.providerID.
const nodeProviderIDIndex = "cloudgate/providerID"

// newNodeIndex indexes the CCM's node informer (SetInformers, called after
// Initialize and before the informers start) by provider ID; nil without
// one.
func newNodeIndex(f informers.SharedInformerFactory) *nodeIndex {
	if f == nil {
		return nil
	}
	inf := f.Core().V1().Nodes().Informer()
	err := inf.AddIndexers(toolscache.Indexers{nodeProviderIDIndex: func(obj any) ([]string, error) {
		if n, ok := obj.(*v1.Node); ok && n.Spec.ProviderID != "" {
			return []string{n.Spec.ProviderID}, nil
		}
		return nil, nil
	}})
	if err != nil && !hasProviderIDIndex(inf) {
		// Already started.
		klog.V(2).InfoS("cloudgate: node informer not indexed by provider ID; the not-found guard's grace period applies to v1 lookups by node name only", "err", err)
	}
	return &nodeIndex{informer: inf, byProviderID: err == nil || hasProviderIDIndex(inf)}
}

// useNodeIndex hands the guard the node informer.
func (n *notFoundGuard) useNodeIndex(ix *nodeIndex) {
	if n == nil || ix == nil {
		return
	}
	n.nodes.Store(ix)
}

func hasProviderIDIndex(inf toolscache.SharedIndexInformer) bool {
	_, ok := inf.GetIndexer().GetIndexers()[nodeProviderIDIndex]
	return ok
}

// nodeCreated is the creation time of the Node key names (by node name or
// provider ID), zero when unknown (no informer, or no such Node).
func (n *notFoundGuard) nodeCreated(key nodeKey) time.Time {
	ix := n.nodes.Load()
	if ix == nil || key.id == "" {
		return time.Time{}
	}
	var objs []any
	if key.byProviderID {
		if !ix.byProviderID {
			return time.Time{}
		}
		objs, _ = ix.informer.GetIndexer().ByIndex(nodeProviderIDIndex, key.id)
	} else if obj, ok, _ := ix.informer.GetIndexer().GetByKey(key.id); ok {
		objs = []any{obj}
	}
	var created time.Time
	for _, o := range objs {
		// Two Nodes with one provider ID: the younger one counts.
		if n, ok := o.(*v1.Node); ok && n.CreationTimestamp.After(created) {
			created = n.CreationTimestamp.Time
		}
	}
	return created
}
