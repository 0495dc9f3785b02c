package test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/provider"
)

// TestValuesSchemaCloudgate: values.schema.json's `cloudgate` block is the one generated
// from provider.Config (CloudgateSchema). CLOUDGATE_UPDATE_SCHEMA=1 writes it.
func TestValuesSchemaCloudgate(t *testing.T) {
	file := filepath.Join(chartDir, "values.schema.json")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	want, err := CloudgateSchema()
	if err != nil {
		t.Fatal(err)
	}
	// Through JSON, so that both sides hold the same Go types.
	wb, _ := json.Marshal(want)
	var wantJ any
	_ = json.Unmarshal(wb, &wantJ)
	got := doc["properties"].(map[string]any)["cloudgate"]
	if reflect.DeepEqual(got, wantJ) {
		return
	}
	if os.Getenv("CLOUDGATE_UPDATE_SCHEMA") == "" {
		t.Fatalf("values.schema.json's cloudgate block is not the one generated from provider.Config: run CLOUDGATE_UPDATE_SCHEMA=1 go test -run TestValuesSchemaCloudgate ./ in charts/test")
	}
	// Rewrite only the cloudgate block, keeping the file's key order elsewhere.
	var ordered orderedObject
	if err := json.Unmarshal(data, &ordered); err != nil {
		t.Fatal(err)
	}
	for i, kv := range ordered {
		if kv.key == "properties" {
			var props orderedObject
			if err := json.Unmarshal(kv.raw, &props); err != nil {
				t.Fatal(err)
			}
			for j := range props {
				if props[j].key == "cloudgate" {
					props[j].raw = wb
				}
			}
			ordered[i].raw, _ = json.Marshal(props)
		}
	}
	out, _ := json.Marshal(ordered)
	var buf bytes.Buffer
	if err := json.Indent(&buf, out, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", file)
}

// orderedObject is a JSON object whose key order survives a round trip.
type orderedObject []struct {
	key string
	raw json.RawMessage
}

func (o *orderedObject) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		*o = append(*o, struct {
			key string
			raw json.RawMessage
		}{k.(string), raw})
	}
	return nil
}

func (o orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(kv.raw)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// TestSchemaAgreesWithLoader: for each `cloudgate:` value below, `helm install` (the
// chart's schema, then its templates) refuses it exactly when cloudgate's own loader
// (provider.LoadConfig, what the CCM runs at start) refuses the cloudgate.yaml it stands
// for; the values the chart's comments and docs show are accepted by both. Rules that tie
// two fields together are the loader's alone (loaderOnly): for those the chart renders and
// the CCM refuses at start, which the readinessProbe keeps from taking down a rollout.
func TestSchemaAgreesWithLoader(t *testing.T) {
	redis := map[string]any{"address": "redis.example:6379", "account": "123456789012"}
	for _, tc := range []struct {
		name       string
		cloudgate  string // YAML
		redis      bool
		loaderOnly bool
		chartOwned bool // a key the chart sets itself: refused in values whatever the loader says
	}{
		{name: "empty", cloudgate: `{}`},
		{name: "values.yaml's example", cloudgate: "cache: {negativeTTL: 30s}\nmethods: {InstanceMetadata: {ttl: 5m}}\nlimits: {read: {qps: 20, burst: 100}}"},
		{name: "cache.ttl (no such key)", cloudgate: "cache: {ttl: 60s}"},
		{name: "brust (misspelt)", cloudgate: "limits: {read: {qps: 10, brust: 20}}"},
		{name: "negative qps", cloudgate: "limits: {read: {qps: -5, burst: 20}}"},
		{name: "zero qps", cloudgate: "limits: {write: {qps: 0, burst: 20}}"},
		{name: "burst 0", cloudgate: "limits: {read: {qps: 5, burst: 0}}"},
		{name: "fractional burst", cloudgate: "limits: {read: {qps: 5, burst: 2.5}}"},
		{name: "duration without unit", cloudgate: "cache: {negativeTTL: 30}"},
		{name: "bad duration", cloudgate: "cache: {staleIfError: 10 minutes}"},
		{name: "negative duration", cloudgate: "batch: {listInterval: -1s}"},
		{name: "mode", cloudgate: "mode: dry-run"},
		{name: "shadow", cloudgate: "mode: shadow"},
		{name: "cache size 0", cloudgate: "cache: {size: 0}"},
		{name: "unknown method", cloudgate: "methods: {DescribeInstances: {ttl: 1m}}"},
		{name: "ttl on a write", cloudgate: "methods: {EnsureLoadBalancer: {ttl: 1m}}"},
		{name: "method bucket", cloudgate: "methods: {GetLoadBalancer: {qps: 2, burst: 4}}"},
		{name: "negative method qps", cloudgate: "methods: {GetLoadBalancer: {qps: -2, burst: 4}}"},
		{name: "method qps without burst", cloudgate: "methods: {GetLoadBalancer: {qps: 2}}", loaderOnly: true},
		{name: "breaker ratio above 1", cloudgate: "breaker: {failureRatio: 1.5}"},
		{name: "half-open 0", cloudgate: "breaker: {halfOpenRequests: 0}"},
		{name: "batch size 0", cloudgate: "batch: {maxSize: 0}"},
		{name: "batch maxWait 0", cloudgate: "batch: {maxWait: 0s}", loaderOnly: true},
		{name: "throttle pattern", cloudgate: "throttle: {patterns: [SlowDown]}"},
		{name: "empty throttle pattern", cloudgate: "throttle: {patterns: ['']}"},
		{name: "upstream (the chart's)", cloudgate: "upstream: {name: aws}", chartOwned: true},
		{name: "shared settings", redis: true, cloudgate: "limits: {shared: {failureMode: closed, maxMembers: 3, weight: 2}}"},
		{name: "shared failureMode", redis: true, cloudgate: "limits: {shared: {failureMode: shut}}"},
		{name: "shared maxMembers", redis: true, cloudgate: "limits: {shared: {maxMembers: -1}}"},
		{name: "shared minShare", redis: true, cloudgate: "limits: {shared: {minShare: 2}}"},
		{name: "shared criticalShare 1", redis: true, cloudgate: "limits: {shared: {criticalShare: 1}}"},
		{name: "shared redis (from redis.*)", redis: true, cloudgate: "limits: {shared: {redis: {address: other:6379}}}", chartOwned: true},
		{name: "shared forgetAfter below 10 heartbeats", redis: true, cloudgate: "limits: {shared: {heartbeat: 1s, forgetAfter: 5s}}", loaderOnly: true},
		{name: "shared without redis.address", cloudgate: "limits: {shared: {failureMode: closed}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cg map[string]any
			if err := yaml.Unmarshal([]byte(tc.cloudgate), &cg); err != nil {
				t.Fatal(err)
			}
			vals := map[string]any{"cloudgate": cg}
			if tc.redis {
				vals["redis"] = redis
			}
			objs, helmErr := Render(chartDir, vals, nil)
			// What the loader sees: the rendered cloudgate.yaml, or (when Helm refused) the
			// same sections with the upstream and fleet the chart would have added.
			var text string
			if helmErr == nil {
				cm := find(objs, "ConfigMap", workloadName+"-cloudgate")
				text, _, _ = unstructured.NestedString(cm.Object, "data", "cloudgate.yaml")
			} else {
				full := map[string]any{}
				for k, v := range cg {
					full[k] = v
				}
				full["upstream"] = map[string]any{"name": "aws-batch"}
				if tc.redis {
					l, _ := full["limits"].(map[string]any)
					if l == nil {
						l = map[string]any{}
					}
					sh, _ := l["shared"].(map[string]any)
					if sh == nil {
						sh = map[string]any{}
					}
					sh["redis"], sh["account"] = map[string]any{"address": redis["address"]}, redis["account"]
					l["shared"], full["limits"] = sh, l
				}
				b, _ := yaml.Marshal(full)
				text = string(b)
			}
			_, loadErr := provider.LoadConfig(strings.NewReader(text))
			t.Logf("helm: %v; loader: %v", helmErr, loadErr)
			switch {
			case tc.chartOwned:
				if helmErr == nil {
					t.Errorf("want refused by the chart (upstream.* and redis.* set it); it rendered")
				}
			case tc.loaderOnly:
				if helmErr != nil || loadErr == nil {
					t.Errorf("want rendered by the chart and refused by the loader only; helm: %v, loader: %v", helmErr, loadErr)
				}
			case (helmErr == nil) != (loadErr == nil):
				t.Errorf("helm and the loader disagree:\nhelm:   %v\nloader: %v\ncloudgate.yaml:\n%s", helmErr, loadErr, text)
			}
			if helmErr != nil && !strings.Contains(helmErr.Error(), "cloudgate") {
				t.Errorf("helm's error does not name the cloudgate value: %v", helmErr)
			}
		})
	}
}

