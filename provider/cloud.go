package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
)

// cloud is the Cloud that New returns: the gate (policy and caches), and
// the mode that runs every wrapped call, chosen once when it is built.
type cloud struct {
	g *gate
	r runner
}

var _ Cloud = (*cloud)(nil)

// runner is a mode: what the wrappers (one per method: instances.go,
// instancesv2.go, loadbalancer.go, routes.go, zones.go, clusters.go) call,
// besides the read paths the mode was bound to (gate.bind): enforce
// (enforce.go: cache, batch, breaker, token, upstream) or shadow (shadow.go:
// the upstream's own calls, and the model beside them).
type runner interface {
	// write sends write m upstream through fn; invalidate (nil: none)
	// drops what it may have changed from the caches.
	write(ctx context.Context, m *method, fn func(context.Context) error, invalidate func()) error
	// notePeer records the lifecycle controller's check of node (batching.go: lifecyclePeers).
	notePeer(node *v1.Node)
	// guard is the not-found guard (nil: none, as in shadow mode, which
	// never changes an answer).
	guard() *notFoundGuard
	// initialize runs after the upstream's Initialize, until stop closes.
	initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{})
	// useNodeInformer takes the CCM's node informer (SetInformers).
	useNodeInformer(informers.SharedInformerFactory)
	// close stops the mode's goroutines and waits for them.
	close()
}

// newCloud builds cloudgate around upstream in cfg's mode; with
// limits.shared it joins the fleet as member (a random id when "").
func newCloud(upstream cloudprovider.Interface, cfg *Config, member string) (*cloud, error) {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	if cfg.Mode == ModeShadow {
		sh, err := newShadow(upstream, cfg)
		if err != nil {
			return nil, err
		}
		sh.g.bind(sh)
		return &cloud{g: sh.g, r: sh}, nil
	}
	e, err := newEnforcer(upstream, cfg, member)
	if err != nil {
		return nil, err
	}
	e.bind(e)
	return &cloud{g: e.gate, r: e}, nil
}

// Initialize passes the client builder to the upstream, then starts the
// mode's own work (enforce: decides batching and list prefetch from the
// upstream's InstancesV2 as it is now, and starts the list prefetch,
// stopped with stop or Close). Called again (leader migration), it
// replaces the loop.
func (c *cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.g.upstream.Initialize(clientBuilder, stop)
	c.r.initialize(clientBuilder, stop)
}

// Unwrap returns the provider cloudgate wraps, unchanged, for a controller
// that needs the upstream's own type beyond cloudprovider.Interface: the AWS
// provider's tagging controller asserts *aws.Cloud and calls its
// TagResource (EC2 CreateTags), which is no cloudprovider.Interface method
// and so was never cloudgate's to cache or limit. Calls made on it bypass
// cloudgate (no cache, limits or metrics). awsbatch.Cloud has the same
// method, so a binary unwraps cloudgate → aws-batch → aws in a loop.
func (c *cloud) Unwrap() cloudprovider.Interface { return c.g.upstream }

// Close stops cloudgate's goroutines (list prefetch) and waits for them and
// for batch calls in flight. The upstream is not closed. Calls made after
// Close still work, without list prefetch — except with limits.shared: Close
// leaves the fleet (its share goes to the other members at once), and later
// calls fail with an error wrapping limiter.ErrClosed.
func (c *cloud) Close() error {
	c.r.close()
	return nil
}

// Each accessor mirrors the upstream's (impl, ok) exactly: an upstream
// without the interface yields an untyped nil and false.

func (c *cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	up, ok := c.g.upstream.LoadBalancer()
	if !ok || up == nil {
		return nil, ok
	}
	return &loadBalancer{g: c.g, r: c.r, up: up}, true
}

func (c *cloud) Instances() (cloudprovider.Instances, bool) {
	up, ok := c.g.upstream.Instances()
	if !ok || up == nil {
		return nil, ok
	}
	return &instances{g: c.g, r: c.r, up: up}, true
}

func (c *cloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	up, ok := c.g.upstream.InstancesV2()
	if !ok || up == nil {
		return nil, ok
	}
	return &instancesV2{g: c.g, r: c.r, up: up}, true
}

func (c *cloud) Zones() (cloudprovider.Zones, bool) {
	up, ok := c.g.upstream.Zones()
	if !ok || up == nil {
		return nil, ok
	}
	return &zones{g: c.g, r: c.r, up: up}, true
}

func (c *cloud) Clusters() (cloudprovider.Clusters, bool) {
	up, ok := c.g.upstream.Clusters()
	if !ok || up == nil {
		return nil, ok
	}
	return &clusters{g: c.g, r: c.r, up: up}, true
}

func (c *cloud) Routes() (cloudprovider.Routes, bool) {
	up, ok := c.g.upstream.Routes()
	if !ok || up == nil {
		return nil, ok
	}
	return &routes{g: c.g, r: c.r, up: up}, true
}

// ProviderName is the upstream's name unless Config.ProviderName overrides
// it: the CCM builds node provider IDs from it, so it must not change when
// cloudgate is put in front of a provider.
func (c *cloud) ProviderName() string { return c.g.providerName }

func (c *cloud) HasClusterID() bool { return c.g.upstream.HasClusterID() }

// UseNodeInformer hands cloudgate the CCM's node informer, as SetInformers
// does, for a cloud built by New over an upstream that takes no informers
// (its wrapper is then no cloudprovider.InformerUser, and the CCM does not
// call SetInformers): the not-found guard's grace period on the v1 calls,
// and the Nodes that ride along in batch calls (joining Nodes, Nodes just
// gone NotReady). Call it before the informers start. The registered
// cloudgate takes it through SetInformers.
func (c *cloud) UseNodeInformer(f informers.SharedInformerFactory) { c.r.useNodeInformer(f) }

// informerCloud is the wrapper of an upstream that implements
// cloudprovider.InformerUser: the CCM type-asserts the top-level cloud and
// calls SetInformers, which must reach the upstream.
type informerCloud struct {
	*cloud
	informers cloudprovider.InformerUser
}

var _ cloudprovider.InformerUser = (*informerCloud)(nil)

func (c *informerCloud) SetInformers(f informers.SharedInformerFactory) {
	c.r.useNodeInformer(f)
	c.informers.SetInformers(f)
}
