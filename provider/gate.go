// Package provider is cloudgate's decorator cloud provider: a
// cloudprovider.Interface that wraps another registered provider with
// per-method LRU+TTL caches, token buckets per API family, circuit breakers
// and batched node lookups, so a large cluster's cloud-controller-manager
// stays under the cloud's API quota.
//
// The wrapper is semantically faithful: the same results, the same errors
// (sentinels such as cloudprovider.InstanceNotFound are returned as the exact
// values), and the same (impl, ok) answers as the upstream. Its own answers —
// waiting for a token ran out of time, the breaker is open — are always
// errors, never "instance not found" or "does not exist", because the node
// lifecycle controller deletes nodes on those.
//
// Each method is a short pipeline: key → cache → batch → breaker → limiter →
// upstream. The policy (which family a method belongs to, its TTL, its
// priority) is one table, methodSpecs, overridden by Config.
package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/metrics"
)

// Name is the name cloudgate registers itself under:
// --cloud-provider=cloudgate.
const Name = "cloudgate"

// gate holds the machinery shared by every wrapped sub-interface.
type gate struct {
	upstream     cloudprovider.Interface
	cfg          *Config
	clock        clock.Clock
	rec          *metrics.Recorder
	throttle     *limiter.ThrottleClassifier
	providerName string

	buckets  []bucketState
	fleet    *fleet.Fleet // nil without limits.shared
	breakers map[string]*limiter.Breaker
	methods  map[string]*method
	caches   []cacheState

	inst instanceCaches
	lb   lbCaches
	rt   routeCaches
	zn   zoneCaches
	cl   clusterCaches

	// Batching and list prefetch are decided from the upstream's
	// InstancesV2 once it offers one (see buildBatcher); batchDecided
	// publishes batch and lister.
	batchMu      sync.Mutex
	batchDecided atomic.Bool
	batch        *batcher       // nil without batching
	lister       InstanceLister // nil without list prefetch

	// The list prefetch loop: one at a time (see start).
	loopMu        sync.Mutex
	loopQuit      chan struct{}
	loopWG        sync.WaitGroup
	closed        bool
	prefetchLoops atomic.Int64
}

// method is one method's resolved policy.
type method struct {
	name   string
	family string
	ttl    time.Duration
	// waitTimeout bounds the token wait (0: the caller's context only).
	waitTimeout time.Duration
	priority    limiter.Priority
	bucket      limiter.Admitter
	bucketName  string // the bucket's (or the method's own bucket's) name, for errors
	breaker     *limiter.Breaker
	requests    *metrics.RequestCounter
}

// bucketState is what Snapshot reads from a *limiter.Bucket or a
// *fleet.Limiter.
type bucketState interface {
	Name() string
	ConfiguredQPS() float64
	EffectiveQPS() float64
	Tokens() float64
	Waiting() int
}

// cacheState reports a cache's size to the metrics.
type cacheState interface {
	Name() string
	Len() int
}

// New wraps upstream with cloudgate. A nil cfg uses DefaultConfig. The
// returned value also implements the optional interfaces upstream implements
// (cloudprovider.InformerUser), and no others.
func New(upstream cloudprovider.Interface, cfg *Config) (cloudprovider.Interface, error) {
	g, err := newGate(upstream, cfg)
	if err != nil {
		return nil, err
	}
	if iu, ok := upstream.(cloudprovider.InformerUser); ok {
		return &informerCloud{cloud: &cloud{g}, informers: iu}, nil
	}
	return &cloud{g}, nil
}

