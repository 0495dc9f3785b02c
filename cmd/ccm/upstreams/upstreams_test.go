package upstreams

import (
	"io"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
)

type fakeCloud struct{ cloudprovider.Interface }

func TestCheck(t *testing.T) {
	cloudprovider.RegisterCloudProvider("upstreams-test-unknown", func(io.Reader) (cloudprovider.Interface, error) { return fakeCloud{}, nil })
	if err := Check("upstreams-test-unknown"); err == nil || !strings.Contains(err.Error(), "lacks") {
		t.Errorf("a registered provider Known lacks: %v, want an error saying so", err)
	}
	if err := Check("simcloud"); err == nil || !strings.Contains(err.Error(), "does not register") {
		t.Errorf("a known provider this binary does not register: %v, want an error saying so", err)
	}
}
