// Command stockccm is the stock GCE cloud-controller-manager as a cluster without cloudgate
// runs it: k8s.io/cloud-provider's command with the unmodified GCE provider, given
// --cloud-provider=gce, and the controllers of k8s.io/cloud-provider-gcp's
// cmd/cloud-controller-manager with its defaults: the standard ones (cloud-node,
// cloud-node-lifecycle, service, route) and nodeipam, all in --controllers=*. It stands in for
// that command, whose module the Go module proxy does not serve (only .../providers is):
// nodeipam is Kubernetes' controller registered as cloud-provider-gcp registers its copy
// (internal/nodeipam, the range allocator), and its GKE-only controllers (gkenetworkparamset,
// gke-service, gke-tenant), disabled by default there, are left out. Unlike cloudgate's CCM
// (cmd/ccm) it runs the app's own leader election, which keeps the Lease on SIGTERM, as the
// stock CCM does. The GCE cut-over test (charts/test) runs it as the stock CCM that cloudgate
// replaces and that replaces cloudgate.
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

	"github.com/cloudgate/cloudgate/providers/gce/internal/nodeipam"
)

func main() {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	constructors := app.DefaultInitFuncConstructors
	ipam := &nodeipam.Controller{}
	fss := cliflag.NamedFlagSets{}
	ipam.AddFlags(fss.FlagSet(nodeipam.FlagSetName))
	constructors[nodeipam.Name] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: nodeipam.ClientName},
		Constructor: ipam.Constructor,
	}
	aliases := names.CCMControllerAliases()
	aliases[nodeipam.Alias] = nodeipam.Name
	cmd := app.NewCloudControllerManagerCommand(opts, cloudInitializer, constructors, aliases, fss, wait.NeverStop)
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
