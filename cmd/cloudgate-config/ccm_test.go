package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/provider"
)

// The bench CCM's upstream (bench/simcloud registers it there; TestKnownUpstreamsRegistered
// in bench/cmd/cloud-controller-manager holds the tool's list to that binary), registered here
// as a fake: the tool must accept what that CCM accepts and refuse what it refuses.
const benchUpstream = "simcloud"

func init() {
	cloudprovider.RegisterCloudProvider(benchUpstream, func(io.Reader) (cloudprovider.Interface, error) {
		return &fake.Cloud{}, nil
	})
}

// ccmLoads runs file through the CCM's path: cloudgate's registered factory (what
// --cloud-provider=cloudgate --cloud-config=file calls), then the registry lookup of
// upstream.name that building the upstream does at start-up. It returns the CCM's refusal (nil
// when it would run) and its start-up log.
func ccmLoads(t *testing.T, file string) (refusal error, log string) {
	t.Helper()
	var buf bytes.Buffer
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	defer func() {
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	}()
	c, err := cloudprovider.GetCloudProvider(provider.Name, strings.NewReader(file))
	klog.Flush()
	if err != nil {
		return err, buf.String()
	}
	defer c.(io.Closer).Close()
	cfg, err := provider.DecodeConfig(strings.NewReader(file))
	if err != nil {
		t.Fatalf("the CCM's factory accepted a file that does not decode: %v", err)
	}
	if !cloudprovider.IsCloudProvider(cfg.Upstream.Name) {
		return errUnregistered, buf.String()
	}
	return nil, buf.String()
}

var errUnregistered = &unregisteredError{}

type unregisteredError struct{}

func (*unregisteredError) Error() string { return "upstream.name is not registered in the CCM binary" }

// Every file the CCM refuses, the tool refuses, with an error naming the field; every file it
// runs, the tool accepts.
func TestRefusesWhatTheCCMRefuses(t *testing.T) {
	dir := t.TempDir()
	upstreamFile := filepath.Join(dir, "simcloud.conf")
	if err := os.WriteFile(upstreamFile, []byte("endpoint: http://127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		want       string // in the tool's error; "" for a file both run
	}{
		{"minimal", "upstream: {name: simcloud}\n", ""},
		{"configFile", "upstream: {name: simcloud, configFile: " + upstreamFile + "}\n", ""},
		{"inline config", "upstream: {name: simcloud, config: 'a: b'}\n", ""},
		{"InstanceMetadata not cached", "upstream: {name: simcloud}\nmethods: {InstanceMetadata: {ttl: 0s}}\n", ""},
		{"unknown upstream", "upstream: {name: nosuch}\n", "upstream.name"},
		{"missing upstream.name", "limits: {read: {qps: 5, burst: 5}}\n", "upstream.name is required"},
		{"upstream is cloudgate", "upstream: {name: cloudgate}\n", "upstream.name"},
		{"unreadable configFile", "upstream: {name: simcloud, configFile: " + filepath.Join(dir, "missing") + "}\n", "upstream.configFile"},
		{"configFile a directory", "upstream: {name: simcloud, configFile: " + dir + "}\n", "upstream.configFile"},
		{"config and configFile", "upstream: {name: simcloud, config: 'a: b', configFile: " + upstreamFile + "}\n", "upstream: set either"},
		{"negative TTL", "upstream: {name: simcloud}\nmethods: {InstanceMetadata: {ttl: -1s}}\n", "methods.InstanceMetadata.ttl"},
		{"TTL a number", "upstream: {name: simcloud}\nmethods: {InstanceMetadata: {ttl: 30}}\n", "methods.InstanceMetadata.ttl"},
		{"TTL of a write", "upstream: {name: simcloud}\nmethods: {CreateRoute: {ttl: 1m}}\n", "methods.CreateRoute.ttl"},
		{"zero QPS", "upstream: {name: simcloud}\nlimits: {read: {qps: 0}}\n", "limits.read.qps"},
		{"negative method QPS", "upstream: {name: simcloud}\nmethods: {InstanceMetadata: {qps: -1}}\n", "methods.InstanceMetadata"},
		{"unknown method", "upstream: {name: simcloud}\nmethods: {Frobnicate: {ttl: 1m}}\n", "methods.Frobnicate"},
		{"bad fleet duration", "upstream: {name: simcloud}\nlimits: {shared: {account: a, redis: {address: '127.0.0.1:1'}, heartbeat: 5}}\n", "limits.shared.heartbeat"},
		{"bad mode", "upstream: {name: simcloud}\nmode: observe\n", "mode"},
		{"malformed YAML", "upstream: [name: simcloud\n", "cloudgate config"},
		{"not a map", "- simcloud\n", "cloudgate config"},
		{"unknown key", "upstream: {name: simcloud}\nsise: 3\n", `unknown field "sise"`},
		{"empty", "\n", "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccmErr, _ := ccmLoads(t, tc.file)
			var out, errb bytes.Buffer
			code := run([]string{"-"}, strings.NewReader(tc.file), &out, &errb)
			switch {
			case tc.want == "" && (ccmErr != nil || code != 0):
				t.Fatalf("a good file: the CCM says %v, the tool exits %d: %s", ccmErr, code, errb.String())
			case tc.want != "" && ccmErr == nil:
				t.Fatalf("the CCM runs a file the table says is bad")
			case tc.want != "" && (code != 1 || !strings.Contains(errb.String(), tc.want)):
				t.Fatalf("the CCM refuses (%v); the tool exits %d with %q, want 1 and %q", ccmErr, code, errb.String(), tc.want)
			}
		})
	}
}

