package recorder

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/limiter"
)

// Source reports the current state of one cloudgate instance; the provider
// implements it. Snapshot is called at scrape time and must be cheap.
type Source interface {
	Snapshot() Snapshot
}

// Snapshot is the point-in-time state exported as gauges.
type Snapshot struct {
	Caches   []CacheState
	Buckets  []BucketState
	Breakers []BreakerState
}

// CacheState is one cache's size.
type CacheState struct {
	Name    string
	Entries int
}

// BucketState is one token bucket's rates and queue.
type BucketState struct {
	Name          string
	ConfiguredQPS float64
	EffectiveQPS  float64
	Tokens        float64
	Waiting       int
}

// BreakerState is one family's circuit-breaker state.
type BreakerState struct {
	Family string
	State  limiter.State
}

// Recorder records the events of one cloudgate instance under its provider
// label: it hands out one observer per cache, bucket and breaker, and
// records the provider's calls, requests and batches.
type Recorder struct {
	m        *Metrics
	provider string

	mu      sync.Mutex
	windows map[string]*windowCounter // granted tokens per bucket, for quota utilisation
	source  Source
}

// Recorder returns a recorder for the instance labelled provider, and makes
// it the one whose state m's gauges report for that label.
func (m *Metrics) Recorder(provider string) *Recorder {
	r := &Recorder{m: m, provider: provider, windows: map[string]*windowCounter{}}
	m.state.set(provider, r)
	return r
}

// SetSource attaches the instance whose state the gauges report.
func (r *Recorder) SetSource(s Source) {
	r.mu.Lock()
	r.source = s
	r.mu.Unlock()
}

// UpstreamCall records one call to the upstream provider.
func (r *Recorder) UpstreamCall(family, method, result string, took time.Duration) {
	r.m.upstreamCalls.WithLabelValues(r.provider, family, method, result).Inc()
	r.m.upstreamDuration.WithLabelValues(r.provider, family, method).Observe(took.Seconds())
}

// Batch records one batched lookup of size nodes, sent for reason (see
// internal/batcher's Flush* constants).
func (r *Recorder) Batch(size int, reason string) {
	r.m.batchSize.WithLabelValues(r.provider).Observe(float64(size))
	r.m.batchFlushes.WithLabelValues(r.provider, reason).Inc()
}

// NotFoundConfirmation records how one held "does not exist" answer of the
// not-found guard ended: outcome is "confirmed" or "refuted".
func (r *Recorder) NotFoundConfirmation(outcome string) {
	r.m.notFoundConfirmations.WithLabelValues(r.provider, outcome).Inc()
}

// CacheObserver returns the observer of the cache named name, its
// counters resolved once (WithLabelValues hashes its labels on every call).
func (r *Recorder) CacheObserver(name string) cache.Observer {
	m := r.m
	return &cacheCounters{
		hits:         m.cacheHits.WithLabelValues(r.provider, name),
		negativeHits: m.cacheNegativeHits.WithLabelValues(r.provider, name),
		misses:       m.cacheMisses.WithLabelValues(r.provider, name),
		deduplicated: m.cacheDeduplicated.WithLabelValues(r.provider, name),
		staleServed:  m.cacheStaleServed.WithLabelValues(r.provider, name),
		evictions:    m.cacheEvictions.WithLabelValues(r.provider, name),
	}
}

// cacheCounters counts one cache's events.
type cacheCounters struct {
	hits, negativeHits, misses, deduplicated, staleServed, evictions prometheus.Counter
}

// Hit implements cache.Observer.
func (o *cacheCounters) Hit() { o.hits.Inc() }

// NegativeHit implements cache.Observer.
func (o *cacheCounters) NegativeHit() { o.negativeHits.Inc() }

// Miss implements cache.Observer.
func (o *cacheCounters) Miss() { o.misses.Inc() }

// Deduplicated implements cache.Observer.
func (o *cacheCounters) Deduplicated() { o.deduplicated.Inc() }

// StaleServed implements cache.Observer.
func (o *cacheCounters) StaleServed() { o.staleServed.Inc() }

