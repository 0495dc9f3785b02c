// Package gcerequests puts cloudgate in front of the Compute Engine
// requests the unmodified GCE cloud provider
// (k8s.io/cloud-provider-gcp/providers/gce) and the gcebatch adapter send,
// inside the CCM process.
//
// # The door
//
// The provider sends its Compute Engine calls through k8s-cloud-provider's
// generated client (pkg/cloud), which asks the Service's cloud.RateLimiter
// before each call (Accept, with a fresh *RateLimitKey naming the call's
// resource and operation) and tells it the call's error after (Observe,
// with the same key). The provider's own limiter (gceRateLimiter,
// support.go) governs only operation polls: at least one second before
// each, then a 5 qps, burst 5 bucket; every other call passes it at once.
// (*gce.Cloud).SetRateLimiter replaces it. Install wraps the registered
// "gce" factory so that every provider it builds (the upstream "gce", and
// "gce-batch", which builds "gce") gets a RateLimiter: the provider's poll
// pacing for polls, then a provider.RequestGate for every call, polls
// included.
//
// The gate's service label is "compute"; its action is the Compute Engine
// method without "compute." (the key's resource and operation with a lower
// first letter: "instances.get", "instances.aggregatedList",
// "routes.insert"), as Compute Engine's audit logs and gcesim name them.
// Operation polls are "operations.get": the key says neither the scope
// (zone, region, global) nor get or wait.
//
// # Buckets
//
// Compute Engine's rate quotas ("Compute Engine rate quotas",
// cloud.google.com/compute/docs/api-rate-limits; the figures gcesim
// enforces, docs/gce.md) are per project and minute per group of methods:
// read requests (*.get), list requests (*.list, *.aggregatedList),
// operation read requests, and queries (mutations), each 1,500 a minute by
// default. The gate keeps one bucket per group (Group), shaped so that any
// 60 s admit at most a group's quota: 20 a second after a burst of 300
// (300 + 60 × 20 = 1,500). Adaptive: a throttling answer halves the
// group's rate, which recovers in about 30 s.
//
// # Attribution
//
// cloudgate's provider puts the method and its priority in the context it
// hands the provider (provider.WithCall), and the gate reads the context
// Accept gets. The provider passes the caller's context to its route calls
// (ListRoutes, CreateRoute, DeleteRoute) and to InstanceMetadata's
// instances.get, and the adapter to its instances.list and aggregatedList.
// The provider's other instance lookups (a Node's name to its provider ID,
// InstanceExists by provider ID, a route's next-hop instance), its zones
// and most of its load balancer calls build a fresh context
// (cloud.ContextWithCallTimeout), so their requests are counted
// "unattributed", at normal priority.
//
// # Pairing
//
// A call's Accept and Observe get the same key pointer; the RateLimiter
// keeps the admitted call under it until Observe. Operation polls differ
// (cloud.Service.pollOperation): each poll asks for a new key, Observe
// comes only after the last poll, with the operation's own error, and a
// refused Accept is ignored (the poll is sent anyway). Polls are paired by
// their context instead: a poll's next Accept on the same context answers
// the previous poll (it answered "not done yet", HTTP 200), Observe answers
// the last, and the context's end answers one left open. A call whose
// Observe never comes is answered "no answer" after MaxPending, so nothing
// is kept without bound.
//
// # What does not pass
//
// Requests the provider sends with its compute.Service directly, not
// through the generated client: while it is built (zones.list of its
// region, projects.get for a numeric project, before SetRateLimiter can be
// called), networks.get and subnetworks.list for its subnetwork, the
// Container API's clusters.list (Clusters) and the TPU API. The token
// source's own requests (token-url, the metadata server) are not Compute
// Engine's. A list of several pages passes the gate once for all of its
// pages (the generated client asks once per call). A poll the gate refuses
// is still sent (the generated client ignores the refusal); it is counted
// refused and not as a request.
package gcerequests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"
	_ "unsafe" // go:linkname

	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud"
	"google.golang.org/api/googleapi"
	"k8s.io/client-go/util/flowcontrol"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider-gcp/providers/gce"
	"k8s.io/utils/clock"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/provider"
)

