package simcloud

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

// routes implements cloudprovider.Routes. An empty cluster name means
// ClientConfig.ClusterName.
type routes struct{ c *Cloud }

var _ cloudprovider.Routes = (*routes)(nil)

func (r *routes) clusterPath(clusterName string) (string, error) {
	if clusterName == "" {
		clusterName = r.c.cfg.ClusterName
	}
	if clusterName == "" {
		return "", errors.New("simcloud: no cluster name (pass one or set clusterName)")
	}
	return "/v1/clusters/" + url.PathEscape(clusterName) + "/routes", nil
}

// ListRoutes is one ListRoutes call.
func (r *routes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	path, err := r.clusterPath(clusterName)
	if err != nil {
		return nil, err
	}
	var resp listRoutesResponse
	if err := r.c.do(ctx, MethodListRoutes, http.MethodGet, path, nil, nil, &resp); err != nil {
		return nil, err
	}
	out := make([]*cloudprovider.Route, 0, len(resp.Routes))
	for _, rt := range resp.Routes {
		out = append(out, &cloudprovider.Route{
			Name:            rt.Name,
			TargetNode:      types.NodeName(rt.TargetNode),
			DestinationCIDR: rt.DestinationCIDR,
			Blackhole:       rt.Blackhole,
		})
	}
	return out, nil
}

// CreateRoute names the route nameHint (the route controller passes the
// node's UID); when nameHint is empty or not a valid name, the name is
// "r-" and a hash of target node and destination.
func (r *routes) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	if route == nil {
		return errors.New("simcloud: nil route")
	}
	path, err := r.clusterPath(clusterName)
	if err != nil {
		return err
	}
	name := nameHint
	if !validName(name) {
		h := fnv.New64a()
		_, _ = fmt.Fprintf(h, "%s|%s", route.TargetNode, route.DestinationCIDR)
		name = fmt.Sprintf("r-%016x", h.Sum64())
	}
	req := routeJSON{Name: name, TargetNode: string(route.TargetNode), DestinationCIDR: route.DestinationCIDR}
	return r.c.do(ctx, MethodCreateRoute, http.MethodPost, path, nil, req, &routeJSON{})
}

// DeleteRoute deletes route.Name; deleting an absent route succeeds.
func (r *routes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	if route == nil || route.Name == "" {
		return errors.New("simcloud: DeleteRoute needs a route with a name")
	}
	path, err := r.clusterPath(clusterName)
	if err != nil {
		return err
	}
	return r.c.do(ctx, MethodDeleteRoute, http.MethodDelete, path+"/"+url.PathEscape(route.Name), nil, nil, &deleteResponse{})
}

// clusters implements cloudprovider.Clusters.
type clusters struct{ c *Cloud }

var _ cloudprovider.Clusters = (*clusters)(nil)

func (c *clusters) ListClusters(ctx context.Context) ([]string, error) {
	var resp listClustersResponse
	if err := c.c.do(ctx, MethodListClusters, http.MethodGet, "/v1/clusters", nil, nil, &resp); err != nil {
		return nil, err
	}
	return resp.Clusters, nil
}

// Master answers the cluster's API server address (a name under the
// reserved .invalid domain: data only).
func (c *clusters) Master(ctx context.Context, clusterName string) (string, error) {
	if clusterName == "" {
		return "", errors.New("simcloud: empty cluster name")
	}
	var resp masterResponse
	path := "/v1/clusters/" + url.PathEscape(clusterName) + "/master"
	if err := c.c.do(ctx, MethodGetMaster, http.MethodGet, path, nil, nil, &resp); err != nil {
		return "", err
	}
	return resp.Address, nil
}
