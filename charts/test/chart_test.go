// Package test renders charts/cloudgate with Helm's Go SDK (helm.sh/helm/v4): the `helm
// lint` rules, every combination of the values that change the objects, cloudgate.yaml
// checked by cloudgate's own loader, and a server-side apply (dry-run) of the rendered
// objects to a real kube-apiserver, with and without the Prometheus Operator's CRDs. It is a
// nested module so Helm's dependencies never enter cloudgate's core module.
package test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/provider"
)

const chartDir = "../cloudgate"

// workloadName is the chart's default workload and ServiceAccount name; stockServiceAccount
// the stock AWS chart's ServiceAccount, which cloudgate's must not be.
const (
	workloadName        = "cloudgate-cloud-controller-manager"
	stockServiceAccount = "cloud-controller-manager"
)

// combo is one combination of the values that change which objects render and how.
type combo struct {
	kind       string // Deployment, DaemonSet
	saCreds    bool   // --use-service-account-credentials
	redis      string // "", "password", "existing-tls"
	upstream   string // aws-batch, aws, gce-batch, gce, simcloud
	monitoring bool   // the cluster serves monitoring.coreos.com/v1
}

func (c combo) String() string {
	return fmt.Sprintf("%s/sa=%v/redis=%s/%s/monitoring=%v", c.kind, c.saCreds, c.redis, c.upstream, c.monitoring)
}

func (c combo) values() map[string]any {
	v := map[string]any{
		"kind":                         c.kind,
		"useServiceAccountCredentials": c.saCreds,
		"upstream":                     map[string]any{"name": c.upstream},
	}
	if strings.HasPrefix(c.upstream, "gce") {
		// The GCE CCM's "*" runs nodeipam, which needs them (TestGCEProfileFlags).
		v["allocateNodeCIDRs"], v["clusterCIDR"] = true, gceClusterCIDR
	}
	switch c.redis {
	case "password":
		v["redis"] = map[string]any{"address": "redis.kube-system.svc:6379", "account": "123456789012", "password": "s3cret"}
	case "existing-tls":
		v["redis"] = map[string]any{"address": "master.cache.example.use1.cache.amazonaws.com:6379", "account": "123456789012",
			"username": "cloudgate", "existingSecret": "elasticache-auth",
			"tls": map[string]any{"enabled": true, "serverName": "master.cache.example.use1.cache.amazonaws.com"}}
	}
	return v
}

func combos() []combo {
	var out []combo
	for _, kind := range []string{"Deployment", "DaemonSet"} {
		for _, sa := range []bool{true, false} {
			for _, redis := range []string{"", "password", "existing-tls"} {
				for _, up := range []string{"aws-batch", "aws", "gce-batch", "gce", "simcloud"} {
					for _, mon := range []bool{false, true} {
						out = append(out, combo{kind, sa, redis, up, mon})
					}
				}
			}
		}
	}
	return out
}

// capabilities is Helm's default capabilities plus, when monitoring, the Prometheus
// Operator's kinds (what .Capabilities.APIVersions.Has sees on a cluster with its CRDs).
func capabilities(monitoring bool, extra ...string) *common.Capabilities {
	caps := common.DefaultCapabilities.Copy()
	caps.APIVersions = append(common.VersionSet{}, caps.APIVersions...)
	if monitoring {
		caps.APIVersions = append(caps.APIVersions, "monitoring.coreos.com/v1",
			"monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule")
	}
	caps.APIVersions = append(caps.APIVersions, extra...)
	return caps
}

// render renders the chart and returns its objects.
func render(t *testing.T, vals map[string]any, caps *common.Capabilities) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Render(chartDir, vals, caps)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

// TestLint runs `helm lint`'s rules (Chart.yaml, values, templates, YAML) on the chart,
// strict: a warning fails too.
func TestLint(t *testing.T) {
	for _, c := range []combo{{kind: "Deployment", saCreds: true, upstream: "aws-batch"}, {kind: "DaemonSet", redis: "existing-tls", upstream: "aws"}} {
		l := lint.RunAll(chartDir, WithTestImage(c.values()), "kube-system")
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%v: lint: %s", c, m)
			}
		}
	}
	for _, sa := range []bool{true, false} {
		l := lint.RunAll(chartDir, gceValues(t, map[string]any{"useServiceAccountCredentials": sa}), "kube-system")
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("values-gce.yaml, sa=%v: lint: %s", sa, m)
			}
		}
	}
}

