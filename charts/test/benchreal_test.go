package test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// benchRealAWS is where the real-binary benchmark (make bench-real-aws)
// keeps the args and cloudgate.yaml it runs the CCMs with.
const benchRealAWS = "../../providers/aws/awsbench/real/testdata/"

// TestBenchRealAWSArgs: the real-binary benchmark runs each CCM as its chart
// does. cloudgate's column is the default install (no values but the
// upstream's cloud.conf): its args and cloudgate.yaml are what the chart
// renders; the stock column's args are the stock AWS chart's.
func TestBenchRealAWSArgs(t *testing.T) {
	objs := render(t, map[string]any{"upstream": map[string]any{"cloudConfig": "[Global]\n"}}, nil)
	w := find(objs, "Deployment", workloadName)
	if w == nil {
		t.Fatal("no Deployment rendered")
	}
	ctrs, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
	var got []string
	for _, a := range ctrs[0].(map[string]any)["args"].([]any) {
		got = append(got, fmt.Sprint(a))
	}
	checkFile(t, benchRealAWS+"chart-cloudgate.args", strings.Join(got, "\n")+"\n")
	cm := find(objs, "ConfigMap", workloadName+"-cloudgate")
	text, _, _ := unstructured.NestedString(cm.Object, "data", "cloudgate.yaml")
	checkFile(t, benchRealAWS+"chart-cloudgate.yaml", strings.TrimRight(text, "\n")+"\n")

	var stock []string
	for _, a := range stockValues(t)["args"].([]any) {
		stock = append(stock, fmt.Sprint(a))
	}
	if !slices.Contains(stock, "--cloud-provider=aws") {
		t.Fatalf("the stock chart's args %q have no --cloud-provider=aws", stock)
	}
	checkFile(t, benchRealAWS+"chart-stock.args", strings.Join(stock, "\n")+"\n")
}

func checkFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not what the chart renders; it should read:\n%s\nit reads:\n%s", path, want, got)
	}
}

// TestChartDefaultsMeasured: the chart's defaults rest on the real-binary
// hour (bench/RESULTS.real-aws.md, the default install's column): its
// memory request covers the largest RSS cloudgate's CCM reached there, and
// its node workers initialise the joining Nodes no slower than the stock
// CCM tuned to 10 workers, at every size the file holds.
func TestChartDefaultsMeasured(t *testing.T) {
	rows := realAWSRows(t, "../../bench/RESULTS.real-aws.md")
	objs := render(t, map[string]any{"upstream": map[string]any{"cloudConfig": "[Global]\n"}}, nil)
	w := find(objs, "Deployment", workloadName)
	if w == nil {
		t.Fatal("no Deployment rendered")
	}
	ctrs, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
	mem, _, _ := unstructured.NestedString(ctrs[0].(map[string]any), "resources", "requests", "memory")
	req, err := resource.ParseQuantity(mem)
	if err != nil {
		t.Fatalf("resources.requests.memory %q: %v", mem, err)
	}
	init := map[string]map[int]float64{}
	var peak float64
	for _, r := range rows {
		if init[r.column] == nil {
			init[r.column] = map[int]float64{}
		}
		init[r.column][r.nodes] = r.initSeconds
		if strings.HasPrefix(r.column, "cloudgate") {
			peak = max(peak, r.rssMiB)
		}
	}
	const stockTuned, cloudgate = "stock AWS CCM (tuned: 10 node workers)", "cloudgate AWS CCM (chart defaults)"
	if len(init[cloudgate]) == 0 || len(init[stockTuned]) == 0 {
		t.Fatalf("no %q or %q rows in the results file", cloudgate, stockTuned)
	}
	for n, cg := range init[cloudgate] {
		tuned, ok := init[stockTuned][n]
		switch {
		case !ok:
			t.Errorf("%d Nodes: no tuned stock row", n)
		case cg < 0 || cg > tuned:
			t.Errorf("%d Nodes: cloudgate's default install initialised the joining Nodes in %.1f s, the stock CCM tuned to 10 workers in %.1f s: raise nodeWorkers", n, cg, tuned)
		}
	}
	if reqMiB := float64(req.Value()) / (1 << 20); reqMiB < peak {
		t.Errorf("resources.requests.memory %s (%.0f MiB) is below the %.0f MiB cloudgate's CCM reached in the results file", mem, reqMiB, peak)
	}
	t.Logf("%d rows; cloudgate's peak RSS %.0f MiB against a request of %s", len(rows), peak, mem)
}

type realAWSRow struct {
	nodes       int
	column      string
	initSeconds float64 // -1: not all in time
	rssMiB      float64 // the larger of start and end
}

// realAWSRows reads the main table of a bench-real-aws results file.
func realAWSRows(t *testing.T, path string) []realAWSRow {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	var rows []realAWSRow
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") {
			cols = nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cols == nil {
			if len(cells) > 2 && cells[0] == "nodes" && cells[1] == "column" && slices.Contains(cells, "CCM RSS start → end") {
				cols = cells
			}
			continue
		}
		if strings.HasPrefix(cells[0], "-") || strings.HasPrefix(cells[0], ":") {
			continue
		}
		at := func(name string) string {
			for i, c := range cols {
				if strings.HasSuffix(c, name) && i < len(cells) {
					return cells[i]
				}
			}
			t.Fatalf("%s: no column %q", path, name)
			return ""
		}
		r := realAWSRow{column: at("column"), initSeconds: -1}
		if _, err := fmt.Sscanf(cells[0], "%d", &r.nodes); err != nil {
			t.Fatalf("%s: row %q: nodes %q", path, line, cells[0])
		}
		fmt.Sscanf(at("Nodes initialised in"), "%f s", &r.initSeconds)
		var a, z float64
		if _, err := fmt.Sscanf(at("CCM RSS start → end"), "%f → %f MiB", &a, &z); err != nil {
			t.Fatalf("%s: row %q: RSS %q: %v", path, line, at("CCM RSS start → end"), err)
		}
		r.rssMiB = max(a, z)
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table with a CCM RSS column", path)
	}
	return rows
}
