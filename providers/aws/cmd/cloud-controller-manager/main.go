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
	"k8s.io/component-base/cli"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/internal/ccm"             // registers "cloudgate"
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
	return ccm.New(stopCh, ccm.Options{
		Linked:       `"cloudgate" (give it --cloud-config=cloudgate.yaml), "aws-batch" and "aws"`,
		UntaggedHint: "set [Global] KubernetesClusterID",
	})
}