// TestRender renders every combination and checks what each value promises.
func TestRender(t *testing.T) {
	for _, c := range combos() {
		objs := render(t, c.values(), capabilities(c.monitoring))
		w := find(objs, c.kind, workloadName)
		if w == nil {
			t.Fatalf("%v: no %s %s", c, c.kind, workloadName)
		}
		spec, _, _ := unstructured.NestedMap(w.Object, "spec", "template", "spec")
		if got := spec["dnsPolicy"]; got != "Default" {
			t.Errorf("%v: dnsPolicy = %v, want Default (the stock chart's: no dependency on CoreDNS)", c, got)
		}
		if got := spec["serviceAccountName"]; got != workloadName || got == stockServiceAccount {
			t.Errorf("%v: serviceAccountName = %v, want %s (not the stock chart's %s)", c, got, workloadName, stockServiceAccount)
		}
		if ns, _, _ := unstructured.NestedStringMap(spec, "nodeSelector"); ns["node-role.kubernetes.io/control-plane"] != "" || len(ns) != 1 {
			t.Errorf("%v: nodeSelector = %v, want control-plane nodes only (the stock chart's)", c, ns)
		}
		ctr := spec["containers"].([]any)[0].(map[string]any)
		args := strings.Trim(fmt.Sprint(ctr["args"]), "[]") + " "
		for _, want := range []string{"--cloud-provider=cloudgate", "--leader-elect=true", "--leader-elect-resource-name=cloud-controller-manager",
			fmt.Sprintf("--use-service-account-credentials=%v", c.saCreds), "--controllers=* ", "--configure-cloud-routes=false "} {
			if !strings.Contains(args, want) {
				t.Errorf("%v: args %s lack %s", c, args, want)
			}
		}
		if cpu, _, _ := unstructured.NestedString(ctr, "resources", "requests", "cpu"); cpu != "200m" {
			t.Errorf("%v: cpu request %q, want 200m (the AWS chart's)", c, cpu)
		}
		if spec["priorityClassName"] != "system-node-critical" {
			t.Errorf("%v: priorityClassName = %v", c, spec["priorityClassName"])
		}
		if c.kind == "Deployment" {
			if r, _, _ := unstructured.NestedFieldNoCopy(w.Object, "spec", "replicas"); fmt.Sprint(r) != "2" {
				t.Errorf("%v: replicas = %v, want 2", c, r)
			}
			if _, ok, _ := unstructured.NestedMap(spec, "affinity", "podAntiAffinity"); !ok {
				t.Errorf("%v: no pod anti-affinity", c)
			}
		}
		if find(objs, "PodDisruptionBudget", "") == nil {
			t.Errorf("%v: no PodDisruptionBudget", c)
		}
		for _, k := range []string{"Service", "ServiceMonitor", "PrometheusRule"} {
			if got := find(objs, k, "") != nil; got != c.monitoring {
				t.Errorf("%v: %s rendered = %v, want %v (only when the cluster serves monitoring.coreos.com/v1)", c, k, got, c.monitoring)
			}
		}
		// cloudgate.yaml: cloudgate's own loader accepts it, with the upstream and Redis asked.
		cm := find(objs, "ConfigMap", workloadName+"-cloudgate")
		text, _, _ := unstructured.NestedString(cm.Object, "data", "cloudgate.yaml")
		cfg, err := provider.LoadConfig(strings.NewReader(text))
		if err != nil {
			t.Fatalf("%v: provider.LoadConfig(cloudgate.yaml): %v\n%s", c, err, text)
		}
		if cfg.Upstream.Name != c.upstream {
			t.Errorf("%v: upstream %q", c, cfg.Upstream.Name)
		}
		// The default install is what the benchmark's headline measured:
		// list prefetch on (it takes effect behind an upstream that lists,
		// aws-batch).
		if !cfg.Batch.ListPrefetch {
			t.Errorf("%v: the chart's default cloudgate.yaml has batch.listPrefetch off\n%s", c, text)
		}
		if (cfg.Limits.Shared != nil) != (c.redis != "") {
			t.Errorf("%v: limits.shared = %+v", c, cfg.Limits.Shared)
		}
		if c.redis == "existing-tls" && !cfg.Limits.Shared.Redis.TLS.Enabled {
			t.Errorf("%v: redis TLS not enabled", c)
		}
		if strings.Contains(text, "s3cret") {
			t.Errorf("%v: the Redis password is in the ConfigMap", c)
		}
		// RBAC: with service-account credentials each controller's account is bound.
		crb := find(objs, "ClusterRoleBinding", "cloudgate:"+workloadName)
		subjects := fmt.Sprint(crb.Object["subjects"])
		for _, sa := range saClients {
			if got := strings.Contains(subjects, "name:"+sa+" "); got != c.saCreds {
				t.Errorf("%v: %s bound = %v", c, sa, got)
			}
		}
		// Behind GCE: the GCE provider's Role, bound to the CCM and (with service-account
		// credentials) to the provider's own client; no such Role for another upstream.
		gce := strings.HasPrefix(c.upstream, "gce")
		if got := strings.Contains(subjects, "name:"+gceProviderClient+" "); got != (gce && c.saCreds) {
			t.Errorf("%v: %s bound to the ClusterRole = %v", c, gceProviderClient, got)
		}
		role, rb := find(objs, "Role", "cloudgate:"+workloadName+":gce"), find(objs, "RoleBinding", "cloudgate:"+workloadName+":gce")
		if (role != nil) != gce || (rb != nil) != gce {
			t.Errorf("%v: GCE Role rendered = %v, RoleBinding = %v; want %v (upstream %s)", c, role != nil, rb != nil, gce, c.upstream)
		}
		if rb != nil {
			rbSubjects := fmt.Sprint(rb.Object["subjects"])
			if !strings.Contains(rbSubjects, "name:"+workloadName+" ") || strings.Contains(rbSubjects, "name:"+gceProviderClient+" ") != c.saCreds {
				t.Errorf("%v: GCE RoleBinding subjects %s", c, rbSubjects)
			}
		}
	}
}

