package metrics

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
// label. It implements cache.Observer and limiter.Observer, and the
// provider's call, request and batch hooks.
type Recorder struct {
	m        *Metrics
	provider string

	caches sync.Map // cache name -> *cacheCounters

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

// Batch records one batched lookup of size nodes, sent for reason ("size" or "wait").
func (r *Recorder) Batch(size int, reason string) {
	r.m.batchSize.WithLabelValues(r.provider).Observe(float64(size))
	r.m.batchFlushes.WithLabelValues(r.provider, reason).Inc()
}

// cacheCounters are one cache's counters, resolved once: a cache hit is on
// the hot path and WithLabelValues hashes its labels on every call.
type cacheCounters struct {
	hits, negativeHits, misses, deduplicated, staleServed, evictions prometheus.Counter
}

func (r *Recorder) cache(name string) *cacheCounters {
	if c, ok := r.caches.Load(name); ok {
		return c.(*cacheCounters)
	}
	m := r.m
	c, _ := r.caches.LoadOrStore(name, &cacheCounters{
		hits:         m.cacheHits.WithLabelValues(r.provider, name),
		negativeHits: m.cacheNegativeHits.WithLabelValues(r.provider, name),
		misses:       m.cacheMisses.WithLabelValues(r.provider, name),
		deduplicated: m.cacheDeduplicated.WithLabelValues(r.provider, name),
		staleServed:  m.cacheStaleServed.WithLabelValues(r.provider, name),
		evictions:    m.cacheEvictions.WithLabelValues(r.provider, name),
	})
	return c.(*cacheCounters)
}

// CacheObserver returns an observer bound to one cache's counters, for the
// hot path: it skips the by-name lookup of the Recorder's own methods.
func (r *Recorder) CacheObserver(name string) *CacheCounters {
	return &CacheCounters{r.cache(name)}
}

// CacheCounters implements cache.Observer for one cache; the cache-name
// arguments are ignored.
type CacheCounters struct{ c *cacheCounters }

func (o *CacheCounters) Hit(string)          { o.c.hits.Inc() }
func (o *CacheCounters) NegativeHit(string)  { o.c.negativeHits.Inc() }
func (o *CacheCounters) Miss(string)         { o.c.misses.Inc() }
func (o *CacheCounters) Deduplicated(string) { o.c.deduplicated.Inc() }
func (o *CacheCounters) StaleServed(string)  { o.c.staleServed.Inc() }
func (o *CacheCounters) Evicted(string)      { o.c.evictions.Inc() }

// Hit implements cache.Observer.
func (r *Recorder) Hit(cache string) { r.cache(cache).hits.Inc() }

// NegativeHit implements cache.Observer.
func (r *Recorder) NegativeHit(cache string) { r.cache(cache).negativeHits.Inc() }

// Miss implements cache.Observer.
func (r *Recorder) Miss(cache string) { r.cache(cache).misses.Inc() }

// Deduplicated implements cache.Observer.
func (r *Recorder) Deduplicated(cache string) { r.cache(cache).deduplicated.Inc() }

// StaleServed implements cache.Observer.
func (r *Recorder) StaleServed(cache string) { r.cache(cache).staleServed.Inc() }

// Evicted implements cache.Observer.
func (r *Recorder) Evicted(cache string) { r.cache(cache).evictions.Inc() }

// WaitDone implements limiter.Observer.
func (r *Recorder) WaitDone(bucket string, p limiter.Priority, waited time.Duration, err error) {
	r.m.limiterWait.WithLabelValues(r.provider, bucket, p.String()).Observe(waited.Seconds())
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			r.m.limiterCancelled.WithLabelValues(r.provider, bucket).Inc()
		}
		return
	}
	r.window(bucket).add(time.Now())
}

// Throttled implements limiter.Observer.
func (r *Recorder) Throttled(bucket string, retryAfter time.Duration) {
	r.m.throttled.WithLabelValues(r.provider, bucket).Inc()
	r.m.retryAfter.WithLabelValues(r.provider, bucket).Observe(retryAfter.Seconds())
}

// RateChanged implements limiter.Observer.
func (r *Recorder) RateChanged(bucket string, _ float64) {
	r.m.rateChanges.WithLabelValues(r.provider, bucket).Inc()
}

// BreakerStateChanged implements limiter.Observer.
func (r *Recorder) BreakerStateChanged(breaker string, from, to limiter.State) {
	r.m.breakerTransitions.WithLabelValues(r.provider, breaker, from.String(), to.String()).Inc()
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

// windowCounter counts events over the last QuotaWindow in one-second slots.
type windowCounter struct {
	mu    sync.Mutex
	slots [60]uint64
	secs  [60]int64
}

func (w *windowCounter) add(now time.Time) {
	s := now.Unix()
	i := s % 60
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
		tokens:         desc("limiter_tokens", "Tokens available in a bucket now (negative when reserved ahead).", "provider", "bucket"),
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
// counters are resolved once so the hot path is two atomic adds at most.
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
	for _, reason := range []string{"size", "wait"} {
		r.m.batchFlushes.WithLabelValues(r.provider, reason)
	}
}