func newGate(upstream cloudprovider.Interface, cfg *Config) (*gate, error) {
	if upstream == nil {
		return nil, errors.New("cloudgate: upstream provider is nil")
	}
	if cfg == nil {
		cfg = DefaultConfig()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &gate{
		upstream:     upstream,
		cfg:          cfg,
		clock:        cfg.Clock,
		providerName: cfg.ProviderName,
		breakers:     map[string]*limiter.Breaker{},
		methods:      map[string]*method{},
	}
	if g.clock == nil {
		g.clock = clock.RealClock{}
	}
	if g.providerName == "" {
		g.providerName = upstream.ProviderName()
	}
	m := cfg.Metrics
	if m == nil {
		m = metrics.Default
	}
	g.rec = m.Recorder(g.providerName)

	var err error
	if g.throttle, err = limiter.NewThrottleClassifier(cfg.Throttle.Patterns); err != nil {
		return nil, fmt.Errorf("cloudgate config: throttle.patterns: %w", err)
	}
	if s := cfg.Limits.Shared; s != nil {
		fr := m.Fleet(g.providerName)
		fr.Init([]string{familyRead, familyWrite})
		if g.fleet, err = fleet.New(*s, fleet.Options{Observer: fr}); err != nil {
			return nil, fmt.Errorf("cloudgate config: %w", err)
		}
	}
	ok := false
	defer func() {
		if !ok && g.fleet != nil {
			g.fleet.Close() // stops its heartbeat and deregisters
		}
	}()
	familyBuckets := map[string]limiter.Admitter{}
	for _, f := range []struct {
		name string
		cfg  BucketConfig
	}{{familyRead, cfg.Limits.Read}, {familyWrite, cfg.Limits.Write}} {
		b, err := g.newFamilyLimiter(f.name, f.cfg)
		if err != nil {
			return nil, fmt.Errorf("cloudgate config: limits.%s: %w", f.name, err)
		}
		familyBuckets[f.name] = b
		br, err := limiter.NewBreaker(f.name, limiter.BreakerConfig{
			FailureRatio:     cfg.Breaker.FailureRatio,
			MinRequests:      cfg.Breaker.MinRequests,
			Interval:         cfg.Breaker.Interval.Duration,
			OpenTimeout:      cfg.Breaker.OpenTimeout.Duration,
			MinOpenTimeout:   cfg.Breaker.MinOpenTimeout.Duration,
			HalfOpenRequests: cfg.Breaker.HalfOpenRequests,
			Clock:            g.clock,
		}, g.notACloudFailure, g.rec)
		if err != nil {
			return nil, fmt.Errorf("cloudgate config: breaker: %w", err)
		}
		g.breakers[f.name] = br
	}
	for _, name := range methodNames() {
		spec := methodSpecs[name]
		mt := &method{
			name: name, family: spec.family, ttl: cfg.ttl(name), priority: spec.priority,
			bucket: familyBuckets[spec.family], bucketName: spec.family, breaker: g.breakers[spec.family],
			requests: g.rec.Requests(name),
		}
		if spec.family == familyWrite {
			mt.waitTimeout = cfg.Limits.Write.WaitTimeout.Duration
		} else {
			mt.waitTimeout = cfg.Limits.Read.WaitTimeout.Duration
		}
		if o := cfg.Methods[name]; o.QPS > 0 {
			fam := cfg.Limits.Read
			if spec.family == familyWrite {
				fam = cfg.Limits.Write
			}
			b, err := g.newBucket(name, BucketConfig{QPS: o.QPS, Burst: o.Burst, Adaptive: fam.Adaptive})
			if err != nil {
				return nil, fmt.Errorf("cloudgate config: methods.%s: %w", name, err)
			}
			mt.bucket, mt.bucketName = b, name
			if g.fleet != nil {
				// The method's own cap, then the fleet's budget of its family.
				mt.bucket = limiter.Chain{b, familyBuckets[spec.family]}
			}
		}
		g.methods[name] = mt
	}
	if err := g.buildCaches(); err != nil {
		return nil, err
	}
	g.buildBatcher(false)
	bucketNames := make([]string, len(g.buckets))
	for i, b := range g.buckets {
		bucketNames[i] = b.Name()
	}
	g.rec.Init(bucketNames, []string{familyRead, familyWrite})
	g.rec.SetSource(g)
	ok = true
	return g, nil
}

// newFamilyLimiter builds a family's limiter: this process's own bucket, or
// with limits.shared the fleet-wide budget, whose quota is b.QPS for the
// whole account and whose local fallback (Redis unreachable) is this
// member's share of it.
func (g *gate) newFamilyLimiter(family string, b BucketConfig) (limiter.Admitter, error) {
	if g.fleet == nil {
		return g.newBucket(family, b)
	}
	l, err := g.fleet.Limiter(family, b.QPS, limiter.BucketConfig{
		QPS: b.QPS, Burst: b.Burst, Adaptive: b.Adaptive == nil || *b.Adaptive,
		MaxRetryAfter: g.cfg.Throttle.MaxRetryAfter.Duration,
	}, g.rec)
	if err != nil {
		return nil, err
	}
	g.buckets = append(g.buckets, l)
	return l, nil
}

func (g *gate) newBucket(name string, b BucketConfig) (*limiter.Bucket, error) {
	bucket, err := limiter.NewBucket(name, limiter.BucketConfig{
		QPS: b.QPS, Burst: b.Burst, Adaptive: b.Adaptive == nil || *b.Adaptive,
		MaxRetryAfter: g.cfg.Throttle.MaxRetryAfter.Duration,
	}, g.clock, g.rec)
	if err != nil {
		return nil, err
	}
	g.buckets = append(g.buckets, bucket)
	return bucket, nil
}

// cacheOpts are the per-method parts of a cache's configuration.
type cacheOpts[K comparable, V any] struct {
	clone     func(V) V
	keyString func(K) string
	// negativeValue: a value that says "does not exist" (InstanceExists
	// false): negativeTTL, never stale.
	negativeValue func(V) bool
	// shortLived: keys (node names) that a re-created instance may reuse;
	// their answers live at most negativeTTL and are never served stale.
	shortLived func(K) bool
}

// newCache builds the cache of a read method, or returns nil when the
// method's TTL turns caching off. The first error is kept in *errp, so a
// caller can build every cache and check once.
func newCache[K comparable, V any](g *gate, errp *error, name string, o cacheOpts[K, V]) *cache.Cache[K, V] {
	ttl := g.methods[name].ttl
	if ttl <= 0 || *errp != nil {
		return nil
	}
	c, err := cache.New(cache.Config[K, V]{
		Name:          name,
		Size:          g.cfg.Cache.Size,
		TTL:           ttl,
		NegativeTTL:   g.cfg.Cache.NegativeTTL.Duration,
		MaxStale:      g.cfg.Cache.StaleIfError.Duration,
		IsNegative:    func(err error) bool { return err == cloudprovider.InstanceNotFound },
		NegativeValue: o.negativeValue,
		ShortLived:    o.shortLived,
		Clone:         o.clone,
		KeyString:     o.keyString,
		Clock:         g.clock,
		Observer:      g.rec.CacheObserver(name),
	})
	if err != nil {
		*errp = fmt.Errorf("cloudgate config: methods.%s: %w", name, err)
		return nil
	}
	g.caches = append(g.caches, c)
	return c
}

// notACloudFailure says which outcomes must not count against the breaker:
// answers (not found, not implemented, an *api.RetryError such as "load
// balancer still provisioning", a per-request 4xx), a caller that gave up (callerGone,
// set by invoke: a context error while the caller's context is live — an
// HTTP client timeout, cloudgate's own batch timeout — is a hung cloud and
// counts), and throttling (adaptive limiting handles that; tripping on it
// would turn quota pressure into an outage).
func (g *gate) notACloudFailure(err error) bool {
	if err == nil {
		return false
	}
	var gone callerGone
	var retry *cloudproviderapi.RetryError
	if errors.As(err, &gone) || errors.Is(err, cloudprovider.InstanceNotFound) ||
		errors.Is(err, cloudprovider.NotImplemented) || errors.Is(err, cloudprovider.ImplementedElsewhere) ||
		errors.As(err, &retry) || limiter.IsClientError(err) {
		return true
	}
	throttled, _ := g.throttle.Classify(err)
	return throttled
}

// answered reports whether an outcome shows the cloud answering: a
// success, or an answer that is not a cloud failure (not found, a 4xx,
// throttling), but not a caller that gave up.
func (g *gate) answered(outcome error) bool {
	if outcome == nil {
		return true
	}
	var gone callerGone
	return !errors.As(outcome, &gone) && g.notACloudFailure(outcome)
}

// callerGone marks the outcome of a call whose caller's context ended:
// whatever the upstream said then, it is no verdict on the cloud.
type callerGone struct{ error }

func (e callerGone) Unwrap() error { return e.error }

// errCallTimeout is the cause of cloudgate's own call timeouts (batch and
// list calls): a call cut short by it hung, and counts as a cloud failure.
var errCallTimeout = errors.New("cloudgate: upstream call timed out")

// breakerOutcome is what the breaker is told about a call that ended with
// err: callerGone when ctx ended (unless by cloudgate's own call timeout).
func breakerOutcome(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && context.Cause(ctx) != errCallTimeout {
		return callerGone{err}
	}
	return err
}

// invoke sends one call upstream: ask the breaker (an open breaker answers
// at once: no token spent, no queueing, so read can serve a stale answer),
// wait for a token, call, then tell the limiter and the metrics how it
// went. fn's result and error are returned unchanged.
func invoke[T any](ctx context.Context, g *gate, m *method, prio limiter.Priority, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	done, err := m.breaker.Allow()
	if err != nil {
		return zero, g.openRetry(err)
	}
	if err := g.wait(ctx, m, prio); err != nil {
		done(callerGone{err}) // nothing was sent: no verdict on the cloud
		return zero, err
	}
	start := g.clock.Now()
	v, err := fn(ctx)
	outcome := breakerOutcome(ctx, err)
	done(outcome)
	if g.answered(outcome) {
		// The cloud answers: an open breaker of the other family probes now.
		for _, br := range g.breakers {
			br.CloudAnswered()
		}
	}
	g.rec.UpstreamCall(m.family, m.name, g.result(m, err), g.clock.Since(start))
	return v, err
}

// breakerOpenError is a breaker's rejection as cloudgate returns it: the
// *limiter.OpenError, and an *api.RetryError retrying when the breaker next
// probes, so the service controller requeues then instead of after an
// exponential backoff that grew through the outage.
type breakerOpenError struct {
	open  error
	retry *cloudproviderapi.RetryError
}

func (e *breakerOpenError) Error() string   { return e.open.Error() }
func (e *breakerOpenError) Unwrap() []error { return []error{e.open, e.retry} }

func (g *gate) openRetry(err error) error {
	var oe *limiter.OpenError
	if !errors.As(err, &oe) {
		return err
	}
	first := g.cfg.Breaker.MinOpenTimeout.Duration
	if first <= 0 {
		first = g.cfg.Breaker.OpenTimeout.Duration / 30
	}
	return &breakerOpenError{open: err, retry: cloudproviderapi.NewRetryError(err.Error(), max(oe.RetryIn, first))}
}

// errWaitTimeout is the cause with which wait gives up.
var errWaitTimeout = errors.New("cloudgate: token wait timed out")

// wait waits for m's token for at most m.waitTimeout (on the gate's clock).
// Running out of it is a retryable *api.RetryError, so the service
// controller requeues instead of parking a worker; the caller's own context
// ending is the bucket's error, as before.
func (g *gate) wait(ctx context.Context, m *method, prio limiter.Priority) error {
	if m.waitTimeout <= 0 {
		return m.bucket.Wait(ctx, prio)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := stoppableAfterFunc(g.clock, m.waitTimeout, func() { cancel(errWaitTimeout) })
	err := m.bucket.Wait(wctx, prio)
	t()
	if err != nil && ctx.Err() == nil && context.Cause(wctx) == errWaitTimeout {
		return cloudproviderapi.NewRetryError(fmt.Sprintf(
			"cloudgate: no %q token within %s (limits.%s.waitTimeout): the cloud API quota is exhausted; retry later",
			m.bucketName, m.waitTimeout, m.family), min(m.waitTimeout, 30*time.Second))
	}
	return err
}

// stoppableAfterFunc runs f after d on clk (the real and fake clocks can
// delay execution; any other clock uses the real one) and returns a stop
// function. stop must not be called with a lock f takes.
func stoppableAfterFunc(clk clock.Clock, d time.Duration, f func()) (stop func()) {
	if c, ok := clk.(clock.WithDelayedExecution); ok {
		t := c.AfterFunc(d, f)
		return func() { t.Stop() }
	}
	t := time.AfterFunc(d, f)
	return func() { t.Stop() }
}

// result classifies an upstream outcome for metrics, and feeds throttling
// back to the method's bucket.
func (g *gate) result(m *method, err error) string {
	switch {
	case err == nil:
		return metrics.ResultOK
	case errors.Is(err, cloudprovider.InstanceNotFound):
		return metrics.ResultNotFound
	}
	if throttled, retryAfter := g.throttle.Classify(err); throttled {
		m.bucket.OnThrottled(retryAfter)
		return metrics.ResultThrottled
	}
	return metrics.ResultError
}

// read answers a read method from its cache (nil: uncached), calling fetch
// (which goes upstream through invoke, or through the batcher) on a miss.
// While the family's breaker is open it serves a positive answer the
// upstream gave at most TTL+cache.staleIfError ago, else the breaker's
// error. Negative answers are never served stale.
func read[K comparable, V any](ctx context.Context, g *gate, name string, c *cache.Cache[K, V], key K, fetch func(context.Context) (V, error)) (V, error) {
	m := g.methods[name]
	if c == nil {
		v, err := fetch(ctx)
		m.requests.Observe(err)
		return v, err
	}
	v, err := c.Get(ctx, key, fetch)
	if err != nil && limiter.IsOpen(err) {
		if stale, ok := c.Stale(key, m.ttl+g.cfg.Cache.StaleIfError.Duration); ok {
			m.requests.Observe(nil)
			return stale, nil
		}
	}
	m.requests.Observe(err)
	return v, err
}

// fresh answers a read from a fresh cache entry, if there is one. Methods
// call it before building their fetch closure, which would otherwise be
// allocated on every call, hits included.
func fresh[K comparable, V any](g *gate, name string, c *cache.Cache[K, V], key K) (V, error, bool) {
	if c == nil {
		var zero V
		return zero, nil, false
	}
	v, err, ok := c.Fresh(key)
	if ok {
		g.methods[name].requests.Observe(err)
	}
	return v, err, ok
}

// write sends a write upstream: never cached, never de-duplicated, always
// sent or answered with an error. invalidate runs after the call whatever
// its outcome (a failed write may have changed state too).
func write(ctx context.Context, g *gate, name string, fn func(context.Context) error, invalidate func()) error {
	m := g.methods[name]
	_, err := invoke(ctx, g, m, m.priority, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	})
	if invalidate != nil {
		invalidate()
	}
	m.requests.Observe(err)
	return err
}

// Snapshot implements metrics.Source.
func (g *gate) Snapshot() metrics.Snapshot {
	var s metrics.Snapshot
	for _, c := range g.caches {
		s.Caches = append(s.Caches, metrics.CacheState{Name: c.Name(), Entries: c.Len()})
	}
	for _, b := range g.buckets {
		s.Buckets = append(s.Buckets, metrics.BucketState{
			Name: b.Name(), ConfiguredQPS: b.ConfiguredQPS(), EffectiveQPS: b.EffectiveQPS(),
			Tokens: b.Tokens(), Waiting: b.Waiting(),
		})
	}
	for _, f := range []string{familyRead, familyWrite} {
		s.Breakers = append(s.Breakers, metrics.BreakerState{Family: f, State: g.breakers[f].State()})
	}
	return s
}
