package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/cloudgate/cloudgate/internal/recorder"
	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/metrics"
)

// Call is the provider method a cloud request is sent for, and the
// priority that method's call had: cloudgate puts it in the context it
// hands the upstream (WithCall), so a request-level gate under the
// upstream (RequestGate, in the upstream's SDK) attributes each request to
// it and queues it at that priority. A request inside a write or a node
// initialisation thus keeps that call's priority.
type Call struct {
	Method   string
	Priority limiter.Priority
	// Shadow: the call is made in shadow mode, which sends every call as
	// without cloudgate; a request gate then records its requests and
	// neither delays nor refuses them.
	Shadow bool
}

// Unattributed is the method of a request sent with no Call in its context:
// one the upstream sends from a context of its own (a background loop).
const Unattributed = "unattributed"

type callKey struct{}

// WithCall returns ctx carrying c.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the Call ctx carries, if any.
func CallFrom(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(Call)
	return c, ok
}

// withCall is the context cloudgate hands the upstream for m at prio.
func withCall(ctx context.Context, m *method, prio limiter.Priority) context.Context {
	return WithCall(ctx, Call{Method: m.name, Priority: prio})
}

// RequestGateConfig configures a RequestGate.
type RequestGateConfig struct {
	// Provider is the provider label of its metrics.
	Provider string
	// Bucket is the token bucket of a (service, action): the cloud's own
	// shape for it. Called once per pair, on its first request.
	Bucket func(service, action string) limiter.BucketConfig
	// Share names the bucket an action takes its tokens from when actions
	// share one (a cloud's quota group: GCE's quotas are per group of
	// methods); Bucket is then called with that name as the action. nil:
	// each action has its own bucket. Metrics keep the action.
	Share func(service, action string) string
	// Breaker configures the breaker of each service.
	Breaker limiter.BreakerConfig
	// WaitTimeout bounds a request's wait for its token (0: only the
	// caller's context): a request queued behind a starved bucket fails,
	// unsent, rather than hang the provider's call.
	WaitTimeout time.Duration
	// Metrics receives the cloudgate_cloud_request* series (nil:
	// metrics.Default).
	Metrics *metrics.Metrics
	// Clock (nil: the real clock).
	Clock clock.WithTickerAndDelayedExecution
}

// RequestGate is cloudgate at the level of the cloud's HTTP requests: a
// token bucket per (service, action) served in priority order, a breaker
// per service, and per-action metrics. The provider-specific part (where
// it sits in the SDK, which answers are throttling) calls Begin before a
// request is sent and the returned done once it is answered.
type RequestGate struct {
	cfg RequestGateConfig
	rec *recorder.CloudRequestRecorder

	mu       sync.Mutex
	buckets  map[[2]string]*limiter.Bucket
	breakers map[string]*limiter.Breaker
}

