package provider

import (
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
)

// cloud is the cloudprovider.Interface cloudgate returns.
type cloud struct{ g *gate }

var _ cloudprovider.Interface = (*cloud)(nil)

// Initialize passes the client builder to the upstream, then decides
// batching and list prefetch from the upstream's InstancesV2 as it is now,
// and starts cloudgate's own housekeeping (list prefetch), stopped with
// stop or Close. Called again (leader migration), it replaces the loop.
func (c *cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.g.upstream.Initialize(clientBuilder, stop)
	if c.g.fleet != nil {
		c.g.fleetEv.initialize(clientBuilder, c.g.fleet.Member(), stop) // fallback Events
	}
	c.g.buildBatcher(true)
	c.g.start(stop)
}

// Upstream returns the provider cloudgate wraps, unchanged, for a controller
// that needs the upstream's own type beyond cloudprovider.Interface: the AWS
// provider's tagging controller asserts *aws.Cloud and calls its
// TagResource (EC2 CreateTags), which is no cloudprovider.Interface method
// and so was never cloudgate's to cache or limit. Calls made on it bypass
// cloudgate (no cache, limits or metrics). awsbatch.Cloud has the same
// method, so a binary unwraps cloudgate → aws-batch → aws in a loop.
func (c *cloud) Upstream() cloudprovider.Interface { return c.g.upstream }

// Close stops cloudgate's goroutines (list prefetch) and waits for them and
// for batch calls in flight. The upstream is not closed. Calls made after
// Close still work, without list prefetch — except with limits.shared: Close
// leaves the fleet (its share goes to the other members at once), and later
// calls fail with an error wrapping limiter.ErrClosed.
func (c *cloud) Close() error {
	c.g.close()
	return nil
}

// Each accessor mirrors the upstream's (impl, ok) exactly: an upstream
// without the interface yields an untyped nil and false.

func (c *cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	up, ok := c.g.upstream.LoadBalancer()
	if !ok || up == nil {
		return nil, ok
	}
	return &loadBalancer{g: c.g, up: up}, true
}

func (c *cloud) Instances() (cloudprovider.Instances, bool) {
	up, ok := c.g.upstream.Instances()
	if !ok || up == nil {
		return nil, ok
	}
	return &instances{g: c.g, up: up}, true
}

func (c *cloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	up, ok := c.g.upstream.InstancesV2()
	if !ok || up == nil {
		return nil, ok
	}
	return &instancesV2{g: c.g, up: up}, true
}

func (c *cloud) Zones() (cloudprovider.Zones, bool) {
	up, ok := c.g.upstream.Zones()
	if !ok || up == nil {
		return nil, ok
	}
	return &zones{g: c.g, up: up}, true
}

func (c *cloud) Clusters() (cloudprovider.Clusters, bool) {
	up, ok := c.g.upstream.Clusters()
	if !ok || up == nil {
		return nil, ok
	}
	return &clusters{g: c.g, up: up}, true
}

func (c *cloud) Routes() (cloudprovider.Routes, bool) {
	up, ok := c.g.upstream.Routes()
	if !ok || up == nil {
		return nil, ok
	}
	return &routes{g: c.g, up: up}, true
}

// ProviderName is the upstream's name unless Config.ProviderName overrides
// it: the CCM builds node provider IDs from it, so it must not change when
// cloudgate is put in front of a provider.
func (c *cloud) ProviderName() string { return c.g.providerName }

func (c *cloud) HasClusterID() bool { return c.g.upstream.HasClusterID() }

// informerCloud is the wrapper of an upstream that implements
// cloudprovider.InformerUser: the CCM type-asserts the top-level cloud and
// calls SetInformers, which must reach the upstream.
type informerCloud struct {
	*cloud
	informers cloudprovider.InformerUser
}

var _ cloudprovider.InformerUser = (*informerCloud)(nil)

func (c *informerCloud) SetInformers(f informers.SharedInformerFactory) {
	c.g.useNodeInformer(f)
	c.informers.SetInformers(f)
}
