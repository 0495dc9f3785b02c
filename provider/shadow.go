package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/internal/recorder"
	"github.com/cloudgate/cloudgate/limiter"
)

// Modes (Config.Mode).
const (
	// ModeEnforce caches, limits, batches and breaks: cloudgate as designed.
	ModeEnforce = "enforce"
	// ModeShadow passes every call straight to the upstream, as without
	// cloudgate, and computes what cloudgate would have done.
	ModeShadow = "shadow"
)

// Shadow mode: every call goes to the upstream exactly as without
// cloudgate — the upstream's own answer and error, its own timing, no token
// wait, no breaker rejection, no batching, no list prefetch, no not-found
// guard, writes straight through — while a model of cloudgate runs beside
// it, fed by the live answers:
//
//   - a shadow cache per method (the same keys, TTLs, negative and
//     short-lived rules; the gate's own caches, filled only by shadow
//     bookkeeping and invalidated by writes as in enforce mode): a fresh
//     entry is a would-be hit, compared with the live answer (a
//     divergence when they differ); otherwise a would-be miss, whose live
//     answer is stored;
//   - would-be batches: a miss of InstanceMetadata/Exists/Shutdown joins
//     the open would-be batch while it is younger than batch.maxWait and
//     smaller than the batch size, unless its caller (told by its context)
//     is in it already (see join); the batch is one would-be
//     BatchInstanceStatus call and, as
//     a real batch answer does, fills the node's other two caches (marked
//     filled: a later read is a would-be hit, whose value the shadow did
//     not see; the first live answer then stands for it, aged from the
//     batch, and later hits are compared with it);
//   - would-be lifecycle peers (batching.go: lifecyclePeers): the Nodes whose InstanceExists
//     or InstanceShutdown were asked lately are noted as in enforce mode,
//     and a would-be batch call, when it opens, carries those due for a
//     refresh (up to the batch size) and fills their three caches as the
//     batch answer would (marked filled, as above). Without them the
//     shadow predicted one call per NotReady Node per TTL where enforce
//     mode makes one per half-TTL for all of them;
//   - a shadow token bucket per bucket (golang.org/x/time/rate at the
//     configured rate and burst, not adaptive): each would-be call reserves
//     a token, and the delay is the would-be wait; one longer than
//     waitTimeout is a would-be RetryError (no call);
//   - a shadow breaker per family, fed by the live outcomes: while it is
//     open a would-be call is rejected;
//   - a live call the cloud throttled is no would-be call: enforce mode
//     would have waited for a token instead and sent it once, which is the
//     controller's retry that gets through (counted then). Without this a
//     throttled write retried by its controller counts many times.
//
// The predictions are exported as cloudgate_shadow_* (internal/recorder/shadow.go);
// cloudgate_upstream_calls_total counts the live calls. Nothing of the
// model reaches a caller: it returns the upstream's value and error
// unchanged (shadow_test.go checks this against the bare upstream).
type shadow struct {
	g        *gate
	rec      *recorder.ShadowRecorder
	buckets  []*shadowBucket // for Snapshot
	methods  map[*method]*shadowMethod
	breakers map[string]*limiter.Breaker
	// filled marks, per InstancesV2 read method, the nodes whose entry a
	// would-be batch answer filled from another method's read: when, and
	// whether positive (false: InstanceNotFound, exists == false).
	filled map[*method]*cache.Cache[nodeKey, shadowFill]
	// batchLimit: the would-be batch size once decided (-1: no batching;
	// 0: not decided yet, see batchSize).
	batchLimit atomic.Int64
	// peers are the Nodes the lifecycle controller checks, carried by
	// would-be batches as enforce mode's batches carry them (batching.go: lifecyclePeers).
	peers lifecyclePeers

	mu   sync.Mutex
	open *shadowBatch // the would-be batch new misses may join
}

// shadowMethod is one method's shadow state.
type shadowMethod struct {
	rec    *recorder.ShadowMethod
	bucket *shadowBucket
	// family is the family's bucket when the method has one of its own
	// (methods.<m>.qps): a call takes a token from bucket, then from
	// family, as the enforce path's limiter.Chain. nil otherwise.
	family *shadowBucket
}