// gceProviderClient is the GCE provider's own kube client (Cloud.Initialize: ClientOrDie("cloud-provider")).
const gceProviderClient = "cloud-provider"

// gceValues is values-gce.yaml (the GCE profile, given with -f) with vals merged over it.
func gceValues(t *testing.T, vals map[string]any) map[string]any {
	t.Helper()
	v, err := common.ReadValuesFile(filepath.Join(chartDir, "values-gce.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// As a user's --set image.repository=REGISTRY/cloudgate-gce-ccm --set clusterCIDR=....
	return mergeValues(mergeValues(v.AsMap(), map[string]any{"image": map[string]any{"repository": "registry.test/cloudgate-gce-ccm"},
		"clusterCIDR": gceClusterCIDR}), vals)
}

// gceClusterCIDR is kube-up's default CLUSTER_IP_RANGE (cloud-provider-gcp's cluster/gce).
const gceClusterCIDR = "10.64.0.0/14"

// mergeValues merges src over dst as a later -f file does (maps merge key by key, anything
// else replaces) and returns dst.
func mergeValues(dst, src map[string]any) map[string]any {
	for k, sv := range src {
		if sm, ok := sv.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = sv
	}
	return dst
}

// TestGCEProfile renders the chart with values-gce.yaml (and each credentials mode and kind):
// the GCE image, cloudgate.yaml naming gce-batch with the provider's gce.conf, accepted by
// cloudgate's loader with list prefetch on, the gce.conf in the upstream Secret, and the GCE
// provider's Role granting what providers/gce/deploy/rbac-gce.yaml grants (TestRBACOneSource
// compares them). TestGCEProfileFlags checks the CCM flags it sets.
func TestGCEProfile(t *testing.T) {
	for _, kind := range []string{"Deployment", "DaemonSet"} {
		for _, sa := range []bool{false, true} {
			objs := render(t, gceValues(t, map[string]any{"kind": kind, "useServiceAccountCredentials": sa}), nil)
			w := find(objs, kind, workloadName)
			ctr, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
			if img := fmt.Sprint(ctr[0].(map[string]any)["image"]); !strings.Contains(img, "/cloudgate-gce-ccm:") {
				t.Errorf("%s/sa=%v: image %s, want the GCE CCM's (cloudgate-gce-ccm)", kind, sa, img)
			}
			cm := find(objs, "ConfigMap", workloadName+"-cloudgate")
			text, _, _ := unstructured.NestedString(cm.Object, "data", "cloudgate.yaml")
			cfg, err := provider.LoadConfig(strings.NewReader(text))
			if err != nil {
				t.Fatalf("%s/sa=%v: provider.LoadConfig(cloudgate.yaml): %v\n%s", kind, sa, err, text)
			}
			if cfg.Upstream.Name != "gce-batch" || cfg.Upstream.ConfigFile == "" || !cfg.Batch.ListPrefetch {
				t.Errorf("%s/sa=%v: upstream %+v, list prefetch %v; want gce-batch with its config file, prefetch on", kind, sa, cfg.Upstream, cfg.Batch.ListPrefetch)
			}
			sec := find(objs, "Secret", workloadName+"-upstream")
			if conf, _, _ := unstructured.NestedString(sec.Object, "stringData", "cloud.conf"); !strings.HasPrefix(conf, "[global]") {
				t.Errorf("%s/sa=%v: upstream cloud.conf %q, want the GCE provider's gcfg ([global])", kind, sa, conf)
			}
			if find(objs, "Role", "cloudgate:"+workloadName+":gce") == nil {
				t.Errorf("%s/sa=%v: no GCE Role", kind, sa)
			}
		}
	}
}

// TestGCEProfileFlags: the GCE profile runs the CCM as kube-up runs cloud-provider-gcp's — a
// DaemonSet (one replica per control-plane node, so a single control plane schedules it and
// rolls it), nodeipam (in "*") with --allocate-node-cidrs and the cluster's CIDR, routes on —
// and refuses to render what the GCE CCM would exit on: no clusterCIDR, or nodeipam left in
// --controllers without --allocate-node-cidrs.
func TestGCEProfileFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vals    map[string]any
		want    []string
		wantErr string
	}{
		{"profile", nil, []string{"--controllers=* ", "--allocate-node-cidrs=true ", "--cluster-cidr=" + gceClusterCIDR + " ", "--configure-cloud-routes=true "}, ""},
		{"no clusterCIDR", map[string]any{"clusterCIDR": ""}, nil, "clusterCIDR is required"},
		{"kube-controller-manager allocates", map[string]any{"allocateNodeCIDRs": false, "configureCloudRoutes": false, "clusterCIDR": "", "controllers": "*,-nodeipam"},
			[]string{"--controllers=*,-nodeipam ", "--configure-cloud-routes=false "}, ""},
		{"nodeipam without allocating", map[string]any{"allocateNodeCIDRs": false}, nil, `controllers: "*" runs the GCE CCM's nodeipam`},
		{"nodeipam named without allocating", map[string]any{"allocateNodeCIDRs": false, "controllers": "cloud-node,nodeipam"}, nil, "needs allocateNodeCIDRs: true"},
		{"long name left out", map[string]any{"allocateNodeCIDRs": false, "controllers": "*,-node-ipam-controller"}, []string{"--controllers=*,-node-ipam-controller "}, ""},
	} {
		objs, err := Render(chartDir, gceValues(t, tc.vals), nil)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		w := find(objs, "DaemonSet", workloadName)
		if w == nil {
			t.Fatalf("%s: no DaemonSet %s (the GCE profile's kind)", tc.name, workloadName)
		}
		ctr, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
		args := strings.Trim(fmt.Sprint(ctr[0].(map[string]any)["args"]), "[]") + " "
		for _, want := range tc.want {
			if !strings.Contains(args, want) {
				t.Errorf("%s: args %s lack %q", tc.name, args, want)
			}
		}
		if tc.name != "profile" && strings.Contains(args, "--allocate-node-cidrs") {
			t.Errorf("%s: args %s pass --allocate-node-cidrs", tc.name, args)
		}
	}
}

