package nodeipam

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/cloud-provider/app/config"
)

// TestCheck: the settings cloud-provider-gcp's CCM accepts are taken with its defaults
// (/24 and /64 per node); what it or Kubernetes' controller would refuse, and the cloud
// allocator this build lacks, are refused at start-up with an error naming the flag.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name     string
		allocate bool
		typ      string
		cluster  string
		flags    []string
		want     string // the mask sizes, or a piece of the error
	}{
		{"kube-up's defaults", true, "RangeAllocator", "10.64.0.0/14", nil, "[24]"},
		{"mask flag", true, "RangeAllocator", "10.64.0.0/14", []string{"--node-cidr-mask-size=26"}, "[26]"},
		{"dual-stack", true, "RangeAllocator", "10.64.0.0/14,fd00::/48", []string{"--node-cidr-mask-size-ipv6=80"}, "[24 80]"},
		{"service range kept out", true, "RangeAllocator", "10.64.0.0/14", []string{"--service-cluster-ip-range=10.0.0.0/16"}, "[24]"},
		{"not allocating", false, "RangeAllocator", "10.64.0.0/14", nil, "--allocate-node-cidrs=true"},
		{"cloud allocator", true, "CloudAllocator", "10.64.0.0/14", nil, "--cidr-allocator-type=CloudAllocator is not supported by this build"},
		{"legacy allocator", true, "IPAMFromCluster", "10.64.0.0/14", nil, `--cidr-allocator-type="IPAMFromCluster" is not supported`},
		{"no cluster CIDR", true, "RangeAllocator", "", nil, "needs --cluster-cidr"},
		{"bad cluster CIDR", true, "RangeAllocator", "10.64.0.0/33", nil, "--cluster-cidr="},
		{"two IPv4 CIDRs", true, "RangeAllocator", "10.64.0.0/14,10.128.0.0/14", nil, "one IPv4 and one IPv6"},
		{"cluster smaller than a node", true, "RangeAllocator", "10.64.0.0/25", nil, "smaller than one node's /24"},
		{"single mask with dual-stack", true, "RangeAllocator", "10.64.0.0/14,fd00::/48", []string{"--node-cidr-mask-size=24"}, "not allowed with a dual-stack"},
		{"both mask kinds", true, "RangeAllocator", "10.64.0.0/14", []string{"--node-cidr-mask-size=24", "--node-cidr-mask-size-ipv4=24"}, "not allowed with --node-cidr-mask-size"},
		{"mask out of range", true, "RangeAllocator", "10.64.0.0/14", []string{"--node-cidr-mask-size=40"}, "out of range 1-32"},
		{"bad service range", true, "RangeAllocator", "10.64.0.0/14", []string{"--service-cluster-ip-range=10.0.0.0"}, "--service-cluster-ip-range="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{}
			fs := pflag.NewFlagSet(tc.name, pflag.ContinueOnError)
			c.AddFlags(fs)
			if err := fs.Parse(tc.flags); err != nil {
				t.Fatal(err)
			}
			cfg := &config.Config{}
			cfg.ComponentConfig.Generic.Controllers = []string{"*"}
			cfg.ComponentConfig.KubeCloudShared.AllocateNodeCIDRs = tc.allocate
			cfg.ComponentConfig.KubeCloudShared.CIDRAllocatorType = tc.typ
			cfg.ComponentConfig.KubeCloudShared.ClusterCIDR = tc.cluster
			s, err := c.check(cfg.Complete())
			got := fmt.Sprint(s.maskSizes)
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) || (err != nil) == strings.HasPrefix(tc.want, "[") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