// shadowFill is a would-be batch answer for a node whose value the shadow
// does not know (it saw another method's answer): when, and whether
// positive. Once a live answer of the method arrives it stands for the
// batch's (seen), aged from the batch: fresh until `until`, as the cache
// would keep an answer given at `at`.
type shadowFill struct {
	at       time.Time
	positive bool

	seen   bool
	answer any // the method's value type (a copy)
	err    error
	until  time.Time
}

// shadowBatch is one would-be batch call.
type shadowBatch struct {
	opened time.Time
	size   int
	// callers are the members' contexts, standing for the controllers
	// that called (each passes its own context down its loop).
	callers []context.Context
	result  string // "" (sent), or why not: ShadowRejected, ShadowWaitTimeout
	done    func(ctx context.Context, err error)
}

// newShadow builds cloudgate in mode: shadow: the gate (the policy, and
// the caches the model uses) and the model; nothing of enforce mode's
// machinery. The caches answer nobody, so they are not observed
// (cloudgate_cache_* stay absent: the shadow reads are counted in
// cloudgate_shadow_reads_total), and there is no not-found guard (it
// changes answers; a shadow never does), no batcher, no list prefetch and
// no fleet. The gauges (Snapshot) report the model's own buckets and
// breakers.
func newShadow(upstream cloudprovider.Interface, cfg *Config) (*shadow, error) {
	g, err := newGate(upstream, cfg, gateOptions{cacheObserver: func(string) cache.Observer { return nil }})
	if err != nil {
		return nil, err
	}
	sh := &shadow{g: g, rec: g.metrics.Shadow(g.providerName), methods: map[*method]*shadowMethod{},
		breakers: map[string]*limiter.Breaker{}, filled: map[*method]*cache.Cache[nodeKey, shadowFill]{}}
	sh.rec.Init([]string{familyRead, familyWrite})
	families := map[string]*shadowBucket{}
	for _, f := range []string{familyRead, familyWrite} {
		br, err := limiter.NewBreaker(f, g.cfg.Breaker.limiterConfig(g.clock), g.notACloudFailure, sh.rec.BreakerObserver(f))
		if err != nil {
			return nil, fmt.Errorf("cloudgate config: breaker: %w", err)
		}
		sh.breakers[f] = br
		fam := g.limits(f)
		families[f] = sh.newBucket(f, fam.QPS, fam.Burst)
	}
	for _, name := range methodNames() {
		mt := g.methods[name]
		sm := &shadowMethod{rec: sh.rec.Method(mt.family, name), bucket: families[mt.family]}
		if o := g.cfg.Methods[name]; o.QPS > 0 {
			sm.bucket, sm.family = sh.newBucket(name, o.QPS, o.Burst), families[mt.family]
		}
		sh.methods[mt] = sm
	}
	byName := func(k nodeKey) bool { return !k.byProviderID }
	for _, mt := range []*method{g.m.instanceExists, g.m.instanceShutdown, g.m.instanceMetadata} {
		if mt.ttl <= 0 {
			continue
		}
		c, err := cache.New(cache.Config[nodeKey, shadowFill]{
			Name: mt.name + " (shadow batch fills)", Size: g.cfg.Cache.Size, TTL: mt.ttl,
			NegativeTTL: g.cfg.Cache.NegativeTTL.Duration, NegativeValue: func(f shadowFill) bool { return !f.positive },
			ShortLived: byName, KeyString: nodeKey.String, Hash: keyHash[nodeKey](), Clock: g.clock,
		})
		if err != nil {
			return nil, fmt.Errorf("cloudgate config: methods.%s: %w", mt.name, err)
		}
		sh.filled[mt] = c
	}
	names := make([]string, len(sh.buckets))
	for i, b := range sh.buckets {
		names[i] = b.name
	}
	g.rec.Init(names, []string{familyRead, familyWrite})
	g.rec.SetSource(sh)
	return sh, nil
}

// shadowBucket is a shadow token bucket: golang.org/x/time/rate at the
// configured rate and burst (not adaptive), named as enforce mode's.
type shadowBucket struct {
	name string
	*rate.Limiter
}

func (sh *shadow) newBucket(name string, qps float64, burst int) *shadowBucket {
	b := &shadowBucket{name: name, Limiter: rate.NewLimiter(rate.Limit(qps), burst)}
	sh.buckets = append(sh.buckets, b)
	return b
}

