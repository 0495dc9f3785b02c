package main

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/provider"
)

// The effective configuration printed for a file loads back, through cloudgate's own loader, to
// the configuration the CCM would run with; the upstream's inline config is never printed.
func TestEffectiveConfigRoundTrips(t *testing.T) {
	in := "upstream:\n  name: mycloud\n  config: |\n    apiKey: s3cr3t-value\nlimits:\n  read: {qps: 7, burst: 9}\nmethods:\n  InstanceMetadata: {ttl: 3m}\n"
	var out, errb bytes.Buffer
	if code := run([]string{"-upstreams", "mycloud", "-"}, strings.NewReader(in), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if strings.Contains(out.String(), "s3cr3t") {
		t.Fatalf("the upstream's inline config was printed:\n%s", out.String())
	}
	want, err := provider.LoadConfig(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if want, err = want.Resolve(provider.ResolveOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := provider.LoadConfig(&out)
	if err != nil {
		t.Fatalf("the printed configuration does not load: %v", err)
	}
	want.Upstream.Config, got.Upstream.Config = "", ""
	wy, _ := yaml.Marshal(want)
	gy, _ := yaml.Marshal(got)
	if !bytes.Equal(wy, gy) {
		t.Errorf("printed configuration loads as\n%s\nwant\n%s", gy, wy)
	}
	for _, s := range []string{"qps: 7", "ttl: 3m0s", "listPrefetch: true", "sendAtOnce: true", "negativeTTL: 30s"} {
		if !strings.Contains(string(gy), s) {
			t.Errorf("effective configuration lacks %q:\n%s", s, gy)
		}
	}
}

// Bad input exits 1 with cloudgate's error naming the field; bad usage exits 2.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		in   string
		code int
		want string
	}{
		{[]string{"-"}, "upstream: {name: x}\nlimits: {write: {qps: 0}}\n", 1, "limits.write.qps"},
		{[]string{"-"}, "upstream: {name: x}\ncache: {negativeTTL: 30}\n", 1, "cache.negativeTTL"},
		{[]string{"-"}, "upstream: {name: x}\nsise: 3\n", 1, `unknown field "sise"`},
		{[]string{"/nonexistent/cloudgate.yaml"}, "", 1, "does not exist"},
		{nil, "", 2, "usage"},
		{[]string{"-defaults", "x.yaml"}, "", 2, "usage"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, strings.NewReader(tc.in), &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("run(%q) = %d, stderr %q; want %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}

func TestDefaults(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-defaults"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, s := range []string{"qps: 10", "openTimeout: 2s", "confirmAfter: 20s", "mode: enforce",
		"  listInterval: 5m0s\n", "  minOpenTimeout: 66.666666ms\n", "#   InstanceMetadata: 10m0s", "#   InstanceExists: 1m0s"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("defaults lack %q:\n%s", s, out.String())
		}
	}
}
