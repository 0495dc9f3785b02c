package test

import (
	"context"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// TestServerSideApply renders the chart against a real kube-apiserver's discovery (the
// capabilities `helm install` would see) and server-side applies every object (dry-run:
// admission, defaulting and schema validation run, nothing is stored), first without the
// Prometheus Operator's CRDs (no ServiceMonitor or PrometheusRule may render) and then with
// them (both must render and apply).
func TestServerSideApply(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cp := e2e.StartControlPlane(ctx, t, t.TempDir(), etcdBin, apiserverBin)
	cfg := &rest.Config{Host: cp.URL, BearerToken: cp.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile}, QPS: 200, Burst: 400}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// kube-system appears shortly after /readyz.
	if err := e2e.Poll(ctx, "namespace kube-system", 200*time.Millisecond, 30*time.Second, func() (bool, error) {
		_, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Get(ctx, "kube-system", metav1.GetOptions{})
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}

	applyAll := func(t *testing.T, monitoring bool) {
		cached := memory.NewMemCacheClient(disco)
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
		caps := serverCapabilities(t, disco)
		if has := caps.APIVersions.Has("monitoring.coreos.com/v1/ServiceMonitor"); has != monitoring {
			t.Fatalf("cluster serves ServiceMonitor = %v, want %v", has, monitoring)
		}
		for _, c := range combos() {
			// The upstream only changes a ConfigMap string, and behind GCE adds the GCE provider's Role.
			if c.monitoring != monitoring || (c.upstream != "aws-batch" && c.upstream != "gce-batch") {
				continue
			}
			// The opt-in dashboard ConfigMap too: its label and the 64 KiB of JSON must pass
			// the apiserver's validation.
			vals := c.values()
			vals["metrics"] = map[string]any{"dashboard": map[string]any{"enabled": true}}
			objs := render(t, vals, caps)
			kinds := map[string]bool{}
			for _, o := range objs {
				kinds[o.GetKind()] = true
				m, err := mapper.RESTMapping(o.GroupVersionKind().GroupKind(), o.GroupVersionKind().Version)
				if err != nil {
					t.Fatalf("%v: %s %s: %v", c, o.GetKind(), o.GetName(), err)
				}
				var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
				if m.Scope.Name() == "namespace" {
					ri = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
				}
				_, err = ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "helm", Force: true, DryRun: []string{metav1.DryRunAll}})
				if err != nil {
					t.Errorf("%v: server-side apply %s %s/%s: %v", c, o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
			if !kinds["ConfigMap"] || find(objs, "ConfigMap", workloadName+"-dashboard") == nil {
				t.Errorf("%v: no dashboard ConfigMap applied", c)
			}
			for _, k := range []string{"ServiceMonitor", "PrometheusRule"} {
				if kinds[k] != monitoring {
					t.Errorf("%v: %s rendered = %v with the CRDs installed = %v", c, k, kinds[k], monitoring)
				}
			}
		}
	}
	t.Run("without-monitoring-crds", func(t *testing.T) { applyAll(t, false) })
	installMonitoringCRDs(ctx, t, dyn, disco)
	t.Run("with-monitoring-crds", func(t *testing.T) { applyAll(t, true) })
}

// installMonitoringCRDs installs ServiceMonitor and PrometheusRule CRDs (the group, versions
// and kinds of the Prometheus Operator's; the schema is left open) and waits until served.
func installMonitoringCRDs(ctx context.Context, t *testing.T, dyn dynamic.Interface, disco discovery.DiscoveryInterface) {
	t.Helper()
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for _, k := range []struct{ kind, plural string }{{"ServiceMonitor", "servicemonitors"}, {"PrometheusRule", "prometheusrules"}} {
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": k.plural + ".monitoring.coreos.com"},
			"spec": map[string]any{
				"group": "monitoring.coreos.com", "scope": "Namespaced",
				"names": map[string]any{"kind": k.kind, "plural": k.plural, "singular": strings.ToLower(k.kind), "listKind": k.kind + "List"},
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
			},
		}}
		if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	if err := e2e.Poll(ctx, "monitoring CRDs served", 200*time.Millisecond, 30*time.Second, func() (bool, error) {
		l, err := disco.ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
		if err != nil {
			return false, err
		}
		return len(l.APIResources) >= 2, fmt.Errorf("%d resources", len(l.APIResources))
	}); err != nil {
		t.Fatal(err)
	}
}

// serverCapabilities is what `helm install` computes from a cluster (action.GetVersionSet:
// every group/version and group/version/Kind served, and the server's version), without
// linking Helm's action package.
func serverCapabilities(t *testing.T, disco discovery.DiscoveryInterface) *common.Capabilities {
	t.Helper()
	groups, resources, err := disco.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var vs common.VersionSet
	for _, g := range groups {
		for _, gv := range g.Versions {
			vs = append(vs, gv.GroupVersion)
		}
	}
	for _, r := range resources {
		for _, ar := range r.APIResources {
			vs = append(vs, path.Join(r.GroupVersion, ar.Kind))
		}
	}
	v, err := disco.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.APIVersions = vs
	caps.KubeVersion = common.KubeVersion{Version: v.GitVersion, Major: v.Major, Minor: v.Minor}
	return caps
}
