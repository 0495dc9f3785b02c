package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
)

// The wrappers of mode: shadow. Each method calls the upstream's own
// method, as without cloudgate, through shadowRead, shadowNodeRead or
// shadowWrite (shadow.go), with the keys and caches of the enforce
// wrappers, so the model predicts what they would have done.

func (sh *shadow) loadBalancer(up cloudprovider.LoadBalancer) cloudprovider.LoadBalancer {
	return &shadowLoadBalancer{sh, up}
}
func (sh *shadow) instances(up cloudprovider.Instances) cloudprovider.Instances {
	return &shadowInstances{sh, up}
}
func (sh *shadow) instancesV2(up cloudprovider.InstancesV2) cloudprovider.InstancesV2 {
	return &shadowInstancesV2{sh, up}
}
func (sh *shadow) zones(up cloudprovider.Zones) cloudprovider.Zones { return &shadowZones{sh, up} }
func (sh *shadow) clusters(up cloudprovider.Clusters) cloudprovider.Clusters {
	return &shadowClusters{sh, up}
}
func (sh *shadow) routes(up cloudprovider.Routes) cloudprovider.Routes { return &shadowRoutes{sh, up} }

// initialize decides the would-be batch size as enforce mode decides
// batching at Initialize; a shadow adds no calls (no list prefetch).
func (sh *shadow) initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {
	sh.decideBatching(true)
}

// useNodeInformer: a shadow has no not-found guard, which alone needs it.
func (sh *shadow) useNodeInformer(informers.SharedInformerFactory) {}

// close: a shadow runs no goroutines.
func (sh *shadow) close() {}

type shadowInstancesV2 struct {
	sh *shadow
	up cloudprovider.InstancesV2
}

func (i *shadowInstancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	i.sh.notePeer(node) // only the lifecycle controller asks (NotReady Nodes): peers.go
	return shadowNodeRead(ctx, i.sh, i.sh.g.m.instanceExists, i.sh.g.inst.exists, node, func(ctx context.Context) (bool, error) {
		return i.up.InstanceExists(ctx, node)
	})
}

func (i *shadowInstancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	i.sh.notePeer(node)
	return shadowNodeRead(ctx, i.sh, i.sh.g.m.instanceShutdown, i.sh.g.inst.shutdown, node, func(ctx context.Context) (bool, error) {
		return i.up.InstanceShutdown(ctx, node)
	})
}

func (i *shadowInstancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return shadowNodeRead(ctx, i.sh, i.sh.g.m.instanceMetadata, i.sh.g.inst.metadata, node, func(ctx context.Context) (*cloudprovider.InstanceMetadata, error) {
		return i.up.InstanceMetadata(ctx, node)
	})
}

type shadowInstances struct {
	sh *shadow
	up cloudprovider.Instances
}

func (i *shadowInstances) NodeAddresses(ctx context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	g := i.sh.g
	return shadowRead(ctx, i.sh, g.m.nodeAddresses, keyed(g.inst.nodeAddresses, string(name)), string(name), func(ctx context.Context) ([]v1.NodeAddress, error) {
		return i.up.NodeAddresses(ctx, name)
	})
}

func (i *shadowInstances) NodeAddressesByProviderID(ctx context.Context, providerID string) ([]v1.NodeAddress, error) {
	g := i.sh.g
	return shadowRead(ctx, i.sh, g.m.nodeAddressesByProviderID, keyed(g.inst.nodeAddressesByProviderID, providerID), providerID, func(ctx context.Context) ([]v1.NodeAddress, error) {
		return i.up.NodeAddressesByProviderID(ctx, providerID)
	})
}

func (i *shadowInstances) InstanceID(ctx context.Context, nodeName types.NodeName) (string, error) {
	g := i.sh.g
	return shadowRead(ctx, i.sh, g.m.instanceID, keyed(g.inst.instanceID, string(nodeName)), string(nodeName), func(ctx context.Context) (string, error) {
		return i.up.InstanceID(ctx, nodeName)
	})
}

func (i *shadowInstances) InstanceType(ctx context.Context, name types.NodeName) (string, error) {
	g := i.sh.g
	return shadowRead(ctx, i.sh, g.m.instanceType, keyed(g.inst.instanceType, string(name)), string(name), func(ctx context.Context) (string, error) {
		return i.up.InstanceType(ctx, name)
	})
}

func (i *shadowInstances) InstanceTypeByProviderID(ctx context.Context, providerID string) (string, error) {
	g := i.sh.g
	return shadowRead(ctx, i.sh, g.m.instanceTypeByProviderID, keyed(g.inst.instanceTypeByProviderID, providerID), providerID, func(ctx context.Context) (string, error) {
		return i.up.InstanceTypeByProviderID(ctx, providerID)
	})
}

func (i *shadowInstances) AddSSHKeyToAllInstances(ctx context.Context, user string, keyData []byte) error {
	return shadowWrite(ctx, i.sh, i.sh.g.m.addSSHKeyToAllInstances, func(ctx context.Context) error {
		return i.up.AddSSHKeyToAllInstances(ctx, user, keyData)
	}, nil)
}

func (i *shadowInstances) CurrentNodeName(ctx context.Context, hostname string) (types.NodeName, error) {
	g := i.sh.g
	return shadowRead(ctx, i.sh, g.m.currentNodeName, keyed(g.inst.currentNodeName, hostname), hostname, func(ctx context.Context) (types.NodeName, error) {
		return i.up.CurrentNodeName(ctx, hostname)
	})
}

