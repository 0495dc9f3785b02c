package recorder

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloudgate/cloudgate/limiter"
)

// cloudRequestMetrics are the collectors of the request-level gate
// (provider.RequestGate): every HTTP request the wrapped provider's SDK
// sends to the cloud, by service, action and the provider method it was
// sent for, so their totals are what the cloud counts (CloudTrail's
// eventName per eventSource).
type cloudRequestMetrics struct {
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	throttles *prometheus.CounterVec
	refused   *prometheus.CounterVec
}

func newCloudRequestMetrics() *cloudRequestMetrics {
	return &cloudRequestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "cloud_requests_total",
			Help: "HTTP requests sent to the cloud's API (each SDK attempt, retries included), by service, action, the provider method they were sent for (unattributed: none) and the HTTP status code answered (none: no answer)."},
			[]string{"provider", "service", "action", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "cloud_request_duration_seconds",
			Help:    "Latency of the HTTP requests sent to the cloud's API, from sending to the answer's headers, without the token wait.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}},
			[]string{"provider", "service", "action"}),
		throttles: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "cloud_request_throttles_total",
			Help: "Requests the cloud answered with throttling (EC2 RequestLimitExceeded, ELB Throttling), by service, action and method."},
			[]string{"provider", "service", "action", "method"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "cloud_requests_refused_total",
			Help: "Requests cloudgate did not send (breaker_open: the service's breaker is open; no_token: the wait for the action's token ended), by service, action, method and reason."},
			[]string{"provider", "service", "action", "method", "reason"}),
	}
}

func (c *cloudRequestMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.requests, c.duration, c.throttles, c.refused}
}

// CloudRequestRecorder records the requests of one request-level gate
// under its provider label. It does not become the label's state source:
// the method-level recorder of the same label keeps that.
type CloudRequestRecorder struct {
	m *Metrics
	r *Recorder // the bucket and breaker observers' (no state source)
}

// CloudRequests returns the recorder of the request-level gate labelled
// provider.
func (m *Metrics) CloudRequests(provider string) *CloudRequestRecorder {
	return &CloudRequestRecorder{m: m, r: &Recorder{m: m, provider: provider, windows: map[string]*windowCounter{}}}
}

// Request records one request sent and answered with code.
func (c *CloudRequestRecorder) Request(service, action, method, code string, took time.Duration, throttled bool) {
	p := c.r.provider
	c.m.cloud.requests.WithLabelValues(p, service, action, method, code).Inc()
	c.m.cloud.duration.WithLabelValues(p, service, action).Observe(took.Seconds())
	if throttled {
		c.m.cloud.throttles.WithLabelValues(p, service, action, method).Inc()
	}
}

// Refused records one request cloudgate did not send.
func (c *CloudRequestRecorder) Refused(service, action, method, reason string) {
	c.m.cloud.refused.WithLabelValues(c.r.provider, service, action, method, reason).Inc()
}

// BucketObserver is the observer of an action's token bucket (the
// cloudgate_limiter_* series under its bucket name).
func (c *CloudRequestRecorder) BucketObserver(name string) limiter.BucketObserver {
	return c.r.BucketObserver(name)
}

// BreakerObserver is the observer of a service's breaker
// (cloudgate_breaker_transitions_total with the service as family).
func (c *CloudRequestRecorder) BreakerObserver(service string) limiter.BreakerObserver {
	return c.r.BreakerObserver(service)
}
