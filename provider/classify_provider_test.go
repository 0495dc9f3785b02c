package provider

import (
	"errors"
	"strings"
	"testing"
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
