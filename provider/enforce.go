package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/internal/recorder"
	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet"
)

// enforcer is mode: enforce, cloudgate as designed: over the gate's policy
// and caches, the token buckets and breakers every call goes through, the
// batching of node lookups, the list prefetch, the not-found guard and,
// with limits.shared, the fleet membership. Shadow mode builds none of it.
type enforcer struct {
	*gate

	buckets  []bucketState
	fleet    *fleet.Fleet // nil without limits.shared
	fleetEv  *fleetEvents // its Kubernetes Events; nil without limits.shared
	breakers map[string]*limiter.Breaker

	nf *notFoundGuard // nil when notFoundGuard.enabled is false

	// Batching and list prefetch are decided from the upstream's
	// InstancesV2 once it offers one (see buildBatcher); batchDecided
	// publishes batch and lister.
	batchMu      sync.Mutex
	batchDecided atomic.Bool
	batch        *nodeBatches   // nil without batching
	lister       InstanceLister // nil without list prefetch
	// peers are the Nodes the lifecycle controller checks, refreshed
	// together by batch calls (batching.go: lifecyclePeers).
	peers lifecyclePeers
	// nodes is the CCM's node informer (nil until SetInformers): the
	// Nodes about to be looked up ride along in batch calls.
	nodes atomic.Pointer[nodeIndex]

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
	// firstList ends with the first list refresh (see firstList.await);
	// nil until the prefetch loop starts.
	firstList atomic.Pointer[firstList]
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

// newEnforcer builds mode: enforce around upstream; with limits.shared it
// joins the fleet as member (a random id when "").
func newEnforcer(upstream cloudprovider.Interface, cfg *Config, member string) (*enforcer, error) {
	g, err := newGate(upstream, cfg, gateOptions{})
	if err != nil {
		return nil, err
	}
	e := &enforcer{
		gate:         g,
		breakers:     map[string]*limiter.Breaker{},
		listAnswered: make(chan struct{}, 1),
		listJitter:   newJitterSource(g.clock.Now()),
		nf:           newNotFoundGuard(g.cfg.NotFoundGuard, g.cfg.Cache.NegativeTTL.Duration, g.clock, g.rec),
	}
	cfg = g.cfg
	if s := cfg.Limits.Shared; s != nil {
		fr := g.metrics.Fleet(g.providerName, s.Account)
		fr.Init([]string{familyRead, familyWrite})
		e.fleetEv = newFleetEvents(fr, s.Account)
		if e.fleet, err = fleet.New(*s, fleet.Options{MemberID: member, Observer: e.fleetEv}); err != nil {
			return nil, fmt.Errorf("cloudgate config: %w", err)
		}
	}
	ok := false
	defer func() {
		if !ok && e.fleet != nil {
			e.fleet.Close() // stops its heartbeat and deregisters
		}
	}()
	familyBuckets := map[string]limiter.Admitter{}
	for _, f := range []string{familyRead, familyWrite} {
		b, err := e.newFamilyLimiter(f, g.limits(f))
		if err != nil {
			return nil, fmt.Errorf("cloudgate config: limits.%s: %w", f, err)
		}
		familyBuckets[f] = b
		br, err := limiter.NewBreaker(f, cfg.Breaker.limiterConfig(g.clock), g.notACloudFailure, newBreakerLog(f, g.rec.BreakerObserver(f)))
		if err != nil {
			return nil, fmt.Errorf("cloudgate config: breaker: %w", err)
		}
		e.breakers[f] = br
	}
	for _, name := range methodNames() {
		mt := g.methods[name]
		mt.bucket, mt.bucketName, mt.breaker = familyBuckets[mt.family], mt.family, e.breakers[mt.family]
		if o := cfg.Methods[name]; o.QPS > 0 {
			b, err := e.newBucket(name, BucketConfig{QPS: o.QPS, Burst: o.Burst, Adaptive: g.limits(mt.family).Adaptive})
			if err != nil {
				return nil, fmt.Errorf("cloudgate config: methods.%s: %w", name, err)
			}
			// The method's own cap, then its family's bucket (this
			// process's, or the fleet's budget): the same with and without
			// a fleet.
			mt.bucket, mt.bucketName = limiter.Chain{b, familyBuckets[mt.family]}, name
		}
	}
	// Batching is decided at Initialize (or first use), not here: a
	// provider may read its MaxBatchSize from a config it loads there.
	bucketNames := make([]string, len(e.buckets))
	for i, b := range e.buckets {
		bucketNames[i] = b.Name()
	}
	g.rec.Init(bucketNames, []string{familyRead, familyWrite})
	g.rec.SetSource(e)
	ok = true
	return e, nil
}

// notACloudFailure, the breakers' policy (newEnforcer), says which
// outcomes must not count against the breaker:
// answers (not found, not implemented, an *api.RetryError such as "load
// balancer still provisioning", a per-request refusal such as a 4xx), a
// caller that gave up (callerGone, set by invoke: a context error while the
// caller's context is live — an HTTP client timeout, cloudgate's own batch
// timeout — is a hung cloud and counts), and throttling (adaptive limiting
// handles that; tripping on it would turn quota pressure into an outage).
// Refusals and throttling are the provider's error classification's
// (ErrorClassifier, then the generic rules: limiter.ThrottleClassifier.Class).
func (g *gate) notACloudFailure(err error) bool {
	if err == nil {
		return false
	}
	var gone callerGone
	var retry *cloudproviderapi.RetryError
	if errors.As(err, &gone) || errors.Is(err, cloudprovider.InstanceNotFound) ||
		errors.Is(err, cloudprovider.NotImplemented) || errors.Is(err, cloudprovider.ImplementedElsewhere) ||
		errors.As(err, &retry) {
		return true
	}
	switch g.throttle.Class(err) {
	case limiter.ClassRefused, limiter.ClassThrottled:
		return true
	}
	return false
}

// newFamilyLimiter builds a family's limiter: this process's own bucket, or
// with limits.shared the fleet-wide budget, whose quota is b.QPS for the
// whole account and whose local fallback (Redis unreachable) is this
// member's share of it.
func (e *enforcer) newFamilyLimiter(family string, b BucketConfig) (limiter.Admitter, error) {
	if e.fleet == nil {
		return e.newBucket(family, b)
	}
	l, err := e.fleet.Limiter(family, b.QPS, b.limiterConfig(e.cfg.Throttle.MaxRetryAfter.Duration), newBucketLog(family, e.rec.BucketObserver(family)))
	if err != nil {
		return nil, err
	}
	e.buckets = append(e.buckets, l)
	return l, nil
}

func (e *enforcer) newBucket(name string, b BucketConfig) (*limiter.Bucket, error) {
	lc := b.limiterConfig(e.cfg.Throttle.MaxRetryAfter.Duration)
	lc.Clock = e.clock
	bucket, err := limiter.NewBucket(name, lc, newBucketLog(name, e.rec.BucketObserver(name)))
	if err != nil {
		return nil, err
	}
	e.buckets = append(e.buckets, bucket)
	return bucket, nil
}

// initialize starts enforce mode's own work after the upstream's
// Initialize: the fleet's fallback Events, then batching and list prefetch
// decided from the upstream's InstancesV2 as it is now, and the list
// prefetch (see start).
func (e *enforcer) initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	if e.fleet != nil {
		e.fleetEv.initialize(b, e.fleet.Member(), stop)
	}
	e.buildBatcher(true)
	e.start(stop)
}