// Service is the gate's service label of every Compute Engine request.
const Service = "compute"

// Quota groups (Compute Engine's rate-quota groups), the gate's bucket
// names.
const (
	GroupRead      = "read"      // *.get
	GroupList      = "list"      // *.list, *.aggregatedList
	GroupOperation = "operation" // operation polls
	GroupWrite     = "write"     // "Queries": mutations
)

// Action is the gate's action label of a call's key.
func Action(key *cloud.RateLimitKey) string {
	if key == nil {
		return "unknown"
	}
	return lowerFirst(key.Service) + "." + lowerFirst(key.Operation)
}

func lowerFirst(s string) string {
	if s == "" {
		return "unknown"
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// Group is the quota group of an action.
func Group(action string) string {
	res, op, _ := strings.Cut(action, ".")
	switch {
	case strings.HasSuffix(res, "perations"): // operations, zoneOperations, ...
		return GroupOperation
	case strings.HasPrefix(op, "get"):
		return GroupRead
	case strings.HasPrefix(op, "list"), strings.HasPrefix(op, "aggregatedList"):
		return GroupList
	default:
		return GroupWrite
	}
}

// PerMinute is Compute Engine's default rate quota of each group, requests
// per project and minute.
const PerMinute = 1500

// Buckets is the bucket of a quota group: any 60 s admit at most
// PerMinute (Burst + 60 × QPS).
func Buckets(_, _ string) limiter.BucketConfig {
	return limiter.BucketConfig{QPS: 20, Burst: PerMinute - 60*20, Adaptive: true}
}

func share(_, action string) string { return Group(action) }

// DefaultBreaker is the service's breaker: cloudgate's default
// method-level breaker, counted in requests.
var DefaultBreaker = limiter.BreakerConfig{
	FailureRatio: 0.5, MinRequests: 20, Interval: time.Minute,
	OpenTimeout: 2 * time.Second, HalfOpenRequests: 3,
}

// WaitTimeout bounds a request's token wait: cloudgate's default
// limits.<family>.waitTimeout.
const WaitTimeout = 2 * time.Minute

// MaxPending is how long an admitted call waits for its Observe before it
// is answered "no answer": longer than the generated client's call timeout
// (one hour, cloud.ContextWithCallTimeout).
const MaxPending = 90 * time.Minute

// NewGate builds the request gate of Compute Engine under the provider
// label "gce" (nil metrics: metrics.Default's, the CCM's /metrics).
func NewGate(cfg provider.RequestGateConfig) (*provider.RequestGate, error) {
	cfg.Provider = "gce"
	if cfg.Bucket == nil {
		cfg.Bucket = Buckets
	}
	cfg.Share = share
	if cfg.Breaker == (limiter.BreakerConfig{}) {
		cfg.Breaker = DefaultBreaker
	}
	return provider.NewRequestGate(cfg)
}

// RateLimiter is the cloud.RateLimiter that sends each call through a
// provider.RequestGate.
type RateLimiter struct {
	gate  *provider.RequestGate
	polls cloud.RateLimiter // the provider's own poll pacing
	clock clock.PassiveClock

	mu      sync.Mutex
	calls   map[*cloud.RateLimitKey]*admitted
	polling map[context.Context]*admitted
	swept   time.Time
}

// admitted is one call the gate let through, until its answer.
type admitted struct {
	done  func(provider.Answer)
	since time.Time
	stop  func() bool // a poll's watch of its context's end
}

var _ cloud.RateLimiter = (*RateLimiter)(nil)

// New returns the RateLimiter over gate, with the provider's own poll
// pacing in front of polls (nil clock: the real one).
func New(gate *provider.RequestGate, clk clock.PassiveClock) *RateLimiter {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &RateLimiter{
		gate: gate, clock: clk,
		polls: &cloud.MinimumRateLimiter{
			RateLimiter: &cloud.AcceptRateLimiter{Acceptor: flowcontrol.NewTokenBucketRateLimiter(5, 5)},
			Minimum:     time.Second,
		},
		calls: map[*cloud.RateLimitKey]*admitted{}, polling: map[context.Context]*admitted{},
	}
}

// Accept admits one call through the gate; a refused call gets the gate's
// error and is not sent. A nil RateLimiter admits every call.
func (r *RateLimiter) Accept(ctx context.Context, key *cloud.RateLimitKey) error {
	if r == nil {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	action := Action(key)
	poll := Group(action) == GroupOperation
	if poll {
		r.answerPoll(ctx, provider.Answer{Code: http.StatusOK}) // the previous poll: not done yet
		if err := r.polls.Accept(ctx, key); err != nil {
			return err
		}
	}
	done, err := r.gate.Begin(ctx, Service, action)
	if err != nil {
		return err
	}
	a := &admitted{done: done, since: r.clock.Now()}
	pairable := key != nil && (!poll || reflect.TypeOf(ctx).Comparable())
	r.mu.Lock()
	expired := r.sweepLocked(a.since)
	switch {
	case !pairable:
	case poll:
		r.polling[ctx] = a
		// A poll loop that ends with its context calls no Observe.
		a.stop = context.AfterFunc(ctx, func() { r.answerPollIf(ctx, a, provider.Answer{}) })
	default:
		r.calls[key] = a
	}
	r.mu.Unlock()
	for _, e := range expired {
		e.done(provider.Answer{})
	}
	if !pairable {
		done(provider.Answer{}) // no Observe can find it: counted, with no answer
	}
	return nil
}

// Observe answers the call Accept admitted under key.
func (r *RateLimiter) Observe(ctx context.Context, err error, key *cloud.RateLimitKey) {
	if r == nil {
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if Group(Action(key)) == GroupOperation {
		r.answerPoll(ctx, pollAnswer(ctx, err))
		return
	}
	r.mu.Lock()
	a := r.calls[key]
	delete(r.calls, key)
	r.mu.Unlock()
	if a != nil {
		a.done(Answer(ctx, err))
	}
}

func (r *RateLimiter) answerPoll(ctx context.Context, ans provider.Answer) {
	if !reflect.TypeOf(ctx).Comparable() {
		return
	}
	r.mu.Lock()
	a := r.polling[ctx]
	delete(r.polling, ctx)
	r.mu.Unlock()
	if a != nil {
		a.stop()
		a.done(ans)
	}
}

// answerPollIf answers a if it is still ctx's open poll.
func (r *RateLimiter) answerPollIf(ctx context.Context, a *admitted, ans provider.Answer) {
	r.mu.Lock()
	open := r.polling[ctx] == a
	if open {
		delete(r.polling, ctx)
	}
	r.mu.Unlock()
	if open {
		a.done(ans)
	}
}

// sweepLocked takes out, at most once a minute, the calls admitted more
// than MaxPending ago whose Observe never came, for the caller to answer.
func (r *RateLimiter) sweepLocked(now time.Time) []*admitted {
	if now.Sub(r.swept) < time.Minute {
		return nil
	}
	r.swept = now
	var out []*admitted
	for k, a := range r.calls {
		if now.Sub(a.since) > MaxPending {
			delete(r.calls, k)
			out = append(out, a)
		}
	}
	return out
}

// Pending is the number of admitted calls not answered yet.
func (r *RateLimiter) Pending() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls) + len(r.polling)
}

// throttleReasons are the reasons Google APIs give a request refused for
// a rate quota (gcebatch.Errors reads the same).
var throttleReasons = map[string]bool{"rateLimitExceeded": true, "userRateLimitExceeded": true}

// Answer is how Compute Engine answered one call, from its error: a
// *googleapi.Error's code; 429 or a rate-quota reason is throttling; a
// 5xx, or no answer while the caller still waited, a failure.
func Answer(ctx context.Context, err error) provider.Answer {
	if err == nil {
		return provider.Answer{Code: http.StatusOK}
	}
	var a provider.Answer
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		a.Failure = ctx.Err() == nil
		return a
	}
	a.Code = ge.Code
	a.Throttled = ge.Code == http.StatusTooManyRequests
	for _, e := range ge.Errors {
		a.Throttled = a.Throttled || throttleReasons[e.Reason]
	}
	if a.Throttled {
		if d, err := time.ParseDuration(ge.Header.Get("Retry-After") + "s"); err == nil && d > 0 {
			a.RetryAfter = d
		}
	}
	a.Failure = ge.Code >= http.StatusInternalServerError && !a.Throttled
	return a
}

// pollAnswer is the answer of the last poll of an operation. Observe gets
// the poll's own error, or, once the operation is done, the operation's
// error, which the generated client builds as a *googleapi.Error with only
// a code and message (no header, no body): the poll itself was answered
// 200 then.
func pollAnswer(ctx context.Context, err error) provider.Answer {
	var ge *googleapi.Error
	if errors.As(err, &ge) && ge.Header == nil && ge.Body == "" && len(ge.Errors) == 0 {
		return provider.Answer{Code: http.StatusOK}
	}
	return Answer(ctx, err)
}

// providers and providersMutex are k8s.io/cloud-provider's registry of
// provider factories (plugins.go): Install wraps the "gce" factory in it,
// since the factory's *gce.Cloud is built inside GetCloudProvider, by
// cloudgate (upstream "gce") or by gcebatch (upstream "gce-batch").
//
//go:linkname providers k8s.io/cloud-provider.providers
var providers map[string]cloudprovider.Factory

//go:linkname providersMutex k8s.io/cloud-provider.providersMutex
var providersMutex sync.Mutex

var (
	installMu sync.Mutex
	installed *RateLimiter
)

// Install makes every GCE provider the registered "gce" factory builds
// from now on, in this process, send its Compute Engine calls through a
// RateLimiter over NewGate's gate (metrics.Default). Call it before the
// provider is built (the CCM's main does). A second call returns the
// installed RateLimiter.
func Install() (*RateLimiter, error) {
	installMu.Lock()
	defer installMu.Unlock()
	if installed != nil {
		return installed, nil
	}
	g, err := NewGate(provider.RequestGateConfig{WaitTimeout: WaitTimeout})
	if err != nil {
		return nil, fmt.Errorf("cloudgate GCE request gate: %w", err)
	}
	rl := New(g, nil)
	providersMutex.Lock()
	defer providersMutex.Unlock()
	f := providers[gce.ProviderName]
	if f == nil {
		return nil, fmt.Errorf("cloudgate GCE request gate: no %q provider registered (k8s.io/cloud-provider's registry is not where this build expects it, or k8s.io/cloud-provider-gcp/providers/gce is not linked): refusing to run the GCE provider ungoverned", gce.ProviderName)
	}
	providers[gce.ProviderName] = func(config io.Reader) (cloudprovider.Interface, error) {
		up, err := f(config)
		if err != nil || up == nil {
			return up, err
		}
		c, ok := up.(*gce.Cloud)
		if !ok || c == nil {
			return nil, fmt.Errorf("cloudgate GCE request gate: provider %q built a %T, not the GCE provider: refusing to run it ungoverned", gce.ProviderName, up)
		}
		c.SetRateLimiter(rl)
		return c, nil
	}
	installed = rl
	return rl, nil
}

// Limiter is the installed RateLimiter, for the requests the adapter sends
// with the provider's compute.Service directly; nil (which admits every
// call) before Install.
func Limiter() *RateLimiter {
	installMu.Lock()
	defer installMu.Unlock()
	return installed
}
