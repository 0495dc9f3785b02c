package provider

import (
	"context"

	cloudprovider "k8s.io/cloud-provider"
)

type clusterCaches struct {
	list   *readPath[string, []string]
	master *readPath[string, string]
}

func (c *clusterCaches) build(b pathBuilder) {
	c.list = newPath(b, "ListClusters", cacheOpts[string, []string]{clone: cloneStrings, keyString: stringKey})
	c.master = newPath(b, "Master", cacheOpts[string, string]{keyString: stringKey})
}

// clusters wraps the upstream's Clusters.
type clusters struct {
	g  *gate
	r  runner
	up cloudprovider.Clusters
}

var _ cloudprovider.Clusters = (*clusters)(nil)

func (c *clusters) ListClusters(ctx context.Context) ([]string, error) {
	return c.g.cl.list.read(ctx, "", c.up.ListClusters)
}

func (c *clusters) Master(ctx context.Context, clusterName string) (string, error) {
	return c.g.cl.master.read(ctx, clusterName, func(ctx context.Context) (string, error) {
		return c.up.Master(ctx, clusterName)
	})
}
