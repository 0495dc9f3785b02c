package provider

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/metrics"
)

func init() {
	cloudprovider.RegisterCloudProvider(Name, newFromConfig)
}

// newFromConfig is the registered factory: --cloud-provider=cloudgate
// --cloud-config=cloudgate.yaml. It resolves the config (Resolve: checks
// it, reads the upstream's config file) now, and builds the upstream on first use:
// cloudprovider.GetCloudProvider holds its registry lock while it calls a
// factory, so building the upstream (another GetCloudProvider call) from
// inside this one would deadlock. Metrics go to metrics.Default, registered
// on the CCM's /metrics.
func newFromConfig(config io.Reader) (cloudprovider.Interface, error) {
	cfg, err := DecodeConfig(config)
	if err != nil {
		return nil, err
	}
	if cfg, err = cfg.Resolve(ResolveOptions{BuildUpstream: true}); err != nil {
		return nil, err
	}
	logEffectiveConfig(cfg)
	metrics.RegisterLegacy()
	return &lazyCloud{cfg: cfg, upstreamConfig: cfg.upstreamConfig}, nil
}

// buildUpstream builds the wrapped provider. Its configuration may hold
// credentials, so no error here quotes it.
func buildUpstream(name string, config []byte) (cloudprovider.Interface, error) {
	var r io.Reader
	if config != nil {
		r = bytes.NewReader(config)
	}
	up, err := cloudprovider.GetCloudProvider(name, r)
	if err != nil {
		return nil, fmt.Errorf("cloudgate: building upstream provider %q: %w", name, err)
	}
	if up == nil {
		return nil, fmt.Errorf("cloudgate config: upstream.name: provider %q is not registered in this binary: import its package in the CCM's main (or fix the name)", name)
	}
	return up, nil
}

// lazyCloud is what the registered factory returns: cloudgate around an
// upstream built on the first call. A CCM cannot run without its cloud, so
// an upstream that cannot be built ends the process with the reason, as the
// CCM does for a cloud config it cannot load. It always offers
// SetInformers, and forwards it when the upstream takes informers.
//
// Replicas: the CCM builds the cloud in every replica, but calls Initialize
// only in the one that wins leader election (k8s.io/cloud-provider v0.37.2,
// app.Run: startControllers runs from OnStartedLeading, and a replica that
// loses the lease exits). So cloudgate's own state — caches, buckets,
// breakers, its metrics, and with limits.shared its fleet membership — is
// built at Initialize, not before: a standby replica answers HasClusterID
// and ProviderName from the upstream alone, exports no cloudgate gauges and
// holds no share of the fleet's quota. At Initialize the fleet member is
// named after the cluster (see clusterMemberID), so a new leader takes over
// the dead one's membership instead of waiting for it to be forgotten.
// A caller that uses a sub-interface before Initialize (a library user, a
// test) builds the gate then, with a random member id.
type lazyCloud struct {
	cfg            *Config
	upstreamConfig []byte

	upOnce sync.Once
	up     cloudprovider.Interface
	upErr  error

	mu     sync.Mutex
	cloud  *cloud
	err    error
	closed bool
	// informers: the CCM's, for the not-found guard's node lookups
	// (gate.useNodeInformer), handed to the gate when it is built.
	informers informers.SharedInformerFactory

	// ready is Ready's Redis probe (ready.go), made at its first call.
	ready readiness
}

var (
	_ Cloud                      = (*lazyCloud)(nil)
	_ cloudprovider.InformerUser = (*lazyCloud)(nil)
)

// upstream builds the upstream once.
func (l *lazyCloud) upstream() (cloudprovider.Interface, error) {
	l.upOnce.Do(func() {
		l.up, l.upErr = buildUpstream(l.cfg.Upstream.Name, l.upstreamConfig)
	})
	return l.up, l.upErr
}

// build builds the upstream and the wrapper once; member names this
// replica in the fleet (limits.shared), "" for a random id.
func (l *lazyCloud) build() (*cloud, error) { return l.buildAs("") }

