package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
)

func TestLoadConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		wantErr string // "" = valid
		check   func(t *testing.T, c *Config)
	}{
		{name: "minimal", yaml: "upstream:\n  name: aws\n", check: func(t *testing.T, c *Config) {
			if c.Limits.Read.QPS != 10 || c.Cache.NegativeTTL.Duration != 30*time.Second || c.ttl("InstanceMetadata") != 10*time.Minute {
				t.Errorf("defaults not applied: %+v", c)
			}
		}},
		{name: "overrides merge with defaults", yaml: `
upstream: {name: aws, config: "region: eu-west-1"}
limits:
  read: {qps: 50}
methods:
  InstanceMetadata: {ttl: 1m}
  ListRoutes: {qps: 1, burst: 2}
`, check: func(t *testing.T, c *Config) {
			if c.Limits.Read.QPS != 50 || c.Limits.Read.Burst != 20 {
				t.Errorf("read bucket = %+v, want qps 50 and the default burst 20", c.Limits.Read)
			}
			if c.ttl("InstanceMetadata") != time.Minute || c.Methods["ListRoutes"].QPS != 1 {
				t.Errorf("method overrides lost: %+v", c.Methods)
			}
		}},
		{name: "unknown key", yaml: "upstream: {name: aws}\ncache: {sise: 10}\n", wantErr: `unknown field "sise"`},
		{name: "unknown top-level key", yaml: "upstream: {name: aws}\nlimit: {}\n", wantErr: `unknown field "limit"`},
		{name: "negative TTL", yaml: "upstream: {name: aws}\nmethods:\n  GetLoadBalancer: {ttl: -5s}\n", wantErr: "methods.GetLoadBalancer.ttl must be >= 0"},
		{name: "zero QPS", yaml: "upstream: {name: aws}\nlimits:\n  write: {qps: 0}\n", wantErr: "limits.write.qps must be > 0"},
		{name: "zero burst", yaml: "upstream: {name: aws}\nlimits:\n  read: {burst: 0}\n", wantErr: "limits.read.burst must be >= 1"},
		{name: "unknown method", yaml: "upstream: {name: aws}\nmethods:\n  InstanceMetdata: {ttl: 1m}\n", wantErr: "methods.InstanceMetdata: unknown method"},
		{name: "ttl on a write", yaml: "upstream: {name: aws}\nmethods:\n  CreateRoute: {ttl: 1m}\n", wantErr: "writes are never cached"},
		{name: "zero cache size", yaml: "upstream: {name: aws}\ncache: {size: 0}\n", wantErr: "cache.size must be >= 1"},
		{name: "negative staleIfError", yaml: "upstream: {name: aws}\ncache: {staleIfError: -1s}\n", wantErr: "cache.staleIfError must be >= 0"},
		{name: "bad duration", yaml: "upstream: {name: aws}\ncache: {negativeTTL: 30}\n", wantErr: `cache.negativeTTL: want a duration string such as "30s" or "5m", got 30`},
		{name: "bad duration string", yaml: "upstream: {name: aws}\nbreaker: {interval: ten}\n", wantErr: `breaker.interval: want a duration string such as "30s" or "5m": time: invalid duration "ten"`},
		{name: "bad method ttl", yaml: "upstream: {name: aws}\nmethods:\n  InstanceMetadata: {ttl: 1x}\n", wantErr: "methods.InstanceMetadata.ttl: want a duration string"},
		{name: "bad fleet duration", yaml: "upstream: {name: aws}\nlimits:\n  shared: {heartbeat: true}\n", wantErr: "limits.shared.heartbeat: want a duration string"},
		{name: "durations", yaml: "upstream: {name: aws}\ncache: {staleIfError: 10m}\nmethods:\n  InstanceMetadata: {ttl: 90s}\n", check: func(t *testing.T, c *Config) {
			if c.Cache.StaleIfError.Duration != 10*time.Minute || c.ttl("InstanceMetadata") != 90*time.Second {
				t.Errorf("staleIfError %v, InstanceMetadata ttl %v; want 10m, 90s", c.Cache.StaleIfError, c.ttl("InstanceMetadata"))
			}
		}},
		{name: "both upstream configs", yaml: "upstream: {name: aws, config: x, configFile: /y}\n", wantErr: "not both"},
		{name: "self as upstream", yaml: "upstream: {name: cloudgate}\n", wantErr: "upstream.name: cannot be"},
		{name: "failure ratio", yaml: "upstream: {name: aws}\nbreaker: {failureRatio: 1.5}\n", wantErr: "breaker.failureRatio must be in (0, 1]"},
		{name: "method burst without qps", yaml: "upstream: {name: aws}\nmethods:\n  ListRoutes: {burst: 3}\n", wantErr: "methods.ListRoutes.qps must be > 0"},
		{name: "method qps without burst", yaml: "upstream: {name: aws}\nmethods:\n  ListRoutes: {qps: 3}\n", wantErr: "methods.ListRoutes.burst must be >= 1"},
		{name: "min open timeout", yaml: "upstream: {name: aws}\nbreaker: {openTimeout: 1m, minOpenTimeout: 2m}\n", wantErr: "breaker.minOpenTimeout must be in [0, openTimeout=1m0s]"},
		{name: "negative confirmAfter", yaml: "upstream: {name: aws}\nnotFoundGuard: {confirmAfter: -1s}\n", wantErr: "notFoundGuard.confirmAfter must be >= 0"},
		{name: "negative gracePeriod", yaml: "upstream: {name: aws}\nnotFoundGuard: {gracePeriod: -1s}\n", wantErr: "notFoundGuard.gracePeriod must be >= 0"},
		{name: "recovery too short", yaml: "upstream: {name: aws}\nlimits:\n  read: {qps: 10, burst: 20, recovery: 1ms}\n", wantErr: "limits.read.recovery must be between 30ms and 1h"},
		{name: "recovery", yaml: "upstream: {name: aws}\nlimits:\n  write: {qps: 6, burst: 5, recovery: 3s}\n", check: func(t *testing.T, c *Config) {
			lc := c.Limits.Write.limiterConfig(0)
			if lc.RecoveryStep != 100*time.Millisecond || lc.RecoveryQPSPerSecond != 2 {
				t.Errorf("limits.write.recovery 3s: step %v, %v QPS/s; want 100ms, 2 (qps 6 in 3s)", lc.RecoveryStep, lc.RecoveryQPSPerSecond)
			}
			if d := c.Limits.Read.limiterConfig(0); d.RecoveryStep != 0 || d.RecoveryQPSPerSecond != 0 {
				t.Errorf("limits.read without recovery: %+v, want the limiter's defaults (zero)", d)
			}
		}},
		{name: "guard off", yaml: "upstream: {name: aws}\nnotFoundGuard: {enabled: false}\n", check: func(t *testing.T, c *Config) {
			if g := c.NotFoundGuard; g.Enabled == nil || *g.Enabled || g.ConfirmAfter.Duration != 20*time.Second {
				t.Errorf("notFoundGuard = %+v, want off with the default confirmAfter kept", g)
			}
		}},
		{name: "malformed", yaml: "upstream: [\n", wantErr: "cloudgate config"},
		{name: "empty", yaml: "  \n", wantErr: "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadConfig(strings.NewReader(tc.yaml))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				tc.check(t, c)
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func FuzzLoadConfig(f *testing.F) {
	for _, seed := range []string{
		"upstream: {name: aws}\n",
		"upstream: {name: aws, config: \"a: b\"}\nlimits: {read: {qps: 5, burst: 1}}\nmethods: {ListRoutes: {ttl: 10s}}\n",
		"cache: {size: -1}\n", "methods: {X: {}}\n", "[", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		c, err := LoadConfig(strings.NewReader(data))
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			return
		}
		// Whatever LoadConfig accepts, New must accept too (no panic, no
		// late validation failure).
		if _, err := New(&fake.Cloud{}, c); err != nil {
			t.Fatalf("LoadConfig accepted a config New rejects: %v", err)
		}
	})
}

