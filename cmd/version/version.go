// Package version says what a cloudgate binary is: cloudgate's own version and commit, the
// versions of the Kubernetes libraries and cloud provider modules it links, and the
// control-plane minors it supports. Every CCM binary prints it for --version (package ccm
// wires it in).
//
// cloudgate's version and commit are the ones stamped into k8s.io/component-base/version by
// `make image` and release builds (-X ...version.gitVersion=..., as the AWS CCM stamps its
// own); the CCM's /version endpoint and version metric report the same. A binary built
// without them (`go build`, `go install ...@vX.Y.Z`) falls back to what the Go toolchain
// recorded: the main module's version and the vcs.revision setting. Module versions come from
// the binary's build information (runtime/debug.ReadBuildInfo), so they are the versions
// actually linked, never a list kept by hand.
package version

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	componentversion "k8s.io/component-base/version"
)

// Modules are the linked modules --version names, in this order; a module the binary does
// not link (the AWS and GCE providers in the core CCM, each other in theirs) is left out.
var Modules = []string{
	"k8s.io/cloud-provider-aws",
	"k8s.io/cloud-provider-gcp/providers",
	"k8s.io/cloud-provider",
	"k8s.io/client-go",
	"k8s.io/component-base",
	"k8s.io/apimachinery",
}

// Module is one linked module and its version.
type Module struct {
	Path    string `json:"path"`
	Version string `json:"version"`
}

// Info describes a binary.
type Info struct {
	// Version is cloudgate's version, e.g. v0.2.0 or v0.0.0-<commit>.
	Version string `json:"version"`
	// Commit is the git commit it was built from ("" when unknown).
	Commit string `json:"commit"`
	// TreeState is "clean" or "dirty" ("" when unknown).
	TreeState string `json:"treeState,omitempty"`
	// BuildDate is the commit's time for `make image` builds (SOURCE_DATE_EPOCH), never the
	// time of the build.
	BuildDate string `json:"buildDate,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// Modules are the linked versions of Modules.
	Modules []Module `json:"modules"`
	// ControlPlane is the range of kube-apiserver minors the linked client-go supports.
	ControlPlane Range `json:"controlPlane"`
}

// Get describes the running binary.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(componentversion.Get(), bi)
}

// get builds Info from the component-base stamp and the build information (nil: none).
func get(kv apimachineryversion.Info, bi *debug.BuildInfo) Info {
	i := Info{GoVersion: kv.GoVersion, Platform: kv.Platform}
	if stamped(kv.GitVersion) {
		i.Version = kv.GitVersion
	}
	if stamped(kv.GitCommit) {
		i.Commit, i.TreeState = kv.GitCommit, kv.GitTreeState
	}
	if kv.BuildDate != "" && kv.BuildDate != "1970-01-01T00:00:00Z" {
		i.BuildDate = kv.BuildDate
	}
	if bi == nil {
		if i.Version == "" {
			i.Version = "(unknown)"
		}
		return i
	}
	if i.Version == "" {
		i.Version = bi.Main.Version
		if i.Version == "" {
			i.Version = "(devel)"
		}
	}
	if i.Commit == "" {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Commit = s.Value
			case "vcs.modified":
				i.TreeState = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
			}
		}
	}
	linked := make(map[string]string, len(bi.Deps))
	for _, d := range bi.Deps {
		v := d.Version
		if d.Replace != nil {
			v = d.Replace.Version
			if v == "" { // a directory replace
				v = d.Version + " (replaced by " + d.Replace.Path + ")"
			}
		}
		linked[d.Path] = v
	}
	for _, p := range Modules {
		if v, ok := linked[p]; ok {
			i.Modules = append(i.Modules, Module{Path: p, Version: v})
		}
	}
	if r, err := Supported(linked["k8s.io/client-go"]); err == nil {
		i.ControlPlane = r
	}
	return i
}

// stamped reports whether an -X stamp was set (component-base's defaults hold "$Format").
func stamped(s string) bool { return s != "" && !strings.Contains(s, "$Format") }

// String is what --version prints: one line for cloudgate, one per linked module, and the
// supported control planes.
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cloudgate %s", i.Version)
	var detail []string
	if i.Commit != "" {
		c := "commit " + i.Commit
		if i.TreeState != "" {
			c += " (" + i.TreeState + ")"
		}
		detail = append(detail, c)
	}
	if i.BuildDate != "" {
		detail = append(detail, "build date "+i.BuildDate)
	}
	detail = append(detail, i.GoVersion, i.Platform)
	fmt.Fprintf(&b, " (%s)\n", strings.Join(detail, ", "))
	for _, m := range i.Modules {
		fmt.Fprintf(&b, "  %s %s\n", m.Path, m.Version)
	}
	if i.ControlPlane.Min != 0 {
		fmt.Fprintf(&b, "  supported control planes: Kubernetes %s (client-go version skew: ±1 minor)\n", i.ControlPlane)
	}
	return b.String()
}

// Range is a range of Kubernetes 1.x minors, both ends included.
type Range struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

func (r Range) String() string { return fmt.Sprintf("1.%d–1.%d", r.Min, r.Max) }

// HelmKubeVersion is the Chart.yaml kubeVersion constraint for r (the -0 lets pre-release
// and provider-suffixed versions such as v1.37.2-eks-1 match).
func (r Range) HelmKubeVersion() string {
	return fmt.Sprintf(">=1.%d.0-0 <1.%d.0-0", r.Min, r.Max+1)
}

// Supported returns the control-plane minors a binary linking client-go at clientGo
// (v0.MINOR.PATCH, matching Kubernetes 1.MINOR) supports: client-go's version skew policy
// keeps a client within one minor of the kube-apiserver, older or newer.
func Supported(clientGo string) (Range, error) {
	parts := strings.SplitN(strings.TrimPrefix(clientGo, "v"), ".", 3)
	if len(parts) < 2 || parts[0] != "0" {
		return Range{}, fmt.Errorf("client-go version %q: want v0.MINOR.PATCH", clientGo)
	}
	minor, err := strconv.Atoi(parts[1])
	if err != nil || minor < 1 {
		return Range{}, fmt.Errorf("client-go version %q: want v0.MINOR.PATCH", clientGo)
	}
	return Range{Min: minor - 1, Max: minor + 1}, nil
}