// Evicted implements cache.Observer.
func (o *cacheCounters) Evicted() { o.evictions.Inc() }

// BucketObserver returns the observer of the token bucket named name: its
// waits, the throttling it was told of, its rate changes, and the tokens it
// granted (for cloudgate_quota_utilization_ratio). Its series are resolved
// once: WaitDone is on every admission.
func (r *Recorder) BucketObserver(name string) limiter.BucketObserver {
	o := &bucketObserver{
		window:      r.window(name),
		cancelled:   r.m.limiterCancelled.WithLabelValues(r.provider, name),
		throttled:   r.m.throttled.WithLabelValues(r.provider, name),
		retryAfter:  r.m.retryAfter.WithLabelValues(r.provider, name),
		rateChanges: r.m.rateChanges.WithLabelValues(r.provider, name),
	}
	for p := range o.wait {
		o.wait[p] = r.m.limiterWait.WithLabelValues(r.provider, name, limiter.Priority(p).String())
	}
	return o
}

type bucketObserver struct {
	wait                              [limiter.PriorityBackground + 1]prometheus.Observer // by priority
	window                            *windowCounter
	cancelled, throttled, rateChanges prometheus.Counter
	retryAfter                        prometheus.Observer
}

func (o *bucketObserver) WaitDone(p limiter.Priority, waited time.Duration, err error) {
	o.wait[min(max(p, limiter.PriorityCritical), limiter.PriorityBackground)].Observe(waited.Seconds())
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			o.cancelled.Inc()
		}
		return
	}
	o.window.add(time.Now())
}

func (o *bucketObserver) Throttled(retryAfter time.Duration) {
	o.throttled.Inc()
	o.retryAfter.Observe(retryAfter.Seconds())
}

func (o *bucketObserver) RateChanged(float64) { o.rateChanges.Inc() }

// BreakerObserver returns the observer of the circuit breaker of family.
func (r *Recorder) BreakerObserver(family string) limiter.BreakerObserver {
	return breakerObserver{r: r, family: family}
}

type breakerObserver struct {
	r      *Recorder
	family string
}

func (o breakerObserver) StateChanged(from, to limiter.State) {
	o.r.m.breakerTransitions.WithLabelValues(o.r.provider, o.family, from.String(), to.String()).Inc()
}

func (r *Recorder) window(bucket string) *windowCounter {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.windows[bucket]
	if !ok {
		w = &windowCounter{}
		r.windows[bucket] = w
	}
	return w
}

// windowCounter counts events over the last QuotaWindow in one-second
// slots: a slot is a second of Unix time.
type windowCounter struct {
	mu    sync.Mutex
	slots [60]uint64
	secs  [60]int64
}

func (w *windowCounter) add(now time.Time) {
	s := now.Unix()
	i := (s%60 + 60) % 60
	w.mu.Lock()
	if w.secs[i] != s {
		w.secs[i], w.slots[i] = s, 0
	}
	w.slots[i]++
	w.mu.Unlock()
}

func (w *windowCounter) sum(now time.Time) uint64 {
	s := now.Unix()
	var total uint64
	w.mu.Lock()
	for i := range w.slots {
		if s-w.secs[i] < 60 {
			total += w.slots[i]
		}
	}
	w.mu.Unlock()
	return total
}

// stateCollector exports the gauges read from each instance's Source.
type stateCollector struct {
	mu        sync.Mutex
	recorders map[string]*Recorder

	cacheEntries, configuredRate, effectiveRate, tokens, waiting, breakerState, quota *prometheus.Desc
}

