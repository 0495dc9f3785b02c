package provider

import (
	"context"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
)

type routeCaches struct {
	list *cache.Cache[string, []*cloudprovider.Route]
}

// routes wraps the upstream's Routes. Creating or deleting a route
// invalidates the cluster's cached route list, so the route controller sees
// its own changes at once. A failed or limited ListRoutes is an error, never
// an empty list (which would make the controller re-create every route).
type routes struct {
	g  *enforcer
	up cloudprovider.Routes
}

var _ cloudprovider.Routes = (*routes)(nil)

func (r *routes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	return cachedRead(ctx, r.g, r.g.m.listRoutes, r.g.rt.list, clusterName, func(ctx context.Context) ([]*cloudprovider.Route, error) {
		return r.up.ListRoutes(ctx, clusterName)
	})
}

func (r *routes) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	return write(ctx, r.g, r.g.m.createRoute, func(ctx context.Context) error {
		return r.up.CreateRoute(ctx, clusterName, nameHint, route)
	}, invalidateRoutes(r.g.gate, clusterName))
}

func (r *routes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	return write(ctx, r.g, r.g.m.deleteRoute, func(ctx context.Context) error {
		return r.up.DeleteRoute(ctx, clusterName, route)
	}, invalidateRoutes(r.g.gate, clusterName))
}

// invalidateRoutes drops the cluster's cached route list (nil: uncached).
func invalidateRoutes(g *gate, clusterName string) func() {
	if g.rt.list == nil {
		return nil
	}
	return func() { g.rt.list.Invalidate(clusterName) }
}
