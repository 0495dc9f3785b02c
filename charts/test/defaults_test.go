package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/cmd/ccm/upstreams"
)

// stockChartDir returns the stock AWS chart (charts/aws-cloud-controller-manager of
// k8s.io/cloud-provider-aws, the version providers/aws requires) from the module cache,
// downloading the module if needed (`make deps` has).
func stockChartDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "k8s.io/cloud-provider-aws")
	cmd.Dir = "../../providers/aws" // its go.mod pins the version
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download k8s.io/cloud-provider-aws (in providers/aws): %v", err)
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download -json: %v: %s", err, out)
	}
	dir := filepath.Join(m.Dir, "charts", "aws-cloud-controller-manager")
	if _, err := os.Stat(filepath.Join(dir, "values.yaml")); err != nil {
		t.Fatalf("the stock AWS chart of k8s.io/cloud-provider-aws %s: %v", m.Version, err)
	}
	return dir
}

// stockValues returns the stock AWS chart's values.yaml.
func stockValues(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stockChartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestStockValueKeys: every key of the stock AWS chart's values.yaml (its own default
// value) either renders here or is refused at render time with a message that names the
// key and says what to do; none is silently ignored (values.schema.json refuses unknown
// keys). The keys that work must change the rendered Pod as they do in the stock chart.
func TestStockValueKeys(t *testing.T) {
	stock := stockValues(t)
	refused := map[string]string{ // key -> what the message must say
		"args":               `"--cloud-provider=aws"`,
		"serviceAccountName": "serviceAccount.name",
		"clusterRoleName":    "nameOverride",
		"roleBindingName":    "nameOverride",
		"roleName":           "nameOverride",
		"clusterRoleRules":   "least-privilege",
		"securityContext":    "security context",
		"podSecurityContext": "security context",
	}
	keys := make([]string, 0, len(stock))
	for k := range stock {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var works, refusals int
	for _, k := range append(keys, "hostNetworking") {
		v, ok := stock[k]
		if !ok { // hostNetworking: in the stock template, not its values.yaml
			v = false
		}
		objs, err := Render(chartDir, map[string]any{k: v}, nil)
		if want, isRefused := refused[k]; isRefused {
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), k) {
				t.Errorf("stock key %s=%v: error %v, want a refusal naming %s and saying %s", k, v, err, k, want)
			}
			refusals++
			continue
		}
		if err != nil {
			t.Errorf("stock key %s=%v: %v", k, v, err)
			continue
		}
		works++
		spec, _, _ := unstructured.NestedMap(find(objs, "Deployment", "").Object, "spec", "template", "spec")
		switch k {
		case "dnsPolicy":
			if spec["dnsPolicy"] != v {
				t.Errorf("dnsPolicy %v rendered %v", v, spec["dnsPolicy"])
			}
		case "nodeSelector":
			if fmt.Sprint(spec["nodeSelector"]) != fmt.Sprint(v) {
				t.Errorf("nodeSelector %v rendered %v", v, spec["nodeSelector"])
			}
		case "hostNetworking":
			if spec["hostNetwork"] != false {
				t.Errorf("hostNetworking: false rendered hostNetwork %v", spec["hostNetwork"])
			}
		case "image":
			img, _, _ := unstructured.NestedString(spec["containers"].([]any)[0].(map[string]any), "image")
			if img != "registry.k8s.io/provider-aws/cloud-controller-manager:v1.35.0" {
				t.Errorf("stock image values rendered image %q", img)
			}
		}
	}
	// Every refusal the table expects is a key the stock chart has (or templates use).
	for k := range refused {
		if _, ok := stock[k]; !ok {
			t.Errorf("the refusal of %s covers no key of the stock values.yaml", k)
		}
	}
	// The whole stock values file at once is refused (its args), never rendered half-right.
	if _, err := Render(chartDir, stock, nil); err == nil {
		t.Error("the stock chart's whole values.yaml rendered without an error")
	}
	// Stock args without --cloud-provider work; -cloud-config in any spelling does not.
	if _, err := Render(chartDir, map[string]any{"args": []any{"--v=4"}}, nil); err != nil {
		t.Errorf("args [--v=4]: %v", err)
	}
	for _, a := range []string{"--cloud-config=/etc/aws/cloud.conf", "--cloud-provider", "-cloud-provider=aws"} {
		if _, err := Render(chartDir, map[string]any{"args": []any{a}}, nil); err == nil || !strings.Contains(err.Error(), a) {
			t.Errorf("args [%s]: error %v, want a refusal naming it", a, err)
		}
	}
	t.Logf("stock values.yaml keys (+ hostNetworking): %d work here, %d refused with a message", works, refusals)
}

