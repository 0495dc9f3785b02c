// Package recorder is the wiring behind package metrics: the collectors of
// one metrics.Metrics, and the recorders and observers the provider, the
// caches, the limiters and the fleet report to. It is internal: its types
// change with the provider; metrics.Metrics is the API.
//
// Labels are low-cardinality by design: provider (the upstream provider's
// registered name), family, bucket, cache, method, result, priority, reason
// — never node names, provider IDs, or anything from the upstream's
// configuration.
package recorder

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "cloudgate"

// Upstream call results (the result label of cloudgate_upstream_calls_total).
const (
	ResultOK        = "ok"
	ResultNotFound  = "not_found"
	ResultThrottled = "throttled"
	ResultError     = "error"
)

// QuotaWindow is the window of cloudgate_quota_utilization_ratio.
const QuotaWindow = time.Minute

// Metrics is one set of cloudgate collectors. Several cloudgate instances
// (told apart by their provider label) may share one.
type Metrics struct {
	upstreamCalls    *prometheus.CounterVec
	upstreamDuration *prometheus.HistogramVec
	requests         *prometheus.CounterVec

	limiterWait      *prometheus.HistogramVec
	limiterCancelled *prometheus.CounterVec
	throttled        *prometheus.CounterVec
	retryAfter       *prometheus.HistogramVec
	rateChanges      *prometheus.CounterVec

	cacheHits         *prometheus.CounterVec
	cacheNegativeHits *prometheus.CounterVec
	cacheMisses       *prometheus.CounterVec
	cacheDeduplicated *prometheus.CounterVec
	cacheStaleServed  *prometheus.CounterVec
	cacheEvictions    *prometheus.CounterVec

	breakerTransitions *prometheus.CounterVec

	batchSize    *prometheus.HistogramVec
	batchFlushes *prometheus.CounterVec

	notFoundConfirmations *prometheus.CounterVec

	state  *stateCollector
	fleet  *fleetMetrics        // fleet.go
	shadow *shadowMetrics       // shadow.go
	cloud  *cloudRequestMetrics // cloudrequests.go
}

// New returns a set of collectors, registered nowhere.
func New() *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, labels)
	}
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	return &Metrics{
		upstreamCalls: counter("upstream_calls_total",
			"Calls cloudgate made to the upstream cloud provider, by method and result (ok, not_found, throttled, error).",
			"provider", "family", "method", "result"),
		upstreamDuration: histogram("upstream_call_duration_seconds",
			"Latency of calls to the upstream cloud provider.", latency, "provider", "family", "method"),
		requests: counter("requests_total",
			"Calls the controllers made to cloudgate, by method and result (ok or error), however they were answered.",
			"provider", "method", "result"),
		limiterWait: histogram("limiter_wait_seconds",
			"Time callers waited for a token, by bucket and priority.",
			[]float64{0, .001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, "provider", "bucket", "priority"),
		limiterCancelled: counter("limiter_cancelled_total",
			"Waits for a token that ended because the caller's context ended (no upstream call was made).",
			"provider", "bucket"),
		throttled: counter("throttled_total",
			"Throttling answers (HTTP 429 and equivalents) the cloud returned, by bucket.", "provider", "bucket"),
		retryAfter: histogram("retry_after_seconds",
			"Retry-After durations the cloud asked for with its throttling answers.",
			[]float64{0, .1, .5, 1, 2, 5, 10, 30, 60, 120}, "provider", "bucket"),
		rateChanges: counter("limiter_rate_changes_total",
			"Changes of a bucket's effective rate by adaptive limiting (decreases and recoveries).", "provider", "bucket"),
		cacheHits: counter("cache_hits_total",
			"Reads answered from a fresh cache entry.", "provider", "cache"),
		cacheNegativeHits: counter("cache_negative_hits_total",
			"Reads answered from a fresh negative entry (e.g. instance not found).", "provider", "cache"),
		cacheMisses: counter("cache_misses_total",
			"Reads that found no fresh entry.", "provider", "cache"),
		cacheDeduplicated: counter("cache_deduplicated_total",
			"Reads answered by an identical read already in flight (no call of their own).", "provider", "cache"),
		cacheStaleServed: counter("cache_stale_served_total",
			"Reads answered from an expired entry, within the stale-if-error bound, while the breaker was open.",
			"provider", "cache"),
		cacheEvictions: counter("cache_evictions_total",
			"Entries evicted to make room (cache size reached).", "provider", "cache"),
		breakerTransitions: counter("breaker_transitions_total",
			"Circuit-breaker state changes.", "provider", "family", "from", "to"),
		batchSize: histogram("batch_size",
			"Nodes per batched upstream lookup.", []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}, "provider"),
		batchFlushes: counter("batch_flushes_total",
			"Batched lookups sent, by why the batch was sent (size: full; wait: batch.maxWait passed since its first node; now: sent as soon as its token was taken, nothing in flight; returned: sent when the batch in flight returned).", "provider", "reason"),
		notFoundConfirmations: counter("notfound_confirmations_total",
			"Held \"instance does not exist\" answers of the not-found guard, by how they ended (confirmed: a second answer at least confirmAfter later agreed and was passed on; refuted: the instance was found).",
			"provider", "outcome"),
		state:  newStateCollector(),
		fleet:  newFleetMetrics(),
		shadow: newShadowMetrics(),
		cloud:  newCloudRequestMetrics(),
	}
}

// Collectors returns every collector of m, for registering by hand.
func (m *Metrics) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{
		m.upstreamCalls, m.upstreamDuration, m.requests,
		m.limiterWait, m.limiterCancelled, m.throttled, m.retryAfter, m.rateChanges,
		m.cacheHits, m.cacheNegativeHits, m.cacheMisses, m.cacheDeduplicated, m.cacheStaleServed, m.cacheEvictions,
		m.breakerTransitions, m.batchSize, m.batchFlushes, m.notFoundConfirmations,
		m.state,
	}, append(append(m.fleet.collectors(), m.shadow.collectors()...), m.cloud.collectors()...)...)
}

// Register registers m's collectors with r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range m.Collectors() {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}
