package limiter

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// retryAfterErr is a cloud SDK error carrying a Retry-After.
type retryAfterErr struct {
	msg string
	d   time.Duration
	ok  bool
}

func (e *retryAfterErr) Error() string                     { return e.msg }
func (e *retryAfterErr) RetryAfter() (time.Duration, bool) { return e.d, e.ok }

func TestThrottleClassifier(t *testing.T) {
	withRetry := &retryAfterErr{msg: "upstream busy", d: 3 * time.Second, ok: true}
	tests := []struct {
		name      string
		err       error
		throttled bool
		retry     time.Duration
	}{
		{"nil", nil, false, 0},
		{"not found with IP", errors.New("instance 10.4.29.1 not found"), false, 0},
		{"node name containing 429", errors.New("node-1429 not found"), false, 0},
		{"node name ending in -429", errors.New(`node "node-429" not found`), false, 0},
		{"duration", errors.New("call took 1.429s"), false, 0},
		{"instance id", errors.New("instance i-0429ab terminated"), false, 0},
		{"4290", errors.New("port 4290 refused"), false, 0},
		{"CPU throttling", errors.New("CPUThrottling detected"), false, 0},
		{"HTTP 429", errors.New("HTTP 429 Too Many Requests"), true, 0},
		{"status code", errors.New("unexpected status code: 429"), true, 0},
		{"status code sentence", errors.New("server returned status 429."), true, 0},
		{"status code key", errors.New("StatusCode=429, RawError: {}"), true, 0},
		{"bare", errors.New("429"), true, 0},
		{"AWS RequestLimitExceeded", errors.New("RequestLimitExceeded: Request limit exceeded.\n\tstatus code: 503"), true, 0},
		{"AWS Throttling", errors.New("Throttling: Rate exceeded"), true, 0},
		{"AWS ThrottlingException", errors.New("operation error: ThrottlingException: Rate exceeded"), true, 0},
		{"Azure TooManyRequests", errors.New(`Code="TooManyRequests" Message="..."`), true, 0},
		{"too many requests lower case", errors.New("too many requests, slow down"), true, 0},
		{"GCE rateLimitExceeded", errors.New("googleapi: Error 403: Rate Limit Exceeded, rateLimitExceeded"), true, 0},
		{"GCE userRateLimitExceeded", errors.New("googleapi: Error 403: userRateLimitExceeded"), true, 0},
		{"S3 SlowDown", errors.New("SlowDown: Please reduce your request rate."), true, 0},
		{"RetryAfterer", withRetry, true, 3 * time.Second},
		{"RetryAfterer wrapped", fmt.Errorf("get instance: %w", withRetry), true, 3 * time.Second},
		{"RetryAfterer wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", withRetry)), true, 3 * time.Second},
		{"RetryAfterer in a join", errors.Join(errors.New("other"), fmt.Errorf("x: %w", withRetry)), true, 3 * time.Second},
		{"RetryAfterer without value", &retryAfterErr{msg: "upstream busy"}, false, 0},
		{"RetryAfterer without value, 429 text", &retryAfterErr{msg: "status 429"}, true, 0},
		{"RetryAfterer behind one without value", fmt.Errorf("%w: %w", &retryAfterErr{msg: "a"}, withRetry), true, 3 * time.Second},
		{"negative Retry-After", &retryAfterErr{msg: "x", d: -time.Second, ok: true}, true, 0},
		{"extra pattern", errors.New("QuotaExceeded for project"), true, 0},
		{"AWS ThrottledException", errors.New("api error ThrottledException: slow"), true, 0},
		{"AWS RequestThrottledException", errors.New("RequestThrottledException: x"), true, 0},
		{"AWS TooManyRequestsException", errors.New("TooManyRequestsException: x"), true, 0},
		{"AWS ProvisionedThroughputExceededException", errors.New("ProvisionedThroughputExceededException: x"), true, 0},
		{"AWS TransactionInProgressException", errors.New("TransactionInProgressException: x"), true, 0},
		{"AWS BandwidthLimitExceeded", errors.New("BandwidthLimitExceeded: x"), true, 0},
		{"AWS EC2ThrottledException", errors.New("EC2ThrottledException: x"), true, 0},
		{"AWS RequestThrottled", errors.New("RequestThrottled: x"), true, 0},
		{"AWS PriorRequestNotComplete", errors.New("PriorRequestNotComplete: x"), true, 0},
		{"AWS LimitExceededException", errors.New("LimitExceededException: x"), true, 0},
		{"EC2 InstanceLimitExceeded is a quota, not throttling", errors.New("InstanceLimitExceeded: You have requested more instances"), false, 0},
	}
	c, err := NewThrottleClassifier([]string{`\bQuotaExceeded\b`})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			throttled, retry := c.Classify(tt.err)
			if throttled != tt.throttled || retry != tt.retry {
				t.Fatalf("Classify(%v) = %v, %v; want %v, %v", tt.err, throttled, retry, tt.throttled, tt.retry)
			}
		})
	}
}

func TestThrottleClassifierDefaultsOnly(t *testing.T) {
	c, err := NewThrottleClassifier(nil)
	if err != nil {
		t.Fatal(err)
	}
	if throttled, _ := c.Classify(errors.New("QuotaExceeded")); throttled {
		t.Fatal("extra pattern matched without being configured")
	}
	if throttled, _ := c.Classify(errors.New("HTTP 429")); !throttled {
		t.Fatal("default pattern did not match")
	}
}

func TestThrottleClassifierBadPattern(t *testing.T) {
	_, err := NewThrottleClassifier([]string{`ok`, `(unclosed`})
	if err == nil || !strings.Contains(err.Error(), `"(unclosed"`) {
		t.Fatalf("NewThrottleClassifier = %v, want error naming the pattern", err)
	}
}

// codeClassifier knows errors whose message starts with "code:".
type codeClassifier struct{ throttling map[string]bool }

func (c codeClassifier) ClassifyThrottle(err error) (throttled, known bool) {
	code, ok := strings.CutPrefix(err.Error(), "code:")
	if !ok {
		return false, false
	}
	return c.throttling[code], true
}

func TestThrottleClassifierWithProvider(t *testing.T) {
	base, err := NewThrottleClassifier(nil)
	if err != nil {
		t.Fatal(err)
	}
	if base.WithProvider(nil) != base {
		t.Fatal("WithProvider(nil) did not return the classifier itself")
	}
	c := base.WithProvider(codeClassifier{throttling: map[string]bool{"SlowPlease": true}})
	tests := []struct {
		name      string
		err       error
		throttled bool
		retry     time.Duration
	}{
		{"provider code throttling", errors.New("code:SlowPlease"), true, 0},
		{"provider says not throttling despite 429 text", errors.New("code:Other 429"), false, 0},
		{"unknown to the provider: patterns decide", errors.New("HTTP 429"), true, 0},
		{"unknown to the provider, no pattern", errors.New("not found"), false, 0},
		{"Retry-After first", &retryAfterErr{msg: "code:Other", d: time.Second, ok: true}, true, time.Second},
		{"nil", nil, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			throttled, retry := c.Classify(tt.err)
			if throttled != tt.throttled || retry != tt.retry {
				t.Fatalf("Classify(%v) = %v, %v; want %v, %v", tt.err, throttled, retry, tt.throttled, tt.retry)
			}
		})
	}
	if throttled, _ := base.Classify(errors.New("code:SlowPlease")); throttled {
		t.Fatal("WithProvider changed the original classifier")
	}
}
