package provider

import (
	"hash/maphash"
	"maps"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

// lbKey identifies a Service's load balancer within a cluster. The UID
// keeps a deleted and re-created Service of the same name apart.
type lbKey struct {
	cluster, namespace, name, uid string
}

func keyOfService(clusterName string, svc *v1.Service) lbKey {
	return lbKey{cluster: clusterName, namespace: svc.Namespace, name: svc.Name, uid: string(svc.UID)}
}

// String quotes every part, so distinct keys never render alike.
func (k lbKey) String() string {
	return strconv.Quote(k.cluster) + "/" + strconv.Quote(k.namespace) + "/" + strconv.Quote(k.name) + "/" + strconv.Quote(k.uid)
}

func stringKey(s string) string { return s }

// keyHash returns the cache shard hash of the key types that have a
// cheaper one than maphash.Comparable (nil: the cache's default).
func keyHash[K comparable]() func(maphash.Seed, K) uint64 {
	var h any
	switch any(*new(K)).(type) {
	case string:
		h = maphash.String
	case nodeKey:
		// Keys differing only in byProviderID may share a shard.
		h = func(s maphash.Seed, k nodeKey) uint64 { return maphash.String(s, k.id) }
	default:
		return nil
	}
	return h.(func(maphash.Seed, K) uint64)
}

// Clones: what the caches store is a copy, so the upstream cannot change it
// afterwards; values leave the caches as copies too (every caller gets its
// own), so a caller that mutates what it was given cannot change what other
// callers see (copies_test.go).

// metadataWith is an InstanceMetadata and room for its addresses in one
// allocation, sized for two (internal IP and host name, the common case)
// or four.
type metadataWith[A any] struct {
	md    cloudprovider.InstanceMetadata
	addrs A
}

func cloneMetadata(m *cloudprovider.InstanceMetadata) *cloudprovider.InstanceMetadata {
	if m == nil {
		return nil
	}
	var c *cloudprovider.InstanceMetadata
	switch n := len(m.NodeAddresses); {
	case n > 0 && n <= 2:
		b := &metadataWith[[2]v1.NodeAddress]{md: *m}
		b.md.NodeAddresses = b.addrs[:n:n]
		c = &b.md
	case n > 2 && n <= 4:
		b := &metadataWith[[4]v1.NodeAddress]{md: *m}
		b.md.NodeAddresses = b.addrs[:n:n]
		c = &b.md
	default:
		c = new(cloudprovider.InstanceMetadata)
		*c = *m
		if m.NodeAddresses != nil {
			c.NodeAddresses = make([]v1.NodeAddress, n)
		}
	}
	copy(c.NodeAddresses, m.NodeAddresses)
	c.AdditionalLabels = maps.Clone(m.AdditionalLabels)
	return c
}

func cloneAddresses(a []v1.NodeAddress) []v1.NodeAddress { return slices.Clone(a) }

func cloneStrings(s []string) []string { return slices.Clone(s) }

func cloneRoutes(routes []*cloudprovider.Route) []*cloudprovider.Route {
	if routes == nil {
		return nil
	}
	out := make([]*cloudprovider.Route, len(routes))
	for i, r := range routes {
		if r == nil {
			continue
		}
		c := *r
		c.TargetNodeAddresses = slices.Clone(r.TargetNodeAddresses)
		out[i] = &c
	}
	return out
}

// lbAnswer is a cached GetLoadBalancer answer.
type lbAnswer struct {
	status *v1.LoadBalancerStatus
	exists bool
}

func cloneLBAnswer(a lbAnswer) lbAnswer {
	return lbAnswer{status: a.status.DeepCopy(), exists: a.exists}
}
