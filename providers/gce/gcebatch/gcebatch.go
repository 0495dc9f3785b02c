// Package gcebatch gives the unmodified GCE cloud provider
// (k8s.io/cloud-provider-gcp/providers/gce, registered as "gce") cloudgate's batch and list
// interfaces. Importing it registers the provider "gce-batch": the GCE provider itself,
// built from the same cloud config, whose InstancesV2 also implements
// provider.BatchInstances (one instances.list per zone, filtered by the batch's instance
// names) and provider.InstanceLister (instances.aggregatedList, 500 per page). Every other
// method, and InstanceMetadata/InstanceExists/InstanceShutdown themselves, are the GCE
// provider's own.
//
// With cloudgate: --cloud-provider=cloudgate, and in cloudgate.yaml
//
//	upstream:
//	  name: gce-batch
//	  configFile: /etc/kubernetes/gce.conf   # the GCE provider's own cloud config
//
// The batch and list answers follow the provider's rules field by field (the differential
// test holds them equal): a Node with a provider ID is looked up in its provider ID's zone
// under the node's own provider ID; one without is looked up in the provider's managed
// zones in order (local-zone, or every zone of the region with multizone or regional) by its
// name up to the first '.', and gets gce://PROJECT/ZONE/NAME; addresses per network
// interface (internal IP, each access config's NAT IP, IPv6); the machine type's last path
// element; the zone and its region. An instance Compute Engine does not know is
// cloudprovider.InstanceNotFound; any instance it knows exists, whatever its status (the
// provider's InstanceExists asks only whether instances.get finds it), and the provider
// implements no InstanceShutdown (NotImplemented, which the node lifecycle controller reads
// as "not shut down"): the adapter answers Shutdown false.
package gcebatch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider-gcp/providers/gce" // registers "gce"
	"k8s.io/klog/v2"
)

// Name is the registered provider name.
const Name = "gce-batch"

func init() {
	cloudprovider.RegisterCloudProvider(Name, factory)
}

// factory checks the cloud config now and builds the GCE provider on first use:
// cloudprovider.GetCloudProvider holds its registry lock while it calls a factory, so building
// "gce" (another GetCloudProvider call) from here would deadlock.
func factory(config io.Reader) (cloudprovider.Interface, error) {
	var data []byte
	if config != nil {
		var err error
		if data, err = io.ReadAll(config); err != nil {
			return nil, fmt.Errorf("%s: reading the cloud config: %w", Name, err)
		}
	}
	s, err := parseConfig(data)
	if err != nil {
		return nil, err
	}
	return &Cloud{config: data, set: s}, nil
}

// New builds the GCE provider ("gce", which must not be being built by the caller's own
// factory) from config and wraps it. Use it outside a provider factory; the registered
// "gce-batch" does the same lazily.
func New(config []byte) (*Cloud, error) {
	s, err := parseConfig(config)
	if err != nil {
		return nil, err
	}
	c := &Cloud{config: config, set: s}
	if _, err := c.build(); err != nil {
		return nil, err
	}
	return c, nil
}

// Cloud is the GCE provider with the adapter's InstancesV2.
type Cloud struct {
	config []byte
	set    *settings

	once sync.Once
	up   *gce.Cloud
	inst *Instances
	err  error
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
)

func (c *Cloud) build() (*gce.Cloud, error) {
	c.once.Do(func() {
		up, err := cloudprovider.GetCloudProvider(gce.ProviderName, bytes.NewReader(c.config))
		if err != nil {
			c.err = fmt.Errorf("%s: building the GCE provider: %w", Name, err)
			return
		}
		g, ok := up.(*gce.Cloud)
		if !ok || g == nil {
			c.err = fmt.Errorf("%s: provider %q is not registered as the GCE provider (got %T)", Name, gce.ProviderName, up)
			return
		}
		zones, err := c.set.managedZones(context.Background(), g)
		if err != nil {
			c.err = fmt.Errorf("%s: %w", Name, err)
			return
		}
		c.up = g
		c.inst = newInstances(g, zones)
	})
	return c.up, c.err
}

// get returns the GCE provider; a CCM cannot run without its cloud, so one that cannot be
// built ends the process with the reason, as the CCM does.
func (c *Cloud) get() *gce.Cloud {
	up, err := c.build()
	if err != nil {
		klog.Fatalf("%v", err)
	}
	return up
}

// Unwrap returns the unmodified GCE provider (provider.Unwrapper).
func (c *Cloud) Unwrap() cloudprovider.Interface { return c.get() }

// Initialize forwards to the GCE provider (it needs the client builder).
func (c *Cloud) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.get().Initialize(b, stop)
}

// SetInformers forwards the node informer the GCE provider keeps its node zones with.
func (c *Cloud) SetInformers(f informers.SharedInformerFactory) { c.get().SetInformers(f) }

func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c.get().LoadBalancer() }
func (c *Cloud) Instances() (cloudprovider.Instances, bool)       { return c.get().Instances() }
func (c *Cloud) Zones() (cloudprovider.Zones, bool)               { return c.get().Zones() }
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool)         { return c.get().Clusters() }
func (c *Cloud) Routes() (cloudprovider.Routes, bool)             { return c.get().Routes() }
func (c *Cloud) ProviderName() string                             { return c.get().ProviderName() }
func (c *Cloud) HasClusterID() bool                               { return c.get().HasClusterID() }

// InstancesV2 returns the GCE provider's InstancesV2 with the batch and list methods added.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	c.get()
	return c.inst, true
}

// BatchInstances returns the adapter (for callers holding the *Cloud).
func (c *Cloud) BatchInstances() *Instances {
	c.get()
	return c.inst
}
