package provider

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
)

type zoneCaches struct {
	local        *cache.Cache[string, cloudprovider.Zone]
	byProviderID *cache.Cache[string, cloudprovider.Zone]
	byNodeName   *cache.Cache[string, cloudprovider.Zone]
}

// zones wraps the upstream's Zones; a Zone is a value, so no copies needed.
type zones struct {
	g  *enforcer
	up cloudprovider.Zones
}

var _ cloudprovider.Zones = (*zones)(nil)

func (z *zones) GetZone(ctx context.Context) (cloudprovider.Zone, error) {
	return cachedRead(ctx, z.g, z.g.m.getZone, z.g.zn.local, "", z.up.GetZone)
}

func (z *zones) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	return cachedRead(ctx, z.g, z.g.m.getZoneByProviderID, keyed(z.g.zn.byProviderID, providerID), providerID, func(ctx context.Context) (cloudprovider.Zone, error) {
		return z.up.GetZoneByProviderID(ctx, providerID)
	})
}

func (z *zones) GetZoneByNodeName(ctx context.Context, nodeName types.NodeName) (cloudprovider.Zone, error) {
	return cachedRead(ctx, z.g, z.g.m.getZoneByNodeName, keyed(z.g.zn.byNodeName, string(nodeName)), string(nodeName), func(ctx context.Context) (cloudprovider.Zone, error) {
		return z.up.GetZoneByNodeName(ctx, nodeName)
	})
}