// TestSharedKeysReachConfig: every limits.shared key set under `cloudgate:` with
// redis.address reaches the rendered cloudgate.yaml with its value (one value per key of
// the fleet's config, redis and account aside: those come from redis.*).
func TestSharedKeysReachConfig(t *testing.T) {
	values := map[string]any{
		"weight": 2.5, "minShare": 0.2, "criticalShare": 0.3, "backgroundShare": 0.4, "redisTimeout": "150ms",
		"fallbackAfter": 7, "failureMode": "closed", "maxMembers": 3, "heartbeat": "2s", "forgetAfter": "5m", "recovery": "45s",
	}
	schema, err := CloudgateSchema()
	if err != nil {
		t.Fatal(err)
	}
	keys := schema["properties"].(map[string]any)["limits"].(map[string]any)["properties"].(map[string]any)["shared"].(map[string]any)["properties"].(map[string]any)
	for k := range keys {
		if _, ok := values[k]; !ok {
			t.Errorf("limits.shared.%s: a key of the fleet's config this test sets no value for", k)
		}
	}
	for k, v := range values {
		t.Run(k, func(t *testing.T) {
			objs := render(t, map[string]any{
				"redis":     map[string]any{"address": "redis.example:6379", "account": "123456789012", "password": "p"},
				"cloudgate": map[string]any{"limits": map[string]any{"shared": map[string]any{k: v}}},
			}, nil)
			cm := find(objs, "ConfigMap", workloadName+"-cloudgate")
			text, _, _ := unstructured.NestedString(cm.Object, "data", "cloudgate.yaml")
			var doc map[string]any
			if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
				t.Fatal(err)
			}
			shared, _, _ := unstructured.NestedMap(doc, "limits", "shared")
			if fmt.Sprint(shared[k]) != fmt.Sprint(v) {
				t.Errorf("limits.shared.%s = %v in cloudgate.yaml, want %v:\n%s", k, shared[k], v, text)
			}
			if shared["account"] != "123456789012" || shared["redis"] == nil {
				t.Errorf("limits.shared lost redis/account:\n%s", text)
			}
			if _, err := provider.LoadConfig(strings.NewReader(text)); err != nil {
				t.Errorf("provider.LoadConfig: %v\n%s", err, text)
			}
		})
	}
}
