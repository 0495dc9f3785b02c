package gcebatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/api/googleapi"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/gce/gcesim"
)

// apiError is a compute API error as the Google client returns it.
func apiError(code int, reason string) error {
	return &googleapi.Error{Code: code, Message: "m", Errors: []googleapi.ErrorItem{{Reason: reason, Message: "m"}}}
}

func TestErrorsTable(t *testing.T) {
	base, err := limiter.NewThrottleClassifier(nil)
	if err != nil {
		t.Fatal(err)
	}
	gate := base.WithErrors(Errors) // as the gate runs with this provider
	transport := &url.Error{Op: "Get", URL: "https://compute.googleapis.com/", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tests := []struct {
		name       string
		err        error
		table      limiter.ErrorClass // Errors alone
		gate, base limiter.ErrorClass // with and without the table
	}{
		{"429", apiError(429, "rateLimitExceeded"), limiter.ClassThrottled, limiter.ClassThrottled, limiter.ClassThrottled},
		{"403 rateLimitExceeded", apiError(403, "rateLimitExceeded"), limiter.ClassThrottled, limiter.ClassThrottled, limiter.ClassThrottled},
		{"403 userRateLimitExceeded", apiError(403, "userRateLimitExceeded"), limiter.ClassThrottled, limiter.ClassThrottled, limiter.ClassThrottled},
		{"403 forbidden", apiError(403, "forbidden"), limiter.ClassRefused, limiter.ClassRefused, limiter.ClassUnknown},
		{"404 route already gone", apiError(404, "notFound"), limiter.ClassRefused, limiter.ClassRefused, limiter.ClassUnknown},
		{"409 already exists", apiError(409, "alreadyExists"), limiter.ClassRefused, limiter.ClassRefused, limiter.ClassUnknown},
		{"404 wrapped", fmt.Errorf("delete route: %w", apiError(404, "notFound")), limiter.ClassRefused, limiter.ClassRefused, limiter.ClassUnknown},
		{"500", apiError(500, "backendError"), limiter.ClassFailed, limiter.ClassFailed, limiter.ClassUnknown},
		{"503", apiError(503, "backendError"), limiter.ClassFailed, limiter.ClassFailed, limiter.ClassUnknown},
		// The unmodified provider's InstanceMetadata formats the error with %v.
		{"404 as text", fmt.Errorf("error while querying for providerID %q: %v", "gce://p/z/n", apiError(404, "notFound")), limiter.ClassRefused, limiter.ClassRefused, limiter.ClassUnknown},
		{"403 rateLimitExceeded as text", fmt.Errorf("x: %v", apiError(403, "rateLimitExceeded")), limiter.ClassThrottled, limiter.ClassThrottled, limiter.ClassThrottled},
		{"500 as text", fmt.Errorf("x: %v", apiError(500, "backendError")), limiter.ClassFailed, limiter.ClassFailed, limiter.ClassUnknown},
		{"transport", transport, limiter.ClassFailed, limiter.ClassFailed, limiter.ClassUnknown},
	}
	for _, tt := range tests {
		if got := Errors.ClassifyError(tt.err); got != tt.table {
			t.Errorf("%s: table says %s, want %s", tt.name, got, tt.table)
		}
		if got := gate.Class(tt.err); got != tt.gate {
			t.Errorf("%s: the gate with the table says %s, want %s", tt.name, got, tt.gate)
		}
		if got := base.Class(tt.err); got != tt.base {
			t.Errorf("%s: the generic rules say %s, want %s", tt.name, got, tt.base)
		}
	}
}

// The cloud answering "not found" is no cloud failure: behind cloudgate, the
// unmodified GCE provider's 404s — 20 DeleteRoute calls for routes already
// gone (a *googleapi.Error), 20 InstanceMetadata calls for instances gone
// (formatted with %v) — open neither breaker, and the next CreateRoute and
// InstanceMetadata reach gcesim. Before the GCE table both breakers opened
// (minRequests 20, failureRatio 0.5) and refused them.
func TestGone404sDoNotOpenBreakers(t *testing.T) {
	sim, c := start(t, gcesim.Config{}, false)
	fleet(sim)
	up := c.Unwrap() // the unmodified "gce" provider
	cfg := provider.DefaultConfig()
	off := false
	cfg.NotFoundGuard.Enabled = &off // its re-reads would double the 404s; not under test
	gated, err := provider.New(up, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gated.Close()
	ctx := context.Background()
	routes, _ := gated.Routes()
	for i := range 20 {
		err := routes.DeleteRoute(ctx, "cluster", &cloudprovider.Route{Name: fmt.Sprintf("gone-%d", i), DestinationCIDR: "10.1.0.0/24"})
		var ge *googleapi.Error
		if !errors.As(err, &ge) || ge.Code != 404 {
			t.Fatalf("DeleteRoute of a gone route: %v, want the provider's 404", err)
		}
	}
	if err := routes.CreateRoute(ctx, "cluster", "hint", &cloudprovider.Route{TargetNode: "node-3", DestinationCIDR: "10.2.0.0/24"}); err != nil {
		t.Errorf("CreateRoute after 20 404s: %v", err)
	}
	i, _ := gated.InstancesV2()
	z := sim.Zones()[0]
	for k := range 20 {
		name := fmt.Sprintf("gone-%d", k)
		if _, err := i.InstanceMetadata(ctx, node(name, sim.ProviderID(z, name))); err == nil || !strings.Contains(err.Error(), "googleapi: Error 404") {
			t.Fatalf("InstanceMetadata of a gone instance: %v, want the provider's 404 text", err)
		}
	}
	live := nodes(sim)[0]
	if _, err := i.InstanceMetadata(ctx, live); err != nil {
		t.Errorf("InstanceMetadata after 20 404s: %v", err)
	}
}