func (e *enforcer) guard() *notFoundGuard { return e.nf }

// useNodeInformer takes the CCM's node informer: the not-found guard finds
// a v1 call's Node in it, and a batch call finds the Nodes that ride along
// (batching.go: informerRiders).
func (e *enforcer) useNodeInformer(f informers.SharedInformerFactory) {
	ix := newNodeIndex(f)
	if ix == nil {
		return
	}
	e.nodes.Store(ix)
	e.nf.useNodeIndex(ix)
}

// close ends the prefetch loop and waits for it and for batches in flight.
func (e *enforcer) close() {
	e.loopMu.Lock()
	e.closed = true
	if e.loopCancel != nil {
		e.loopCancel()
		e.loopCancel = nil
	}
	e.loopMu.Unlock()
	e.loopWG.Wait()
	if e.batchDecided.Load() && e.batch != nil {
		e.batch.Wait()
	}
	if e.fleet != nil {
		e.fleet.Close() // deregisters this member; its limiters then fall back to local buckets
		e.fleetEv.close()
	}
}

// Snapshot implements recorder.Source: the caches, and the buckets and
// breakers every call goes through.
func (e *enforcer) Snapshot() recorder.Snapshot {
	s := recorder.Snapshot{Caches: e.snapshotCaches()}
	for _, b := range e.buckets {
		s.Buckets = append(s.Buckets, recorder.BucketState{
			Name: b.Name(), ConfiguredQPS: b.ConfiguredQPS(), EffectiveQPS: b.EffectiveQPS(),
			Tokens: b.Tokens(), Waiting: b.Waiting(),
		})
	}
	for _, f := range []string{familyRead, familyWrite} {
		s.Breakers = append(s.Breakers, recorder.BreakerState{Family: f, State: e.breakers[f].State()})
	}
	return s
}
