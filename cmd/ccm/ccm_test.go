package ccm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"

	"github.com/cloudgate/cloudgate/cmd/version"
)

func noop(app.ControllerInitContext, *config.CompletedConfig, cloudprovider.Interface) app.InitFunc {
	return func(context.Context, genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		return nil, false, nil
	}
}

// TestControllers: a binary's own controllers join --controllers beside the standard ones,
// disabled by default when asked; a duplicate or constructor-less one is an error.
func TestControllers(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	for _, tc := range []struct {
		name    string
		ctrls   []Controller
		wantErr string
	}{
		{"own controller", []Controller{{Name: "ccm-test-extra", ClientName: "extra", Constructor: noop, DisabledByDefault: true}}, ""},
		{"a standard name again", []Controller{{Name: names.ServiceLBController, Constructor: noop}}, names.ServiceLBController},
		{"no constructor", []Controller{{Name: "ccm-test-nil"}}, "ccm-test-nil"},
		{"an alias taken", []Controller{{Name: "ccm-test-alias", Alias: "route", Constructor: noop}}, `alias "route"`},
		{"own alias", []Controller{{Name: "ccm-test-extra", Alias: "ccm-extra", Constructor: noop, DisabledByDefault: true}}, ""},
	} {
		cmd, err := New(stop, Options{Controllers: tc.ctrls})
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		usage := cmd.Flags().Lookup("controllers").Usage
		all, disabled, _ := strings.Cut(usage, "Disabled-by-default controllers:")
		for _, c := range []string{names.CloudNodeController, names.CloudNodeLifecycleController, names.ServiceLBController, names.NodeRouteController, "ccm-test-extra"} {
			if !strings.Contains(all, c) {
				t.Errorf("%s: --controllers lacks %s: %q", tc.name, c, usage)
			}
		}
		if !strings.Contains(disabled, "ccm-test-extra") {
			t.Errorf("%s: ccm-test-extra not disabled by default: %q", tc.name, disabled)
		}
	}
}

// TestVersion: --version prints package version's description (cloudgate's version first,
// not the upstream's "Kubernetes vX" line) and ends the process with 0; --version=raw prints
// the same as JSON. The upstream's own handler would call os.Exit(0) inside the test, which
// the test binary reports as a failure. (A test binary records no module versions: the
// module lines of a real binary are checked by make test-image, deploy/image.)
func TestVersion(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	var code []int
	exit = func(c int) { code = append(code, c) }
	t.Cleanup(func() { exit = os.Exit })
	for _, arg := range []string{"--version", "--version=raw"} {
		cmd, err := New(stop, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The flag is package-global in k8s.io/component-base/version/verflag.
		t.Cleanup(func() { _ = cmd.Flags().Set("version", "false") })
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SilenceUsage = true
		cmd.SetArgs([]string{arg})
		code = nil
		if err := cmd.Execute(); !errors.Is(err, errVersionPrinted) {
			t.Fatalf("%s: Execute = %v, want the command stopped after printing", arg, err)
		}
		if len(code) != 1 || code[0] != 0 {
			t.Errorf("%s: exit calls %v, want one exit(0)", arg, code)
		}
		if arg == "--version" {
			if s := out.String(); !strings.HasPrefix(s, "cloudgate ") || s != version.Get().String() {
				t.Errorf("--version printed %q, want %q", s, version.Get().String())
			}
			continue
		}
		var i version.Info
		if err := json.Unmarshal(out.Bytes(), &i); err != nil {
			t.Fatalf("--version=raw: %v\n%s", err, out.String())
		}
		if i.Version == "" || i.Version != version.Get().Version || i.GoVersion == "" {
			t.Errorf("--version=raw = %+v, want %+v", i, version.Get())
		}
	}
}
