// Package deploy holds the manifests that run cloudgate's cloud-controller-manager in a
// cluster — the YAML files in this directory, applied with kubectl (see docs/ccm.md) — and
// embeds them so that tests can decode them and apply them to a real API server.
package deploy

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var manifests embed.FS

// Files returns the names of the manifest files, in lexical order.
func Files() []string {
	names, err := fs.Glob(manifests, "*.yaml")
	if err != nil { // only for a malformed pattern
		panic(err)
	}
	return names
}

// strict decodes with client-go's scheme and rejects unknown or duplicate fields.
var strict = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// Objects decodes the YAML documents of the named manifest file into typed objects of
// client-go's scheme, in file order. A document with an unknown kind or field is an error;
// documents holding only comments are skipped.
func Objects(name string) ([]runtime.Object, error) {
	data, err := manifests.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return Decode(name, data)
}

// Decode is Objects for YAML documents from elsewhere (e.g. the Helm chart rendered by
// charts/test/cmd/render-chart); name labels its errors.
func Decode(name string, data []byte) ([]runtime.Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []runtime.Object
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		var fields map[string]any
		if err := yaml.Unmarshal(doc, &fields); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if len(fields) == 0 {
			continue
		}
		obj, _, err := strict.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		objs = append(objs, obj)
	}
}
