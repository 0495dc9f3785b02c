package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"

	"github.com/cloudgate/cloudgate/internal/recorder"
	"github.com/cloudgate/cloudgate/limiter"
)

// One upstream call: breaker, token, call, and what the outcome tells the
// breaker, the limiter and the metrics.

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
	return invokeAdmitted(ctx, g, m, prio, false, fn)
}

// invokeAdmitted is invoke; admitted: the call's token was taken already
// (a batch admitted while it was open, see admitBatch).
func invokeAdmitted[T any](ctx context.Context, g *gate, m *method, prio limiter.Priority, admitted bool, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	opened := m.breaker.Opened() // before Allow: an opening in between ends the wait at once
	done, err := m.breaker.Allow()
	if err != nil {
		return zero, g.openRetry(err)
	}
	if !admitted {
		if err := g.wait(ctx, m, prio, opened); err != nil {
			done(callerGone{err}) // nothing was sent: no verdict on the cloud
			return zero, err
		}
	}
	start := g.clock.Now()
	v, err := fn(ctx)
	err = bareNotFound(err)
	outcome := breakerOutcome(ctx, err)
	done(outcome)
	if g.answered(outcome) {
		// The cloud answers: an open breaker of the other family probes now.
		for _, br := range g.breakers {
			br.CloudAnswered()
		}
		// A failed list is brought forward by an answer that shows an
		// outage ended; a throttled one shows the quota is short.
		if throttled, _ := g.throttle.Classify(err); !throttled && g.listFailed.Load() {
			select {
			case g.listAnswered <- struct{}{}:
			default:
			}
		}
	}
	g.rec.UpstreamCall(m.family, m.name, g.result(m, err), g.clock.Since(start))
	return v, err
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

func (g *gate) openRetry(err error) error {
	var oe *limiter.OpenError
	if !errors.As(err, &oe) {
		return err
	}
	first := g.cfg.Breaker.MinOpenTimeout.Duration // > 0 (Config.Resolve)
	return &breakerOpenError{open: err, retry: cloudproviderapi.NewRetryError(err.Error(), max(oe.RetryIn, first))}
}

// whileOpen runs the read op and, while m's breaker rejects it (an
// *OpenError), waits for the breaker's next change — its open interval
// ending, the cloud answering another call, its probes settling — and runs
// op again, as a provider's client retries with backoff
// (breaker.waitForProbe). It returns the rejection when a probe failed
// after the first try (the cloud is still down), when ctx ends, or
// 2 × openTimeout after the first try. Only reads wait: a write held here
// could be overtaken by a newer write of the same object and land last.
func whileOpen[T any](ctx context.Context, g *gate, m *method, op func() (T, error)) (T, error) {
	v, err := op()
	if !*g.cfg.Breaker.WaitForProbe || !limiter.IsOpen(err) || ctx.Err() != nil {
		return v, err // the usual path: nothing more than op
	}
	reopened := m.breaker.Opened() // cancelled when a probe fails from now on
	deadline := g.clock.Now().Add(2 * g.cfg.Breaker.OpenTimeout.Duration)
	for {
		// Changed is taken before op, so a change between the two ends the
		// wait at once; the first op here repeats the rejected one for that.
		changed := m.breaker.Changed()
		v, err = op()
		var oe *limiter.OpenError
		if !errors.As(err, &oe) || ctx.Err() != nil || reopened.Err() != nil {
			return v, err
		}
		wait := deadline.Sub(g.clock.Now())
		if oe.RetryIn > 0 {
			wait = min(wait, oe.RetryIn)
		}
		if wait <= 0 || !g.sleep(ctx, wait, changed) || reopened.Err() != nil {
			return v, err
		}
	}
}

// sleep waits d on the gate's clock, or until wake ends; it reports false
// when ctx ended first.
func (g *gate) sleep(ctx context.Context, d time.Duration, wake context.Context) bool {
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

// errWaitTimeout is the cause with which wait gives up.
var errWaitTimeout = errors.New("cloudgate: token wait timed out")

// errBreakerOpened is the cause with which wait gives up when the family's
// breaker opens.
var errBreakerOpened = errors.New("cloudgate: circuit breaker opened while waiting for a token")

// wait waits for m's token for at most m.waitTimeout (on the gate's clock).
// Running out of it is a retryable *api.RetryError, so the service
// controller requeues instead of parking a worker; the caller's own context
// ending is the bucket's error, as before. When m's breaker opens meanwhile
// (opened ends), the caller gets the breaker's rejection, as a caller
// arriving then would: otherwise the callers admitted before it opened would
// keep their places in the queue and the half-open breaker's probe would
// wait behind them while every new call is rejected.
func (g *gate) wait(ctx context.Context, m *method, prio limiter.Priority, opened context.Context) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopOpened := context.AfterFunc(opened, func() { cancel(errBreakerOpened) })
	defer stopOpened()
	stopTimeout := func() {}
	if m.waitTimeout > 0 {
		stopTimeout = stoppableAfterFunc(g.clock, m.waitTimeout, func() { cancel(errWaitTimeout) })
	}
	err := m.bucket.Wait(wctx, prio)
	stopTimeout()
	if err == nil || ctx.Err() != nil {
		return err
	}
	switch context.Cause(wctx) {
	case errWaitTimeout:
		return cloudproviderapi.NewRetryError(fmt.Sprintf(
			"cloudgate: no %q token within %s (limits.%s.waitTimeout): the cloud API quota is exhausted; retry later",
			m.bucketName, m.waitTimeout, m.family), min(m.waitTimeout, 30*time.Second))
	case errBreakerOpened:
		return g.openRetry(m.breaker.Rejection())
	}
	return err
}

// withCallTimeout is context.WithTimeoutCause on the gate's clock: on real
// time (Config.Clock nil) exactly that (the upstream sees the deadline);
// with an injected clock the timeout is that clock's timer, so a simulated
// clock governs cloudgate's own call timeouts as it governs the token waits
// (the history checker runs on a fake clock, where a real-clock timeout
// never fires).
func (g *gate) withCallTimeout(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
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
func (g *gate) result(m *method, err error) string {
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
