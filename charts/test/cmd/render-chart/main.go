// Command render-chart prints charts/cloudgate rendered with Helm's Go SDK, as YAML
// documents, for tests outside this module: providers/aws's e2e test applies the chart's
// RBAC and runs the CCM with the chart's flags. Run it in charts/test:
//
//	go run ./cmd/render-chart -values '{"useServiceAccountCredentials":true}' -kinds ClusterRole,Role
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/charts/test"
)

func main() {
	chart := flag.String("chart", "../cloudgate", "the chart's directory")
	values := flag.String("values", "{}", "values, as a JSON object (like helm --set-json)")
	kinds := flag.String("kinds", "", "comma-separated kinds to print (empty: every object)")
	flag.Parse()
	if err := run(*chart, *values, *kinds); err != nil {
		fmt.Fprintln(os.Stderr, "render-chart:", err)
		os.Exit(1)
	}
}

func run(chart, values, kinds string) error {
	var vals map[string]any
	if err := json.Unmarshal([]byte(values), &vals); err != nil {
		return fmt.Errorf("-values: want a JSON object: %w", err)
	}
	objs, err := test.Render(chart, vals, nil)
	if err != nil {
		return err
	}
	want := strings.Split(kinds, ",")
	for _, o := range objs {
		if kinds != "" && !slices.Contains(want, o.GetKind()) {
			continue
		}
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", b)
	}
	return nil
}