const testUpstream = "cloudgate-test-fake"

var registeredFake = &fake.Cloud{EnableInstancesV2: true, Provider: testUpstream}

func init() {
	cloudprovider.RegisterCloudProvider(testUpstream, func(config io.Reader) (cloudprovider.Interface, error) {
		if config != nil {
			b, _ := io.ReadAll(config)
			if string(b) != "secret-token: hunter2\n" {
				return nil, fmt.Errorf("unexpected upstream config")
			}
		}
		return registeredFake, nil
	})
}

func TestRegisteredFactory(t *testing.T) {
	dir := t.TempDir()
	upstreamFile := filepath.Join(dir, "upstream.yaml")
	if err := os.WriteFile(upstreamFile, []byte("secret-token: hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, yaml string }{
		{"inline", "upstream:\n  name: " + testUpstream + "\n  config: |\n    secret-token: hunter2\n"},
		{"file", "upstream:\n  name: " + testUpstream + "\n  configFile: " + upstreamFile + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := cloudprovider.InitCloudProvider(Name, path)
			if err != nil || c == nil {
				t.Fatalf("InitCloudProvider = %v, %v", c, err)
			}
			if c.ProviderName() != testUpstream {
				t.Fatalf("ProviderName = %q", c.ProviderName())
			}
			if _, ok := c.(*lazyCloud); !ok {
				t.Fatalf("got %T, want cloudgate's wrapper", c)
			}
			if _, ok := c.InstancesV2(); !ok {
				t.Fatal("InstancesV2 lost through the factory")
			}
			// The upstream itself, for controllers that need its own type (AWS tagging).
			if up := c.(Unwrapper).Unwrap(); up != cloudprovider.Interface(registeredFake) {
				t.Fatalf("Unwrap() = %T %p, want the registered upstream %p", up, up, registeredFake)
			}
		})
	}
}

func TestFactoryErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown upstream", "upstream: {name: no-such-cloud}\n", `provider "no-such-cloud" is not registered`},
		{"no upstream", "cache: {size: 10}\n", "upstream.name is required"},
		{"missing file", "upstream: {name: " + testUpstream + ", configFile: /nonexistent/x.yaml}\n", "upstream.configFile"},
		{"upstream rejects its config", "upstream: {name: " + testUpstream + ", config: \"secret-token: wrong\"}\n", "building upstream provider"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newFromConfig(strings.NewReader(tc.yaml))
			if err == nil {
				_, err = c.(*lazyCloud).build()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "wrong") {
				t.Fatalf("the upstream's config leaked into an error: %v", err)
			}
		})
	}
}

// TestDefaultSwitches: every optional switch left nil means the same in a
// Config built by hand (Default, which New applies) as in a YAML file that
// leaves it out (DefaultConfig): true for each; an explicit false stays.
func TestDefaultSwitches(t *testing.T) {
	loaded, err := LoadConfig(strings.NewReader("upstream: {name: aws}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var byHand Config
	byHand.Default()
	switches := func(c *Config) map[string]*bool {
		return map[string]*bool{
			"limits.read.adaptive": c.Limits.Read.Adaptive, "limits.write.adaptive": c.Limits.Write.Adaptive,
			"breaker.waitForProbe": c.Breaker.WaitForProbe, "batch.enabled": c.Batch.Enabled,
			"batch.sendAtOnce": c.Batch.SendAtOnce, "notFoundGuard.enabled": c.NotFoundGuard.Enabled,
		}
	}
	for name, p := range switches(&byHand) {
		if p == nil || !*p {
			t.Errorf("%s left nil by hand: Default gives %v, want true", name, p)
		}
		if q := switches(loaded)[name]; q == nil || *q != *p {
			t.Errorf("%s: YAML default %v, Default %v: they differ", name, q, p)
		}
	}
	if byHand.Mode != ModeEnforce {
		t.Errorf("mode = %q, want %q", byHand.Mode, ModeEnforce)
	}
	off := false
	byHand.Breaker.WaitForProbe = &off
	byHand.Default()
	if *byHand.Breaker.WaitForProbe {
		t.Error("Default overwrote an explicit false")
	}
}

// What the CCM logs at start-up (the configuration Resolve returned, which
// cloudgate-config prints) is what its gate runs with: the gate resolves it
// again and gets it back unchanged, derived values included.
func TestLoggedConfigIsWhatRuns(t *testing.T) {
	for _, file := range []string{
		"upstream: {name: " + testUpstream + "}\n",
		"upstream: {name: " + testUpstream + "}\nmethods: {InstanceMetadata: {ttl: 0s}}\n",
		"upstream: {name: " + testUpstream + "}\nmethods: {InstanceMetadata: {ttl: 3m}}\nbreaker: {openTimeout: 9s}\n",
		"upstream: {name: " + testUpstream + "}\nbatch: {listInterval: 7m}\nbreaker: {minOpenTimeout: 1s}\n",
		"upstream: {name: " + testUpstream + "}\nmode: shadow\n",
	} {
		c, err := newFromConfig(strings.NewReader(file))
		if err != nil {
			t.Fatalf("%q: %v", file, err)
		}
		l := c.(*lazyCloud)
		built, err := l.build()
		if err != nil {
			t.Fatalf("%q: %v", file, err)
		}
		logged, _ := json.Marshal(l.cfg)
		runs, _ := json.Marshal(built.g.cfg)
		if !bytes.Equal(logged, runs) {
			t.Errorf("%q: logged\n%s\nruns with\n%s", file, logged, runs)
		}
		iv, ttl := built.g.cfg.Batch.ListInterval.Duration, built.g.m.instanceMetadata.ttl
		want := ttl / 2
		switch {
		case strings.Contains(file, "listInterval: 7m"):
			want = 7 * time.Minute
		case ttl == 0:
			want = time.Minute
		}
		if iv != want {
			t.Errorf("%q: list interval %v with InstanceMetadata TTL %v; want %v", file, iv, ttl, want)
		}
		l.Close()
	}
}
