package test

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestImageRepository is the image repository Render gives values that set none.
const TestImageRepository = "registry.test/cloudgate-aws-ccm"

// WithTestImage returns vals with image.repository set to TestImageRepository when vals does
// not set the key (a copy: vals is not modified).
func WithTestImage(vals map[string]any) map[string]any {
	img, _ := vals["image"].(map[string]any)
	if _, ok := img["repository"]; ok {
		return vals
	}
	out := maps.Clone(vals)
	if out == nil {
		out = map[string]any{}
	}
	img = maps.Clone(img)
	if img == nil {
		img = map[string]any{}
	}
	img["repository"] = TestImageRepository
	out["image"] = img
	return out
}

// Render renders the chart in dir as `helm template --namespace kube-system` does, with the
// given values and capabilities (nil: Helm's defaults), and returns its objects in template
// file order. cmd/render-chart prints them for tests in other modules (providers/aws's
// e2e applies the chart's RBAC with it).
//
// The chart requires image.repository (the user's registry): values that do not set the key
// get TestImageRepository, so that renders about something else need not say it; an explicit
// "" gets the chart's refusal.
func Render(dir string, vals map[string]any, caps *common.Capabilities) ([]*unstructured.Unstructured, error) {
	vals = WithTestImage(vals)
	if caps == nil {
		caps = common.DefaultCapabilities
	}
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	rv, err := util.ToRenderValuesWithSchemaValidation(ch, vals,
		common.ReleaseOptions{Name: "cloudgate", Namespace: "kube-system", IsInstall: true}, caps, false)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	var objs []*unstructured.Unstructured
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !strings.HasSuffix(n, ".yaml") {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(files[n]), 4096)
		for {
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w\n%s", n, err, files[n])
			}
			if len(m) == 0 {
				continue
			}
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs, nil
}
