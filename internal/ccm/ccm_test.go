package ccm

import (
	"context"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
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
