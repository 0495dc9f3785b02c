package provider

import (
	"context"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
)

type clusterCaches struct {
	list   *cache.Cache[string, []string]
	master *cache.Cache[string, string]
}

// clusters wraps the upstream's Clusters.
type clusters struct {
	g  *enforcer
	up cloudprovider.Clusters
}

var _ cloudprovider.Clusters = (*clusters)(nil)

func (c *clusters) ListClusters(ctx context.Context) ([]string, error) {
	return cachedRead(ctx, c.g, c.g.m.listClusters, c.g.cl.list, "", c.up.ListClusters)
}

func (c *clusters) Master(ctx context.Context, clusterName string) (string, error) {
	return cachedRead(ctx, c.g, c.g.m.master, c.g.cl.master, clusterName, func(ctx context.Context) (string, error) {
		return c.up.Master(ctx, clusterName)
	})
}
