// Package ccm builds a cloud-controller-manager command: the upstream
// k8s.io/cloud-provider/app command with cloudgate's start-up checks. The
// providers it can run are the ones the calling binary links in by import;
// the bench module's CCM (bench/cmd/cloud-controller-manager, with simcloud) and the
// provider modules' (providers/aws and providers/gce, cmd/cloud-controller-manager) share
// it, and a CCM of your own can run it too.
package ccm

import (
	"encoding/json"
	"fmt"
	"os"

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

	"github.com/cloudgate/cloudgate/cmd/version"
	_ "github.com/cloudgate/cloudgate/provider" // registers provider "cloudgate"
)

// Options says what a binary's start-up errors tell the operator.
type Options struct {
	// Linked describes the providers the binary links, for the error given
	// when --cloud-provider names none of them.
	Linked string
	// UntaggedHint says how to give the cloud a cluster ID.
	UntaggedHint string
	// Controllers are the binary's own controllers beside the CCM's standard
	// ones (cloud-node, cloud-node-lifecycle, service, route), e.g. the AWS
	// provider's tagging controller.
	Controllers []Controller
	// Flags are the flag sets of those controllers.
	Flags cliflag.NamedFlagSets
}

// Controller is one controller a binary adds to --controllers, registered as
// its provider's own cloud-controller-manager registers it.
type Controller struct {
	// Name is its --controllers key.
	Name string
	// Alias is the short name --controllers also takes for it (as "route" for
	// node-route-controller); empty: Name only.
	Alias string
	// ClientName is the kube client's name: with
	// --use-service-account-credentials=true, the ServiceAccount in
	// kube-system it acts as.
	ClientName string
	// Constructor builds it from the cloud that --cloud-provider names
	// (cloudgate's, for --cloud-provider=cloudgate).
	Constructor app.InitFuncConstructor
	// DisabledByDefault leaves it out of "*": it runs only when named.
	DisabledByDefault bool
}

// New returns the cloud-controller-manager command; it runs until stopCh is
// closed. With --leader-elect (the default) the election is cloudgate's own,
// which releases the Lease when the process gets SIGTERM (lease.go).
func New(stopCh <-chan struct{}, o Options) (*cobra.Command, error) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	constructors := make(map[string]app.ControllerInitFuncConstructor, len(app.DefaultInitFuncConstructors)+len(o.Controllers))
	for name, c := range app.DefaultInitFuncConstructors {
		constructors[name] = c
	}
	aliases := names.CCMControllerAliases()
	for _, c := range o.Controllers {
		if _, dup := constructors[c.Name]; dup || c.Constructor == nil {
			return nil, fmt.Errorf("ccm: controller %q is registered twice or has no constructor", c.Name)
		}
		constructors[c.Name] = app.ControllerInitFuncConstructor{
			InitContext: app.ControllerInitContext{ClientName: c.ClientName},
			Constructor: c.Constructor,
		}
		aliases[c.Name] = c.Name
		if c.Alias != "" {
			if _, dup := aliases[c.Alias]; dup {
				return nil, fmt.Errorf("ccm: controller %q: alias %q is taken", c.Name, c.Alias)
			}
			aliases[c.Alias] = c.Name
		}
		if c.DisabledByDefault {
			// The app reads this package-level set (as the AWS CCM's main does).
			app.ControllersDisabledByDefault.Insert(c.Name)
		}
	}
	rz := &readyz{}
	rz.addFlags(o.Flags.FlagSet("readiness"))
	initCloud := func(c *config.CompletedConfig) cloudprovider.Interface {
		cloud := o.cloudInitializer(c)
		rz.serve(cloud) // once the cloud is built: its config loaded
		return cloud
	}
	cmd := app.NewCloudControllerManagerCommand(opts, initCloud,
		constructors, aliases, o.Flags, stopCh)
	printVersion(cmd)
	return cmd, nil
}

// exit ends the process after --version (tests replace it).
var exit = os.Exit

// printVersion makes --version print cloudgate's version, commit and linked module versions
// (package version) instead of the upstream's one line "Kubernetes vX": a PreRunE, so it
// runs before the command's RunE however that is wrapped. --version=raw prints them as JSON;
// --version=vX.Y.Z (set the reported version) is left to the upstream.
func printVersion(cmd *cobra.Command) {
	pre := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if f := c.Flags().Lookup("version"); f != nil {
			switch f.Value.String() {
			case "true":
				fmt.Fprint(c.OutOrStdout(), version.Get())
				exit(0)
				return errVersionPrinted
			case "raw":
				b, err := json.MarshalIndent(version.Get(), "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(c.OutOrStdout(), "%s\n", b)
				exit(0)
				return errVersionPrinted
			}
		}
		if pre != nil {
			return pre(c, args)
		}
		return nil
	}
}

// errVersionPrinted stops the command after --version when exit did not end the process.
var errVersionPrinted = fmt.Errorf("--version printed")

// cloudInitializer builds the provider named by --cloud-provider from
// --cloud-config. The app's signature has no error result, so a provider
// that cannot be built ends the process with a message saying what to fix.
func (o Options) cloudInitializer(c *config.CompletedConfig) cloudprovider.Interface {
	shared := c.ComponentConfig.KubeCloudShared
	name, file := shared.CloudProvider.Name, shared.CloudProvider.CloudConfigFile
	cloud, err := cloudprovider.InitCloudProvider(name, file)
	if err != nil {
		klog.Fatalf("cloud provider %q (--cloud-config=%q) could not be initialized: %v", name, file, err)
	}
	if cloud == nil {
		klog.Fatalf("no cloud provider: --cloud-provider=%q names none; this binary links %s", name, o.Linked)
	}
	if !cloud.HasClusterID() {
		if !shared.AllowUntaggedCloud {
			klog.Fatalf("cloud provider %q reports no cluster ID; %s or pass --allow-untagged-cloud", name, o.UntaggedHint)
		}
		klog.InfoS("Cloud provider reports no cluster ID; running untagged (--allow-untagged-cloud)", "provider", name)
	}
	return handOver(c, cloud) // leader election that releases the Lease on SIGTERM (lease.go)
}
