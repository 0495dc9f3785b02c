// Package command builds cloudgate's cloud-controller-manager command: the upstream
// k8s.io/cloud-provider/app command, with the "cloudgate" and "simcloud" providers linked
// in by import. A cloud vendor's own CCM main needs only the cloudgate import (see
// docs/ccm.md); this package exists so that tests can build the very command the binary
// runs and check flags against it.
package command

import (
	"github.com/spf13/cobra"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register"          // optional JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric on /metrics
	"k8s.io/klog/v2"

	_ "github.com/cloudgate/cloudgate/bench/simcloud" // registers provider "simcloud"
	_ "github.com/cloudgate/cloudgate/provider"       // registers provider "cloudgate"
)

// New returns the cloud-controller-manager command; it runs until stopCh is closed.
func New(stopCh <-chan struct{}) (*cobra.Command, error) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	return app.NewCloudControllerManagerCommand(opts, cloudInitializer,
		app.DefaultInitFuncConstructors, names.CCMControllerAliases(),
		cliflag.NamedFlagSets{}, stopCh), nil
}

// cloudInitializer builds the provider named by --cloud-provider from --cloud-config. The
// app's signature has no error result, so a provider that cannot be built ends the process
// with a message saying what to fix.
func cloudInitializer(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared
	name, file := shared.CloudProvider.Name, shared.CloudProvider.CloudConfigFile
	cloud, err := cloudprovider.InitCloudProvider(name, file)
	if err != nil {
		klog.Fatalf("cloud provider %q (--cloud-config=%q) could not be initialized: %v", name, file, err)
	}
	if cloud == nil {
		klog.Fatalf("no cloud provider: --cloud-provider=%q names none; this binary links "+
			"\"cloudgate\" (give it --cloud-config=cloudgate.yaml) and \"simcloud\"", name)
	}
	if !cloud.HasClusterID() {
		if !shared.AllowUntaggedCloud {
			klog.Fatalf("cloud provider %q reports no cluster ID; tag the cluster or pass --allow-untagged-cloud", name)
		}
		klog.Warningf("cloud provider %q reports no cluster ID; running untagged (--allow-untagged-cloud)", name)
	}
	return cloud
}
