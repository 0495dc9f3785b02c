package simcloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	cloudprovider "k8s.io/cloud-provider"
)

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader(`
endpoint: http://127.0.0.1:9/
clusterName: prod
timeout: 3s
apiKey: k
maxBatchSize: 100
listPageSize: 50
`))
	if err != nil {
		t.Fatal(err)
	}
	want := ClientConfig{Endpoint: "http://127.0.0.1:9", ClusterName: "prod", Timeout: 3 * time.Second, APIKey: "k", MaxBatchSize: 100, ListPageSize: 50}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("ParseConfig = %+v, want %+v", cfg, want)
	}
	cfg, err = ParseConfig(strings.NewReader("endpoint: http://127.0.0.1:9\napiKey: k\n"))
	if err != nil || cfg.Timeout != DefaultTimeout || cfg.MaxBatchSize != DefaultMaxBatchSize {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
}

func TestConfigErrorsNameTheKeyAndNeverTheSecret(t *testing.T) {
	base := "endpoint: http://127.0.0.1:9\napiKey: " + testKey + "\n"
	for _, tc := range []struct{ config, want string }{
		{base + "bogusKey: 1\n", "bogusKey"},
		{base + "timeout: soon\n", "timeout"},
		{base + "timeout: -1s\n", "timeout"},
		{base + "maxBatchSize: -1\n", "maxBatchSize"},
		{base + "listPageSize: -1\n", "listPageSize"},
		{base + "apiKey: again\n", "apiKey"},
		{"apiKey: " + testKey + "\n", "endpoint is required"},
		{"endpoint: http://127.0.0.1:9\n", "apiKey is required"},
		{"endpoint: ftp://127.0.0.1:9\napiKey: " + testKey + "\n", "scheme"},
		{"endpoint: http://u:" + testKey + "@127.0.0.1:9\napiKey: " + testKey + "\n", "user info"},
		{"endpoint: http://127.0.0.1:9\napiKey: [" + testKey + "]\n", "apiKey"},
		{"endpoint: http://127.0.0.1:9\napiKey: " + testKey + "\n  nested: [\n", "yaml"},
	} {
		_, err := cloudprovider.GetCloudProvider(ProviderName, strings.NewReader(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("config %q: err = %v, want it to mention %q", tc.config, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), testKey) {
			t.Errorf("config error leaks the API key: %v", err)
		}
	}
	if _, err := cloudprovider.GetCloudProvider(ProviderName, nil); err == nil {
		t.Fatal("nil config accepted")
	}
}

func TestAPIKeyNeverPrinted(t *testing.T) {
	s := startServer(t, ServerConfig{APIKey: "the-right-key", ReadQPS: negligibleQPS, ReadBurst: 1})
	c := cloudFor(t, s, "")
	cfg := c.Config()
	for _, v := range []any{c, *c, cfg, &cfg, cfg.APIKey, s.Config()} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			if out := fmt.Sprintf(verb, v); strings.Contains(out, testKey) || strings.Contains(out, "the-right-key") ||
				strings.Contains(out, fmt.Sprintf("%x", testKey)) {
				t.Errorf("%s of %T leaks the key: %s", verb, v, out)
			}
		}
	}
	if out := c.String(); !strings.Contains(out, "[REDACTED]") || !strings.Contains(out, s.URL()) {
		t.Errorf("String() = %q", out)
	}
	b, _ := json.Marshal(cfg)
	if strings.Contains(string(b), testKey) {
		t.Errorf("JSON leaks the key: %s", b)
	}

	// The server wants another key: 401, and the error does not echo ours.
	cl, _ := c.Clusters()
	_, err := cl.ListClusters(context.Background())
	apiError(t, err, http.StatusUnauthorized, CodeUnauthorized)
	if strings.Contains(err.Error(), testKey) || strings.Contains(fmt.Sprintf("%+v", err), testKey) {
		t.Fatalf("error leaks the key: %v", err)
	}
	// The right key is accepted, and a 429 does not echo it either.
	good, err := NewClient(ClientConfig{Endpoint: s.URL(), APIKey: "the-right-key"})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	gcl, _ := good.Clusters()
	if _, err := gcl.ListClusters(context.Background()); err != nil {
		t.Fatalf("right key: %v", err)
	}
	_, err = gcl.ListClusters(context.Background())
	apiError(t, err, http.StatusTooManyRequests, CodeTooManyRequests)
	if strings.Contains(err.Error(), "the-right-key") {
		t.Fatalf("error leaks the key: %v", err)
	}
	// A transport error names the URL, never the key.
	s.Close()
	_, err = gcl.ListClusters(context.Background())
	var ae *APIError
	if err == nil || errors.As(err, &ae) && ae.StatusCode != http.StatusServiceUnavailable || strings.Contains(err.Error(), "the-right-key") {
		t.Fatalf("after Close: %v", err)
	}
}

func TestNewClientValidates(t *testing.T) {
	for _, cfg := range []ClientConfig{
		{APIKey: "k"},
		{Endpoint: "127.0.0.1:9", APIKey: "k"},
		{Endpoint: "http://127.0.0.1:9?x=1", APIKey: "k"},
		{Endpoint: "http://127.0.0.1:9", APIKey: "k\nInjected: 1"},
		{Endpoint: "http://127.0.0.1:9", APIKey: "k", Timeout: -1},
	} {
		if c, err := NewClient(cfg); err == nil {
			c.Close()
			t.Errorf("NewClient(%+v) accepted", cfg)
		}
	}
}