// saClients are the kube client names a CCM of the AWS image uses with
// --use-service-account-credentials=true (the ServiceAccounts the chart must bind): the
// CCM's controllers (k8s.io/cloud-provider app.DefaultInitFuncConstructors: cloud-node and
// cloud-node-lifecycle share node-controller), the AWS provider's tagging controller and
// the AWS provider itself (Cloud.Initialize: aws-cloud-provider), and cloudgate's Events.
// providers/aws's e2e test runs the CCM with them and fails on any "forbidden".
var saClients = []string{"node-controller", "service-controller", "route-controller", "tagging-controller",
	"aws-cloud-provider", provider.EventsClientName}

// TestTagging: tagging.tags turns the AWS provider's tagging controller on with its flags;
// without tags "*" leaves it off (as in the AWS CCM); keys that --tags cannot carry fail.
// Likewise configureCloudRoutes needs clusterCIDR (the route controller exits without it).
func TestTagging(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tagging map[string]any
		want    []string
		wantErr string
	}{
		{"off", nil, []string{"--controllers=* "}, ""},
		{"on", map[string]any{"tags": map[string]any{"team": "platform", "cost-center": "1234"}},
			[]string{"--controllers=*,tagging ", "--tags=cost-center=1234,team=platform ", "--resources=instance "}, ""},
		{"two resources", map[string]any{"tags": map[string]any{"a": "b"}, "resources": []any{"instance", "instance"}},
			[]string{"--resources=instance --resources=instance "}, ""},
		{"routes", nil, []string{"--configure-cloud-routes=true ", "--cluster-cidr=100.96.0.0/11 "}, ""},
		{"routes without a cluster CIDR", nil, nil, "clusterCIDR is required"},
		{"comma in a key", map[string]any{"tags": map[string]any{"a,b": "c"}}, nil, `tagging.tags: "a,b"`},
		{"comma in a value", map[string]any{"tags": map[string]any{"a": "b,c"}}, nil, `tagging.tags: "a"`},
	} {
		vals := map[string]any{}
		if tc.tagging != nil {
			vals["tagging"] = tc.tagging
		}
		switch tc.name {
		case "routes":
			vals["configureCloudRoutes"], vals["clusterCIDR"] = true, "100.96.0.0/11"
		case "routes without a cluster CIDR":
			vals["configureCloudRoutes"] = true
		}
		objs, err := Render(chartDir, vals, nil)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		w := find(objs, "Deployment", workloadName)
		ctr := w.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		args := strings.Trim(fmt.Sprint(ctr["args"]), "[]") + " "
		for _, want := range tc.want {
			if !strings.Contains(args, want) {
				t.Errorf("%s: args %s lack %q", tc.name, args, want)
			}
		}
		if tc.tagging == nil && strings.Contains(args, "--tags") {
			t.Errorf("%s: args %s pass --tags", tc.name, args)
		}
	}
}

