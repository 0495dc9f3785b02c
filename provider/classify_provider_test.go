package provider

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/limiter"
)

// classifyingCloud is an upstream that knows its own throttling errors.
type classifyingCloud struct{ *countingCloud }

func (classifyingCloud) ClassifyThrottle(err error) (throttled, known bool) {
	switch err.Error() {
	case "ProviderSaysSlowDown":
		return true, true
	case "HTTP 429 but the provider knows better":
		return false, true
	}
	return false, false
}

// The gate asks an upstream implementing limiter.ProviderClassifier before
// its patterns, and only such an upstream.
func TestGateUsesProviderClassifier(t *testing.T) {
	tests := []struct {
		msg                string
		plain, classifying bool
	}{
		{"ProviderSaysSlowDown", false, true},
		{"HTTP 429 but the provider knows better", true, false},
		{"HTTP 429", true, true},
		{"not found", false, false},
	}
	plain, err := newGate(newCountingCloud(), testConfig(nil), gateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := newGate(classifyingCloud{newCountingCloud()}, testConfig(nil), gateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if got, _ := plain.throttle.Classify(errors.New(tt.msg)); got != tt.plain {
			t.Errorf("plain upstream: Classify(%q) = %v, want %v", tt.msg, got, tt.plain)
		}
		if got, _ := cl.throttle.Classify(errors.New(tt.msg)); got != tt.classifying {
			t.Errorf("classifying upstream: Classify(%q) = %v, want %v", tt.msg, got, tt.classifying)
		}
	}
}

// Issue 24 suspected item: throttle.patterns are checked by Validate
// (LoadConfig): an invalid regexp, or one matching every message.
func TestThrottlePatternsValidated(t *testing.T) {
	for _, tc := range []struct {
		pattern, want string
	}{
		{"(unclosed", "throttle.patterns[0]"},
		{".*", "matches the empty string"},
		{"x?", "matches the empty string"},
	} {
		cfg := DefaultConfig()
		cfg.Throttle.Patterns = []string{tc.pattern}
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("pattern %q: Validate() = %v; want an error naming %q", tc.pattern, err, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Throttle.Patterns = []string{"QuotaExceeded"}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("a valid pattern: %v", err)
	}
}

// statusErr is a provider SDK's error carrying its HTTP status in a field,
// as googleapi.Error does: no method cloudgate's generic rules read.
type statusErr struct{ code int }

func (e statusErr) Error() string { return fmt.Sprintf("cloud says %d", e.code) }

// statusTable classifies statusErr by its code.
var statusTable = limiter.ErrorTable{limiter.AsRule("statusErr: its code", func(e statusErr) limiter.ErrorClass {
	return limiter.HTTPStatusClass(e.code)
})}

// erroringCloud is an upstream classifying its own errors.
type erroringCloud struct{ *countingCloud }

func (erroringCloud) ClassifyError(err error) limiter.ErrorClass {
	return statusTable.ClassifyError(err)
}

// namedCloud is an unmodified upstream named name.
type namedCloud struct {
	*countingCloud
	name string
}

func (c namedCloud) ProviderName() string { return c.name }

// The breakers' policy follows the provider's error classification, the
// upstream's own or the one registered for its name: a 404 is the cloud
// answering, a 503 a failure, a 429 throttling. Without one, the generic
// rules cannot read statusErr, and every such error counts as a failure.
func TestBreakerPolicyUsesProviderErrorClassification(t *testing.T) {
	RegisterErrorClassifier("test-registered", statusTable)
	tests := []struct {
		err              error
		notAFailure      bool // with a classification
		throttled, plain bool // throttled with one; notAFailure without
	}{
		{statusErr{404}, true, false, false},
		{fmt.Errorf("wrapped: %w", statusErr{403}), true, false, false},
		{statusErr{429}, true, true, true}, // "429" in its text: the generic patterns
		{statusErr{503}, false, false, false},
		{statusErr{408}, false, false, false},
	}
	for _, up := range []struct {
		name string
		c    cloudprovider.Interface
	}{
		{"own", erroringCloud{newCountingCloud()}},
		{"registered", namedCloud{newCountingCloud(), "test-registered"}},
	} {
		g, err := newGate(up.c, testConfig(nil), gateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			if got := g.notACloudFailure(tt.err); got != tt.notAFailure {
				t.Errorf("%s: notACloudFailure(%v) = %v, want %v", up.name, tt.err, got, tt.notAFailure)
			}
			if got, _ := g.throttle.Classify(tt.err); got != tt.throttled {
				t.Errorf("%s: Classify(%v) = %v, want %v", up.name, tt.err, got, tt.throttled)
			}
		}
	}
	plain, err := newGate(namedCloud{newCountingCloud(), "test-unregistered"}, testConfig(nil), gateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		if got := plain.notACloudFailure(tt.err); got != tt.plain {
			t.Errorf("no classification: notACloudFailure(%v) = %v, want %v", tt.err, got, tt.plain)
		}
	}
}
