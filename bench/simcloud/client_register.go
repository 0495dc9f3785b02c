package simcloud

import (
	"errors"
	"fmt"
	"io"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"sigs.k8s.io/yaml"
)

func init() {
	cloudprovider.RegisterCloudProvider(ProviderName, func(config io.Reader) (cloudprovider.Interface, error) {
		if config == nil {
			return nil, errors.New("simcloud: a config file is required (at least endpoint and apiKey)")
		}
		cfg, err := ParseConfig(config)
		if err != nil {
			return nil, err
		}
		return NewClient(cfg)
	})
}

// fileConfig is the config file's schema.
type fileConfig struct {
	Endpoint     string `json:"endpoint"`
	ClusterName  string `json:"clusterName"`
	Timeout      string `json:"timeout"`
	APIKey       string `json:"apiKey"`
	MaxBatchSize int    `json:"maxBatchSize"`
	ListPageSize int    `json:"listPageSize"`
}

// ParseConfig reads a YAML (or JSON) client config:
//
//	endpoint: http://127.0.0.1:41234   # required
//	apiKey: s3cr3t                     # required, sent as a bearer token
//	clusterName: kubernetes
//	timeout: 10s                       # per request, Go duration syntax
//	maxBatchSize: 500
//	listPageSize: 0                    # 0: the server's page size
//
// Unknown and duplicate keys are errors naming the key. It validates the
// result like NewClient does. No error ever contains the API key.
func ParseConfig(r io.Reader) (ClientConfig, error) {
	data, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return ClientConfig{}, fmt.Errorf("simcloud: read config: %w", err)
	}
	var fc fileConfig
	if err := yaml.UnmarshalStrict(data, &fc); err != nil {
		return ClientConfig{}, fmt.Errorf("simcloud: config: %w", err)
	}
	cfg := ClientConfig{
		Endpoint:     fc.Endpoint,
		ClusterName:  fc.ClusterName,
		APIKey:       Secret(fc.APIKey),
		MaxBatchSize: fc.MaxBatchSize,
		ListPageSize: fc.ListPageSize,
	}
	if fc.Timeout != "" {
		d, err := time.ParseDuration(fc.Timeout)
		if err != nil {
			return ClientConfig{}, fmt.Errorf("simcloud: config: timeout %q is not a duration like 10s", fc.Timeout)
		}
		cfg.Timeout = d
	}
	return cfg.withDefaults()
}
