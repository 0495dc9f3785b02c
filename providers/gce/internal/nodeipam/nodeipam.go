// Package nodeipam registers the node IPAM controller (--controllers name
// node-ipam-controller, alias nodeipam) in a GCE cloud-controller-manager as
// k8s.io/cloud-provider-gcp's cmd/cloud-controller-manager registers it: enabled by
// default, so --controllers=* runs it, with that command's flags (--node-cidr-mask-size,
// --node-cidr-mask-size-ipv4, --node-cidr-mask-size-ipv6, --service-cluster-ip-range) and
// its checks of --allocate-node-cidrs and --cluster-cidr.
//
// The controller itself is Kubernetes' (k8s.io/kubernetes/pkg/controller/nodeipam): the
// module holding cloud-provider-gcp's copy is not served by the Go module proxy. Kubernetes'
// copy has the range allocator only (--cidr-allocator-type=RangeAllocator, the default: Pod
// CIDRs carved from --cluster-cidr, what kube-up runs without IP aliases); the cloud
// allocator, which reads each instance's alias IP range, is cloud-provider-gcp's alone, so
// --cidr-allocator-type=CloudAllocator is refused at start-up with that reason.
package nodeipam

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/pflag"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"
	kcmnames "k8s.io/kubernetes/cmd/kube-controller-manager/names"
	"k8s.io/kubernetes/pkg/controller/nodeipam"
	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam"
	netutils "k8s.io/utils/net"
)

const (
	// Name is the controller's --controllers key, kube-controller-manager's name for it.
	Name = kcmnames.NodeIpamController
	// Alias is the short name cloud-provider-gcp's CCM gives it.
	Alias = "nodeipam"
	// ClientName is the kube client it acts as (the ServiceAccount with
	// --use-service-account-credentials=true), as in cloud-provider-gcp's CCM.
	ClientName = "node-controller"
	// FlagSetName is the section of --help its flags are in.
	FlagSetName = "nodeipam controller"

	// The node CIDR mask sizes without a flag: cloud-provider-gcp's and
	// kube-controller-manager's defaults.
	defaultNodeMaskIPv4 = 24
	defaultNodeMaskIPv6 = 64
)

// Controller holds the controller's flags; its Constructor is the app's constructor.
type Controller struct {
	serviceCIDR                  string
	maskSize, maskIPv4, maskIPv6 int32
}

// AddFlags adds cloud-provider-gcp's nodeipam flags (its GKE-only multi-network and
// multi-subnet flags, which configure its cloud allocator, are not among them).
func (c *Controller) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.serviceCIDR, "service-cluster-ip-range", c.serviceCIDR, "CIDR Range for Services in cluster (at most two, comma-separated: dual-stack); kept out of the Pod CIDRs the node IPAM controller allocates. Requires --allocate-node-cidrs to be true")
	fs.Int32Var(&c.maskSize, "node-cidr-mask-size", c.maskSize, "Mask size for node cidr in cluster. Default is 24 for IPv4 and 64 for IPv6.")
	fs.Int32Var(&c.maskIPv4, "node-cidr-mask-size-ipv4", c.maskIPv4, "Mask size for IPv4 node cidr in dual-stack cluster. Default is 24.")
	fs.Int32Var(&c.maskIPv6, "node-cidr-mask-size-ipv6", c.maskIPv6, "Mask size for IPv6 node cidr in dual-stack cluster. Default is 64.")
}

// settings is what the controller runs with, checked.
type settings struct {
	clusterCIDRs                      []*net.IPNet
	serviceCIDR, secondaryServiceCIDR *net.IPNet
	maskSizes                         []int
}

// Constructor is the controller's app.InitFuncConstructor. When --controllers enables it, it
// checks its settings at once and ends the process with what to fix (before leader
// election, so a standby with a bad setting fails when it starts, not when it leads); the
// controller itself is built when the replica leads.
func (c *Controller) Constructor(initContext app.ControllerInitContext, cfg *config.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	if !genericcontrollermanager.IsControllerEnabled(Name, app.ControllersDisabledByDefault, cfg.ComponentConfig.Generic.Controllers) {
		return func(context.Context, genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
			return nil, false, nil
		}
	}
	s, err := c.check(cfg)
	if err != nil {
		klog.Fatalf("%s: %v", Name, err)
	}
	allocator := ipam.CIDRAllocatorType(cfg.ComponentConfig.KubeCloudShared.CIDRAllocatorType)
	return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		client := cc.ClientBuilder.ClientOrDie(initContext.ClientName)
		ic, err := nodeipam.NewNodeIpamController(ctx, cc.InformerFactory.Core().V1().Nodes(), cloud, client,
			s.clusterCIDRs, s.serviceCIDR, s.secondaryServiceCIDR, s.maskSizes, allocator)
		if err != nil {
			return nil, false, err
		}
		go ic.RunWithMetrics(ctx, cc.ControllerManagerMetrics)
		return nil, true, nil
	}
}

