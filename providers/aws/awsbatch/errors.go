package awsbatch

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/cloudgate/cloudgate/limiter"
)

var _ limiter.ProviderClassifier = (*Cloud)(nil)

// ClassifyThrottle implements limiter.ProviderClassifier: an error whose tree
// holds a smithy.APIError (every AWS SDK v2 service error) is throttling
// exactly when its error code is one of the SDK's own throttle codes,
// retry.DefaultThrottleErrorCodes, the set the SDK's retryer uses. Errors
// without an API error code (transport errors, the provider's own errors)
// are left to cloudgate's patterns.
func (c *Cloud) ClassifyThrottle(err error) (throttled, known bool) {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false, false
	}
	_, throttled = retry.DefaultThrottleErrorCodes[api.ErrorCode()]
	return throttled, true
}
