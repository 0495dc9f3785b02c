package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/internal/recorder"
	"github.com/cloudgate/cloudgate/limiter"
)

// The read path every wrapped read goes through, and mode enforce's
// pipeline behind it (shadow mode's: shadow.go): every read method's path
// runs enforceRead or enforceNodeRead, every write enforcer.write, and
// every upstream call, batches included, begin and end (the breaker,
// the token, and what the outcome tells them and the metrics).

// A read path is one read method's pipeline: its policy, its cache, and
// the mode that runs it (set once by bind when the mode is built: enforce's
// cache-batch-breaker-token-upstream, or shadow's live call and model).
type readPath[K comparable, V any] struct {
	m   *method
	c   *cache.Cache[K, V] // nil: uncached
	run readRun[K, V]
}

// readRun is a mode's read: answer key from c (nil: uncached), calling
// the upstream through call as the mode does.
type readRun[K comparable, V any] interface {
	read(ctx context.Context, m *method, c *cache.Cache[K, V], key K, prio limiter.Priority, call func(context.Context) (V, error)) (V, error)
}

// read answers key, cached whatever it is.
func (p *readPath[K, V]) read(ctx context.Context, key K, call func(context.Context) (V, error)) (V, error) {
	return p.run.read(ctx, p.m, p.c, key, p.m.priority, call)
}

// readID answers key, an identity (a node name, a provider ID, a host
// name): an empty one identifies nothing, so it is neither cached nor
// merged (every node without a provider ID would share one answer).
func (p *readPath[K, V]) readID(ctx context.Context, key K, call func(context.Context) (V, error)) (V, error) {
	return p.run.read(ctx, p.m, p.identified(key), key, p.m.priority, call)
}

// readFirstSight is readID raised above the periodic resync when nothing is
// held for key: the v1 calls carry no Node whose uninitialized taint could
// say so, and a node never seen is most likely being initialised (nothing
// can be scheduled on it until it is).
func (p *readPath[K, V]) readFirstSight(ctx context.Context, key K, call func(context.Context) (V, error)) (V, error) {
	c, prio := p.identified(key), p.m.priority
	if c != nil && !c.Has(key) {
		prio = limiter.PriorityCritical
	}
	return p.run.read(ctx, p.m, c, key, prio, call)
}

func (p *readPath[K, V]) identified(key K) *cache.Cache[K, V] {
	var none K
	if key == none {
		return nil
	}
	return p.c
}

// invalidate drops key's cached answer.
func (p *readPath[K, V]) invalidate(key K) { invalidate(p.c, key) }

// enforceRead runs a read path in enforce mode: cache, breaker, token,
// upstream.
type enforceRead[K comparable, V any] struct{ e *enforcer }

func (r enforceRead[K, V]) read(ctx context.Context, m *method, c *cache.Cache[K, V], key K, prio limiter.Priority, call func(context.Context) (V, error)) (V, error) {
	return read(ctx, r.e, m, c, key, func(ctx context.Context) (V, error) {
		return invoke(ctx, r.e, m, prio, call)
	})
}

// enforceNodeRead runs an InstancesV2 read in enforce mode: keyed by the
// node's instance, answered from the cache, else by the node's lookup
// (nodeFetch: a batch, or a call of its own). p.of and call are static
// functions, so a cache hit allocates nothing but the caller's copy.
type enforceNodeRead[V any] struct{ e *enforcer }

func (r enforceNodeRead[V]) nodeRead(ctx context.Context, p *nodePath[V], up cloudprovider.InstancesV2, node *v1.Node, key nodeKey, call nodeCall[V]) (V, error) {
	e, m, c := r.e, p.m, p.c
	if key.id == "" {
		c = nil // no identity: neither cached nor merged
	}
	if v, err, ok := fresh(m, c, key); ok {
		return v, err
	}
	prio := nodePriority(node, m.priority)
	// A Node being initialised does not wait for the first list: its pages
	// are background reads, each waiting for a token, and a critical
	// lookup goes first (a batch or a call of its own at its priority).
	if f := e.firstList.Load(); f != nil && c != nil && prio != limiter.PriorityCritical && f.await(ctx) {
		if v, err, ok := fresh(m, c, key); ok {
			return v, err
		}
	}
	f := &nodeFetch[V]{e: e, p: p, up: up, node: node, key: key, prio: prio, call: call}
	return read(ctx, e, m, c, key, f.fetch)
}

