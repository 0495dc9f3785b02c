package awsbatch

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cloudgate/cloudgate/limiter"
)

// sdkError is an error as the AWS SDK v2 returns it from an operation:
// operation error → response error (HTTP status, request ID) → API error.
func sdkError(status int, code string, fault smithy.ErrorFault) error {
	return &smithy.OperationError{ServiceID: "EC2", OperationName: "DescribeInstances", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      &smithy.GenericAPIError{Code: code, Message: "m", Fault: fault},
		},
		RequestID: "r-1",
	}}
}

// gateClassifier is the classification the gate runs with this provider:
// the table first, then cloudgate's generic rules.
func gateClassifier(t *testing.T) *limiter.ThrottleClassifier {
	t.Helper()
	c, err := limiter.NewThrottleClassifier(nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.WithErrors(Errors)
}

func TestErrorsEveryThrottleCode(t *testing.T) {
	if len(retry.DefaultThrottleErrorCodes) == 0 {
		t.Fatal("the SDK lists no throttle codes")
	}
	g := gateClassifier(t)
	for code := range retry.DefaultThrottleErrorCodes {
		for _, status := range []int{400, 503} { // EC2 answers RequestLimitExceeded with 503
			e := sdkError(status, code, smithy.FaultClient)
			if c := g.Class(e); c != limiter.ClassThrottled {
				t.Errorf("%s (%d): %s, want throttled", code, status, c)
			}
			if c := g.Class(fmt.Errorf("provider: %v", e)); c != limiter.ClassThrottled {
				t.Errorf("%s (%d) as text: %s, want throttled", code, status, c)
			}
		}
	}
}

func TestErrorsTable(t *testing.T) {
	g := gateClassifier(t)
	transport := &smithy.OperationError{ServiceID: "EC2", OperationName: "DescribeInstances",
		Err: &smithyhttp.RequestSendError{Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}}
	tests := []struct {
		name string
		err  error
		want limiter.ErrorClass
	}{
		{"404-like: unknown instance ID", sdkError(400, "InvalidInstanceID.NotFound", smithy.FaultClient), limiter.ClassRefused},
		{"duplicate rule", sdkError(400, "InvalidPermission.Duplicate", smithy.FaultClient), limiter.ClassRefused},
		{"missing permission", sdkError(403, "UnauthorizedOperation", smithy.FaultClient), limiter.ClassRefused},
		{"ELB not found", sdkError(400, "LoadBalancerNotFound", smithy.FaultClient), limiter.ClassRefused},
		{"instance quota, not a rate", sdkError(400, "InstanceLimitExceeded", smithy.FaultClient), limiter.ClassRefused},
		{"internal error", sdkError(500, "InternalError", smithy.FaultServer), limiter.ClassFailed},
		{"unavailable", sdkError(503, "Unavailable", smithy.FaultServer), limiter.ClassFailed},
		{"request timeout", sdkError(408, "RequestTimeout", smithy.FaultUnknown), limiter.ClassFailed},
		{"transport", transport, limiter.ClassFailed},
		{"API error without response, client fault", &smithy.GenericAPIError{Code: "InvalidParameterValue", Fault: smithy.FaultClient}, limiter.ClassRefused},
		{"API error without response, server fault", &smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer}, limiter.ClassFailed},
		{"404-like as text", fmt.Errorf("error listing AWS instances: %v", sdkError(400, "InvalidInstanceID.Malformed", smithy.FaultClient)), limiter.ClassRefused},
		{"5xx as text", fmt.Errorf("error: %v", sdkError(500, "InternalError", smithy.FaultServer)), limiter.ClassFailed},
		{"plain error", errors.New("something went wrong"), limiter.ClassUnknown},
	}
	for _, tt := range tests {
		if got := Errors.ClassifyError(tt.err); got != tt.want {
			t.Errorf("%s: table says %s, want %s", tt.name, got, tt.want)
		}
	}
	// Through the gate: what no rule judges is a cloud failure (unknown).
	if c := g.Class(sdkError(400, "InvalidInstanceID.NotFound", smithy.FaultClient)); c != limiter.ClassRefused {
		t.Errorf("gate: %s, want refused", c)
	}
}
