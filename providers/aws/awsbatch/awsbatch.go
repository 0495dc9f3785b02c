// Package awsbatch gives the unmodified AWS cloud provider
// (k8s.io/cloud-provider-aws, registered as "aws") cloudgate's batch and
// list interfaces. Importing it registers the provider "aws-batch": the AWS
// provider itself, built from the same cloud config, whose InstancesV2 also
// implements provider.BatchInstances (up to 200 nodes per DescribeInstances
// call) and provider.InstanceLister (the cluster's instances, 1,000 per
// page). Every other method, and InstanceMetadata/InstanceExists/
// InstanceShutdown themselves, are the AWS provider's own.
//
// With cloudgate: --cloud-provider=cloudgate, and in cloudgate.yaml
//
//	upstream:
//	  name: aws-batch
//	  configFile: /etc/kubernetes/aws.conf   # the AWS provider's own cloud config
//
// The batch and list answers follow the provider's rules field by field:
// provider IDs aws:///<zone>/<instance-id> (or the node's own), addresses in
// the provider's order per configured IP family, instance type, zone,
// Region, and the topology.k8s.aws zone-ID and network-node labels from the
// provider's own topology manager. A terminated instance answers its
// metadata with Deleted set (the provider: InstanceExists false,
// InstanceMetadata succeeds); an instance EC2 does not know is
// cloudprovider.InstanceNotFound. The adapter needs [Global]
// KubernetesClusterID (or KubernetesClusterTag) to list the cluster's
// instances.
package awsbatch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	awsv1 "k8s.io/cloud-provider-aws/pkg/providers/v1" // registers "aws"
	"k8s.io/klog/v2"
)

// Name is the registered provider name.
const Name = "aws-batch"

func init() {
	cloudprovider.RegisterCloudProvider(Name, factory)
}

// factory checks the cloud config now and builds the AWS provider on first
// use: cloudprovider.GetCloudProvider holds its registry lock while it calls
// a factory, so building "aws" (another GetCloudProvider call) from here
// would deadlock.
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

// New builds the AWS provider ("aws", which must not be being built by the
// caller's own factory) from config and wraps it. Use it outside a provider
// factory; the registered "aws-batch" does the same lazily.
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

// Cloud is the AWS provider with the adapter's InstancesV2.
type Cloud struct {
	config []byte
	set    *settings

	once sync.Once
	up   cloudprovider.Interface
	inst *Instances
	err  error
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
)

func (c *Cloud) build() (cloudprovider.Interface, error) {
	c.once.Do(func() {
		up, err := cloudprovider.GetCloudProvider(awsv1.ProviderName, bytes.NewReader(c.config))
		if err != nil {
			c.err = fmt.Errorf("%s: building the AWS provider: %w", Name, err)
			return
		}
		if up == nil {
			c.err = fmt.Errorf("%s: provider %q is not registered", Name, awsv1.ProviderName)
			return
		}
		ctx := context.Background()
		region, err := c.set.region(ctx)
		if err != nil {
			c.err = err
			return
		}
		client, err := c.set.newEC2Client(ctx, region)
		if err != nil {
			c.err = err
			return
		}
		c.up = up
		if v2, ok := up.InstancesV2(); ok && v2 != nil {
			c.inst = newInstances(v2, client, region, c.set)
		}
	})
	return c.up, c.err
}

// get returns the AWS provider; a CCM cannot run without its cloud, so one
// that cannot be built ends the process with the reason, as the CCM does.
func (c *Cloud) get() cloudprovider.Interface {
	up, err := c.build()
	if err != nil {
		klog.Fatalf("%v", err)
	}
	return up
}

// Unwrap returns the unmodified AWS provider (provider.Unwrapper).
func (c *Cloud) Unwrap() cloudprovider.Interface { return c.get() }

// Initialize forwards to the AWS provider (it needs the client builder).
func (c *Cloud) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.get().Initialize(b, stop)
}

// SetInformers forwards the node informer the AWS provider uses to map
// node names to instance IDs.
func (c *Cloud) SetInformers(f informers.SharedInformerFactory) {
	if iu, ok := c.get().(cloudprovider.InformerUser); ok {
		iu.SetInformers(f)
	}
}

func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c.get().LoadBalancer() }
func (c *Cloud) Instances() (cloudprovider.Instances, bool)       { return c.get().Instances() }
func (c *Cloud) Zones() (cloudprovider.Zones, bool)               { return c.get().Zones() }
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool)         { return c.get().Clusters() }
func (c *Cloud) Routes() (cloudprovider.Routes, bool)             { return c.get().Routes() }
func (c *Cloud) ProviderName() string                             { return c.get().ProviderName() }
func (c *Cloud) HasClusterID() bool                               { return c.get().HasClusterID() }

// InstancesV2 returns the AWS provider's InstancesV2 with the batch and
// list methods added.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	c.get()
	if c.inst == nil {
		return nil, false
	}
	return c.inst, true
}

// BatchInstances returns the adapter (for callers holding the *Cloud).
func (c *Cloud) BatchInstances() *Instances {
	c.get()
	return c.inst
}
