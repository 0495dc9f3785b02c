package limiter

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// RetryAfterer is implemented by errors that carry a server's Retry-After.
// ok reports whether the server sent one.
type RetryAfterer interface {
	RetryAfter() (d time.Duration, ok bool)
}

// defaultThrottlePatterns are the regular expressions (Go syntax) that
// NewThrottleClassifier always uses: HTTP 429 and the throttling error codes
// of the major clouds.
//
// 429 must stand alone as a number: not next to a letter, digit, '_', '-'
// or '.' (a '.' directly after it is allowed when it ends the number, as in
// "status 429."). So "HTTP 429", "code=429" and "(429)" match while
// "node-429", "node-1429", "10.4.29.1", "1.429s" and "i-0429ab" do not; a
// plain `\b429\b` would wrongly match numbered node names like "node-429".
var defaultThrottlePatterns = []string{
	`(?:^|[^\w.-])429(?:\.?(?:[^\w.-]|$))`,
	`\bRequestLimitExceeded\b`, // AWS EC2
	`\bThrottling`,             // AWS "Throttling", "ThrottlingException"
	`\bTooManyRequests\b`,      // Azure ARM error code
	`(?i)\btoo many requests\b`,
	`[Rr]ateLimitExceeded\b`, // GCE "rateLimitExceeded", "userRateLimitExceeded"
	`\bSlowDown\b`,           // S3 / OSS
	// The rest of the AWS SDK's throttle codes (aws/retry.DefaultThrottleErrorCodes);
	// "Throttling", "ThrottlingException" and "RequestLimitExceeded" are above.
	`\b(?:EC2)?ThrottledException\b`,
	`\bRequestThrottled(?:Exception)?\b`,
	`\b(?:TooManyRequests|ProvisionedThroughputExceeded|TransactionInProgress|LimitExceeded)Exception\b`,
	`\b(?:BandwidthLimitExceeded|PriorRequestNotComplete)\b`,
}

// ProviderClassifier is implemented by a cloud provider (or a provider
// adapter) that recognises its own throttling errors, typically from the
// error codes its SDK returns rather than from the message text.
//
// ClassifyThrottle reports known == false when the error is not one the
// provider can judge (the patterns then decide); with known == true its
// throttled answer is final. It must be safe for concurrent use.
type ProviderClassifier interface {
	ClassifyThrottle(err error) (throttled, known bool)
}

// ThrottleClassifier recognises throttling errors. It is immutable and safe
// for concurrent use.
type ThrottleClassifier struct {
	re       *regexp.Regexp     // all patterns, alternated
	provider ProviderClassifier // asked before the patterns; may be nil
	errs     ErrorClassifier    // asked before provider; may be nil
}

// WithProvider returns a copy of c that asks p first (after a Retry-After
// carrying error, which is always throttling). A nil p returns c.
func (c *ThrottleClassifier) WithProvider(p ProviderClassifier) *ThrottleClassifier {
	if p == nil {
		return c
	}
	return &ThrottleClassifier{re: c.re, provider: p, errs: c.errs}
}

// WithErrors returns a copy of c that asks e first (after a Retry-After
// carrying error, which is always throttling). A nil e returns c.
func (c *ThrottleClassifier) WithErrors(e ErrorClassifier) *ThrottleClassifier {
	if e == nil {
		return c
	}
	return &ThrottleClassifier{re: c.re, provider: c.provider, errs: e}
}

// Class classifies err, in this order: an error in its tree carrying a
// Retry-After is throttling; then the provider's ErrorClassifier
// (WithErrors) decides if it judges err; then a ProviderClassifier
// (WithProvider) that knows err says whether it is throttling; then the
// throttle patterns; then an HTTP status an error in the tree carries
// (HTTPStatusCode() or StatusCode(), see HTTPStatusClass). A nil err is
// ClassUnknown, and so is an error nothing judges (the breakers count it as
// a cloud failure).
func (c *ThrottleClassifier) Class(err error) ErrorClass {
	class, _ := c.classify(err)
	return class
}

func (c *ThrottleClassifier) classify(err error) (ErrorClass, time.Duration) {
	if err == nil {
		return ClassUnknown, 0
	}
	if d, ok := findRetryAfter(err); ok {
		return ClassThrottled, max(d, 0)
	}
	if c.errs != nil {
		if class := c.errs.ClassifyError(err); class != ClassUnknown {
			return class, 0
		}
	}
	patterns := true
	if c.provider != nil {
		if throttled, known := c.provider.ClassifyThrottle(err); known {
			if throttled {
				return ClassThrottled, 0
			}
			patterns = false // its "not throttling" is final; a status may still say refused
		}
	}
	if patterns && c.re.MatchString(err.Error()) {
		return ClassThrottled, 0
	}
	class := statusRules.ClassifyError(err)
	if class == ClassThrottled && !patterns {
		class = ClassUnknown // the provider's "not throttling" is final
	}
	return class, 0
}

// NewThrottleClassifier returns a classifier matching defaultThrottlePatterns
// plus extraPatterns (Go regexps, matched anywhere in the error message). A
// pattern that does not compile is reported in the error, quoted.
func NewThrottleClassifier(extraPatterns []string) (*ThrottleClassifier, error) {
	all := make([]string, 0, len(defaultThrottlePatterns)+len(extraPatterns))
	all = append(all, defaultThrottlePatterns...)
	all = append(all, extraPatterns...)
	for i, p := range all {
		if _, err := regexp.Compile(p); err != nil {
			return nil, fmt.Errorf("limiter: throttle pattern %q: %w", p, err)
		}
		all[i] = "(?:" + p + ")"
	}
	re, err := regexp.Compile(strings.Join(all, "|"))
	if err != nil { // not expected once each part compiled
		return nil, fmt.Errorf("limiter: throttle patterns: %w", err)
	}
	return &ThrottleClassifier{re: re}, nil
}

// Classify reports whether err is a throttling error and the Retry-After to
// honour (0 if none): Class is ClassThrottled, see Class.
//
// err is throttling if any error in its tree (followed through
// Unwrap() error and Unwrap() []error) implements RetryAfterer and returns
// ok == true — the first such error, depth first, supplies retryAfter
// (negative values become 0) — or else, when an ErrorClassifier is set
// (WithErrors) and judges err, as it answers, or else when a
// ProviderClassifier is set (WithProvider) and knows err, as it answers —
// or else if err's message matches one of the patterns. A nil err is not
// throttling.
func (c *ThrottleClassifier) Classify(err error) (throttled bool, retryAfter time.Duration) {
	class, d := c.classify(err)
	return class == ClassThrottled, d
}

// findRetryAfter walks err's tree depth first for a RetryAfterer with ok.
func findRetryAfter(err error) (time.Duration, bool) {
	for err != nil {
		if ra, isRA := err.(RetryAfterer); isRA {
			if d, ok := ra.RetryAfter(); ok {
				return d, true
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if d, ok := findRetryAfter(e); ok {
					return d, true
				}
			}
			return 0, false
		default:
			return 0, false
		}
	}
	return 0, false
}
