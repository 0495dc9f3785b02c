package test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

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
