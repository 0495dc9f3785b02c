// Package awsrequests puts cloudgate in front of every EC2, ELB and ELBv2
// request the unmodified AWS cloud provider (k8s.io/cloud-provider-aws)
// and the awsbatch adapter send, inside the CCM process.
//
// # The door
//
// The provider builds each SDK client (Compute, LoadBalancing,
// LoadBalancingV2 in pkg/providers/v1/aws_sdk.go) from
// config.LoadDefaultConfig with its package-level defaultHTTPClient, then
// appends its own middleware. It takes no client, transport or middleware
// from its caller: NewAWSCloud takes a Services, but its clients
// (awsSdkEC2) are unexported, and the HTTP client is an
// *awshttp.BuildableClient whose transport every client clones, so a
// RoundTripper put there is lost. What every one of those clients does
// share is config.LoadDefaultConfig, which resolves an aws.Config through
// the SDK's list of resolvers. Install appends one resolver to that list
// (go:linkname; the list's element type is the SDK's unexported
// awsConfigResolver, whose shape is pinned by the SDK version in go.mod and
// checked at Install): it adds one Finalize-step middleware, after the
// retryer (so each attempt, retries included, passes it) and before the
// signer (so a request that waited is signed when it is sent). The
// middleware sees the request in the process, before signing; credentials
// never leave the process, and nothing is dialled but the endpoints the
// provider resolves (the cloud's, or the [ServiceOverride] ones).
//
// Each request of the EC2, Elastic Load Balancing and Elastic Load
// Balancing v2 services then passes a provider.RequestGate: the breaker of
// its service, the token bucket of its action (EC2's documented shape,
// Buckets), at the priority of the cloudgate call it was sent for; and it
// is counted by service, action, method and HTTP status code. Other
// services (STS, KMS, the instance-metadata service) pass untouched.
//
// # Attribution
//
// cloudgate's provider puts the method and its priority in the context it
// hands the provider (provider.WithCall). The AWS provider passes that
// context down to its SDK calls, so the SDK's context, which the middleware
// reads, carries it. Requests sent from a context of the provider's own
// are counted with method "unattributed" at normal priority: the provider
// builds its clients and looks up its own instance at startup with
// context.Background(), and the tagging controller, which calls the
// provider's CreateTags/DeleteTags batchers itself, not through a provider
// interface method, sends them from its own. A DescribeInstances the provider's own batcher
// merges (InstanceExists/InstanceShutdown/getInstancesByIDs, 100 ms idle,
// 1 s max) is sent with the context of the call whose request opened the
// batch, and so attributed to that call.
//
// # Failure
//
// Install fails (and the CCM does not start) when the resolver cannot be
// added or the check that LoadDefaultConfig runs it fails. Once
// installed, the gate has no state that can fail: a request the breaker or
// the token wait refuses gets an error at once, unsent (the SDK does not
// retry it), and the provider's call fails with it as it would with a
// cloud error; requests in flight are never cut.
package awsrequests

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // go:linkname

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/provider"
)

// sdkResolvers is config.defaultAWSConfigResolvers: the resolvers
// LoadDefaultConfig runs, in order. Its element type is
// func(context.Context, *aws.Config, configs) error where configs is
// []config.Config: the same as this declaration's.
//
//go:linkname sdkResolvers github.com/aws/aws-sdk-go-v2/config.defaultAWSConfigResolvers
var sdkResolvers []func(context.Context, *aws.Config, []awsconfig.Config) error

// Service labels: the services the gate governs, by SDK service ID.
const (
	ServiceEC2   = "ec2"
	ServiceELB   = "elb"
	ServiceELBv2 = "elbv2"
)

var serviceIDs = map[string]string{
	"EC2":                       ServiceEC2,
	"Elastic Load Balancing":    ServiceELB,
	"Elastic Load Balancing v2": ServiceELBv2,
}

// MiddlewareID is the gate's middleware in the SDK's Finalize step.
const MiddlewareID = "cloudgate.RequestGate"

// Buckets is the token bucket of an action, EC2's documented shape
// ("Request throttling for the Amazon EC2 API"): a bucket per action per
// account and Region; non-mutating actions (Describe*, and the Get, List
// and Search reads) hold 100 tokens refilled at 20 per second, mutating
// actions 200 refilled at 5. AWS documents no per-action buckets for the
// load balancing APIs; they get the same shape. Adaptive: a throttling
// answer halves the action's rate, which recovers in about 30 s.
func Buckets(service, action string) limiter.BucketConfig {
	for _, p := range []string{"Describe", "Get", "List", "Search"} {
		if strings.HasPrefix(action, p) {
			return limiter.BucketConfig{QPS: 20, Burst: 100, Adaptive: true}
		}
	}
	return limiter.BucketConfig{QPS: 5, Burst: 200, Adaptive: true}
}