// nodePriority raises reads for nodes that are still being initialised
// above the periodic resync of initialised ones: while a node carries the
// uninitialized taint nothing can be scheduled on it.
func nodePriority(node *v1.Node, fallback limiter.Priority) limiter.Priority {
	for _, t := range node.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return limiter.PriorityCritical
		}
	}
	return fallback
}

// read answers a read method from its cache (nil: uncached), calling fetch
// (which goes upstream through invoke, or through the batcher) on a miss.
// While the family's breaker is open it serves a positive answer the
// upstream gave at most TTL+cache.staleIfError ago, else the breaker's
// error — after waiting for the breaker's next probe (probeWait). Negative
// answers are never served stale.
func read[K comparable, V any](ctx context.Context, g *enforcer, m *method, c *cache.Cache[K, V], key K, fetch func(context.Context) (V, error)) (V, error) {
	var v V
	var err error
	for w := (probeWait{g: g, m: m}); ; {
		if c == nil {
			v, err = fetch(ctx)
		} else if v, err = c.Get(ctx, key, fetch); err != nil && limiter.IsOpen(err) {
			if stale, ok := c.Stale(key, m.ttl+g.cfg.Cache.StaleIfError.Duration); ok {
				v, err = stale, nil
			}
		}
		if !w.again(ctx, err) {
			break
		}
	}
	m.requests.Observe(err)
	return v, err
}

// probeWait is a read's wait for its breaker: while m's breaker rejects
// the read (an *OpenError), again waits for the breaker's next change — its
// open interval ending, the cloud answering another call, its probes
// settling — and says to read again, as a provider's client retries with
// backoff (breaker.waitForProbe). It gives up (the read returns the
// rejection) when a probe failed after the first try (the cloud is still
// down), when ctx ends, or 2 × openTimeout after the first try. Only reads
// wait: a write held here could be overtaken by a newer write of the same
// object and land last.
type probeWait struct {
	g *enforcer
	m *method
	// After the first rejection: the breaker reopening (cancelled when a
	// probe fails from then on), its next change, and when to give up.
	waiting           bool
	reopened, changed context.Context
	deadline          time.Time
}

// again reports whether to read again after a try that ended with err,
// having waited for the breaker as probeWait says.
func (w *probeWait) again(ctx context.Context, err error) bool {
	g, m := w.g, w.m
	if !w.waiting {
		if !*g.cfg.Breaker.WaitForProbe || !limiter.IsOpen(err) || ctx.Err() != nil {
			return false // the usual path: one try
		}
		w.waiting = true
		w.reopened = m.breaker.Opened()
		w.deadline = g.clock.Now().Add(2 * g.cfg.Breaker.OpenTimeout.Duration)
		// Changed is taken before each try, so a change between the two
		// ends the wait at once; the first try again repeats the rejected
		// one for that.
		w.changed = m.breaker.Changed()
		return true
	}
	var oe *limiter.OpenError
	if !errors.As(err, &oe) || ctx.Err() != nil || w.reopened.Err() != nil {
		return false
	}
	wait := w.deadline.Sub(g.clock.Now())
	if oe.RetryIn > 0 {
		wait = min(wait, oe.RetryIn)
	}
	if wait <= 0 || !g.sleep(ctx, wait, w.changed) || w.reopened.Err() != nil {
		return false
	}
	w.changed = m.breaker.Changed()
	return true
}