// check returns the settings from the CCM's flags, or an error naming the flag to fix.
func (c *Controller) check(cfg *config.CompletedConfig) (settings, error) {
	var s settings
	shared := cfg.ComponentConfig.KubeCloudShared
	if !shared.AllocateNodeCIDRs {
		return s, fmt.Errorf("the node IPAM controller (%q in --controllers=%s) needs --allocate-node-cidrs=true and --cluster-cidr, as in cloud-provider-gcp's cloud-controller-manager; where kube-controller-manager allocates Pod CIDRs, leave it out: --controllers=%s,-%s",
			Alias, strings.Join(cfg.ComponentConfig.Generic.Controllers, ","), strings.Join(cfg.ComponentConfig.Generic.Controllers, ","), Alias)
	}
	switch t := ipam.CIDRAllocatorType(shared.CIDRAllocatorType); t {
	case ipam.RangeAllocatorType:
	case ipam.CloudAllocatorType:
		return s, fmt.Errorf("--cidr-allocator-type=%s is not supported by this build: the cloud allocator (Pod CIDRs from each instance's alias IP range) is in k8s.io/cloud-provider-gcp's pkg/controller/nodeipam, whose module the Go module proxy does not serve; this CCM runs Kubernetes' node IPAM controller, which has %s only (docs/gce.md)", t, ipam.RangeAllocatorType)
	default:
		return s, fmt.Errorf("--cidr-allocator-type=%q is not supported: this CCM allocates with %s only (docs/gce.md)", t, ipam.RangeAllocatorType)
	}
	if strings.TrimSpace(shared.ClusterCIDR) == "" {
		return s, errors.New("--allocate-node-cidrs=true needs --cluster-cidr (the Pod CIDR range to allocate from, e.g. kube-up's CLUSTER_IP_RANGE)")
	}
	cidrs, err := netutils.ParseCIDRs(strings.Split(strings.TrimSpace(shared.ClusterCIDR), ","))
	if err != nil {
		return s, fmt.Errorf("--cluster-cidr=%q: %w", shared.ClusterCIDR, err)
	}
	if len(cidrs) > 2 {
		return s, fmt.Errorf("--cluster-cidr=%q: %d CIDRs, at most 2 (one per IP family)", shared.ClusterCIDR, len(cidrs))
	}
	if dual, _ := netutils.IsDualStackCIDRs(cidrs); len(cidrs) == 2 && !dual {
		return s, fmt.Errorf("--cluster-cidr=%q: two CIDRs must be one IPv4 and one IPv6", shared.ClusterCIDR)
	}
	s.clusterCIDRs = cidrs

	if svc := strings.TrimSpace(c.serviceCIDR); svc != "" {
		list := strings.Split(svc, ",")
		if len(list) > 2 {
			return s, fmt.Errorf("--service-cluster-ip-range=%q: more than two CIDRs", c.serviceCIDR)
		}
		var nets []*net.IPNet
		for _, one := range list {
			_, n, err := netutils.ParseCIDRSloppy(strings.TrimSpace(one))
			if err != nil {
				return s, fmt.Errorf("--service-cluster-ip-range=%q: %w", c.serviceCIDR, err)
			}
			nets = append(nets, n)
		}
		s.serviceCIDR = nets[0]
		if len(nets) == 2 {
			if dual, _ := netutils.IsDualStackCIDRs(nets); !dual {
				return s, fmt.Errorf("--service-cluster-ip-range=%q: two CIDRs must be one IPv4 and one IPv6", c.serviceCIDR)
			}
			s.secondaryServiceCIDR = nets[1]
		}
	}

	if s.maskSizes, err = c.maskSizes(cidrs); err != nil {
		return s, err
	}
	for i, cidr := range cidrs {
		if ones, _ := cidr.Mask.Size(); ones > s.maskSizes[i] {
			return s, fmt.Errorf("--cluster-cidr=%q: %s is smaller than one node's /%d (--node-cidr-mask-size*)", shared.ClusterCIDR, cidr, s.maskSizes[i])
		}
	}
	return s, nil
}

// maskSizes returns the node mask size for each cluster CIDR, with cloud-provider-gcp's
// rules: --node-cidr-mask-size for a single-stack cluster, the per-family flags (not it) for
// a dual-stack one.
func (c *Controller) maskSizes(cidrs []*net.IPNet) ([]int, error) {
	v4, v6 := defaultNodeMaskIPv4, defaultNodeMaskIPv6
	switch {
	case len(cidrs) > 1 && c.maskSize != 0:
		return nil, errors.New("--node-cidr-mask-size is not allowed with a dual-stack --cluster-cidr: use --node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6")
	case c.maskSize != 0 && (c.maskIPv4 != 0 || c.maskIPv6 != 0):
		return nil, errors.New("--node-cidr-mask-size-ipv4 and --node-cidr-mask-size-ipv6 are not allowed with --node-cidr-mask-size")
	case c.maskSize != 0:
		v4, v6 = int(c.maskSize), int(c.maskSize)
	default:
		if c.maskIPv4 != 0 {
			v4 = int(c.maskIPv4)
		}
		if c.maskIPv6 != 0 {
			v6 = int(c.maskIPv6)
		}
	}
	sizes := make([]int, len(cidrs))
	for i, cidr := range cidrs {
		bits := 32
		sizes[i] = v4
		if netutils.IsIPv6CIDR(cidr) {
			sizes[i], bits = v6, 128
		}
		if sizes[i] < 1 || sizes[i] > bits {
			return nil, fmt.Errorf("node CIDR mask size /%d for %s is out of range 1-%d (--node-cidr-mask-size*)", sizes[i], cidr, bits)
		}
	}
	return sizes, nil
}
