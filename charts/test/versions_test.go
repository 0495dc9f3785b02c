package test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/cmd/version"
)

// TestKubeVersion: Chart.yaml's kubeVersion is the range of control-plane minors the
// deployed binary supports — the AWS CCM's client-go minor ±1 (client-go's version skew
// policy, package version) — and docs/versions.md's table says the same; Helm's own check
// accepts every patch (and provider-suffixed build) of those minors and nothing outside them.
func TestKubeVersion(t *testing.T) {
	clientGo := requiredVersion(t, "../../providers/aws/go.mod", "k8s.io/client-go")
	r, err := version.Supported(clientGo)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(chartDir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	if want := r.HelmKubeVersion(); meta.KubeVersion != want {
		t.Errorf("Chart.yaml kubeVersion = %q; the AWS CCM links client-go %s, which supports Kubernetes %s: want %q",
			meta.KubeVersion, clientGo, r, want)
	}
	for minor := r.Min - 1; minor <= r.Max+1; minor++ {
		want := minor >= r.Min && minor <= r.Max
		for _, v := range []string{"v1.%d.0", "v1.%d.9", "v1.%d.3-eks-4a5b6c7", "v1.%d.0-rc.1"} {
			v = fmt.Sprintf(v, minor)
			if got := chartutil.IsCompatibleRange(meta.KubeVersion, v); got != want {
				t.Errorf("kubeVersion %q accepts %s: %v, want %v", meta.KubeVersion, v, got, want)
			}
		}
	}

	doc, err := os.ReadFile("../../docs/versions.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| unreleased") {
			row = line
		}
	}
	for _, want := range []string{"client-go " + clientGo, r.String(), "`" + r.HelmKubeVersion() + "`"} {
		if !strings.Contains(row, want) {
			t.Errorf("docs/versions.md's unreleased row %q lacks %q", row, want)
		}
	}
}

// requiredVersion returns the version the go.mod at path requires of module.
func requiredVersion(t *testing.T, path, module string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	t.Fatalf("%s does not require %s", path, module)
	return ""
}