// sleep waits d on the gate's clock, or until wake ends; it reports false
// when ctx ended first.
func (g *enforcer) sleep(ctx context.Context, d time.Duration, wake context.Context) bool {
	timer, cancel := context.WithCancel(wake)
	defer cancel()
	stop := stoppableAfterFunc(g.clock, d, cancel)
	defer stop()
	select {
	case <-timer.Done():
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// fresh answers a read from a fresh cache entry, if there is one. It is
// asked before the fetch closure is built, which would otherwise be
// allocated on every call, hits included.
func fresh[K comparable, V any](m *method, c *cache.Cache[K, V], key K) (V, error, bool) {
	if c == nil {
		var zero V
		return zero, nil, false
	}
	v, err, ok := c.Fresh(key)
	if ok {
		m.requests.Observe(err)
	}
	return v, err, ok
}

// write sends a write upstream: never cached, never de-duplicated, always
// sent or answered with an error. invalidate runs after the call whatever
// its outcome (a failed write may have changed state too).
func (e *enforcer) write(ctx context.Context, m *method, fn func(context.Context) error, invalidate func()) error {
	_, err := invoke(ctx, e, m, m.priority, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	})
	if invalidate != nil {
		invalidate()
	}
	m.requests.Observe(err)
	return err
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
func invoke[T any](ctx context.Context, g *enforcer, m *method, prio limiter.Priority, fn func(context.Context) (T, error)) (T, error) {
	c, err := g.begin(ctx, m, prio, awaitToken)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := fn(withCall(ctx, m, prio))
	return v, c.end(ctx, err)
}

// admission is how a call gets past the limiter.
type admission uint8

const (
	// awaitToken: the call waits for m's token (bounded by waitTimeout).
	awaitToken admission = iota
	// tokenTaken: the call's token was taken already, by a batch admitted
	// while it was open (nodeBatches.Admit).
	tokenTaken
)

// admissionOf is the admission of a batch's first call (batcher.Flush).
func admissionOf(admitted bool) admission {
	if admitted {
		return tokenTaken
	}
	return awaitToken
}

// upstreamCall is one call let through to the upstream: begin asked the
// breaker and took the token, the caller calls the upstream, and end tells
// the breaker, the limiter and the metrics how it went.
type upstreamCall struct {
	g     *enforcer
	m     *method
	done  func(error) // the breaker's
	start time.Time
}

// begin asks m's breaker and, admitted as a says, waits for m's token.
func (g *enforcer) begin(ctx context.Context, m *method, prio limiter.Priority, a admission) (upstreamCall, error) {
	opened := m.breaker.Opened() // before Allow: an opening in between ends the wait at once
	done, err := m.breaker.Allow()
	if err != nil {
		return upstreamCall{}, g.openRetry(err)
	}
	if a == awaitToken {
		if err := g.wait(ctx, m, prio, opened, m.waitTimeout); err != nil {
			done(callerGone{err}) // nothing was sent: no verdict on the cloud
			return upstreamCall{}, err
		}
	}
	return upstreamCall{g: g, m: m, done: done, start: g.clock.Now()}, nil
}

// end reports the call's outcome err (the upstream's error; ctx the
// call's) and returns err as the caller returns it (bareNotFound).
func (c upstreamCall) end(ctx context.Context, err error) error {
	g := c.g
	err = bareNotFound(err)
	outcome := breakerOutcome(ctx, err)
	c.done(outcome)
	if g.answered(outcome) {
		// The cloud answers: an open breaker of the other family probes now.
		for _, br := range g.breakers {
			br.CloudAnswered()
		}
		// A failed list is brought forward by an answer that shows an
		// outage ended; a throttled one shows the quota is short.
		if g.listFailed.Load() {
			if throttled, _ := g.throttle.Classify(err); !throttled {
				select {
				case g.listAnswered <- struct{}{}:
				default:
				}
			}
		}
	}
	g.rec.UpstreamCall(c.m.family, c.m.name, g.result(c.m, err), g.clock.Since(c.start))
	return err
}

// bareNotFound returns cloudprovider.InstanceNotFound itself for any error
// that wraps it (errors.Is), and err otherwise. A provider may wrap the
// sentinel (the AWS provider's InstanceMetadata does, with %w); the caches,
// the not-found guard and the controllers all take the bare value, and
// cloudprovider.GetInstanceProviderID, which the lifecycle and node
// controllers call, compares InstanceID's error with ==.
func bareNotFound(err error) error {
	if err != nil && err != cloudprovider.InstanceNotFound && errors.Is(err, cloudprovider.InstanceNotFound) {
		return cloudprovider.InstanceNotFound
	}
	return err
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

func (g *enforcer) openRetry(err error) error {
	var oe *limiter.OpenError
	if !errors.As(err, &oe) {
		return err
	}
	first := g.cfg.Breaker.MinOpenTimeout.Duration // > 0 (Config.Resolve)
	return &breakerOpenError{open: err, retry: cloudproviderapi.NewRetryError(err.Error(), max(oe.RetryIn, first))}
}

// errWaitTimeout is the cause with which wait gives up.
var errWaitTimeout = errors.New("cloudgate: token wait timed out")

// errBreakerOpened is the cause with which wait gives up when the family's
// breaker opens.
var errBreakerOpened = errors.New("cloudgate: circuit breaker opened while waiting for a token")

// wait waits for m's token for at most timeout (on the gate's clock; 0:
// as long as ctx allows). Running out of it is a retryable
// *api.RetryError (noToken), so the service controller requeues instead of
// parking a worker; the caller's own context ending is the bucket's error,
// as before. When m's breaker opens meanwhile (opened ends), the caller gets
// the breaker's rejection, as a caller arriving then would: otherwise the
// callers admitted before it opened would keep their places in the queue
// and the half-open breaker's probe would wait behind them while every new
// call is rejected.
func (g *enforcer) wait(ctx context.Context, m *method, prio limiter.Priority, opened context.Context, timeout time.Duration) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopOpened := context.AfterFunc(opened, func() { cancel(errBreakerOpened) })
	defer stopOpened()
	stopTimeout := func() {}
	if timeout > 0 {
		stopTimeout = stoppableAfterFunc(g.clock, timeout, func() { cancel(errWaitTimeout) })
	}
	err := m.bucket.Wait(wctx, prio)
	stopTimeout()
	if err == nil || ctx.Err() != nil {
		return err
	}
	switch context.Cause(wctx) {
	case errWaitTimeout:
		return noToken(m, timeout)
	case errBreakerOpened:
		return g.openRetry(m.breaker.Rejection())
	}
	return err
}

// noToken is the answer of a call or batch that had no token from m's
// bucket within bound: a retryable *api.RetryError.
func noToken(m *method, bound time.Duration) error {
	setting := fmt.Sprintf("limits.%s.waitTimeout", m.family)
	if bound != m.waitTimeout { // a batch's bound with no waitTimeout set
		setting = fmt.Sprintf("a batch's bound while %s is 0", setting)
	}
	return cloudproviderapi.NewRetryError(fmt.Sprintf(
		"cloudgate: no %q token within %s (%s): the cloud API quota is exhausted; retry later",
		m.bucketName, bound, setting), min(bound, 30*time.Second))
}

// withCallTimeout is context.WithTimeoutCause on the gate's clock: on real
// time (Config.Clock nil) exactly that (the upstream sees the deadline);
// with an injected clock the timeout is that clock's timer, so a simulated
// clock governs cloudgate's own call timeouts as it governs the token waits
// (the history checker runs on a fake clock, where a real-clock timeout
// never fires).
func (g *enforcer) withCallTimeout(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	if g.cfg.Clock == nil {
		return context.WithTimeoutCause(ctx, d, cause)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := stoppableAfterFunc(g.clock, d, func() { cancel(cause) })
	return ctx, func() { stop(); cancel(nil) }
}

// stoppableAfterFunc runs f after d on clk and returns a stop function.
// stop must not be called with a lock f takes.
func stoppableAfterFunc(clk clock.WithTickerAndDelayedExecution, d time.Duration, f func()) (stop func()) {
	t := clk.AfterFunc(d, f)
	return func() { t.Stop() }
}

// result classifies an upstream outcome for metrics, and feeds throttling
// back to the method's bucket.
func (g *enforcer) result(m *method, err error) string {
	switch {
	case err == nil:
		return recorder.ResultOK
	case errors.Is(err, cloudprovider.InstanceNotFound):
		return recorder.ResultNotFound
	}
	if throttled, retryAfter := g.throttle.Classify(err); throttled {
		m.bucket.OnThrottled(retryAfter)
		return recorder.ResultThrottled
	}
	return recorder.ResultError
}
