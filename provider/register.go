package provider

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
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
// --cloud-config=cloudgate.yaml. It validates the config and reads the
// upstream's config file now, and builds the upstream on first use:
// cloudprovider.GetCloudProvider holds its registry lock while it calls a
// factory, so building the upstream (another GetCloudProvider call) from
// inside this one would deadlock. Metrics go to metrics.Default, registered
// on the CCM's /metrics.
func newFromConfig(config io.Reader) (cloudprovider.Interface, error) {
	cfg, err := LoadConfig(config)
	if err != nil {
		return nil, err
	}
	if cfg.Upstream.Name == "" {
		return nil, errors.New("cloudgate config: upstream.name is required: name the provider to wrap (e.g. aws, gce, azure), registered in this binary")
	}
	var upstreamConfig []byte
	switch {
	case cfg.Upstream.ConfigFile != "":
		if upstreamConfig, err = os.ReadFile(cfg.Upstream.ConfigFile); err != nil {
			return nil, fmt.Errorf("cloudgate config: upstream.configFile: %w", err)
		}
	case cfg.Upstream.Config != "":
		upstreamConfig = []byte(cfg.Upstream.Config)
	}
	logEffectiveConfig(cfg)
	metrics.RegisterLegacy()
	return &lazyCloud{cfg: cfg, upstreamConfig: upstreamConfig}, nil
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
type lazyCloud struct {
	cfg            *Config
	upstreamConfig []byte

	once  sync.Once
	cloud *cloud
	err   error
}

var (
	_ cloudprovider.Interface    = (*lazyCloud)(nil)
	_ cloudprovider.InformerUser = (*lazyCloud)(nil)
)

// build builds the upstream and the wrapper once.
func (l *lazyCloud) build() (*cloud, error) {
	l.once.Do(func() {
		up, err := buildUpstream(l.cfg.Upstream.Name, l.upstreamConfig)
		if err != nil {
			l.err = err
			return
		}
		g, err := newGate(up, l.cfg)
		if err != nil {
			l.err = err
			return
		}
		l.cloud = &cloud{g}
	})
	return l.cloud, l.err
}

func (l *lazyCloud) get() *cloud {
	c, err := l.build()
	if err != nil {
		klog.Fatalf("cloudgate: cannot start: %v", err)
	}
	return c
}

// Upstream returns the wrapped provider (cloud.Upstream), building it first.
func (l *lazyCloud) Upstream() cloudprovider.Interface { return l.get().Upstream() }

func (l *lazyCloud) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	l.get().Initialize(b, stop)
}
func (l *lazyCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return l.get().LoadBalancer() }
func (l *lazyCloud) Instances() (cloudprovider.Instances, bool)       { return l.get().Instances() }
func (l *lazyCloud) InstancesV2() (cloudprovider.InstancesV2, bool)   { return l.get().InstancesV2() }
func (l *lazyCloud) Zones() (cloudprovider.Zones, bool)               { return l.get().Zones() }
func (l *lazyCloud) Clusters() (cloudprovider.Clusters, bool)         { return l.get().Clusters() }
func (l *lazyCloud) Routes() (cloudprovider.Routes, bool)             { return l.get().Routes() }
func (l *lazyCloud) ProviderName() string                             { return l.get().ProviderName() }
func (l *lazyCloud) HasClusterID() bool                               { return l.get().HasClusterID() }

// Close closes cloudgate around the upstream if it was built; closed before
// first use, it is never built (later use ends the process with the reason).
func (l *lazyCloud) Close() error {
	l.once.Do(func() { l.err = errors.New("cloudgate: closed before first use") })
	if l.cloud != nil {
		return l.cloud.Close()
	}
	return nil
}

// SetInformers forwards to the upstream when it takes informers.
func (l *lazyCloud) SetInformers(f informers.SharedInformerFactory) {
	if iu, ok := l.get().g.upstream.(cloudprovider.InformerUser); ok {
		iu.SetInformers(f)
	}
}
