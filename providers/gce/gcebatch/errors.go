package gcebatch

import (
	"net/http"
	"net/url"

	"google.golang.org/api/googleapi"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/provider"
)

// throttleReasons are the error reasons Google APIs give a request refused for a rate quota
// (Compute Engine documents 403 rateLimitExceeded; userRateLimitExceeded is the per-user
// form).
var throttleReasons = map[string]bool{"rateLimitExceeded": true, "userRateLimitExceeded": true}

// Errors is the classification of the GCE provider's errors (the compute
// client's *googleapi.Error), first rule first: HTTP 429, or a 403 whose
// reason is a rate quota (throttleReasons), is throttling; any other 4xx (a
// 404 for a route or instance already gone, a 403 for a missing permission,
// a 409 conflict) is a per-request refusal; a 5xx a cloud failure. The GCE
// provider formats some errors with %v (InstanceMetadata: "error while
// querying for providerID ...: googleapi: Error 404: ..."), which drops the
// type: the last rules read googleapi's text for those, rate-quota reasons
// first (this table is asked before cloudgate's generic throttle patterns).
var Errors = limiter.ErrorTable{
	limiter.AsRule("a Google API error (*googleapi.Error): 429 or a rate-quota reason is throttling, else its HTTP status",
		func(e *googleapi.Error) limiter.ErrorClass {
			if e.Code == http.StatusTooManyRequests {
				return limiter.ClassThrottled
			}
			for _, r := range e.Errors {
				if throttleReasons[r.Reason] {
					return limiter.ClassThrottled
				}
			}
			return limiter.HTTPStatusClass(e.Code)
		}),
	limiter.MessageRule("a Google API error formatted as text, with a rate-quota reason",
		`googleapi: Error \d{3}: .*\b(?:rateLimitExceeded|userRateLimitExceeded)\b`, limiter.ClassThrottled),
	limiter.StatusInMessage("a Google API error formatted as text: 'googleapi: Error NNN'", `googleapi: Error (\d{3})\b`),
	limiter.AsRule("a request that got no answer (*url.Error: DNS, connection, TLS, the client's timeout)",
		func(*url.Error) limiter.ErrorClass { return limiter.ClassFailed }),
}

// The unmodified "gce" provider's errors are classified by the same table
// (the GCE CCM imports this package to register gce-batch); gce-batch
// implements it as a method.
func init() { provider.RegisterErrorClassifier("gce", Errors) }

var _ provider.ErrorClassifier = (*Cloud)(nil)

// ClassifyError implements provider.ErrorClassifier with Errors.
func (c *Cloud) ClassifyError(err error) limiter.ErrorClass { return Errors.ClassifyError(err) }