// NewRequestGate checks cfg and builds the gate; its buckets and breakers
// are made on each pair's (service's) first request.
func NewRequestGate(cfg RequestGateConfig) (*RequestGate, error) {
	if cfg.Provider == "" {
		return nil, errors.New("request gate: Provider is required (the provider label of its metrics)")
	}
	if cfg.Bucket == nil {
		return nil, errors.New("request gate: Bucket is required (the token bucket of a service's action)")
	}
	if cfg.WaitTimeout < 0 {
		return nil, fmt.Errorf("request gate: WaitTimeout must be >= 0 (got %v)", cfg.WaitTimeout)
	}
	if err := cfg.Breaker.Validate(); err != nil {
		return nil, fmt.Errorf("request gate: Breaker: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	cfg.Breaker.Clock = cfg.Clock
	m := cfg.Metrics
	if m == nil {
		m = metrics.Default
	}
	return &RequestGate{
		cfg: cfg, rec: m.Recorders().CloudRequests(cfg.Provider),
		buckets: map[[2]string]*limiter.Bucket{}, breakers: map[string]*limiter.Breaker{},
	}, nil
}

func (g *RequestGate) limits(service, action string) (*limiter.Bucket, *limiter.Breaker, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	br := g.breakers[service]
	if br == nil {
		var err error
		br, err = limiter.NewBreaker(service, g.cfg.Breaker, func(err error) bool { return errors.Is(err, errNoVerdict) }, g.rec.BreakerObserver(service))
		if err != nil {
			return nil, nil, fmt.Errorf("request gate: breaker of %s: %w", service, err)
		}
		g.breakers[service] = br
	}
	bucket := action
	if g.cfg.Share != nil {
		bucket = g.cfg.Share(service, action)
	}
	key := [2]string{service, bucket}
	b := g.buckets[key]
	if b == nil {
		bc := g.cfg.Bucket(service, bucket)
		bc.Clock = g.cfg.Clock
		name := service + "/" + bucket
		var err error
		if b, err = limiter.NewBucket(name, bc, g.rec.BucketObserver(name)); err != nil {
			return nil, nil, fmt.Errorf("request gate: bucket %s: %w", name, err)
		}
		g.buckets[key] = b
	}
	return b, br, nil
}

// errRequestWait ends a request's token wait after WaitTimeout.
var errRequestWait = errors.New("request gate: no token within the wait timeout")

// errNoVerdict is the breaker outcome of a request that says nothing of the
// cloud's health: one not sent, or throttled.
var errNoVerdict = errors.New("no verdict on the cloud")

// Answer is how the cloud answered one request.
type Answer struct {
	// Code is the HTTP status code ("" when no answer came: a transport
	// error or the caller gave up).
	Code int
	// Throttled: the cloud refused the request for its rate; RetryAfter is
	// the pause it asked for, if any.
	Throttled  bool
	RetryAfter time.Duration
	// Failure: an outcome that counts against the service's breaker (a
	// server error that is not throttling, or no answer while the caller
	// still waited).
	Failure bool
}

// Begin admits one request of service's action: it asks the service's
// breaker (open: the request is refused at once, unsent) and waits for the
// action's token at the priority of ctx's Call (PriorityNormal without
// one). done records the answer; it must be called once for every admitted
// request.
func (g *RequestGate) Begin(ctx context.Context, service, action string) (done func(Answer), err error) {
	call, ok := CallFrom(ctx)
	if !ok {
		call = Call{Method: Unattributed, Priority: limiter.PriorityNormal}
	}
	b, br, err := g.limits(service, action)
	if err != nil {
		return nil, err
	}
	if call.Shadow {
		start := g.cfg.Clock.Now()
		return g.recordOnce(service, action, call.Method, start, func(Answer) {}), nil
	}
	brDone, err := br.Allow()
	if err != nil {
		g.rec.Refused(service, action, call.Method, "breaker_open")
		return nil, fmt.Errorf("cloudgate: %s %s not sent: %w", service, action, err)
	}
	wctx := ctx
	if g.cfg.WaitTimeout > 0 {
		var cancel context.CancelCauseFunc
		wctx, cancel = context.WithCancelCause(ctx)
		stop := stoppableAfterFunc(g.cfg.Clock, g.cfg.WaitTimeout, func() { cancel(errRequestWait) })
		defer func() { stop(); cancel(nil) }()
	}
	if err := b.Wait(wctx, call.Priority); err != nil {
		if c := context.Cause(wctx); c == errRequestWait {
			err = fmt.Errorf("%w (%v): %w", c, g.cfg.WaitTimeout, err)
		}
		brDone(errNoVerdict) // nothing was sent
		g.rec.Refused(service, action, call.Method, "no_token")
		return nil, fmt.Errorf("cloudgate: %s %s not sent: %w", service, action, err)
	}
	start := g.cfg.Clock.Now()
	return g.recordOnce(service, action, call.Method, start, func(a Answer) {
		if a.Throttled {
			b.OnThrottled(a.RetryAfter)
		}
		var outcome error
		switch {
		case a.Failure:
			outcome = fmt.Errorf("%s %s: answered HTTP %d", service, action, a.Code)
		case a.Throttled:
			outcome = errNoVerdict // quota, not an outage: the bucket handles it
		}
		brDone(outcome)
	}), nil
}

// recordOnce returns the done of one admitted request: it tells the limits
// (limits) and records the request, once.
func (g *RequestGate) recordOnce(service, action, method string, start time.Time, limits func(Answer)) func(Answer) {
	var once sync.Once
	return func(a Answer) {
		once.Do(func() {
			limits(a)
			code := "none"
			if a.Code != 0 {
				code = strconv.Itoa(a.Code)
			}
			g.rec.Request(service, action, method, code, g.cfg.Clock.Since(start), a.Throttled)
		})
	}
}