// configInLog is the configuration of the CCM's start-up line ("effective configuration").
var configInLog = regexp.MustCompile(`"cloudgate: effective configuration" .*config=("(?:[^"\\]|\\.)*")`)

// The tool prints the configuration the CCM logs at start-up (the one its gate runs with:
// provider's TestLoggedConfigIsWhatRuns), derived values included: with InstanceMetadata not
// cached, the list interval is the 1m the prefetch uses, not 0s.
func TestPrintsWhatTheCCMRuns(t *testing.T) {
	for _, file := range []string{
		"upstream: {name: simcloud}\n",
		"upstream: {name: simcloud}\nmethods: {InstanceMetadata: {ttl: 0s}}\n",
		"upstream: {name: simcloud, config: 'key: s3cr3t'}\nmethods: {InstanceMetadata: {ttl: 3m}}\nbreaker: {openTimeout: 9s}\n",
		"upstream: {name: simcloud}\nbatch: {listInterval: 7m}\nbreaker: {minOpenTimeout: 1s}\nlimits: {write: {qps: 2, burst: 3, recovery: 10s}}\n",
	} {
		ccmErr, log := ccmLoads(t, file)
		if ccmErr != nil {
			t.Fatalf("%q: the CCM refuses: %v", file, ccmErr)
		}
		m := configInLog.FindStringSubmatch(log)
		if m == nil {
			t.Fatalf("%q: no effective configuration in the CCM's log:\n%s", file, log)
		}
		logged, err := strconv.Unquote(m[1])
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if code := run([]string{"-"}, strings.NewReader(file), &out, &errb); code != 0 {
			t.Fatalf("%q: exit %d: %s", file, code, errb.String())
		}
		printed, err := yaml.YAMLToJSON(out.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		var want, got map[string]any
		if err := json.Unmarshal([]byte(logged), &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(printed, &got); err != nil {
			t.Fatal(err)
		}
		// Both redact the upstream's inline config, each in its own words.
		for _, c := range []map[string]any{want, got} {
			if u, _ := c["upstream"].(map[string]any); u["config"] != nil {
				u["config"] = "redacted"
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: the tool prints\n%s\nthe CCM runs with\n%s", file, printed, logged)
		}
		if strings.Contains(file, "ttl: 0s") && !strings.Contains(out.String(), "listInterval: 1m0s") {
			t.Errorf("InstanceMetadata not cached: want listInterval: 1m0s (what the list prefetch uses):\n%s", out.String())
		}
	}
}
