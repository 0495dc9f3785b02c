package gcebatch

import (
	"errors"
	"net/http"

	"google.golang.org/api/googleapi"

	"github.com/cloudgate/cloudgate/limiter"
)

var _ limiter.ProviderClassifier = (*Cloud)(nil)

// throttleReasons are the error reasons Google APIs give a request refused for a rate quota
// (Compute Engine documents 403 rateLimitExceeded; userRateLimitExceeded is the per-user
// form).
var throttleReasons = map[string]bool{"rateLimitExceeded": true, "userRateLimitExceeded": true}

// ClassifyThrottle implements limiter.ProviderClassifier for errors whose tree holds a
// *googleapi.Error (the compute client's): HTTP 429, or a reason in throttleReasons, is
// throttling; any other status (a 403 for a missing permission, a 404) is not. The GCE
// provider formats some errors with %v (InstanceMetadata), which drops the type: those are
// left to cloudgate's patterns, which match the same reasons in the message.
func (c *Cloud) ClassifyThrottle(err error) (throttled, known bool) {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return false, false
	}
	if ge.Code == http.StatusTooManyRequests {
		return true, true
	}
	for _, e := range ge.Errors {
		if throttleReasons[e.Reason] {
			return true, true
		}
	}
	return false, true
}
