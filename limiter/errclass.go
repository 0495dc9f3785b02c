package limiter

import (
	"errors"
	"regexp"
	"strconv"
)

// ErrorClass is what an upstream's error says about the cloud: the
// breakers count only ClassFailed, the adaptive limiter slows down on
// ClassThrottled.
type ErrorClass uint8

const (
	// ClassUnknown: the rule or classifier cannot judge the error. An error
	// no rule judges counts as a cloud failure.
	ClassUnknown ErrorClass = iota
	// ClassFailed: the cloud failed to answer (a 5xx, 408, a transport
	// error or a timeout).
	ClassFailed
	// ClassRefused: the cloud answered and refused this one request (a 4xx
	// other than 408 and 429: not found, bad input, a conflict, not
	// permitted), which says nothing about its health.
	ClassRefused
	// ClassThrottled: the cloud refused the request for quota.
	ClassThrottled
)

func (c ErrorClass) String() string {
	switch c {
	case ClassFailed:
		return "failed"
	case ClassRefused:
		return "refused"
	case ClassThrottled:
		return "throttled"
	}
	return "unknown"
}

// ErrorClassifier classifies a provider's errors, typically from its SDK's
// error types and codes. It is asked before cloudgate's generic rules
// (Retry-After excepted), and its answer other than ClassUnknown is final.
// It must be safe for concurrent use. An ErrorTable is one.
type ErrorClassifier interface {
	ClassifyError(err error) ErrorClass
}

// ErrorRule is one row of an ErrorTable.
type ErrorRule struct {
	// What names the errors the rule judges, for documentation and tests.
	What string
	// Classify returns the class of err, or ClassUnknown when the rule
	// does not apply to it.
	Classify func(err error) ErrorClass
}

// ErrorTable is a provider's error classification: its rules in order,
// the first that judges an error deciding.
type ErrorTable []ErrorRule

// ClassifyError implements ErrorClassifier.
func (t ErrorTable) ClassifyError(err error) ErrorClass {
	if err == nil {
		return ClassUnknown
	}
	for _, r := range t {
		if c := r.Classify(err); c != ClassUnknown {
			return c
		}
	}
	return ClassUnknown
}

// HTTPStatusClass is the class of an HTTP status: 429 is throttling, 408
// and 5xx are cloud failures, any other 4xx a refusal; other codes are
// ClassUnknown.
func HTTPStatusClass(code int) ErrorClass {
	switch {
	case code == 429:
		return ClassThrottled
	case code == 408 || code >= 500 && code < 600:
		return ClassFailed
	case code >= 400 && code < 500:
		return ClassRefused
	}
	return ClassUnknown
}

// StatusInMessage is a rule for errors whose HTTP status is known only from
// their text (a provider that formats its SDK's error with %v drops the
// type): re's first group is the status.
func StatusInMessage(what, re string) ErrorRule {
	rx := regexp.MustCompile(re)
	return ErrorRule{What: what, Classify: func(err error) ErrorClass {
		m := rx.FindStringSubmatch(err.Error())
		if m == nil {
			return ClassUnknown
		}
		code, _ := strconv.Atoi(m[1])
		return HTTPStatusClass(code)
	}}
}

// MessageRule is a rule giving class to the errors whose text matches re.
func MessageRule(what, re string, class ErrorClass) ErrorRule {
	rx := regexp.MustCompile(re)
	return ErrorRule{What: what, Classify: func(err error) ErrorClass {
		if rx.MatchString(err.Error()) {
			return class
		}
		return ClassUnknown
	}}
}

// AsRule is a rule for the errors whose tree holds an E (errors.As): class
// says how to judge it.
func AsRule[E error](what string, class func(E) ErrorClass) ErrorRule {
	return ErrorRule{What: what, Classify: func(err error) ErrorClass {
		var e E
		if !errors.As(err, &e) {
			return ClassUnknown
		}
		return class(e)
	}}
}

// statusRules are the generic rules every classification ends with: the
// HTTP status of an error in the tree that carries one, as the AWS SDKs'
// errors do.
var statusRules = ErrorTable{
	AsRule("an error with an HTTPStatusCode() int method (AWS SDK v2)", func(e interface {
		error
		HTTPStatusCode() int
	}) ErrorClass {
		return HTTPStatusClass(e.HTTPStatusCode())
	}),
	AsRule("an error with a StatusCode() int method (AWS SDK v1)", func(e interface {
		error
		StatusCode() int
	}) ErrorClass {
		return HTTPStatusClass(e.StatusCode())
	}),
}

// IsClientError reports whether err carries an HTTP status in 4xx other
// than 408 (request timeout) and 429 (throttling), read from an error in
// its tree with an HTTPStatusCode() or StatusCode() method: the cloud
// answered and refused this one request.
func IsClientError(err error) bool {
	return statusRules.ClassifyError(err) == ClassRefused
}
