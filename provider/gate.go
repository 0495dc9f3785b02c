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
	"k8s.io/utils/clock"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/internal/recorder"
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
	clock        clock.WithTickerAndDelayedExecution
	rec          *recorder.Recorder
	metrics      *recorder.Metrics // where rec records
	throttle     *limiter.ThrottleClassifier
	providerName string

	buckets  []bucketState
	fleet    *fleet.Fleet // nil without limits.shared
	fleetEv  *fleetEvents // its Kubernetes Events; nil without limits.shared
	breakers map[string]*limiter.Breaker
	// m is the resolved policy, one field per method; methods indexes the
	// same by name (for tests and by-name lookups outside the hot path).
	m       methodSet
	methods map[string]*method
	caches  []cacheState

	inst instanceCaches
	nf   *notFoundGuard // nil when notFoundGuard.enabled is false, and in shadow mode
	// nodes finds the Node of a v1 call (which carries none) for the
	// guard's grace period; nil until the CCM hands over its informers.
	nodes atomic.Pointer[nodeIndex]
	lb    lbCaches
	rt    routeCaches
	zn    zoneCaches
	cl    clusterCaches

	// Batching and list prefetch are decided from the upstream's
	// InstancesV2 once it offers one (see buildBatcher); batchDecided
	// publishes batch and lister.
	batchMu      sync.Mutex
	batchDecided atomic.Bool
	batch        *nodeBatcher   // nil without batching
	lister       InstanceLister // nil without list prefetch
	batchSize    int            // the batches' largest size (0 without batching)
	// peers are the Nodes the lifecycle controller checks, refreshed
	// together by batch calls (peers.go).
	peers lifecyclePeers

	// The list prefetch loop: one at a time (see start).
	loopMu        sync.Mutex
	loopCancel    context.CancelFunc // ends the running loop
	loopWG        sync.WaitGroup
	closed        bool
	prefetchLoops atomic.Int64
	// listFailed: the last list refresh failed; then a call the cloud
	// answers signals listAnswered, and the loop refreshes again at once
	// instead of a whole interval later (see start).
	listFailed   atomic.Bool
	listAnswered chan struct{}
	listJitter   *jitterSource // the list refreshes' jitter (prefetch.go)
	// firstList ends with the first list refresh (see awaitFirstList);
	// nil until the prefetch loop starts.
	firstList atomic.Pointer[firstList]
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
	requests    *recorder.RequestCounter
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
// returned Cloud also implements the optional interfaces upstream
// implements (cloudprovider.InformerUser), and no others.
func New(upstream cloudprovider.Interface, cfg *Config) (Cloud, error) {
	c, err := newCloud(upstream, cfg, "")
	if err != nil {
		return nil, err
	}
	if iu, ok := upstream.(cloudprovider.InformerUser); ok {
		return &informerCloud{cloud: c, informers: iu}, nil
	}
	return c, nil
}

// gateOptions are what the mode decides of the gate (see newCloud).
type gateOptions struct {
	// member names this replica in the fleet (limits.shared); "" for a
	// random id.
	member string
	// cacheObserver observes the cache of a method (nil: the metrics').
	cacheObserver func(name string) cache.Observer
}

