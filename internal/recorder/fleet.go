package recorder

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloudgate/cloudgate/limiter/fleet"
)

// Fallback-transition directions (the to label of
// cloudgate_fleet_fallback_transitions_total).
const (
	fleetToFallback = "fallback"
	fleetToShared   = "shared"
)

// fleetMetrics are the collectors of the fleet-wide quota (package
// limiter/fleet): one cloudgate among several sharing a cloud account's
// quota through Redis. Every series carries the account (limits.shared.account,
// a name, never a credential) beside the provider, so that the members of
// one account's fleet, scraped from several clusters, aggregate by account.
type fleetMetrics struct {
	usage       *prometheus.GaugeVec
	rate        *prometheus.GaugeVec
	share       *prometheus.GaugeVec
	members     *prometheus.GaugeVec
	fallback    *prometheus.GaugeVec
	stop        *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	redisErrors *prometheus.CounterVec
	admissions  *prometheus.CounterVec
	latency     *prometheus.HistogramVec
}

func newFleetMetrics() *fleetMetrics {
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	return &fleetMetrics{
		usage: gauge("fleet_usage_ratio",
			"Calls the whole fleet sharing this account admitted in the last minute, divided by what the family's quota allows in a minute.",
			"provider", "account", "family"),
		rate: gauge("fleet_effective_rate",
			"The fleet-wide rate of a family after adaptive decreases (shared through Redis), in calls per second.",
			"provider", "account", "family"),
		share: gauge("fleet_share_rate",
			"This member's static share of a family's quota (weight / sum of registered members' weights, live or fallen), the rate it falls back to when Redis is unavailable, in calls per second.",
			"provider", "account", "family"),
		members: gauge("fleet_members",
			"Registered members of the fleet as last seen in Redis, live or fallen (a fallen member's share is held from the budget); 0 when none is known.",
			"provider", "account"),
		fallback: gauge("fleet_fallback",
			"1 while this member serves from its local share because Redis is unavailable or slow, 0 on the shared budget.",
			"provider", "account"),
		stop: gauge("fleet_stop_timestamp_seconds",
			"While this member is in fallback with limits.shared.failureMode closed: the Unix time at which it admits nothing (the others may free its share then) unless Redis answers first; in the past once it has stopped. With failureMode closed and its heartbeats failing while its admissions still reach Redis: the time from which the first admission Redis does not answer stops it. 0 when no stop is coming (heartbeats answered, failureMode open, or a member that never reached Redis).",
			"provider", "account"),
		transitions: counter("fleet_fallback_transitions_total",
			"Switches between the shared budget and the local fallback share, by the mode switched to (fallback, shared).",
			"provider", "account", "to"),
		redisErrors: counter("fleet_redis_errors_total",
			"Redis calls of this member that failed or exceeded redisTimeout; fallbackAfter of them in a row switch it to fallback.",
			"provider", "account"),
		admissions: counter("fleet_admissions_total",
			"Calls this member admitted, from the fleet's shared budget (mode shared) or from its local share (mode fallback: in fallback, or right after a failed admission round trip).",
			"provider", "account", "family", "mode"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "fleet_redis_admission_duration_seconds",
			Help:    "Duration of one admission round trip to Redis (answered, granted or not).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"provider", "account", "family"}),
	}
}

func (f *fleetMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.usage, f.rate, f.share, f.members, f.fallback, f.stop, f.transitions, f.redisErrors, f.admissions, f.latency}
}

// FleetRecorder records one cloudgate's fleet events under its provider
// and account labels. It implements limiter/fleet.Observer.
type FleetRecorder struct {
	m        *fleetMetrics
	provider string
	account  string
}

// Fleet returns the fleet recorder of the instance labelled provider, a
// member of account's fleet (limits.shared.account).
func (m *Metrics) Fleet(provider, account string) *FleetRecorder {
	r := &FleetRecorder{m: m.fleet, provider: provider, account: account}
	r.m.fallback.WithLabelValues(provider, account).Set(0)
	r.m.members.WithLabelValues(provider, account).Set(0)
	r.m.stop.WithLabelValues(provider, account).Set(0)
	r.m.redisErrors.WithLabelValues(provider, account)
	for _, to := range []string{fleetToFallback, fleetToShared} {
		r.m.transitions.WithLabelValues(provider, account, to)
	}
	return r
}

// Init creates the families' event-driven series at zero, so that rate()
// and increase() see their first event.
func (r *FleetRecorder) Init(families []string) {
	for _, f := range families {
		r.m.admissions.WithLabelValues(r.provider, r.account, f, fleetToShared)
		r.m.admissions.WithLabelValues(r.provider, r.account, f, fleetToFallback)
	}
}

// FallbackChanged implements fleet.Observer.
func (r *FleetRecorder) FallbackChanged(fallback bool) {
	if fallback {
		r.m.fallback.WithLabelValues(r.provider, r.account).Set(1)
		r.m.transitions.WithLabelValues(r.provider, r.account, fleetToFallback).Inc()
		return
	}
	r.m.fallback.WithLabelValues(r.provider, r.account).Set(0)
	r.m.transitions.WithLabelValues(r.provider, r.account, fleetToShared).Inc()
}

// StopAt implements fleet.Observer.
func (r *FleetRecorder) StopAt(at time.Time) {
	v := 0.0
	if !at.IsZero() {
		v = float64(at.UnixNano()) / 1e9
	}
	r.m.stop.WithLabelValues(r.provider, r.account).Set(v)
}

// RedisError implements fleet.Observer.
func (r *FleetRecorder) RedisError() { r.m.redisErrors.WithLabelValues(r.provider, r.account).Inc() }

// Family implements fleet.Observer: the observer of one family, its series
// resolved once (an admission is on the hot path).
func (r *FleetRecorder) Family(family string) fleet.FamilyObserver {
	p, a := r.provider, r.account
	return &fleetFamily{
		latency:  r.m.latency.WithLabelValues(p, a, family),
		shared:   r.m.admissions.WithLabelValues(p, a, family, fleetToShared),
		fallback: r.m.admissions.WithLabelValues(p, a, family, fleetToFallback),
		share:    r.m.share.WithLabelValues(p, a, family),
		members:  r.m.members.WithLabelValues(p, a),
		rate:     r.m.rate.WithLabelValues(p, a, family),
		usage:    r.m.usage.WithLabelValues(p, a, family),
	}
}

// fleetFamily records one family's fleet events.
type fleetFamily struct {
	latency                     prometheus.Observer
	shared, fallback            prometheus.Counter
	share, members, rate, usage prometheus.Gauge
}

func (o *fleetFamily) RedisAdmission(took time.Duration) { o.latency.Observe(took.Seconds()) }

func (o *fleetFamily) Admitted(fallback bool) {
	if fallback {
		o.fallback.Inc()
		return
	}
	o.shared.Inc()
}

func (o *fleetFamily) ShareChanged(shareQPS float64, members int) {
	o.share.Set(shareQPS)
	o.members.Set(float64(members))
}

func (o *fleetFamily) FleetState(_, rateQPS, usage float64) {
	o.rate.Set(rateQPS)
	o.usage.Set(usage)
}
