package limiter

import (
	"errors"
	"fmt"
	"testing"
)

// v2Err carries an HTTP status as AWS SDK v2 errors do.
type v2Err struct{ code int }

func (e v2Err) Error() string       { return fmt.Sprintf("status %d", e.code) }
func (e v2Err) HTTPStatusCode() int { return e.code }

// knowsNothing is a ProviderClassifier that knows every error and calls
// none throttling.
type knowsNothing struct{}

func (knowsNothing) ClassifyThrottle(error) (bool, bool) { return false, true }

func TestHTTPStatusClass(t *testing.T) {
	for code, want := range map[int]ErrorClass{
		200: ClassUnknown, 400: ClassRefused, 403: ClassRefused, 404: ClassRefused, 409: ClassRefused,
		408: ClassFailed, 429: ClassThrottled, 500: ClassFailed, 503: ClassFailed, 600: ClassUnknown,
	} {
		if got := HTTPStatusClass(code); got != want {
			t.Errorf("HTTPStatusClass(%d) = %s, want %s", code, got, want)
		}
	}
}

// Class asks, in order: Retry-After, the ErrorClassifier, a
// ProviderClassifier, the patterns, an HTTP status in the tree.
func TestClassOrder(t *testing.T) {
	base, err := NewThrottleClassifier(nil)
	if err != nil {
		t.Fatal(err)
	}
	table := ErrorTable{
		MessageRule("says fine", `all fine`, ClassRefused),
		StatusInMessage("code=NNN", `code=(\d{3})`),
	}
	withTable := base.WithErrors(table)
	withBoth := withTable.WithProvider(knowsNothing{})
	tests := []struct {
		name                  string
		err                   error
		base, table, provider ErrorClass
	}{
		{"nil", nil, ClassUnknown, ClassUnknown, ClassUnknown},
		{"Retry-After first", &retryAfterErr{msg: "all fine", d: 1, ok: true}, ClassThrottled, ClassThrottled, ClassThrottled},
		{"table before patterns", errors.New("all fine: HTTP 429"), ClassThrottled, ClassRefused, ClassRefused},
		{"status in text", errors.New("code=404"), ClassUnknown, ClassRefused, ClassRefused},
		{"status method", fmt.Errorf("w: %w", v2Err{404}), ClassRefused, ClassRefused, ClassRefused},
		{"status method 5xx", v2Err{503}, ClassFailed, ClassFailed, ClassFailed},
		{"patterns", errors.New("RequestLimitExceeded"), ClassThrottled, ClassThrottled, ClassUnknown},
		{"429 status, provider says not throttling", v2Err{429}, ClassThrottled, ClassThrottled, ClassUnknown},
		{"nothing judges it", errors.New("boom"), ClassUnknown, ClassUnknown, ClassUnknown},
	}
	for _, tt := range tests {
		for _, c := range []struct {
			cl   *ThrottleClassifier
			want ErrorClass
		}{{base, tt.base}, {withTable, tt.table}, {withBoth, tt.provider}} {
			if got := c.cl.Class(tt.err); got != c.want {
				t.Errorf("%s: Class = %s, want %s", tt.name, got, c.want)
			}
			if th, _ := c.cl.Classify(tt.err); th != (c.want == ClassThrottled) {
				t.Errorf("%s: Classify = %v, want %v", tt.name, th, c.want == ClassThrottled)
			}
		}
	}
	if !IsClientError(v2Err{404}) || IsClientError(v2Err{429}) || IsClientError(errors.New("404")) {
		t.Error("IsClientError: want true for a 404 status only")
	}
}