// DefaultBreaker is each service's breaker: cloudgate's default method-level
// breaker (half of at least 20 requests in a minute failing opens it, probes
// after 2 s), counted in requests instead of calls.
var DefaultBreaker = limiter.BreakerConfig{
	FailureRatio: 0.5, MinRequests: 20, Interval: time.Minute,
	OpenTimeout: 2 * time.Second, HalfOpenRequests: 3,
}

// WaitTimeout bounds a request's token wait: cloudgate's default
// limits.<family>.waitTimeout, so a request inside a call waits no longer
// than the call could for its own token.
const WaitTimeout = 2 * time.Minute

var (
	installMu sync.Mutex
	installed *provider.RequestGate
	resolved  atomic.Int64 // LoadDefaultConfig calls that ran the resolver
)

// Install puts the gate in every SDK client config.LoadDefaultConfig builds
// from now on, in this process; call it before the AWS provider is built.
// Its metrics are metrics.Default's (the CCM's /metrics) under the provider
// label "aws". A second call returns the installed gate.
func Install() (*provider.RequestGate, error) {
	installMu.Lock()
	defer installMu.Unlock()
	if installed != nil {
		return installed, nil
	}
	g, err := provider.NewRequestGate(provider.RequestGateConfig{Provider: "aws", Bucket: Buckets, Breaker: DefaultBreaker, WaitTimeout: WaitTimeout})
	if err != nil {
		return nil, fmt.Errorf("cloudgate AWS request gate: %w", err)
	}
	if len(sdkResolvers) == 0 {
		return nil, errors.New("cloudgate AWS request gate: the AWS SDK's config resolvers are not where this build expects them (github.com/aws/aws-sdk-go-v2/config changed?): refusing to run the AWS provider ungoverned")
	}
	sdkResolvers = append(sdkResolvers, func(_ context.Context, cfg *aws.Config, _ []awsconfig.Config) error {
		resolved.Add(1)
		cfg.APIOptions = append(cfg.APIOptions, func(s *middleware.Stack) error { return AddMiddleware(s, g) })
		return nil
	})
	// Check that LoadDefaultConfig now runs it, loaded as the provider
	// loads its clients' (the environment, the shared files), with static
	// credentials so that no credential source is asked.
	before := resolved.Load()
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion("us-east-1"),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("check", "check", "")))
	if err != nil {
		return nil, fmt.Errorf("cloudgate AWS request gate: checking the SDK's config loading: %w", err)
	}
	if resolved.Load() == before || len(cfg.APIOptions) == 0 {
		return nil, errors.New("cloudgate AWS request gate: config.LoadDefaultConfig did not run the gate's resolver: refusing to run the AWS provider ungoverned")
	}
	installed = g
	return g, nil
}

// AddMiddleware adds the gate's middleware to an SDK client's stack, after
// the retryer and before the signer. Clients built without
// config.LoadDefaultConfig (a test's) add it with
// o.APIOptions = append(o.APIOptions, func(s) { return AddMiddleware(s, g) }).
func AddMiddleware(s *middleware.Stack, g *provider.RequestGate) error {
	if _, ok := s.Finalize.Get(MiddlewareID); ok {
		return nil
	}
	mw := middleware.FinalizeMiddlewareFunc(MiddlewareID, func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		service, ok := serviceIDs[awsmiddleware.GetServiceID(ctx)]
		if !ok {
			return next.HandleFinalize(ctx, in) // STS, KMS, IMDS: not governed
		}
		action := awsmiddleware.GetOperationName(ctx)
		done, err := g.Begin(ctx, service, action)
		if err != nil {
			return middleware.FinalizeOutput{}, middleware.Metadata{}, err
		}
		out, md, err := next.HandleFinalize(ctx, in)
		done(answer(ctx, md, err))
		return out, md, err
	})
	if _, ok := s.Finalize.Get("Retry"); ok {
		return s.Finalize.Insert(mw, "Retry", middleware.After)
	}
	return s.Finalize.Add(mw, middleware.Before)
}

// answer is how the cloud answered one attempt.
func answer(ctx context.Context, md middleware.Metadata, err error) provider.Answer {
	var a provider.Answer
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		a.Code = re.HTTPStatusCode()
	} else if r, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok && r != nil {
		a.Code = r.StatusCode
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		_, a.Throttled = retry.DefaultThrottleErrorCodes[ae.ErrorCode()]
	}
	switch {
	case a.Code == 0:
		a.Failure = err != nil && ctx.Err() == nil // no answer while the caller waited
	case a.Code >= http.StatusInternalServerError:
		a.Failure = !a.Throttled
	}
	return a
}