// Snapshot implements recorder.Source: the model's caches, buckets and
// breakers, the objects shadow mode uses. Nobody waits for a shadow token.
func (sh *shadow) Snapshot() recorder.Snapshot {
	now := sh.g.clock.Now()
	s := recorder.Snapshot{Caches: sh.g.snapshotCaches()}
	for _, b := range sh.buckets {
		qps := float64(b.Limit())
		s.Buckets = append(s.Buckets, recorder.BucketState{Name: b.name, ConfiguredQPS: qps, EffectiveQPS: qps, Tokens: max(0, b.TokensAt(now))})
	}
	for _, f := range []string{familyRead, familyWrite} {
		s.Breakers = append(s.Breakers, recorder.BreakerState{Family: f, State: sh.breakers[f].State()})
	}
	return s
}

// begin is a would-be upstream call of m: the breaker's verdict, then a
// token (its delay is the would-be wait). It returns the function that
// tells the breaker the live outcome, or why the call would not have been
// made (ShadowRejected, ShadowWaitTimeout) and done == nil.
func (sh *shadow) begin(m *method) (done func(ctx context.Context, err error), notSent string) {
	br := sh.breakers[m.family]
	allowed, err := br.Allow()
	if err != nil {
		sh.rec.BreakerRejected(m.family)
		return nil, recorder.ShadowRejected
	}
	now := sh.g.clock.Now()
	sm := sh.methods[m]
	r := sm.bucket.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	var rf *rate.Reservation // the family's token after the method's own
	if sm.family != nil {
		rf = sm.family.ReserveN(now.Add(wait), 1)
		wait += rf.DelayFrom(now.Add(wait))
	}
	cancel := func() {
		if rf != nil {
			rf.CancelAt(now)
		}
		r.CancelAt(now)
	}
	if m.waitTimeout > 0 && wait > m.waitTimeout {
		cancel()
		allowed(callerGone{errWaitTimeout}) // nothing would have been sent
		return nil, recorder.ShadowWaitTimeout
	}
	return func(ctx context.Context, err error) {
		if throttled, _ := sh.g.throttle.Classify(err); throttled {
			// Enforce mode paces calls below the quota: this call would
			// have waited instead, and been sent once — as the retry the
			// controller makes after this throttled one, which is counted.
			cancel()
		} else {
			sh.rec.Wait(m.family, wait)
			sm.rec.Call()
		}
		outcome := breakerOutcome(ctx, err)
		allowed(outcome)
		if sh.g.answered(outcome) {
			for _, b := range sh.breakers {
				b.CloudAnswered()
			}
		}
	}, ""
}

// live sends one call upstream as the bare provider would, and counts it
// in cloudgate_upstream_calls_total. Nothing else: no token, no breaker,
// no adaptive cut.
func live[T any](ctx context.Context, g *gate, m *method, fn func(context.Context) (T, error)) (T, error) {
	start := g.clock.Now()
	// Shadow: a request-level gate under the upstream records the request
	// and lets it through as it came, as this mode does with the call.
	v, err := fn(WithCall(ctx, Call{Method: m.name, Priority: m.priority, Shadow: true}))
	g.rec.UpstreamCall(m.family, m.name, liveResult(g, err), g.clock.Since(start))
	return v, err
}

func liveResult(g *gate, err error) string {
	switch {
	case err == nil:
		return recorder.ResultOK
	case errors.Is(err, cloudprovider.InstanceNotFound):
		return recorder.ResultNotFound
	}
	if throttled, _ := g.throttle.Classify(err); throttled {
		return recorder.ResultThrottled
	}
	return recorder.ResultError
}

// shadowRead runs a read path in shadow mode (modelRead).
type shadowRead[K comparable, V any] struct{ sh *shadow }

// read ignores prio: the live call is sent at once, as without cloudgate.
func (r shadowRead[K, V]) read(ctx context.Context, m *method, c *cache.Cache[K, V], key K, _ limiter.Priority, call func(context.Context) (V, error)) (V, error) {
	return modelRead(ctx, r.sh, m, c, key, call)
}

// shadowNodeRead runs an InstancesV2 read path in shadow mode
// (modelNodeRead).
type shadowNodeRead[V any] struct{ sh *shadow }

func (r shadowNodeRead[V]) nodeRead(ctx context.Context, p *nodePath[V], up cloudprovider.InstancesV2, node *v1.Node, key nodeKey, call nodeCall[V]) (V, error) {
	return modelNodeRead(ctx, r.sh, p.m, p.c, node, key, func(ctx context.Context) (V, error) { return call(up, ctx, node) })
}