func (i *shadowInstances) InstanceExistsByProviderID(ctx context.Context, providerID string) (bool, error) {
	g := i.sh.g
	return shadowRead(ctx, i.sh, g.m.instanceExistsByProviderID, keyed(g.inst.existsByProviderID, providerID), providerID, func(ctx context.Context) (bool, error) {
		return i.up.InstanceExistsByProviderID(ctx, providerID)
	})
}

func (i *shadowInstances) InstanceShutdownByProviderID(ctx context.Context, providerID string) (bool, error) {
	g := i.sh.g
	return shadowRead(ctx, i.sh, g.m.instanceShutdownByProviderID, keyed(g.inst.shutdownByProviderID, providerID), providerID, func(ctx context.Context) (bool, error) {
		return i.up.InstanceShutdownByProviderID(ctx, providerID)
	})
}

type shadowZones struct {
	sh *shadow
	up cloudprovider.Zones
}

func (z *shadowZones) GetZone(ctx context.Context) (cloudprovider.Zone, error) {
	return shadowRead(ctx, z.sh, z.sh.g.m.getZone, z.sh.g.zn.local, "", z.up.GetZone)
}

func (z *shadowZones) GetZoneByProviderID(ctx context.Context, providerID string) (cloudprovider.Zone, error) {
	g := z.sh.g
	return shadowRead(ctx, z.sh, g.m.getZoneByProviderID, keyed(g.zn.byProviderID, providerID), providerID, func(ctx context.Context) (cloudprovider.Zone, error) {
		return z.up.GetZoneByProviderID(ctx, providerID)
	})
}

func (z *shadowZones) GetZoneByNodeName(ctx context.Context, nodeName types.NodeName) (cloudprovider.Zone, error) {
	g := z.sh.g
	return shadowRead(ctx, z.sh, g.m.getZoneByNodeName, keyed(g.zn.byNodeName, string(nodeName)), string(nodeName), func(ctx context.Context) (cloudprovider.Zone, error) {
		return z.up.GetZoneByNodeName(ctx, nodeName)
	})
}

type shadowLoadBalancer struct {
	sh *shadow
	up cloudprovider.LoadBalancer
}

func (l *shadowLoadBalancer) GetLoadBalancer(ctx context.Context, clusterName string, service *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	a, err := shadowRead(ctx, l.sh, l.sh.g.m.getLoadBalancer, l.sh.g.lb.get, keyOfService(clusterName, service), func(ctx context.Context) (lbAnswer, error) {
		status, exists, err := l.up.GetLoadBalancer(ctx, clusterName, service)
		return lbAnswer{status: status, exists: exists}, err
	})
	return a.status, a.exists, err
}

func (l *shadowLoadBalancer) GetLoadBalancerName(ctx context.Context, clusterName string, service *v1.Service) string {
	return l.up.GetLoadBalancerName(ctx, clusterName, service)
}

func (l *shadowLoadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	var status *v1.LoadBalancerStatus
	err := shadowWrite(ctx, l.sh, l.sh.g.m.ensureLoadBalancer, func(ctx context.Context) error {
		var err error
		status, err = l.up.EnsureLoadBalancer(ctx, clusterName, service, nodes)
		return err
	}, invalidateLB(l.sh.g, clusterName, service))
	return status, err
}

func (l *shadowLoadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) error {
	return shadowWrite(ctx, l.sh, l.sh.g.m.updateLoadBalancer, func(ctx context.Context) error {
		return l.up.UpdateLoadBalancer(ctx, clusterName, service, nodes)
	}, invalidateLB(l.sh.g, clusterName, service))
}

func (l *shadowLoadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *v1.Service) error {
	return shadowWrite(ctx, l.sh, l.sh.g.m.ensureLoadBalancerDeleted, func(ctx context.Context) error {
		return l.up.EnsureLoadBalancerDeleted(ctx, clusterName, service)
	}, invalidateLB(l.sh.g, clusterName, service))
}

type shadowRoutes struct {
	sh *shadow
	up cloudprovider.Routes
}

func (r *shadowRoutes) ListRoutes(ctx context.Context, clusterName string) ([]*cloudprovider.Route, error) {
	return shadowRead(ctx, r.sh, r.sh.g.m.listRoutes, r.sh.g.rt.list, clusterName, func(ctx context.Context) ([]*cloudprovider.Route, error) {
		return r.up.ListRoutes(ctx, clusterName)
	})
}

func (r *shadowRoutes) CreateRoute(ctx context.Context, clusterName string, nameHint string, route *cloudprovider.Route) error {
	return shadowWrite(ctx, r.sh, r.sh.g.m.createRoute, func(ctx context.Context) error {
		return r.up.CreateRoute(ctx, clusterName, nameHint, route)
	}, invalidateRoutes(r.sh.g, clusterName))
}

func (r *shadowRoutes) DeleteRoute(ctx context.Context, clusterName string, route *cloudprovider.Route) error {
	return shadowWrite(ctx, r.sh, r.sh.g.m.deleteRoute, func(ctx context.Context) error {
		return r.up.DeleteRoute(ctx, clusterName, route)
	}, invalidateRoutes(r.sh.g, clusterName))
}

type shadowClusters struct {
	sh *shadow
	up cloudprovider.Clusters
}

func (c *shadowClusters) ListClusters(ctx context.Context) ([]string, error) {
	return shadowRead(ctx, c.sh, c.sh.g.m.listClusters, c.sh.g.cl.list, "", c.up.ListClusters)
}

func (c *shadowClusters) Master(ctx context.Context, clusterName string) (string, error) {
	return shadowRead(ctx, c.sh, c.sh.g.m.master, c.sh.g.cl.master, clusterName, func(ctx context.Context) (string, error) {
		return c.up.Master(ctx, clusterName)
	})
}
