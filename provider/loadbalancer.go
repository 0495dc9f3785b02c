package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
)

type lbCaches struct {
	get *readPath[lbKey, lbAnswer]
}

// build: exists=false is "does not exist": negativeTTL, never stale (the
// service controller skips EnsureLoadBalancerDeleted on it).
func (c *lbCaches) build(b pathBuilder) {
	c.get = newPath(b, "GetLoadBalancer", cacheOpts[lbKey, lbAnswer]{clone: cloneLBAnswer, keyString: lbKey.String,
		negativeValue: func(a lbAnswer) bool { return !a.exists }})
}

// loadBalancer wraps the upstream's LoadBalancer. Writes invalidate the
// cached GetLoadBalancer answer of their Service. Upstream errors, including
// ImplementedElsewhere and a wrapped *api.RetryError, come back unchanged.
type loadBalancer struct {
	g  *gate
	r  runner
	up cloudprovider.LoadBalancer
}

var _ cloudprovider.LoadBalancer = (*loadBalancer)(nil)

func (l *loadBalancer) GetLoadBalancer(ctx context.Context, clusterName string, service *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	a, err := l.g.lb.get.read(ctx, keyOfService(clusterName, service), func(ctx context.Context) (lbAnswer, error) {
		status, exists, err := l.up.GetLoadBalancer(ctx, clusterName, service)
		return lbAnswer{status: status, exists: exists}, err
	})
	return a.status, a.exists, err
}

// GetLoadBalancerName is computed locally by every provider: passed through,
// neither limited nor cached.
func (l *loadBalancer) GetLoadBalancerName(ctx context.Context, clusterName string, service *v1.Service) string {
	return l.up.GetLoadBalancerName(ctx, clusterName, service)
}

func (l *loadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	var status *v1.LoadBalancerStatus
	err := l.r.write(ctx, l.g.m.ensureLoadBalancer, func(ctx context.Context) error {
		var err error
		status, err = l.up.EnsureLoadBalancer(ctx, clusterName, service, nodes)
		return err
	}, l.invalidate(clusterName, service))
	return status, err
}

func (l *loadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) error {
	return l.r.write(ctx, l.g.m.updateLoadBalancer, func(ctx context.Context) error {
		return l.up.UpdateLoadBalancer(ctx, clusterName, service, nodes)
	}, l.invalidate(clusterName, service))
}

func (l *loadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *v1.Service) error {
	return l.r.write(ctx, l.g.m.ensureLoadBalancerDeleted, func(ctx context.Context) error {
		return l.up.EnsureLoadBalancerDeleted(ctx, clusterName, service)
	}, l.invalidate(clusterName, service))
}

// invalidate drops the Service's cached GetLoadBalancer answer (nil: uncached).
func (l *loadBalancer) invalidate(clusterName string, service *v1.Service) func() {
	p := l.g.lb.get
	if p.c == nil {
		return nil
	}
	key := keyOfService(clusterName, service)
	return func() { p.c.Invalidate(key) }
}
