// Command cloud-controller-manager is the Kubernetes cloud-controller-manager for AWS with
// cloudgate in front of the unmodified AWS cloud provider (k8s.io/cloud-provider-aws) and the
// awsbatch adapter, which adds batched and listed instance lookups to it. Run it with
//
//	--cloud-provider=cloudgate --cloud-config=cloudgate.yaml
//
// where cloudgate.yaml names the upstream "aws-batch" (the AWS provider plus the adapter) or
// "aws" (the provider alone) and points at the AWS provider's own cloud config. See
// docs/aws.md.
package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register"          // optional JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric on /metrics
	"k8s.io/klog/v2"

	_ "github.com/cloudgate/cloudgate/provider"               // registers "cloudgate"
	_ "github.com/cloudgate/cloudgate/providers/aws/awsbatch" // registers "aws-batch" (and "aws")
)

func main() {
	cmd, err := newCommand(wait.NeverStop)
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	os.Exit(cli.Run(cmd))
}

func newCommand(stopCh <-chan struct{}) (*cobra.Command, error) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	return app.NewCloudControllerManagerCommand(opts, cloudInitializer,
		app.DefaultInitFuncConstructors, names.CCMControllerAliases(),
		cliflag.NamedFlagSets{}, stopCh), nil
}

// cloudInitializer builds the provider named by --cloud-provider from --cloud-config; one that
// cannot be built ends the process with what to fix.
func cloudInitializer(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared
	name, file := shared.CloudProvider.Name, shared.CloudProvider.CloudConfigFile
	cloud, err := cloudprovider.InitCloudProvider(name, file)
	if err != nil {
		klog.Fatalf("cloud provider %q (--cloud-config=%q) could not be initialized: %v", name, file, err)
	}
	if cloud == nil {
		klog.Fatalf("no cloud provider: --cloud-provider=%q names none; this binary links "+
			"\"cloudgate\" (give it --cloud-config=cloudgate.yaml), \"aws-batch\" and \"aws\"", name)
	}
	if !cloud.HasClusterID() {
		if !shared.AllowUntaggedCloud {
			klog.Fatalf("cloud provider %q reports no cluster ID; set [Global] KubernetesClusterID or pass --allow-untagged-cloud", name)
		}
		klog.Warningf("cloud provider %q reports no cluster ID; running untagged (--allow-untagged-cloud)", name)
	}
	return cloud
}
