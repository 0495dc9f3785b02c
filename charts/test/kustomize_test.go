package test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// TestKustomize builds deploy/ (the base) and a user's overlay of it with deploy/components/aws, both with
// sigs.k8s.io/kustomize/api: the same objects, the overlay's cloudgate.yaml naming aws-batch
// through provider.LoadConfig, its CCM flags those of the AWS drop-in, and the RBAC binding
// every controller's ServiceAccount.
func TestKustomize(t *testing.T) {
	// The user's overlay, outside deploy/ (kustomize refuses an overlay inside its base).
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
	base, aws := kustomize(t, "../../deploy"), kustomize(t, overlay)
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
		d := find(objs, "Deployment", "cloud-controller-manager")
		spec, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
		if spec["dnsPolicy"] != "ClusterFirstWithHostNet" {
			t.Errorf("%s: dnsPolicy = %v", name, spec["dnsPolicy"])
		}
		ctr := spec["containers"].([]any)[0].(map[string]any)
		if cpu, _, _ := unstructured.NestedString(ctr, "resources", "requests", "cpu"); cpu != "200m" {
			t.Errorf("%s: cpu request %q, want 200m", name, cpu)
		}
	}
	d := find(aws, "Deployment", "cloud-controller-manager")
	ctr := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	cmd := fmt.Sprint(ctr["command"])
	for _, want := range []string{"--use-service-account-credentials=true", "--controllers=*", "--cloud-provider=cloudgate"} {
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
	for _, sa := range []string{"cloud-node-controller", "node-controller", "service-controller", "route-controller", "tagging-controller"} {
		if !strings.Contains(subjects, "name:"+sa+" ") {
			t.Errorf("aws overlay: ServiceAccount %s is not bound", sa)
		}
	}
}
