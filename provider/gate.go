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
	"errors"
	"fmt"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/clock"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/internal/recorder"
	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/metrics"
)

// Name is the name cloudgate registers itself under:
// --cloud-provider=cloudgate.
const Name = "cloudgate"

// gate is what both modes share: the policy resolved from Config (which
// family a method belongs to, its TTL, its priority, how its errors are
// classified) and the caches of the read methods. What a mode runs beside
// it is the mode's own: enforce.go's limiters, breakers, batching, list
// prefetch and not-found guard, or shadow.go's model.
type gate struct {
	upstream     cloudprovider.Interface
	cfg          *Config
	clock        clock.WithTickerAndDelayedExecution
	rec          *recorder.Recorder
	metrics      *recorder.Metrics // where rec records
	throttle     *limiter.ThrottleClassifier
	providerName string

	// m is the resolved policy, one field per method; methods indexes the
	// same by name (for tests and by-name lookups outside the hot path).
	m       methodSet
	methods map[string]*method
	caches  []cacheState
	// paths are the read methods' paths, handed to the mode by bind.
	paths []interface{ bind(runner) }

	inst instanceCaches
	lb   lbCaches
	rt   routeCaches
	zn   zoneCaches
	cl   clusterCaches
}

// method is one method's resolved policy.
type method struct {
	name   string
	family string
	ttl    time.Duration
	// waitTimeout bounds the token wait (0: the caller's context only).
	waitTimeout time.Duration
	priority    limiter.Priority
	requests    *recorder.RequestCounter
	// The limits enforce mode applies (set by newEnforcer; nil in shadow
	// mode, whose model keeps its own).
	bucket     limiter.Admitter
	bucketName string // the bucket's (or the method's own bucket's) name, for errors
	breaker    *limiter.Breaker
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
	// cacheObserver observes the cache of a method (nil: the metrics').
	cacheObserver func(name string) cache.Observer
}

// newGate resolves cfg into the policy and builds the read caches: what
// both modes use.
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
		methods:      map[string]*method{},
	}
	if g.clock == nil {
		g.clock = clock.RealClock{}
	}
	if g.providerName == "" {
		g.providerName = upstream.ProviderName()
	}
	pm := cfg.Metrics
	if pm == nil {
		pm = metrics.Default
	}
	g.metrics = pm.Recorders()
	g.rec = g.metrics.Recorder(g.providerName)

	if g.throttle, err = limiter.NewThrottleClassifier(cfg.Throttle.Patterns); err != nil {
		return nil, fmt.Errorf("cloudgate config: throttle.patterns: %w", err)
	}
	if pc, ok := upstream.(ProviderClassifier); ok {
		g.throttle = g.throttle.WithProvider(pc) // the provider's own error codes first
	}
	g.throttle = g.throttle.WithErrors(errorClassifierOf(upstream)) // before those
	for _, name := range methodNames() {
		spec := methodSpecs[name]
		mt := &method{
			name: name, family: spec.family, ttl: cfg.ttl(name), priority: spec.priority,
			requests: g.rec.Requests(name),
		}
		mt.waitTimeout = g.limits(spec.family).WaitTimeout.Duration
		g.methods[name] = mt
		*spec.slot(&g.m) = mt
	}
	observe := o.cacheObserver
	if observe == nil {
		observe = g.rec.CacheObserver
	}
	if err := g.buildCaches(observe); err != nil {
		return nil, err
	}
	return g, nil
}

// limits is an API family's configured limits.
func (g *gate) limits(family string) BucketConfig {
	if family == familyWrite {
		return g.cfg.Limits.Write
	}
	return g.cfg.Limits.Read
}

// snapshotCaches is the caches' part of a mode's Snapshot.
func (g *gate) snapshotCaches() []recorder.CacheState {
	var s []recorder.CacheState
	for _, c := range g.caches {
		s = append(s, recorder.CacheState{Name: c.Name(), Entries: c.Len()})
	}
	return s
}
