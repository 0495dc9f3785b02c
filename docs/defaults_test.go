package docs

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/provider"
)

// codeDefaults returns every default a page may quote, by its key's path: cloudgate.yaml's
// (provider.DefaultConfig, and the values its fields' comments say 0 stands for: the fleet's
// constants, batch.listInterval), and the Helm chart's values.yaml (prefixed "chart.").
func codeDefaults(t *testing.T) map[string]any {
	t.Helper()
	out := map[string]any{}
	b, err := json.Marshal(provider.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	flatten("", cfg, out)
	shared := map[string]any{
		"weight": fleet.DefaultWeight, "minShare": fleet.DefaultMinShare, "criticalShare": fleet.DefaultCriticalShare,
		"redisTimeout": fleet.DefaultRedisTimeout.String(), "fallbackAfter": fleet.DefaultFallbackAfter,
		"heartbeat": fleet.DefaultHeartbeat.String(), "recovery": fleet.DefaultRecovery.String(),
		"forgetAfter": (fleet.DefaultHeartbeat * fleet.DefaultForgetAfterHeartbeats).String(), "failureMode": fleet.FailureOpen,
	}
	for k, v := range shared {
		out["limits.shared."+k] = v
	}
	out["batch.listInterval"] = (provider.DefaultTTLs()["InstanceMetadata"] / 2).String()
	data, err := os.ReadFile("../charts/cloudgate/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(data, &vals); err != nil {
		t.Fatal(err)
	}
	flatten("chart.", vals, out)
	return out
}

func flatten(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			flatten(prefix+k+".", sub, out)
			continue
		}
		out[prefix+k] = v
	}
}

// defaultRE is how the pages quote a default: "`key` (default VALUE".
var defaultRE = regexp.MustCompile("`([A-Za-z][A-Za-z0-9.]*)` \\(default ([^),;]+)")

// lookup finds the one default whose path ends in key ("criticalShare" is
// limits.shared.criticalShare); ok is false when none or several do.
func lookup(defaults map[string]any, key string) (string, any, bool) {
	var hits []string
	for p := range defaults {
		if p == key || p == "chart."+key || strings.HasSuffix(p, "."+key) {
			hits = append(hits, p)
		}
	}
	if len(hits) == 1 {
		return hits[0], defaults[hits[0]], true
	}
	return "", nil, false
}

// quoted parses a default as a page writes it: 20 %, 50 ms, 10 m, 5 min, 3, `10258`.
func quoted(s string) (float64, bool) {
	s = strings.TrimSpace(strings.Trim(strings.TrimSpace(s), "`"))
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return f, true
	}
	if n, ok := strings.CutSuffix(s, "%"); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(n), 64); err == nil {
			return f / 100, true
		}
	}
	d := strings.NewReplacer(" ", "", "min", "m", "sec", "s").Replace(s)
	if dur, err := time.ParseDuration(d); err == nil {
		return dur.Seconds(), true
	}
	return 0, false
}

// inCode turns a default from the code or values.yaml into the same unit as quoted.
func inCode(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	case string:
		if d, err := time.ParseDuration(v); err == nil {
			return d.Seconds(), true
		}
		f, err := strconv.ParseFloat(v, 64)
		return f, err == nil
	}
	return 0, false
}

// checkDefaults returns one line per default quoted in text that disagrees with the code,
// and how many quoted defaults it compared.
func checkDefaults(defaults map[string]any, page, text string) (bad []string, compared int) {
	for _, m := range defaultRE.FindAllStringSubmatchIndex(text, -1) {
		key, val := text[m[2]:m[3]], text[m[4]:m[5]]
		path, def, ok := lookup(defaults, key)
		if !ok {
			continue
		}
		q, ok1 := quoted(val)
		c, ok2 := inCode(def)
		if !ok1 || !ok2 {
			continue
		}
		compared++
		if diff := q - c; diff > 1e-9 || diff < -1e-9 {
			line := strings.Count(text[:m[0]], "\n") + 1
			bad = append(bad, fmt.Sprintf("%s:%d: `%s` (default %s), but %s's default is %v", page, line, key, val, path, def))
		}
	}
	return bad, compared
}

// TestQuotedDefaults: every "`key` (default VALUE)" in README.md and docs/*.md agrees with
// the code's or the chart's default for that key.
func TestQuotedDefaults(t *testing.T) {
	defaults := codeDefaults(t)
	total := 0
	for _, p := range pages(t) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bad, n := checkDefaults(defaults, p, string(data))
		total += n
		for _, b := range bad {
			t.Error(b)
		}
	}
	if total < 5 {
		t.Errorf("only %d quoted defaults compared: the pattern no longer matches how the pages quote them", total)
	}
	t.Logf("%d quoted defaults compared with the code and the chart", total)
	// The check can fail: a stale forgetAfter and a stale chart port are caught.
	for _, stale := range []string{"`limits.shared.forgetAfter` (default 2 min)", "`metrics.port` (default 10258)"} {
		if bad, _ := checkDefaults(defaults, "stale.md", stale); len(bad) != 1 {
			t.Errorf("%q: not caught (%v)", stale, bad)
		}
	}
}

// selectorRE is a kubectl label selector in a page: -l key=value or --selector key=value.
var selectorRE = regexp.MustCompile(`(?:-l|--selector)[ =]([a-z0-9./-]*app[a-z0-9./-]*)=([A-Za-z0-9._-]+)`)

// TestLabelSelectors: every `kubectl -l ...app=...` in README.md and docs/*.md selects Pods
// that exist: cloudgate's (the chart's selector label, k8s-app=nameOverride, and deploy/'s
// manifests) or the stock AWS chart's (k8s-app=aws-cloud-controller-manager).
func TestLabelSelectors(t *testing.T) {
	data, err := os.ReadFile("../charts/cloudgate/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vals struct {
		NameOverride string `json:"nameOverride"`
	}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		t.Fatal(err)
	}
	helpers, err := os.ReadFile("../charts/cloudgate/templates/_helpers.tpl")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(helpers), "k8s-app: {{ include \"cloudgate.name\" . }}") {
		t.Fatal("the chart's selector label is no longer k8s-app: <name>: update this test")
	}
	known := []string{"k8s-app=" + vals.NameOverride, "k8s-app=aws-cloud-controller-manager"}
	for _, f := range []string{"../deploy/deployment.yaml", "../deploy/daemonset.yaml"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^      (k8s-app): (\S+)$`).FindStringSubmatch(string(data))
		if m == nil {
			t.Fatalf("%s: no selector label", f)
		}
		known = append(known, m[1]+"="+m[2])
	}
	bad := func(text string) []string {
		var out []string
		for _, m := range selectorRE.FindAllStringSubmatch(text, -1) {
			if sel := m[1] + "=" + m[2]; !slices.Contains(known, sel) {
				out = append(out, sel)
			}
		}
		return out
	}
	checked := 0
	for _, p := range pages(t) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		checked += len(selectorRE.FindAllString(string(data), -1))
		for _, sel := range bad(string(data)) {
			sort.Strings(known)
			t.Errorf("%s: kubectl selector %s selects no Pod of cloudgate's chart or manifests (labels: %s)", p, sel, strings.Join(known, ", "))
		}
	}
	t.Logf("%d selectors checked against %v", checked, known)
	if got := bad("kubectl -n kube-system get pods -l app=cloud-controller-manager"); len(got) != 1 {
		t.Errorf("a stale selector was not caught: %v", got)
	}
}