func (l *lazyCloud) buildAs(member string) (*cloud, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cloud != nil || l.err != nil {
		return l.cloud, l.err
	}
	if l.closed {
		l.err = errors.New("cloudgate: closed before first use")
		return nil, l.err
	}
	up, err := l.upstream()
	if err != nil {
		l.err = err
		return nil, err
	}
	c, err := newCloud(up, l.cfg, member)
	if err != nil {
		l.err = err
		return nil, err
	}
	l.cloud = c
	if l.informers != nil {
		c.r.useNodeInformer(l.informers)
	}
	return l.cloud, nil
}

// built returns the wrapper if it was built.
func (l *lazyCloud) built() *cloud {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cloud
}

func (l *lazyCloud) get() *cloud {
	c, err := l.build()
	if err != nil {
		klog.Fatalf("cloudgate: cannot start: %v", err)
	}
	return c
}

// Unwrap returns the wrapped provider (cloud.Unwrap) without building
// cloudgate: controllers that need the provider's own type (the AWS tagging
// controller) get it in a standby too.
func (l *lazyCloud) Unwrap() cloudprovider.Interface { return l.getUpstream() }

func (l *lazyCloud) getUpstream() cloudprovider.Interface {
	up, err := l.upstream()
	if err != nil {
		klog.Fatalf("cloudgate: cannot start: %v", err)
	}
	return up
}

// Initialize builds cloudgate (this replica leads: the CCM calls it only
// then), joining the fleet as this cluster's member, and initializes it.
func (l *lazyCloud) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	member := ""
	if l.cfg.Limits.Shared != nil && l.built() == nil {
		member = clusterMemberID(b)
	}
	c, err := l.buildAs(member)
	if err != nil {
		klog.Fatalf("cloudgate: cannot start: %v", err)
	}
	c.Initialize(b, stop)
}
func (l *lazyCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return l.get().LoadBalancer() }
func (l *lazyCloud) Instances() (cloudprovider.Instances, bool)       { return l.get().Instances() }
func (l *lazyCloud) InstancesV2() (cloudprovider.InstancesV2, bool)   { return l.get().InstancesV2() }
func (l *lazyCloud) Zones() (cloudprovider.Zones, bool)               { return l.get().Zones() }
func (l *lazyCloud) Clusters() (cloudprovider.Clusters, bool)         { return l.get().Clusters() }
func (l *lazyCloud) Routes() (cloudprovider.Routes, bool)             { return l.get().Routes() }

// ProviderName is what the gate would answer (Config.ProviderName or the
// upstream's), without building it: the CCM asks every replica.
func (l *lazyCloud) ProviderName() string {
	if l.cfg.ProviderName != "" {
		return l.cfg.ProviderName
	}
	return l.getUpstream().ProviderName()
}

// HasClusterID is the upstream's; the CCM asks it in every replica, before
// leader election.
func (l *lazyCloud) HasClusterID() bool { return l.getUpstream().HasClusterID() }

// Close closes cloudgate around the upstream if it was built; closed before
// it was built, it never is (later use ends the process with the reason).
func (l *lazyCloud) Close() error {
	l.mu.Lock()
	l.closed = true
	c := l.cloud
	l.mu.Unlock()
	l.ready.close()
	if c != nil {
		return c.Close()
	}
	return nil
}

// SetInformers forwards to the upstream when it takes informers, and gives
// cloudgate the node informer (the not-found guard's grace period on the
// v1 calls, which carry no Node).
func (l *lazyCloud) SetInformers(f informers.SharedInformerFactory) {
	l.mu.Lock()
	l.informers = f
	c := l.cloud
	l.mu.Unlock()
	if c != nil {
		c.r.useNodeInformer(f)
	}
	if iu, ok := l.getUpstream().(cloudprovider.InformerUser); ok {
		iu.SetInformers(f)
	}
}
