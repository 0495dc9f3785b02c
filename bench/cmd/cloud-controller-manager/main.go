// Command cloud-controller-manager is the Kubernetes cloud-controller-manager with cloudgate
// linked in: run it with --cloud-provider=cloudgate --cloud-config=cloudgate.yaml, and
// cloudgate builds the upstream provider named in that file (here: simcloud, the simulated
// cloud) and puts its caches, limiters and breakers in front of it.
//
// It is the upstream sample (k8s.io/cloud-provider/sample/basic_main.go) with the default
// controller identities; the command itself is built by package command, so tests can read
// its flags. See docs/ccm.md.
package main

import (
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/cli"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/bench/cmd/cloud-controller-manager/command"
)

func main() {
	cmd, err := command.New(wait.NeverStop)
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	os.Exit(cli.Run(cmd))
}
