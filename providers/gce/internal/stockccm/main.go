// Command stockccm is the stock GCE cloud-controller-manager as a cluster without cloudgate
// runs it: k8s.io/cloud-provider's command with its default controllers (cloud-node,
// cloud-node-lifecycle, service, route) and the unmodified GCE provider, given
// --cloud-provider=gce. It stands in for k8s.io/cloud-provider-gcp's cmd/cloud-controller-manager,
// whose module the Go module proxy does not serve (only .../providers is); that command adds
// GKE-only controllers (nodeipam with the cloud CIDR allocator, gkenetworkparamset) on top of
// these. Unlike cloudgate's CCM (cmd/ccm) it runs the app's own leader election, which
// keeps the Lease on SIGTERM, as the stock CCM does. The GCE cut-over test (charts/test)
// runs it as the stock CCM that cloudgate replaces and that replaces cloudgate.
package main

import (
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	"k8s.io/klog/v2"

	_ "k8s.io/cloud-provider-gcp/providers/gce" // registers "gce"
)

func main() {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	cmd := app.NewCloudControllerManagerCommand(opts, cloudInitializer, app.DefaultInitFuncConstructors,
		names.CCMControllerAliases(), cliflag.NamedFlagSets{}, wait.NeverStop)
	os.Exit(cli.Run(cmd))
}

// cloudInitializer builds the provider --cloud-provider names from --cloud-config, as the
// upstream CCMs' mains do.
func cloudInitializer(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared.CloudProvider
	cloud, err := cloudprovider.InitCloudProvider(shared.Name, shared.CloudConfigFile)
	if err != nil {
		klog.Fatalf("Cloud provider could not be initialized: %v", err)
	}
	if cloud == nil {
		klog.Fatalf("Cloud provider is nil")
	}
	if !cloud.HasClusterID() {
		if c.ComponentConfig.KubeCloudShared.AllowUntaggedCloud {
			klog.Warning("detected a cluster without a ClusterID. A ClusterID will be required in the future. Please tag your cluster to avoid any future issues")
		} else {
			klog.Fatalf("no ClusterID found. A ClusterID is required for the cloud provider to function properly. This check can be bypassed by setting the allow-untagged-cloud option")
		}
	}
	return cloud
}