// TestSchemaRejectsUnknownKeys: a misspelt or foreign key fails the render, naming it, at
// the top level, inside the chart's own objects and in cloudgate's own section (its schema
// is generated from provider.Config: TestValuesSchemaCloudgate).
func TestSchemaRejectsUnknownKeys(t *testing.T) {
	for _, tc := range []struct {
		vals map[string]any
		key  string
	}{
		{map[string]any{"replica": 3}, "replica"},
		{map[string]any{"image": map[string]any{"tagg": "v1"}}, "tagg"},
		{map[string]any{"redis": map[string]any{"tls": map[string]any{"enable": true}}}, "enable"},
		{map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{"label": map[string]any{"release": "x"}}}}, "label"},
		{map[string]any{"serviceAccount": map[string]any{"create": true}}, "create"},
		{map[string]any{"metrics": map[string]any{"dashboard": map[string]any{"labels": map[string]any{"grafana_dashboard": "1"}}}}, "labels"},
		{map[string]any{"cloudgate": map[string]any{"cache": map[string]any{"ttl": "30s"}}}, "ttl"},
	} {
		if _, err := Render(chartDir, tc.vals, nil); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("values %v: error %v, want a schema error naming %q", tc.vals, err, tc.key)
		}
	}
	if _, err := Render(chartDir, map[string]any{"dnsPolicy": "ClusterFirstWithHostNet", "cloudgate": map[string]any{"cache": map[string]any{"negativeTTL": "30s"}}}, nil); err != nil {
		t.Errorf("known keys: %v", err)
	}
}

