package provider

import (
	"context"

	cloudprovider "k8s.io/cloud-provider"
)

type routeCaches struct {
	list *readPath[string, []*cloudprovider.Route]
}

func (c *routeCaches) build(b pathBuilder) {
	c.list = newPath(b, "ListRoutes", cacheOpts[string, []*cloudprovider.Route]{clone: cloneRoutes, keyString: stringKey})
}

// routes wraps the upstream's Routes. Creating or deleting a route
// invalidates the cluster's cached route list, so the route controller sees
// its own changes at once. A failed or limited ListRoutes is an error, never
// an empty list (which would make the controller re-create every route).
type routes struct {
	g  *gate
	r  runner
	up cloudprovider.Routes
}

var _ cloudprovider.Routes = (*routes)(nil)

func (r *routes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	return r.g.rt.list.read(ctx, clusterName, func(ctx context.Context) ([]*cloudprovider.Route, error) {
		return r.up.ListRoutes(ctx, clusterName)
	})
}

func (r *routes) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	return r.r.write(ctx, r.g.m.createRoute, func(ctx context.Context) error {
		return r.up.CreateRoute(ctx, clusterName, nameHint, route)
	}, r.invalidate(clusterName))
}

func (r *routes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	return r.r.write(ctx, r.g.m.deleteRoute, func(ctx context.Context) error {
		return r.up.DeleteRoute(ctx, clusterName, route)
	}, r.invalidate(clusterName))
}

// invalidate drops the cluster's cached route list (nil: uncached).
func (r *routes) invalidate(clusterName string) func() {
	p := r.g.rt.list
	if p.c == nil {
		return nil
	}
	return func() { p.c.Invalidate(clusterName) }
}
