package awsbatch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/cloudgate/cloudgate/limiter"
)

func TestClassifyThrottleEveryAWSCode(t *testing.T) {
	c := &Cloud{}
	if len(retry.DefaultThrottleErrorCodes) == 0 {
		t.Fatal("the SDK lists no throttle codes")
	}
	patterns, err := limiter.NewThrottleClassifier(nil)
	if err != nil {
		t.Fatal(err)
	}
	withProvider := patterns.WithProvider(c)
	for code := range retry.DefaultThrottleErrorCodes {
		t.Run(code, func(t *testing.T) {
			// As the SDK wraps it: operation error → response error → API error.
			e := fmt.Errorf("operation error EC2: DescribeInstances, https response error StatusCode: 503: %w",
				&smithy.GenericAPIError{Code: code, Message: "slow down"})
			if throttled, known := c.ClassifyThrottle(e); !throttled || !known {
				t.Fatalf("ClassifyThrottle(%s) = %v, %v; want true, true", code, throttled, known)
			}
			if throttled, _ := withProvider.Classify(e); !throttled {
				t.Fatalf("gate classifier with the adapter: %s not throttling", code)
			}
			// The default patterns alone also know every SDK code by name.
			if throttled, _ := patterns.Classify(errors.New(code + ": slow down")); !throttled {
				t.Fatalf("default patterns miss %s", code)
			}
		})
	}
}

func TestClassifyThrottleOtherErrors(t *testing.T) {
	c := &Cloud{}
	tests := []struct {
		name             string
		err              error
		throttled, known bool
	}{
		{"not found", &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: "HTTP 429 in text"}, false, true},
		{"quota, not throttling", fmt.Errorf("x: %w", &smithy.GenericAPIError{Code: "InstanceLimitExceeded"}), false, true},
		{"no API error", errors.New("dial tcp: connection refused"), false, false},
		{"nil", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			throttled, known := c.ClassifyThrottle(tt.err)
			if throttled != tt.throttled || known != tt.known {
				t.Fatalf("ClassifyThrottle(%v) = %v, %v; want %v, %v", tt.err, throttled, known, tt.throttled, tt.known)
			}
		})
	}
}
