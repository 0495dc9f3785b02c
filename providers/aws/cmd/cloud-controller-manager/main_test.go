package main

import (
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
	awsv1 "k8s.io/cloud-provider-aws/pkg/providers/v1"
	fakecloud "k8s.io/cloud-provider/fake"

	"github.com/cloudgate/cloudgate/provider"
)

// TestControllersMatchAWS: the command's controllers are the AWS CCM's — the standard four
// plus tagging, which "*" leaves out — and it has the tagging controller's flags.
func TestControllersMatchAWS(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	cmd, err := newCommand(stop)
	if err != nil {
		t.Fatal(err)
	}
	f := cmd.Flags().Lookup("controllers")
	if f == nil {
		t.Fatal("no --controllers flag")
	}
	all, disabled, ok := strings.Cut(f.Usage, "Disabled-by-default controllers:")
	if !ok {
		t.Fatalf("--controllers usage %q lists no disabled-by-default controllers", f.Usage)
	}
	for _, c := range []string{"cloud-node", "cloud-node-lifecycle", "service", "route", "tagging"} {
		if !strings.Contains(all, c) {
			t.Errorf("--controllers knows no %s: %q", c, f.Usage)
		}
	}
	if strings.TrimSpace(disabled) != "tagging" {
		t.Errorf("disabled by default: %q, want tagging (as in the AWS CCM)", disabled)
	}
	for _, name := range []string{"tags", "resources", "tagging-controller-rate-limit", "tagging-controller-burst-limit",
		"tagging-controller-concurrent-node-syncs", "tagging-controller-enable-batching"} {
		if cmd.Flags().Lookup(name) == nil {
			t.Errorf("no --%s flag (the AWS CCM's tagging controller flags)", name)
		}
	}
}

// TestAWSCloudUnwraps: the tagging controller gets the AWS provider from inside cloudgate;
// a cloud without one is passed as it is.
func TestAWSCloudUnwraps(t *testing.T) {
	aws := &awsv1.Cloud{}
	gated, err := provider.New(aws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gated.Close()
	if got := awsCloud(gated); got != cloudprovider.Interface(aws) {
		t.Errorf("awsCloud(cloudgate over aws) = %T %p, want the AWS provider %p", got, got, aws)
	}
	if got := awsCloud(aws); got != cloudprovider.Interface(aws) {
		t.Errorf("awsCloud(aws) = %T", got)
	}
	other, err := provider.New(gated, nil) // no AWS provider type at the bottom of a non-Unwrapper
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got := awsCloud(other); got != cloudprovider.Interface(aws) {
		t.Errorf("awsCloud(cloudgate over cloudgate over aws) = %T", got)
	}
	notAWS, err := provider.New(&fakecloud.Cloud{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer notAWS.(interface{ Close() error }).Close()
	if got := awsCloud(notAWS); got != notAWS {
		t.Errorf("awsCloud(cloudgate over a non-AWS cloud) = %T, want that cloud itself", got)
	}
}
