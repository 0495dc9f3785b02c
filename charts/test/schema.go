package test

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/provider"
)

// CloudgateSchema returns the JSON schema of the chart's `cloudgate:` values (cloudgate.yaml
// less upstream, which the chart sets), generated from provider.Config: its keys (json tags,
// every object closed as the loader's strict decoding is), their types, and the bounds the
// loader checks field by field (limits below, each one a rule of provider.Config.Validate or
// of what it calls). Method names, and which of them take a ttl, are asked of
// provider.LoadConfig itself. Rules that tie two fields together (limits.shared.forgetAfter
// against heartbeat, a method's qps with its burst, duration ranges) stay the loader's: the
// chart tests render with cloudgate's loader (TestSchemaAgreesWithLoader).
func CloudgateSchema() (map[string]any, error) {
	methods, cached, err := loaderMethods()
	if err != nil {
		return nil, err
	}
	s := typeSchema(reflect.TypeFor[provider.Config](), "")
	props := s["properties"].(map[string]any)
	delete(props, "upstream") // the chart's: upstream.name, upstream.cloudConfig
	shared := props["limits"].(map[string]any)["properties"].(map[string]any)["shared"].(map[string]any)
	sharedProps := shared["properties"].(map[string]any)
	delete(sharedProps, "redis") // from redis.* values (the password Secret is mounted to match)
	delete(sharedProps, "account")
	shared["description"] = "The fleet's settings (docs/fleet.md); redis and account come from the redis.* values, which are required with it."

	m := props["methods"].(map[string]any)
	perMethod := m["additionalProperties"].(map[string]any)
	delete(m, "additionalProperties")
	mp := map[string]any{}
	for _, name := range methods {
		ms := deepCopyMap(perMethod)
		if !slices.Contains(cached, name) {
			delete(ms["properties"].(map[string]any), "ttl") // a write, or a read cloudgate does not cache
		}
		mp[name] = ms
	}
	m["properties"], m["additionalProperties"] = mp, false
	s["type"] = []any{"object", "null"}
	s["description"] = "cloudgate.yaml's sections other than upstream (docs/ccm.md, provider.Config), generated from provider.Config and checked against provider.LoadConfig (charts/test: go test -run TestValuesSchemaCloudgate, CLOUDGATE_UPDATE_SCHEMA=1 rewrites it)."
	return s, nil
}

// durationPattern is a Go duration (time.ParseDuration) that is not negative: what every
// duration field of cloudgate.yaml takes.
const durationPattern = `^(0|([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))*$`

// limits are the per-field bounds of provider.Config.Validate (and the limiter, breaker,
// cache and fleet Validate it calls), by path; "*" is any method name.
var limits = map[string]map[string]any{
	"mode":                          {"enum": []any{"enforce", "shadow"}},
	"cache.size":                    {"minimum": 1},
	"limits.read.qps":               {"exclusiveMinimum": 0},
	"limits.read.burst":             {"minimum": 1},
	"limits.write.qps":              {"exclusiveMinimum": 0},
	"limits.write.burst":            {"minimum": 1},
	"limits.shared.weight":          {"minimum": 0},
	"limits.shared.minShare":        {"minimum": 0, "maximum": 1},
	"limits.shared.criticalShare":   {"minimum": 0, "exclusiveMaximum": 1},
	"limits.shared.backgroundShare": {"exclusiveMinimum": 0, "maximum": 1},
	"limits.shared.failureMode":     {"enum": []any{"", "open", "closed"}},
	"limits.shared.maxMembers":      {"minimum": 0, "maximum": 10000},
	"limits.shared.fallbackAfter":   {"minimum": 0, "maximum": 100},
	"breaker.failureRatio":          {"exclusiveMinimum": 0, "maximum": 1},
	"breaker.halfOpenRequests":      {"minimum": 1},
	"methods.*.qps":                 {"minimum": 0},
	"methods.*.burst":               {"minimum": 0},
	"batch.maxSize":                 {"minimum": 1},
	"throttle.patterns.items":       {"minLength": 1},
}

// durationTypes are the config's duration types: provider's (metav1.Duration) and the fleet's
// own (limits.shared: the limiter does not depend on apimachinery); both read "30s" strings.
var durationTypes = []reflect.Type{reflect.TypeFor[metav1.Duration](), reflect.TypeFor[fleet.Duration]()}

// typeSchema is the schema of t at path (dot-separated json names).
func typeSchema(t reflect.Type, path string) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var s map[string]any
	switch {
	case slices.Contains(durationTypes, t):
		s = map[string]any{"type": "string", "pattern": durationPattern}
	case t.Kind() == reflect.Struct:
		props := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			props[name] = typeSchema(f.Type, join(path, name))
		}
		s = map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	case t.Kind() == reflect.Map:
		s = map[string]any{"type": "object", "additionalProperties": typeSchema(t.Elem(), join(path, "*"))}
	case t.Kind() == reflect.Slice:
		s = map[string]any{"type": "array", "items": typeSchema(t.Elem(), join(path, "items"))}
	case t.Kind() == reflect.String:
		s = map[string]any{"type": "string"}
	case t.Kind() == reflect.Bool:
		s = map[string]any{"type": "boolean"}
	case t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32:
		s = map[string]any{"type": "number"}
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64:
		s = map[string]any{"type": "integer"}
	case t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64:
		s = map[string]any{"type": "integer", "minimum": 0}
	default:
		panic(fmt.Sprintf("cloudgate schema: %s: no JSON schema for Go type %s", path, t))
	}
	for k, v := range limits[path] {
		s[k] = v
	}
	return s
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// loaderMethods asks provider.LoadConfig for the method names methods.* takes (its error
// for an unknown one lists them) and which of them take a ttl (it refuses a ttl on a write
// or on a read it does not cache).
func loaderMethods() (all, cached []string, err error) {
	_, lerr := provider.LoadConfig(strings.NewReader("upstream: {name: x}\nmethods: {NoSuchMethod: {}}\n"))
	if lerr == nil {
		return nil, nil, fmt.Errorf("provider.LoadConfig took methods.NoSuchMethod")
	}
	m := regexp.MustCompile(`known methods: ([A-Za-z, ]+)`).FindStringSubmatch(lerr.Error())
	if m == nil {
		return nil, nil, fmt.Errorf("provider.LoadConfig's error for an unknown method lists no methods: %v", lerr)
	}
	all = strings.Split(m[1], ", ")
	for _, name := range all {
		if _, err := provider.LoadConfig(strings.NewReader(fmt.Sprintf("upstream: {name: x}\nmethods: {%s: {ttl: 1s}}\n", name))); err == nil {
			cached = append(cached, name)
		}
	}
	return all, cached, nil
}

func deepCopyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = deepCopyMap(sub)
		}
		out[k] = v
	}
	return out
}
