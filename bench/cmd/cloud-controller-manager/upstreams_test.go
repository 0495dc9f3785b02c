package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
)

// cloudgate-config checks upstream.name against the providers of cloudgate's CCM binaries
// (its knownUpstreams): each provider this binary registers must be among them, or the tool
// would refuse a file this CCM runs.
func TestKnownUpstreamsRegistered(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../../../cmd/cloudgate-config/main.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var known []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "knownUpstreams" || len(vs.Values) != 1 {
			return true
		}
		for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
			s, err := strconv.Unquote(e.(*ast.BasicLit).Value)
			if err != nil {
				t.Fatal(err)
			}
			known = append(known, s)
		}
		return false
	})
	for _, name := range []string{"simcloud"} {
		if !cloudprovider.IsCloudProvider(name) {
			t.Errorf("this CCM binary does not register %q: update the list here", name)
		}
		if !slices.Contains(known, name) {
			t.Errorf("cloudgate-config's knownUpstreams %q lack %q, which this CCM registers: add it", known, name)
		}
	}
}