func (sh *shadow) guard() *notFoundGuard { return nil }

// initialize decides the would-be batch size as enforce mode decides
// batching at Initialize; a shadow adds no calls (no list prefetch).
func (sh *shadow) initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {
	sh.decideBatching(true)
}

// useNodeInformer: a shadow has no not-found guard, which alone needs it.
func (sh *shadow) useNodeInformer(informers.SharedInformerFactory) {}

// close: a shadow runs no goroutines.
func (sh *shadow) close() {}

// modelRead is a read in shadow mode: call is the upstream's own method,
// sent live; the would-be cache (c, nil: uncached) answers beside it.
func modelRead[K comparable, V any](ctx context.Context, sh *shadow, m *method, c *cache.Cache[K, V], key K, call func(context.Context) (V, error)) (V, error) {
	g, sm := sh.g, sh.methods[m]
	if c != nil {
		if cached, cerr, hit := c.Fresh(key); hit {
			v, err := live(ctx, g, m, call)
			sm.rec.Read(recorder.ShadowHit)
			if diverges(cached, cerr, v, err) {
				sm.rec.Diverged()
			}
			m.requests.Observe(err)
			return v, err
		}
	}
	done, notSent := sh.begin(m)
	v, err := live(ctx, g, m, call)
	if done == nil {
		sm.rec.Read(notSent)
	} else {
		done(ctx, err)
		sm.rec.Read(recorder.ShadowMiss)
		if c != nil {
			storeAnswer(c, key, v, err)
		}
	}
	m.requests.Observe(err)
	return v, err
}