func newStateCollector() *stateCollector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
	}
	return &stateCollector{
		recorders:      map[string]*Recorder{},
		cacheEntries:   desc("cache_entries", "Entries held by a cache (fresh, or kept for stale-if-error).", "provider", "cache"),
		configuredRate: desc("limiter_configured_rate", "Configured sustained rate of a token bucket, in calls per second.", "provider", "bucket"),
		effectiveRate:  desc("limiter_effective_rate", "Current rate of a token bucket after adaptive decreases, in calls per second.", "provider", "bucket"),
		tokens:         desc("limiter_tokens", "Tokens available in a bucket now (0 while callers are queued for the next one).", "provider", "bucket"),
		waiting:        desc("limiter_waiting", "Callers queued for a token.", "provider", "bucket"),
		breakerState:   desc("breaker_state", "Circuit-breaker state: 0 closed, 1 half-open, 2 open.", "provider", "family"),
		quota: desc("quota_utilization_ratio",
			"Upstream calls admitted in the last minute divided by what the bucket's configured rate allows in a minute.",
			"provider", "bucket"),
	}
}

func (c *stateCollector) set(provider string, r *Recorder) {
	c.mu.Lock()
	c.recorders[provider] = r
	c.mu.Unlock()
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cacheEntries, c.configuredRate, c.effectiveRate, c.tokens, c.waiting, c.breakerState, c.quota} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	providers := make([]string, 0, len(c.recorders))
	for p := range c.recorders {
		providers = append(providers, p)
	}
	sort.Strings(providers)
	recorders := make([]*Recorder, len(providers))
	for i, p := range providers {
		recorders[i] = c.recorders[p]
	}
	c.mu.Unlock()

	now := time.Now()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, r := range recorders {
		r.mu.Lock()
		src := r.source
		r.mu.Unlock()
		if src == nil {
			continue
		}
		s := src.Snapshot()
		for _, cs := range s.Caches {
			gauge(c.cacheEntries, float64(cs.Entries), r.provider, cs.Name)
		}
		for _, b := range s.Buckets {
			gauge(c.configuredRate, b.ConfiguredQPS, r.provider, b.Name)
			gauge(c.effectiveRate, b.EffectiveQPS, r.provider, b.Name)
			gauge(c.tokens, b.Tokens, r.provider, b.Name)
			gauge(c.waiting, float64(b.Waiting), r.provider, b.Name)
			utilisation := 0.0
			if b.ConfiguredQPS > 0 {
				utilisation = float64(r.window(b.Name).sum(now)) / (b.ConfiguredQPS * QuotaWindow.Seconds())
			}
			gauge(c.quota, utilisation, r.provider, b.Name)
		}
		for _, br := range s.Breakers {
			gauge(c.breakerState, float64(br.State), r.provider, br.Family)
		}
	}
}

// RequestCounter counts one method's calls from the controllers; its
// counters are resolved once.
type RequestCounter struct {
	ok, failed prometheus.Counter
}

// Requests returns the request counter of method.
func (r *Recorder) Requests(method string) *RequestCounter {
	return &RequestCounter{
		ok:     r.m.requests.WithLabelValues(r.provider, method, ResultOK),
		failed: r.m.requests.WithLabelValues(r.provider, method, ResultError),
	}
}

// Observe counts one request by its outcome.
func (c *RequestCounter) Observe(err error) {
	if err != nil {
		c.failed.Inc()
		return
	}
	c.ok.Inc()
}

// Init creates the event-driven series of the given buckets and breaker
// families at zero, so that rate() and increase() see their first event
// (a series born with value 1 has no increase to show).
func (r *Recorder) Init(buckets, families []string) {
	for _, b := range buckets {
		r.m.throttled.WithLabelValues(r.provider, b)
		r.m.limiterCancelled.WithLabelValues(r.provider, b)
		r.m.rateChanges.WithLabelValues(r.provider, b)
	}
	states := []limiter.State{limiter.StateClosed, limiter.StateHalfOpen, limiter.StateOpen}
	for _, f := range families {
		for _, from := range states {
			for _, to := range states {
				if from != to {
					r.m.breakerTransitions.WithLabelValues(r.provider, f, from.String(), to.String())
				}
			}
		}
	}
	for _, reason := range []string{"size", "wait", "now", "returned"} {
		r.m.batchFlushes.WithLabelValues(r.provider, reason)
	}
	for _, outcome := range []string{"confirmed", "refuted"} {
		r.m.notFoundConfirmations.WithLabelValues(r.provider, outcome)
	}
}
