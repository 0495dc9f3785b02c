package provider

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
)

type zoneCaches struct {
	local        *readPath[string, cloudprovider.Zone]
	byProviderID *readPath[string, cloudprovider.Zone]
	byNodeName   *readPath[string, cloudprovider.Zone]
}

func (c *zoneCaches) build(b pathBuilder) {
	zone := cacheOpts[string, cloudprovider.Zone]{keyString: stringKey}
	c.local = newPath(b, "GetZone", zone)
	c.byProviderID = newPath(b, "GetZoneByProviderID", zone)
	c.byNodeName = newPath(b, "GetZoneByNodeName", cacheOpts[string, cloudprovider.Zone]{keyString: stringKey, shortLived: always})
}

// zones wraps the upstream's Zones; a Zone is a value, so no copies needed.
type zones struct {
	g  *gate
	r  runner
	up cloudprovider.Zones
}

var _ cloudprovider.Zones = (*zones)(nil)

func (z *zones) GetZone(ctx context.Context) (cloudprovider.Zone, error) {
	return z.g.zn.local.read(ctx, "", z.up.GetZone)
}

func (z *zones) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	return z.g.zn.byProviderID.readID(ctx, providerID, func(ctx context.Context) (cloudprovider.Zone, error) {
		return z.up.GetZoneByProviderID(ctx, providerID)
	})
}

func (z *zones) GetZoneByNodeName(ctx context.Context, nodeName types.NodeName) (cloudprovider.Zone, error) {
	return z.g.zn.byNodeName.readID(ctx, string(nodeName), func(ctx context.Context) (cloudprovider.Zone, error) {
		return z.up.GetZoneByNodeName(ctx, nodeName)
	})
}
