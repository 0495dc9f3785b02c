// Command cloud-controller-manager is the Kubernetes cloud-controller-manager for AWS with
// cloudgate in front of the unmodified AWS cloud provider (k8s.io/cloud-provider-aws) and the
// awsbatch adapter, which adds batched and listed instance lookups to it. Run it with
//
//	--cloud-provider=cloudgate --cloud-config=cloudgate.yaml
//
// where cloudgate.yaml names the upstream "aws-batch" (the AWS provider plus the adapter) or
// "aws" (the provider alone) and points at the AWS provider's own cloud config. See
// docs/aws.md.
//
// Its controllers are the AWS cloud-controller-manager's: the standard four and the AWS
// provider's own tagging controller, registered as the AWS CCM's main registers it (its
// flags --tags, --resources, --tagging-controller-*; off under "*", on with
// --controllers=*,tagging).
//
// Every EC2, ELB and ELBv2 request the provider and the adapter send passes
// cloudgate's request gate (package awsrequests): per-action token buckets,
// a breaker per service, and cloudgate_cloud_requests_total by action and
// by the provider method that sent it.
package main

import (
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider-aws/pkg/controllers/tagging"
	awsv1 "k8s.io/cloud-provider-aws/pkg/providers/v1"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/cmd/ccm" // registers "cloudgate"
	"github.com/cloudgate/cloudgate/provider"
	_ "github.com/cloudgate/cloudgate/providers/aws/awsbatch" // registers "aws-batch" (and "aws")
	"github.com/cloudgate/cloudgate/providers/aws/awsrequests"
)

func main() {
	// Before any AWS SDK client exists: every EC2, ELB and ELBv2 request
	// the provider sends then passes cloudgate's request gate. A CCM that
	// cannot have it does not start (no silent bypass).
	if _, err := awsrequests.Install(); err != nil {
		klog.Fatalf("unable to start: %v", err)
	}
	cmd, err := newCommand(wait.NeverStop)
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	os.Exit(cli.Run(cmd))
}

func newCommand(stopCh <-chan struct{}) (*cobra.Command, error) {
	tc := &tagging.ControllerWrapper{}
	flags := cliflag.NamedFlagSets{}
	tc.Options.AddFlags(flags.FlagSet("tagging controller"))
	return ccm.New(stopCh, ccm.Options{
		Linked:       `"cloudgate" (give it --cloud-config=cloudgate.yaml), "aws-batch" and "aws"`,
		UntaggedHint: "set [Global] KubernetesClusterID",
		Controllers: []ccm.Controller{{
			Name:       tagging.TaggingControllerKey,
			ClientName: tagging.TaggingControllerClientName,
			Constructor: func(ic app.ControllerInitContext, cc *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
				return tc.StartTaggingControllerWrapper(ic, cc, awsCloud(cloud))
			},
			DisabledByDefault: true, // as in the AWS CCM: "*" leaves it out
		}},
		Flags: flags,
	})
}

// awsCloud returns the AWS provider inside cloud (cloudgate → aws-batch → aws): the tagging
// controller asserts *awsv1.Cloud and calls EC2 CreateTags/DeleteTags through it, which
// are not cloudprovider.Interface methods, so cloudgate never gated them. A cloud with no
// AWS provider inside is returned as it is; the tagging controller then reports that it
// does not support that provider and does not start, as in the AWS CCM.
func awsCloud(cloud cloudprovider.Interface) cloudprovider.Interface {
	for c := cloud; c != nil; {
		if _, ok := c.(*awsv1.Cloud); ok {
			return c
		}
		u, ok := c.(provider.Unwrapper) // cloudgate's and awsbatch's
		if !ok {
			break
		}
		c = u.Unwrap()
	}
	return cloud
}
