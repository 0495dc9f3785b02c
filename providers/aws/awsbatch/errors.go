package awsbatch

import (
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/provider"
)

// Errors is the classification of the AWS provider's errors (EC2, ELB,
// ELBv2: every AWS SDK v2 service error has the same shape), first rule
// first. Throttling is the SDK's own list of throttle codes, the set its
// retryer uses; a per-request refusal is a 4xx (InvalidInstanceID.NotFound,
// a duplicate security group rule, a missing permission); a cloud failure
// is a 5xx or a request that got no answer. The provider formats some SDK
// errors with %v, which drops the types: the last rules read the SDK's
// text ("api error CODE", "StatusCode: NNN") for those.
var Errors = limiter.ErrorTable{
	limiter.AsRule("an AWS API error (smithy.APIError) with one of the SDK's throttle codes (retry.DefaultThrottleErrorCodes)",
		func(e smithy.APIError) limiter.ErrorClass {
			if _, ok := retry.DefaultThrottleErrorCodes[e.ErrorCode()]; ok {
				return limiter.ClassThrottled
			}
			return limiter.ClassUnknown
		}),
	limiter.AsRule("an AWS response error (awshttp.ResponseError): its HTTP status",
		func(e *awshttp.ResponseError) limiter.ErrorClass { return limiter.HTTPStatusClass(e.HTTPStatusCode()) }),
	limiter.AsRule("an AWS API error without a response: its fault (client: refused, server: failed)",
		func(e smithy.APIError) limiter.ErrorClass {
			switch e.ErrorFault() {
			case smithy.FaultClient:
				return limiter.ClassRefused
			case smithy.FaultServer:
				return limiter.ClassFailed
			}
			return limiter.ClassUnknown
		}),
	limiter.AsRule("a request that got no answer (smithyhttp.RequestSendError: DNS, connection, TLS)",
		func(*smithyhttp.RequestSendError) limiter.ErrorClass { return limiter.ClassFailed }),
	{What: "an SDK error formatted as text: 'api error CODE' with a throttle code", Classify: throttleCodeInText},
	limiter.StatusInMessage("an SDK error formatted as text: 'StatusCode: NNN'", `\bStatusCode: (\d{3})\b`),
}

var apiErrorCode = regexp.MustCompile(`\bapi error ([A-Za-z0-9.]+):`)

func throttleCodeInText(err error) limiter.ErrorClass {
	for _, m := range apiErrorCode.FindAllStringSubmatch(err.Error(), -1) {
		if _, ok := retry.DefaultThrottleErrorCodes[m[1]]; ok {
			return limiter.ClassThrottled
		}
	}
	return limiter.ClassUnknown
}

// The unmodified "aws" provider's errors are classified by the same table
// (the AWS CCM imports this package to register aws-batch); aws-batch
// implements it as a method.
func init() { provider.RegisterErrorClassifier("aws", Errors) }

var _ provider.ErrorClassifier = (*Cloud)(nil)

// ClassifyError implements provider.ErrorClassifier with Errors.
func (c *Cloud) ClassifyError(err error) limiter.ErrorClass { return Errors.ClassifyError(err) }