// newGate builds the machinery every wrapper shares: policy, caches,
// limiters, breakers, and with limits.shared the fleet membership.
func newGate(upstream cloudprovider.Interface, cfg *Config, o gateOptions) (*gate, error) {
	if upstream == nil {
		return nil, errors.New("cloudgate: upstream provider is nil")
	}
	if cfg == nil {
		cfg = DefaultConfig()
	}
	cfg, err := cfg.Resolve(ResolveOptions{})
	if err != nil {
		return nil, err
	}
	g := &gate{
		upstream:     upstream,
		cfg:          cfg,
		clock:        cfg.Clock,
		providerName: cfg.ProviderName,
		breakers:     map[string]*limiter.Breaker{},
		methods:      map[string]*method{},
		listAnswered: make(chan struct{}, 1),
	}
	if g.clock == nil {
		g.clock = clock.RealClock{}
	}
	g.listJitter = newJitterSource(g.clock.Now())
	if g.providerName == "" {
		g.providerName = upstream.ProviderName()
	}
	pm := cfg.Metrics
	if pm == nil {
		pm = metrics.Default
	}
	m := pm.Recorders()
	g.rec = m.Recorder(g.providerName)
	g.nf = newNotFoundGuard(cfg.NotFoundGuard, g.clock, g.rec)

	if g.throttle, err = limiter.NewThrottleClassifier(cfg.Throttle.Patterns); err != nil {
		return nil, fmt.Errorf("cloudgate config: throttle.patterns: %w", err)
	}
	if pc, ok := upstream.(ProviderClassifier); ok {
		g.throttle = g.throttle.WithProvider(pc) // the provider's own error codes first
	}
	if s := cfg.Limits.Shared; s != nil {
		fr := m.Fleet(g.providerName, s.Account)
		fr.Init([]string{familyRead, familyWrite})
		g.fleetEv = newFleetEvents(fr, s.Account)
		if g.fleet, err = fleet.New(*s, fleet.Options{MemberID: o.member, Observer: g.fleetEv}); err != nil {
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
		br, err := limiter.NewBreaker(f.name, cfg.Breaker.limiterConfig(g.clock), g.notACloudFailure, newBreakerLog(f.name, g.rec.BreakerObserver(f.name)))
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
			// The method's own cap, then its family's bucket (this
			// process's, or the fleet's budget): the same with and without
			// a fleet.
			mt.bucket, mt.bucketName = limiter.Chain{b, familyBuckets[spec.family]}, name
		}
		g.methods[name] = mt
		*spec.slot(&g.m) = mt
	}
	g.metrics = m
	observe := o.cacheObserver
	if observe == nil {
		observe = g.rec.CacheObserver
	}
	if err := g.buildCaches(observe); err != nil {
		return nil, err
	}
	// Batching is decided at Initialize (or first use), not here: a
	// provider may read its MaxBatchSize from a config it loads there.
	bucketNames := make([]string, len(g.buckets))
	for i, b := range g.buckets {
		bucketNames[i] = b.Name()
	}
	g.rec.Init(bucketNames, []string{familyRead, familyWrite})
	g.rec.SetSource(g)
	ok = true
	return g, nil
}

// close ends the prefetch loop and waits for it and for batches in flight.
func (g *gate) close() {
	g.loopMu.Lock()
	g.closed = true
	if g.loopCancel != nil {
		g.loopCancel()
		g.loopCancel = nil
	}
	g.loopMu.Unlock()
	g.loopWG.Wait()
	if g.batchDecided.Load() && g.batch != nil {
		g.batch.Wait()
	}
	if g.fleet != nil {
		g.fleet.Close() // deregisters this member; its limiters then fall back to local buckets
		g.fleetEv.close()
	}
}

// newFamilyLimiter builds a family's limiter: this process's own bucket, or
// with limits.shared the fleet-wide budget, whose quota is b.QPS for the
// whole account and whose local fallback (Redis unreachable) is this
// member's share of it.
func (g *gate) newFamilyLimiter(family string, b BucketConfig) (limiter.Admitter, error) {
	if g.fleet == nil {
		return g.newBucket(family, b)
	}
	l, err := g.fleet.Limiter(family, b.QPS, b.limiterConfig(g.cfg.Throttle.MaxRetryAfter.Duration), newBucketLog(family, g.rec.BucketObserver(family)))
	if err != nil {
		return nil, err
	}
	g.buckets = append(g.buckets, l)
	return l, nil
}

func (g *gate) newBucket(name string, b BucketConfig) (*limiter.Bucket, error) {
	lc := b.limiterConfig(g.cfg.Throttle.MaxRetryAfter.Duration)
	lc.Clock = g.clock
	bucket, err := limiter.NewBucket(name, lc, newBucketLog(name, g.rec.BucketObserver(name)))
	if err != nil {
		return nil, err
	}
	g.buckets = append(g.buckets, bucket)
	return bucket, nil
}

// Snapshot implements recorder.Source.
func (g *gate) Snapshot() recorder.Snapshot {
	var s recorder.Snapshot
	for _, c := range g.caches {
		s.Caches = append(s.Caches, recorder.CacheState{Name: c.Name(), Entries: c.Len()})
	}
	for _, b := range g.buckets {
		s.Buckets = append(s.Buckets, recorder.BucketState{
			Name: b.Name(), ConfiguredQPS: b.ConfiguredQPS(), EffectiveQPS: b.EffectiveQPS(),
			Tokens: b.Tokens(), Waiting: b.Waiting(),
		})
	}
	for _, f := range []string{familyRead, familyWrite} {
		s.Breakers = append(s.Breakers, recorder.BreakerState{Family: f, State: g.breakers[f].State()})
	}
	return s
}
