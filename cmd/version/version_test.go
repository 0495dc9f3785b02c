package version

import (
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

func buildInfo(main string, deps ...*debug.Module) *debug.BuildInfo {
	return &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/cloudgate/cloudgate/providers/aws", Version: main},
		Deps: deps,
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
}

var awsDeps = []*debug.Module{
	{Path: "k8s.io/client-go", Version: "v0.37.2"},
	{Path: "k8s.io/apimachinery", Version: "v0.37.2"},
	{Path: "github.com/cloudgate/cloudgate", Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "../.."}},
	{Path: "k8s.io/cloud-provider-aws", Version: "v1.37.1"},
	{Path: "k8s.io/cloud-provider", Version: "v0.37.0", Replace: &debug.Module{Path: "k8s.io/cloud-provider", Version: "v0.37.2"}},
	{Path: "k8s.io/component-base", Version: "v0.37.2"},
}

// unstamped is component-base's version.Get() in a binary built without -X stamps.
var unstamped = apimachineryversion.Info{GitVersion: "v0.0.0-master+$Format:%H$", GitCommit: "$Format:%H$",
	BuildDate: "1970-01-01T00:00:00Z", GoVersion: "go1.26.7", Platform: "linux/arm64"}

// TestStamped: a make image build names the stamped version, commit and build date, and every
// linked module of Modules in that order (a replace's version wins), with the control planes
// its client-go supports.
func TestStamped(t *testing.T) {
	kv := apimachineryversion.Info{GitVersion: "v0.3.0", GitCommit: "feedface", GitTreeState: "clean",
		BuildDate: "2026-11-25T20:00:00Z", GoVersion: "go1.26.7", Platform: "linux/amd64"}
	i := get(kv, buildInfo("(devel)", awsDeps...))
	if i.Version != "v0.3.0" || i.Commit != "feedface" || i.TreeState != "clean" || i.BuildDate != "2026-11-25T20:00:00Z" {
		t.Errorf("got %+v, want the stamped version, commit, tree state and date", i)
	}
	want := []Module{
		{"k8s.io/cloud-provider-aws", "v1.37.1"},
		{"k8s.io/cloud-provider", "v0.37.2"},
		{"k8s.io/client-go", "v0.37.2"},
		{"k8s.io/component-base", "v0.37.2"},
		{"k8s.io/apimachinery", "v0.37.2"},
	}
	if len(i.Modules) != len(want) {
		t.Fatalf("modules = %v, want %v", i.Modules, want)
	}
	for n := range want {
		if i.Modules[n] != want[n] {
			t.Errorf("module %d = %v, want %v", n, i.Modules[n], want[n])
		}
	}
	if i.ControlPlane != (Range{36, 38}) {
		t.Errorf("control plane = %v, want 1.36–1.38", i.ControlPlane)
	}
	s := i.String()
	for _, line := range []string{
		"cloudgate v0.3.0 (commit feedface (clean), build date 2026-11-25T20:00:00Z, go1.26.7, linux/amd64)\n",
		"\n  k8s.io/cloud-provider-aws v1.37.1\n",
		"\n  k8s.io/client-go v0.37.2\n",
		"\n  supported control planes: Kubernetes 1.36–1.38",
	} {
		if !strings.Contains(s, line) {
			t.Errorf("String() lacks %q:\n%s", line, s)
		}
	}
}

// TestGCE: the GCE binary names the GCE provider's module (k8s.io/cloud-provider-gcp/providers)
// and not the AWS one.
func TestGCE(t *testing.T) {
	deps := []*debug.Module{awsDeps[0], awsDeps[1], {Path: "k8s.io/cloud-provider-gcp/providers", Version: "v0.28.2"}, awsDeps[4]}
	i := get(unstamped, buildInfo("(devel)", deps...))
	want := []Module{{"k8s.io/cloud-provider-gcp/providers", "v0.28.2"}, {"k8s.io/cloud-provider", "v0.37.2"},
		{"k8s.io/client-go", "v0.37.2"}, {"k8s.io/apimachinery", "v0.37.2"}}
	if fmt.Sprint(i.Modules) != fmt.Sprint(want) {
		t.Errorf("modules = %v, want %v", i.Modules, want)
	}
	if s := i.String(); !strings.Contains(s, "\n  k8s.io/cloud-provider-gcp/providers v0.28.2\n") || strings.Contains(s, "cloud-provider-aws") {
		t.Errorf("String() does not name the GCE provider alone:\n%s", s)
	}
}

// TestUnstamped: without -X stamps (go build, go install @version) the version and commit
// come from what the Go toolchain recorded; a module the binary does not link is left out.
func TestUnstamped(t *testing.T) {
	i := get(unstamped, buildInfo("v0.3.0", awsDeps[0], awsDeps[1]))
	if i.Version != "v0.3.0" || i.Commit != "0123abcd" || i.TreeState != "dirty" || i.BuildDate != "" {
		t.Errorf("got %+v, want the main module's version and the vcs settings", i)
	}
	if len(i.Modules) != 2 || i.Modules[0].Path != "k8s.io/client-go" {
		t.Errorf("modules = %v, want client-go and apimachinery only", i.Modules)
	}
	if s := i.String(); strings.Contains(s, "$Format") || strings.Contains(s, "1970") || strings.Contains(s, "cloud-provider-aws") {
		t.Errorf("String() shows a default stamp or an unlinked module:\n%s", s)
	}
	if i := get(unstamped, nil); i.Version != "(unknown)" {
		t.Errorf("without build info: version %q, want (unknown)", i.Version)
	}
	if i := get(unstamped, buildInfo("")); i.Version != "(devel)" {
		t.Errorf("no main module version: %q, want (devel)", i.Version)
	}
	dir := get(unstamped, buildInfo("", &debug.Module{Path: "k8s.io/client-go", Version: "v0.37.2", Replace: &debug.Module{Path: "../client-go"}}))
	if len(dir.Modules) != 1 || dir.Modules[0].Version != "v0.37.2 (replaced by ../client-go)" {
		t.Errorf("directory replace: %v", dir.Modules)
	}
}

// TestSupported: client-go v0.M supports kube-apiserver 1.(M-1) to 1.(M+1); Chart.yaml's
// kubeVersion says the same.
func TestSupported(t *testing.T) {
	r, err := Supported("v0.37.2")
	if err != nil || r != (Range{36, 38}) {
		t.Fatalf("Supported(v0.37.2) = %v, %v; want 1.36–1.38", r, err)
	}
	if got, want := r.HelmKubeVersion(), ">=1.36.0-0 <1.39.0-0"; got != want {
		t.Errorf("HelmKubeVersion = %q, want %q", got, want)
	}
	if got := r.String(); got != "1.36–1.38" {
		t.Errorf("String = %q", got)
	}
	for _, bad := range []string{"", "v1.37.2", "v0.x.1", "v0", "v0.0.1"} {
		if _, err := Supported(bad); err == nil {
			t.Errorf("Supported(%q): no error", bad)
		}
	}
}