// chartFiles are the files the chart ships from dashboards/ (`make chart-sync` copies them:
// a chart can only read files inside it).
var chartFiles = []string{"alerts.yaml", "cloudgate.json"}

// TestFilesCopy: the chart's copies of dashboards/ are identical to the originals, and the
// PrometheusRule's alerts are dashboards/alerts.yaml's.
func TestFilesCopy(t *testing.T) {
	for _, f := range chartFiles {
		orig, err := os.ReadFile(filepath.Join("../../dashboards", f))
		if err != nil {
			t.Fatal(err)
		}
		cp, err := os.ReadFile(filepath.Join(chartDir, "files", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(orig, cp) {
			t.Errorf("charts/cloudgate/files/%s differs from dashboards/%s: run `make chart-sync`", f, f)
		}
	}
	orig, err := os.ReadFile("../../dashboards/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := render(t, nil, capabilities(true))
	rule := find(objs, "PrometheusRule", "")
	var want map[string]any
	if err := yaml.Unmarshal(orig, &want); err != nil {
		t.Fatal(err)
	}
	got, _ := yaml.Marshal(rule.Object["spec"])
	wantY, _ := yaml.Marshal(want)
	if !bytes.Equal(got, wantY) {
		t.Errorf("PrometheusRule spec differs from dashboards/alerts.yaml")
	}
	if !strings.Contains(string(got), "{{ $labels.") {
		t.Error("the alerts' {{ $labels }} templates were consumed by Helm")
	}
}

// TestDashboardConfigMap: metrics.dashboard.enabled ships dashboards/cloudgate.json byte for
// byte in a ConfigMap labelled as Grafana's dashboard sidecar selects (kube-prometheus-stack's
// grafana_dashboard: "1" by default, or the label and value set), whether or not the
// cluster serves the Prometheus Operator's CRDs; nothing by default.
func TestDashboardConfigMap(t *testing.T) {
	orig, err := os.ReadFile("../../dashboards/cloudgate.json")
	if err != nil {
		t.Fatal(err)
	}
	name := workloadName + "-dashboard"
	for _, mon := range []bool{false, true} {
		if cm := find(render(t, nil, capabilities(mon)), "ConfigMap", name); cm != nil {
			t.Errorf("monitoring=%v: dashboard ConfigMap rendered by default", mon)
		}
	}
	for _, tc := range []struct {
		dashboard        map[string]any
		label, value, ns string
		annotations      map[string]string
	}{
		{map[string]any{"enabled": true}, "grafana_dashboard", "1", "kube-system", nil},
		{map[string]any{"enabled": true, "label": "grafana.example.com/dashboard", "labelValue": "cloud",
			"namespace": "monitoring", "annotations": map[string]any{"grafana_folder": "Kubernetes"}},
			"grafana.example.com/dashboard", "cloud", "monitoring", map[string]string{"grafana_folder": "Kubernetes"}},
	} {
		for _, mon := range []bool{false, true} {
			objs := render(t, map[string]any{"metrics": map[string]any{"dashboard": tc.dashboard}}, capabilities(mon))
			cm := find(objs, "ConfigMap", name)
			if cm == nil {
				t.Fatalf("%v, monitoring=%v: no ConfigMap %s", tc.dashboard, mon, name)
			}
			if got := cm.GetLabels()[tc.label]; got != tc.value {
				t.Errorf("%v: label %s = %q, want %q (labels %v)", tc.dashboard, tc.label, got, tc.value, cm.GetLabels())
			}
			if cm.GetNamespace() != tc.ns {
				t.Errorf("%v: namespace %q, want %q", tc.dashboard, cm.GetNamespace(), tc.ns)
			}
			if fmt.Sprint(cm.GetAnnotations()) != fmt.Sprint(tc.annotations) {
				t.Errorf("%v: annotations %v, want %v", tc.dashboard, cm.GetAnnotations(), tc.annotations)
			}
			data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
			if len(data) != 1 || data["cloudgate.json"] != string(orig) {
				t.Errorf("%v: data is not dashboards/cloudgate.json (keys %d, %d bytes of %d)", tc.dashboard, len(data), len(data["cloudgate.json"]), len(orig))
			}
		}
	}
	if _, err := Render(chartDir, map[string]any{"metrics": map[string]any{"dashboard": map[string]any{"enabled": true, "labelValue": "not a label value"}}}, nil); err == nil {
		t.Error("a labelValue Kubernetes refuses rendered")
	}
}

// TestImageReference: the workload's image is repository:tag (the tag defaulting to the
// appVersion) or, with image.digest, repository@digest whatever the tag; the schema refuses
// a digest that is not sha256:<64 hex>; without image.repository the chart refuses to render,
// naming the key (cloudgate publishes to no registry, so there is no default to fall back on).
func TestImageReference(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	image := func(vals map[string]any) string {
		t.Helper()
		objs := render(t, vals, nil)
		for _, kind := range []string{"Deployment", "DaemonSet"} {
			if w := find(objs, kind, workloadName); w != nil {
				ctrs, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
				return fmt.Sprint(ctrs[0].(map[string]any)["image"])
			}
		}
		t.Fatal("no workload rendered")
		return ""
	}
	for _, tc := range []struct {
		img  map[string]any
		want string
	}{
		{map[string]any{"repository": "r.example/cloudgate-aws-ccm", "tag": "v9.9.9"}, "r.example/cloudgate-aws-ccm:v9.9.9"},
		{map[string]any{"repository": "r.example/cloudgate-aws-ccm", "digest": digest}, "r.example/cloudgate-aws-ccm@" + digest},
		{map[string]any{"repository": "r.example/cloudgate-aws-ccm", "tag": "v9.9.9", "digest": digest}, "r.example/cloudgate-aws-ccm@" + digest},
	} {
		for _, kind := range []string{"Deployment", "DaemonSet"} {
			if got := image(map[string]any{"kind": kind, "image": tc.img}); got != tc.want {
				t.Errorf("%s, image %v: %s, want %s", kind, tc.img, got, tc.want)
			}
		}
	}
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := image(map[string]any{}), TestImageRepository+":"+ch.Metadata.AppVersion; got != want {
		t.Errorf("no tag: %s, want %s (the appVersion)", got, want)
	}
	for _, bad := range []string{"sha256:abc", strings.TrimPrefix(digest, "sha256:"), "sha512:" + strings.Repeat("ab", 32), strings.ToUpper(digest), digest + "\n"} {
		_, err := Render(chartDir, map[string]any{"image": map[string]any{"repository": "r.example/x", "digest": bad}}, nil)
		if err == nil || !strings.Contains(err.Error(), "digest") {
			t.Errorf("digest %q: %v, want the schema's refusal naming image.digest", bad, err)
		}
	}
	for _, vals := range []map[string]any{{"image": map[string]any{"repository": ""}}, gceValues(t, map[string]any{"image": map[string]any{"repository": ""}})} {
		_, err := Render(chartDir, vals, nil)
		if err == nil || !strings.Contains(err.Error(), "image.repository is required") {
			t.Errorf("no repository: %v, want the chart's refusal naming image.repository", err)
		}
	}
}
