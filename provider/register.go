package provider

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/metrics"
)

func init() {
	cloudprovider.RegisterCloudProvider(Name, newFromConfig)
}

// newFromConfig is the registered factory: --cloud-provider=cloudgate
// --cloud-config=cloudgate.yaml. It builds the upstream named in the config
// (registered in the same binary) and wraps it. Its metrics go to
// metrics.Default, which it registers on the CCM's /metrics.
func newFromConfig(config io.Reader) (cloudprovider.Interface, error) {
	cfg, err := LoadConfig(config)
	if err != nil {
		return nil, err
	}
	upstream, err := buildUpstream(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	metrics.RegisterLegacy()
	return New(upstream, cfg)
}

// buildUpstream builds the wrapped provider. Its configuration may hold
// credentials, so no error here quotes it.
func buildUpstream(u UpstreamConfig) (cloudprovider.Interface, error) {
	if u.Name == "" {
		return nil, errors.New("cloudgate config: upstream.name is required: name the provider to wrap (e.g. aws, gce, azure), registered in this binary")
	}
	if !cloudprovider.IsCloudProvider(u.Name) {
		return nil, fmt.Errorf("cloudgate config: upstream.name: provider %q is not registered in this binary: import its package in the CCM's main (or fix the name)", u.Name)
	}
	var config io.Reader
	switch {
	case u.ConfigFile != "":
		f, err := os.Open(u.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("cloudgate config: upstream.configFile: %w", err)
		}
		defer f.Close()
		config = f
	case u.Config != "":
		config = strings.NewReader(u.Config)
	}
	up, err := cloudprovider.GetCloudProvider(u.Name, config)
	if err != nil {
		return nil, fmt.Errorf("cloudgate: building upstream provider %q: %w", u.Name, err)
	}
	if up == nil {
		return nil, fmt.Errorf("cloudgate: upstream provider %q returned no provider", u.Name)
	}
	return up, nil
}