// write is a write in shadow mode: the write goes straight through; it is
// a would-be call of its family, and invalidates the shadow caches as it
// would the real ones.
func (sh *shadow) write(ctx context.Context, m *method, fn func(context.Context) error, invalidate func()) error {
	done, notSent := sh.begin(m)
	_, err := live(ctx, sh.g, m, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	if done != nil {
		done(ctx, err)
	} else {
		sh.methods[m].rec.Read(notSent) // a write the breaker or the wait would have refused
	}
	if invalidate != nil {
		invalidate()
	}
	m.requests.Observe(err)
	return err
}

// modelNodeRead is an InstancesV2 read (InstanceMetadata,
// InstanceExists, InstanceShutdown) in shadow mode: the upstream's own
// method, and the would-be cache, batch or call beside it.
func modelNodeRead[V any](ctx context.Context, sh *shadow, m *method, c *cache.Cache[nodeKey, V], node *v1.Node, key nodeKey,
	call func(context.Context) (V, error)) (V, error) {
	g, sm := sh.g, sh.methods[m]
	if key.id == "" {
		c = nil // no identity: neither cached nor merged
	}
	if c != nil {
		cached, cerr, hit := c.Fresh(key)
		var fill shadowFill
		filled := false
		if !hit {
			if f := sh.filled[m]; f != nil {
				fill, _, filled = f.Fresh(key)
				if filled && fill.seen {
					if filled = g.clock.Now().Before(fill.until); filled {
						hit, cerr = true, fill.err
						cached, _ = fill.answer.(V)
					}
				}
			}
		}
		if hit || filled {
			v, err := live(ctx, g, m, call)
			sm.rec.Read(recorder.ShadowHit)
			switch {
			case hit:
				if diverges(cached, cerr, v, err) {
					sm.rec.Diverged()
				}
			case err == nil || errors.Is(err, cloudprovider.InstanceNotFound):
				// The first live answer stands for the batch's (unseen),
				// aged from the batch: later hits are compared with it.
				sh.seen(m, key, fill.at, v, err)
			}
			m.requests.Observe(err)
			return v, err
		}
	}
	limit := sh.batchSize()
	if limit <= 0 || key.id == "" {
		return modelRead(ctx, sh, m, c, key, call)
	}
	b, peers := sh.join(limit, ctx, key)
	at := g.clock.Now()
	sh.fillPeers(peers, at)
	v, err := live(ctx, g, m, call)
	sh.leave(b, ctx, err)
	if b.result != "" {
		sm.rec.Read(b.result)
	} else {
		sm.rec.Read(recorder.ShadowBatched)
		storeAnswer(c, key, v, err)
		if mark, positive := sh.fillOf(m, v, err); mark {
			for mt, f := range sh.filled {
				if mt != m {
					f.Put(key, shadowFill{at: at, positive: positive})
				}
			}
		}
	}
	m.requests.Observe(err)
	return v, err
}

// batchSize is the would-be batch size: min(batch.maxSize, the upstream's
// MaxBatchSize), decided as enforce mode decides it (planBatching, at
// Initialize or first use); <= 0: no batching.
func (sh *shadow) batchSize() int {
	if n := sh.batchLimit.Load(); n != 0 {
		return int(n)
	}
	sh.decideBatching(false)
	return max(int(sh.batchLimit.Load()), 0)
}

// decideBatching fixes the would-be batch size once planBatching decides.
func (sh *shadow) decideBatching(final bool) {
	p, decided := planBatching(sh.g.upstream, sh.g.cfg, final)
	if !decided {
		return
	}
	n := int64(-1)
	if p.size > 0 {
		n = int64(p.size)
	}
	sh.batchLimit.CompareAndSwap(0, n)
}

// join adds a would-be batched miss of node key to the open would-be
// batch, or opens a new one (a would-be BatchInstanceStatus call). The
// open batch takes the miss while it is younger than batch.maxWait and
// below the batch size, unless the miss's caller is in it already: in
// enforce mode that caller would still be waiting for the batch's answer
// (its next miss comes after the batch is sent), whereas in shadow mode
// its live call returned at once. A caller is told by its context
// (controllers pass theirs down each loop); two callers with one context
// are taken for one, which predicts more calls, not fewer.
//
// A batch that would have been sent carries the lifecycle peers due for a
// refresh (batching.go: lifecyclePeers), taken when it opens (enforce mode sends at once,
// batch.sendAtOnce): they are returned for fillPeers. A member that is a
// peer is refreshed by its batch, as enforce mode's batch members are.
func (sh *shadow) join(limit int, ctx context.Context, key nodeKey) (*shadowBatch, []*v1.Node) {
	now := sh.g.clock.Now()
	in := map[nodeKey]bool{key: true}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if b := sh.open; b != nil && b.size < limit && now.Sub(b.opened) < sh.g.cfg.Batch.MaxWait.Duration && !slices.ContainsFunc(b.callers, sameCaller(ctx)) {
		b.size++
		b.callers = append(b.callers, ctx)
		if b.result == "" {
			sh.peers.take(in, 0, sh.g.peerAge(), now)
		}
		return b, nil
	}
	b := &shadowBatch{opened: now, size: 1, callers: []context.Context{ctx}}
	b.done, b.result = sh.begin(sh.g.m.batchInstanceStatus)
	sh.open = b
	if b.result != "" || sh.g.peerAge() <= 0 {
		return b, nil // not sent: it refreshes nothing
	}
	return b, sh.peers.take(in, limit-1, sh.g.peerAge(), now)
}

// notePeer records a lifecycle check of node (InstanceExists,
// InstanceShutdown) when the shadow predicts batches and the answers are
// cached, as enforce mode's gate.notePeer does when it batches.
func (sh *shadow) notePeer(node *v1.Node) {
	if sh.g.peerAge() <= 0 || sh.batchSize() <= 0 {
		return
	}
	if key := keyOfNode(node); key.id != "" {
		sh.peers.note(key, node, sh.g.clock.Now())
	}
}

// fillPeers marks the caches of the peers a would-be batch carried filled
// at `at`, as the batch answer would fill them (gate.fill). Their value is
// unknown to the shadow; whether it is positive is the last InstanceExists
// answer it still holds (else "exists": the first live answer then stands
// for it, see seen).
func (sh *shadow) fillPeers(peers []*v1.Node, at time.Time) {
	for _, node := range peers {
		key := keyOfNode(node)
		positive := true
		if exists, err, ok := sh.g.inst.exists.c.Fresh(key); ok {
			positive = exists && err == nil
		}
		for _, f := range sh.filled {
			f.Put(key, shadowFill{at: at, positive: positive})
		}
	}
}

// sameCaller reports whether a context is ctx, compared as interface
// values (==, no reflection): the same pointer for the derived contexts,
// one value for the background one. Two contexts of one type that cannot
// be compared (none of the standard ones; a custom struct holding a map or
// a func) make == panic: they count as two callers.
func sameCaller(ctx context.Context) func(context.Context) bool {
	return func(other context.Context) (same bool) {
		defer func() {
			if recover() != nil {
				same = false
			}
		}()
		return other == ctx
	}
}

// leave ends a member's live call; the first member's live outcome is
// the batch's, for the breaker.
func (sh *shadow) leave(b *shadowBatch, ctx context.Context, err error) {
	sh.mu.Lock()
	done := b.done
	b.done = nil
	sh.mu.Unlock()
	if done != nil {
		done(ctx, err)
	}
}

// seen records the first live answer (v, err) of m for a node a would-be
// batch answered at `at`: it is kept as m's cache would keep an answer
// given then (negative: negativeTTL; by node name: at most negativeTTL;
// else the TTL), and dropped if that has passed.
func (sh *shadow) seen(m *method, key nodeKey, at time.Time, v any, err error) {
	f := sh.filled[m]
	negative := err != nil
	if !negative && m == sh.g.m.instanceExists {
		exists, _ := v.(bool)
		negative = !exists
	}
	life, negTTL := m.ttl, sh.g.cfg.Cache.NegativeTTL.Duration
	switch {
	case negative:
		life = negTTL
	case !key.byProviderID:
		life = min(life, negTTL)
	}
	until := at.Add(life)
	if life <= 0 || !sh.g.clock.Now().Before(until) {
		f.Invalidate(key)
		return
	}
	if md, ok := v.(*cloudprovider.InstanceMetadata); ok {
		v = cloneMetadata(md) // the caller may change its own
	}
	f.Put(key, shadowFill{at: at, positive: !negative, seen: true, answer: v, err: err, until: until})
}

// fillOf says what a batch answer carrying this live answer of m would
// have stored in the node's other caches: mark is false when it is no
// answer (a per-node failure); positive is false for "does not exist".
func (sh *shadow) fillOf(m *method, v any, err error) (mark, positive bool) {
	switch {
	case errors.Is(err, cloudprovider.InstanceNotFound):
		return true, false
	case err != nil:
		return false, false
	case m == sh.g.m.instanceExists:
		exists, _ := v.(bool)
		return true, exists
	}
	return true, true
}

// storeAnswer stores a live answer in a shadow cache as a fetch would: a
// value, or a negative answer (InstanceNotFound); other errors are not
// answers.
func storeAnswer[K comparable, V any](c *cache.Cache[K, V], key K, v V, err error) {
	switch {
	case c == nil:
	case err == nil:
		c.Put(key, v)
	case errors.Is(err, cloudprovider.InstanceNotFound):
		c.PutNegative(key, err)
	}
}

// diverges reports whether a would-be cached answer (cached, cerr) differs
// from the live one (v, err). Values are compared semantically (nil and
// empty slices alike, as Kubernetes compares objects); errors by class:
// InstanceNotFound against a value is a divergence. A live failure
// (throttling, an outage) is no answer to compare: the cache would have
// hidden it, which is not staleness.
func diverges[V any](cached V, cerr error, v V, err error) bool {
	notFound := errors.Is(err, cloudprovider.InstanceNotFound)
	switch {
	case err != nil && !notFound:
		return false
	case cerr != nil || notFound:
		return errors.Is(cerr, cloudprovider.InstanceNotFound) != notFound
	}
	switch c := any(cached).(type) {
	case bool:
		return c != any(v).(bool)
	case string:
		return c != any(v).(string)
	case *cloudprovider.InstanceMetadata: // the hot path: no reflection
		return !sameMetadata(c, any(v).(*cloudprovider.InstanceMetadata))
	case lbAnswer: // unexported fields: compared one by one
		l := any(v).(lbAnswer)
		return c.exists != l.exists || !equality.Semantic.DeepEqual(c.status, l.status)
	}
	return !equality.Semantic.DeepEqual(cached, v)
}

// sameMetadata compares two InstanceMetadata as equality.Semantic would
// (nil and empty alike), without reflection.
func sameMetadata(a, b *cloudprovider.InstanceMetadata) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.ProviderID != b.ProviderID || a.InstanceType != b.InstanceType || a.Zone != b.Zone || a.Region != b.Region ||
		len(a.NodeAddresses) != len(b.NodeAddresses) || len(a.AdditionalLabels) != len(b.AdditionalLabels) {
		return false
	}
	for i := range a.NodeAddresses {
		if a.NodeAddresses[i] != b.NodeAddresses[i] {
			return false
		}
	}
	for k, v := range a.AdditionalLabels {
		if w, ok := b.AdditionalLabels[k]; !ok || w != v {
			return false
		}
	}
	return true
}
