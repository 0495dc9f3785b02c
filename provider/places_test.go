package provider

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
)

// machineryMethods are the methods cloudgate's own machinery names besides
// their wrapper, and where: batching and list prefetch fill the three
// InstancesV2 caches and send the batched and listed reads, the lifecycle
// peers refresh by InstanceExists' and InstanceShutdown's TTLs, the
// shadow model predicts batches, and the config resolver derives the list
// interval from InstanceMetadata's TTL.
var machineryMethods = map[string][]string{
	"InstanceExists":      {"batching.go", "instancesv2.go", "methods.go", "shadow.go"},
	"InstanceShutdown":    {"batching.go", "instancesv2.go", "methods.go", "shadow.go"},
	"InstanceMetadata":    {"config.go", "instancesv2.go", "methods.go", "shadow.go"},
	"BatchInstanceStatus": {"batching.go", "methods.go", "shadow.go"},
	"ListInstances":       {"methods.go", "prefetch.go"},
}

// TestMethodPlaces lists the places a method lives in: every non-test file
// of the package that names it (its policy name as a string, its methodSet
// slot as x.m.<slot>, or a method declared with its name). A wrapped method
// lives in two: its row of the policy table (methods.go) and its wrapper's
// file, which declares the method and builds its read path; so adding a
// read method touches those two and nothing else. Only the methods in
// machineryMethods are named elsewhere, where listed.
func TestMethodPlaces(t *testing.T) {
	slots := map[string]string{} // method name -> methodSet field
	var s methodSet
	st := reflect.ValueOf(&s).Elem()
	for name, spec := range methodSpecs {
		p := spec.slot(&s)
		for i := range st.NumField() {
			if st.Field(i).Addr().UnsafePointer() == reflect.ValueOf(p).UnsafePointer() {
				slots[name] = st.Type().Field(i).Name
			}
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	places := map[string][]string{}
	wrappers := map[string]string{} // method name -> the file declaring it
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		named := map[string]bool{}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if v, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING {
					if _, ok := methodSpecs[v]; ok {
						named[v] = true
					}
				}
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.SelectorExpr); ok && x.Sel.Name == "m" {
					for name, slot := range slots {
						if n.Sel.Name == slot {
							named[name] = true
						}
					}
				}
			case *ast.FuncDecl:
				if _, ok := methodSpecs[n.Name.Name]; ok && n.Recv != nil {
					named[n.Name.Name] = true
					wrappers[n.Name.Name] = f
				}
			}
			return true
		})
		for name := range named {
			places[name] = append(places[name], f)
		}
	}
	for _, name := range methodNames() {
		got := places[name]
		slices.Sort(got)
		want, machinery := machineryMethods[name]
		if !machinery {
			want = []string{"methods.go", wrappers[name]}
			slices.Sort(want)
			if wrappers[name] == "" {
				t.Errorf("%s: no wrapper declares it", name)
				continue
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s lives in %v, want %v", name, got, want)
		}
		t.Logf("%s: %v", name, got)
	}
	// Every method of the wrapped interfaces has a policy row, bar
	// GetLoadBalancerName (computed locally, passed through).
	for _, it := range []reflect.Type{
		reflect.TypeFor[cloudprovider.Instances](), reflect.TypeFor[cloudprovider.InstancesV2](),
		reflect.TypeFor[cloudprovider.Zones](), reflect.TypeFor[cloudprovider.LoadBalancer](),
		reflect.TypeFor[cloudprovider.Routes](), reflect.TypeFor[cloudprovider.Clusters](),
	} {
		for i := range it.NumMethod() {
			name := it.Method(i).Name
			if _, ok := methodSpecs[name]; !ok && name != "GetLoadBalancerName" {
				t.Errorf("%s.%s has no row in methodSpecs", it.Name(), name)
			}
		}
	}
}
