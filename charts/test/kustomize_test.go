package test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/cloudgate/cloudgate/provider"
)

// kustomize builds a kustomization directory as `kubectl kustomize DIR` does.
func kustomize(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// awsOverlay writes a user's overlay of deploy/ with deploy/components/aws, outside deploy/
// (kustomize refuses an overlay inside its base), and returns its directory.
func awsOverlay(t *testing.T) string {
	t.Helper()
	overlay := t.TempDir()
	abs, err := filepath.Abs("../../deploy")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(overlay, abs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(
		"resources: ["+rel+"]\ncomponents: ["+rel+"/components/aws]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return overlay
}

// TestKustomize builds deploy/ (the base) and a user's overlay of it with deploy/components/aws, both with
// sigs.k8s.io/kustomize/api: the same objects, the overlay's cloudgate.yaml naming aws-batch
// through provider.LoadConfig, its CCM flags those of the AWS drop-in, and the RBAC binding
// every controller's ServiceAccount.
func TestKustomize(t *testing.T) {
	base, aws := kustomize(t, "../../deploy"), kustomize(t, awsOverlay(t))
	ids := func(objs []*unstructured.Unstructured) string {
		var s []string
		for _, o := range objs {
			s = append(s, o.GetKind()+"/"+o.GetName())
		}
		return strings.Join(s, " ")
	}
	if ids(base) != ids(aws) {
		t.Errorf("overlay objects %s\ndiffer from the base's %s", ids(aws), ids(base))
	}
	for _, k := range []string{"Deployment", "PodDisruptionBudget", "ServiceAccount", "ClusterRole", "ConfigMap", "Secret"} {
		if find(base, k, "") == nil {
			t.Errorf("the base has no %s", k)
		}
	}
	for name, objs := range map[string][]*unstructured.Unstructured{"base": base, "aws": aws} {
		d := find(objs, "Deployment", "cloudgate-cloud-controller-manager")
		spec, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
		if spec["dnsPolicy"] != "Default" {
			t.Errorf("%s: dnsPolicy = %v", name, spec["dnsPolicy"])
		}
		ctr := spec["containers"].([]any)[0].(map[string]any)
		if cpu, _, _ := unstructured.NestedString(ctr, "resources", "requests", "cpu"); cpu != "200m" {
			t.Errorf("%s: cpu request %q, want 200m", name, cpu)
		}
	}
	d := find(aws, "Deployment", "cloudgate-cloud-controller-manager")
	ctr := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	cmd := fmt.Sprint(ctr["command"])
	for _, want := range []string{"--use-service-account-credentials=true", "--controllers=*", "--configure-cloud-routes=false", "--cloud-provider=cloudgate"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("aws overlay command %s lacks %s", cmd, want)
		}
	}
	if !strings.Contains(fmt.Sprint(ctr["image"]), "cloudgate-aws-ccm") {
		t.Errorf("aws overlay image %v", ctr["image"])
	}
	cm := find(aws, "ConfigMap", "cloudgate-config")
	text, _, _ := unstructured.NestedString(cm.Object, "data", "cloudgate.yaml")
	cfg, err := provider.LoadConfig(strings.NewReader(text))
	if err != nil {
		t.Fatalf("aws overlay cloudgate.yaml: %v", err)
	}
	if cfg.Upstream.Name != "aws-batch" {
		t.Errorf("aws overlay upstream %q, want aws-batch", cfg.Upstream.Name)
	}
	subjects := fmt.Sprint(find(aws, "ClusterRoleBinding", "cloudgate:cloud-controller-manager").Object["subjects"])
	for _, sa := range saClients {
		if !strings.Contains(subjects, "name:"+sa+" ") {
			t.Errorf("aws overlay: ServiceAccount %s is not bound", sa)
		}
	}
}

// TestRBACOneSource: the chart's RBAC and kustomize's are the same grants — the ClusterRole's
// rules, the ServiceAccounts bound to it, the namespaced Role's rules (leader election; with
// service-account credentials, creating the clients' ServiceAccounts and tokens) and the two
// secure-port bindings — for each credentials mode (chart useServiceAccountCredentials
// false ↔ deploy/, true ↔ deploy/ + components/aws). providers/aws's e2e test applies the
// chart's (true) and the root one deploy/'s (false), so both sources are proven.
func TestRBACOneSource(t *testing.T) {
	for _, tc := range []struct {
		saCreds bool
		dir     string
	}{{false, "../../deploy"}, {true, awsOverlay(t)}} {
		chart := render(t, map[string]any{"useServiceAccountCredentials": tc.saCreds}, nil)
		kust := kustomize(t, tc.dir)
		got, want := grants(t, kust), grants(t, chart)
		if len(want) == 0 {
			t.Fatalf("sa=%v: the chart grants nothing", tc.saCreds)
		}
		for _, g := range sortedKeys(want) {
			if !got[g] {
				t.Errorf("sa=%v: the chart grants %s, kustomize (%s) does not", tc.saCreds, g, tc.dir)
			}
		}
		for _, g := range sortedKeys(got) {
			if !want[g] {
				t.Errorf("sa=%v: kustomize (%s) grants %s, the chart does not", tc.saCreds, tc.dir, g)
			}
		}
		t.Logf("sa=%v: %d grants compared", tc.saCreds, len(want))
	}
	// GCE: the chart with values-gce.yaml grants what deploy/ and providers/gce/deploy/rbac-gce.yaml
	// (which providers/gce's e2e test applies) grant together.
	chart := render(t, gceValues(t, nil), nil)
	data, err := os.ReadFile("../../providers/gce/deploy/rbac-gce.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kust := kustomize(t, "../../deploy")
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("rbac-gce.yaml: %v", err)
		}
		if len(m) > 0 {
			kust = append(kust, &unstructured.Unstructured{Object: m})
		}
	}
	got, want := grants(t, kust), grants(t, chart)
	for _, g := range sortedKeys(want) {
		if !got[g] {
			t.Errorf("gce: the chart grants %s, deploy/ + rbac-gce.yaml do not", g)
		}
	}
	for _, g := range sortedKeys(got) {
		if !want[g] {
			t.Errorf("gce: deploy/ + rbac-gce.yaml grant %s, the chart (values-gce.yaml) does not", g)
		}
	}
	t.Logf("gce: %d grants compared", len(want))
}

// grants flattens the RBAC objects into "subject -> rule" strings: for each binding, each
// subject and each (apiGroup, resource, resourceName, verb) of the role it binds, in the
// binding's namespace ("*" for a ClusterRoleBinding). Names of roles and bindings do not
// matter; what is granted to whom does.
func grants(t *testing.T, objs []*unstructured.Unstructured) map[string]bool {
	t.Helper()
	type rule struct {
		APIGroups, Resources, ResourceNames, Verbs []string
	}
	roles := map[string][]rule{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		b, _ := json.Marshal(o.Object["rules"])
		var rs []rule
		if err := json.Unmarshal(b, &rs); err != nil {
			t.Fatal(err)
		}
		roles[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = rs
	}
	out := map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "ClusterRoleBinding" && o.GetKind() != "RoleBinding" {
			continue
		}
		ref, _, _ := unstructured.NestedStringMap(o.Object, "roleRef")
		ns, where := o.GetNamespace(), o.GetNamespace()
		if o.GetKind() == "ClusterRoleBinding" {
			ns, where = "", "*"
		}
		key := ref["kind"] + "/" + ns + "/" + ref["name"]
		if ref["kind"] == "ClusterRole" {
			key = "ClusterRole//" + ref["name"]
		}
		rs, ok := roles[key]
		if !ok { // a built-in role (system:auth-delegator, extension-apiserver-authentication-reader)
			rs = []rule{{Verbs: []string{"role " + ref["name"]}}}
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			sm := s.(map[string]any)
			who := fmt.Sprintf("%v/%v/%v", sm["kind"], sm["namespace"], sm["name"])
			for _, r := range rs {
				names := r.ResourceNames
				if len(names) == 0 {
					names = []string{""}
				}
				groups, resources := r.APIGroups, r.Resources
				if len(groups) == 0 {
					groups = []string{"-"}
				}
				if len(resources) == 0 {
					resources = []string{"-"}
				}
				for _, g := range groups {
					for _, res := range resources {
						for _, n := range names {
							for _, v := range r.Verbs {
								out[fmt.Sprintf("%s in %s: %s %q/%s/%s", who, where, v, g, res, n)] = true
							}
						}
					}
				}
			}
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