// TestSchemaRefusesUnregisteredUpstream: upstream.name is one of the providers cloudgate's
// images register — the schema's enum is upstreams.Known, which each CCM binary's tests
// hold to what that binary registers — so a misspelt name (aws-bach, which rendered and
// then ended the CCM at start, exit 255) fails `helm install`/`upgrade` (the same schema
// validation Render runs) with an error naming the field and the names it takes; every
// registered name renders.
func TestSchemaRefusesUnregisteredUpstream(t *testing.T) {
	for _, bad := range []string{"aws-bach", "AWS", "cloudgate", ""} {
		_, err := Render(chartDir, map[string]any{"upstream": map[string]any{"name": bad}}, nil)
		if err == nil || !strings.Contains(err.Error(), "/upstream/name") || !strings.Contains(err.Error(), "aws-batch") {
			t.Errorf("upstream.name %q: error %v, want a schema error naming /upstream/name and the names it takes", bad, err)
			continue
		}
		t.Logf("upstream.name %q: %v", bad, err)
	}
	for _, name := range upstreams.Known {
		vals := map[string]any{"upstream": map[string]any{"name": name}}
		if strings.HasPrefix(name, "gce") {
			// The GCE CCM's "*" runs nodeipam, which needs them (TestGCEProfileFlags).
			vals["allocateNodeCIDRs"], vals["clusterCIDR"] = true, gceClusterCIDR
		}
		if _, err := Render(chartDir, vals, nil); err != nil {
			t.Errorf("upstream.name %q (registered): %v", name, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Upstream struct {
				Properties struct {
					Name struct {
						Enum []string `json:"enum"`
					} `json:"name"`
				} `json:"properties"`
			} `json:"upstream"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Properties.Upstream.Properties.Name.Enum; !slices.Equal(got, upstreams.Known) {
		t.Errorf("values.schema.json upstream.name enum %q, want upstreams.Known %q (the providers the images register)", got, upstreams.Known)
	}
}

// TestMonitoringObjects: the ServiceMonitor and PrometheusRule carry the labels values
// (kube-prometheus-stack selects them by release=...), the ServiceMonitor authenticates with
// `authorization` (bearerTokenFile is deprecated) from the chart's own /metrics-only token
// or an existing Secret.
func TestMonitoringObjects(t *testing.T) {
	vals := map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"labels": map[string]any{"release": "kube-prometheus-stack"}},
		"prometheusRule": map[string]any{"labels": map[string]any{"release": "kube-prometheus-stack", "role": "alert-rules"}},
	}}
	objs := render(t, vals, capabilities(true))
	sm, pr := find(objs, "ServiceMonitor", ""), find(objs, "PrometheusRule", "")
	if sm.GetLabels()["release"] != "kube-prometheus-stack" || pr.GetLabels()["release"] != "kube-prometheus-stack" || pr.GetLabels()["role"] != "alert-rules" {
		t.Errorf("labels: ServiceMonitor %v, PrometheusRule %v", sm.GetLabels(), pr.GetLabels())
	}
	ep := sm.Object["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
	// The job the ServiceMonitor scrapes cloudgate as is the one the alerts select: they tell
	// cloudgate's leader_election_master_status from the stock CCM's by it.
	job := ""
	for _, r := range ep["relabelings"].([]any) {
		if r := r.(map[string]any); r["targetLabel"] == "job" && r["action"] == "replace" {
			job, _ = r["replacement"].(string)
		}
	}
	alerts, err := os.ReadFile("../../dashboards/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if job == "" || !strings.Contains(string(alerts), `leader_election_master_status{job="`+job+`"`) {
		t.Errorf("ServiceMonitor relabels job to %q, which dashboards/alerts.yaml does not select (relabelings %v)", job, ep["relabelings"])
	}
	if _, ok := ep["bearerTokenFile"]; ok {
		t.Error("the ServiceMonitor uses the deprecated bearerTokenFile")
	}
	secret, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
	if typ, _, _ := unstructured.NestedString(ep, "authorization", "type"); typ != "Bearer" || secret != workloadName+"-metrics-reader" {
		t.Errorf("authorization = %v", ep["authorization"])
	}
	tok := find(objs, "Secret", secret)
	if tok == nil || tok.Object["type"] != "kubernetes.io/service-account-token" || tok.GetAnnotations()["kubernetes.io/service-account.name"] != workloadName+"-metrics-reader" {
		t.Fatalf("token Secret %s: %v", secret, tok)
	}
	if find(objs, "ServiceAccount", workloadName+"-metrics-reader") == nil {
		t.Error("no metrics-reader ServiceAccount")
	}
	cr := find(objs, "ClusterRole", "cloudgate:"+workloadName+":metrics-reader")
	if cr == nil || fmt.Sprint(cr.Object["rules"]) != "[map[nonResourceURLs:[/metrics] verbs:[get]]]" {
		t.Errorf("metrics-reader ClusterRole: %v", cr)
	}
	// Default labels: none added; an existing Secret: no ServiceAccount or token of the chart's.
	objs = render(t, map[string]any{"metrics": map[string]any{"serviceMonitor": map[string]any{
		"authorization": map[string]any{"existingSecret": "prom-token", "key": "t"}}}}, capabilities(true))
	sm = find(objs, "ServiceMonitor", "")
	if _, ok := sm.GetLabels()["release"]; ok {
		t.Errorf("default ServiceMonitor labels %v", sm.GetLabels())
	}
	ep = sm.Object["spec"].(map[string]any)["endpoints"].([]any)[0].(map[string]any)
	if fmt.Sprint(ep["authorization"]) != "map[credentials:map[key:t name:prom-token] type:Bearer]" {
		t.Errorf("authorization with an existing Secret = %v", ep["authorization"])
	}
	if find(objs, "ServiceAccount", workloadName+"-metrics-reader") != nil || find(objs, "Secret", workloadName+"-metrics-reader") != nil {
		t.Error("the chart's metrics-reader token rendered beside an existing Secret")
	}
}

// TestConfigChecksum: the Pods' checksum annotation changes with cloudgate.yaml and with the
// upstream provider's cloud.conf (the Secret), so a change to either rolls the Pods.
func TestConfigChecksum(t *testing.T) {
	sum := func(vals map[string]any) string {
		t.Helper()
		w := find(render(t, vals, nil), "Deployment", "")
		a, _, _ := unstructured.NestedString(w.Object, "spec", "template", "metadata", "annotations", "checksum/config")
		if a == "" {
			t.Fatal("no checksum/config annotation")
		}
		return a
	}
	base := sum(nil)
	if s := sum(map[string]any{"upstream": map[string]any{"cloudConfig": "[Global]\nKubernetesClusterID = other\n"}}); s == base {
		t.Error("changing upstream.cloudConfig (the cloud.conf Secret) left checksum/config unchanged")
	}
	if s := sum(map[string]any{"cloudgate": map[string]any{"cache": map[string]any{"negativeTTL": "30s"}}}); s == base {
		t.Error("changing cloudgate.yaml left checksum/config unchanged")
	}
	if s := sum(map[string]any{"replicas": 3}); s != base {
		t.Error("checksum/config changed with a value that is in neither file")
	}
}

// TestAlertsKeepCluster: every aggregation in the alerts keeps the `cluster` label, so one
// Prometheus (or Thanos) over many clusters alerts per cluster instead of summing them.
func TestAlertsKeepCluster(t *testing.T) {
	data, err := os.ReadFile("../../dashboards/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	agg := regexp.MustCompile(`\b(sum|max|min|avg|count)\s*(by\s*\(([^)]*)\))?\s*\(`)
	n := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			for _, m := range agg.FindAllStringSubmatch(r.Expr, -1) {
				if strings.Contains(m[0], "kube_node_info") {
					continue
				}
				by := strings.Split(strings.ReplaceAll(m[3], " ", ""), ",")
				if m[1] == "count" && m[2] == "" {
					continue // count(kube_node_info): "the cluster has nodes", any cluster
				}
				if !slices.Contains(by, "cluster") {
					t.Errorf("%s: %q aggregates away the cluster label", r.Alert, m[0])
				}
				n++
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d aggregations checked", n)
	}
	t.Logf("%d aggregations keep cluster", n)
}
