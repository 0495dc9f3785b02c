package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Fallback-transition directions (the to label of
// cloudgate_fleet_fallback_transitions_total).
const (
	FleetToFallback = "fallback"
	FleetToShared   = "shared"
)

// fleetMetrics are the collectors of the fleet-wide quota (package
// limiter/fleet): one cloudgate among several sharing a cloud account's
// quota through Redis.
type fleetMetrics struct {
	usage       *prometheus.GaugeVec
	rate        *prometheus.GaugeVec
	share       *prometheus.GaugeVec
	members     *prometheus.GaugeVec
	fallback    *prometheus.GaugeVec
	transitions *prometheus.CounterVec
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
			"provider", "family"),
		rate: gauge("fleet_effective_rate",
			"The fleet-wide rate of a family after adaptive decreases (shared through Redis), in calls per second.",
			"provider", "family"),
		share: gauge("fleet_share_rate",
			"This member's static share of a family's quota (weight / sum of live members' weights), the rate it falls back to when Redis is unavailable, in calls per second.",
			"provider", "family"),
		members: gauge("fleet_members",
			"Live members of the fleet (recent heartbeat in Redis) as last seen; 0 when none is known.",
			"provider"),
		fallback: gauge("fleet_fallback",
			"1 while this member serves from its local share because Redis is unavailable or slow, 0 on the shared budget.",
			"provider"),
		transitions: counter("fleet_fallback_transitions_total",
			"Switches between the shared budget and the local fallback share, by the mode switched to (fallback, shared).",
			"provider", "to"),
		admissions: counter("fleet_admissions_total",
			"Calls this member admitted, from the fleet's shared budget (mode shared) or from its local fallback share (mode fallback).",
			"provider", "family", "mode"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "fleet_redis_admission_duration_seconds",
			Help:    "Duration of one admission round trip to Redis (answered, granted or not).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"provider", "family"}),
	}
}

func (f *fleetMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{f.usage, f.rate, f.share, f.members, f.fallback, f.transitions, f.admissions, f.latency}
}

// FleetRecorder records one cloudgate's fleet events under its provider
// label. It implements limiter/fleet.Observer.
type FleetRecorder struct {
	m        *fleetMetrics
	provider string
}

// Fleet returns the fleet recorder of the instance labelled provider.
func (m *Metrics) Fleet(provider string) *FleetRecorder {
	r := &FleetRecorder{m: m.fleet, provider: provider}
	r.m.fallback.WithLabelValues(provider).Set(0)
	r.m.members.WithLabelValues(provider).Set(0)
	for _, to := range []string{FleetToFallback, FleetToShared} {
		r.m.transitions.WithLabelValues(provider, to)
	}
	return r
}

// Init creates the families' event-driven series at zero, so that rate()
// and increase() see their first event.
func (r *FleetRecorder) Init(families []string) {
	for _, f := range families {
		r.m.admissions.WithLabelValues(r.provider, f, FleetToShared)
		r.m.admissions.WithLabelValues(r.provider, f, FleetToFallback)
	}
}

// RedisAdmission implements fleet.Observer.
func (r *FleetRecorder) RedisAdmission(family string, took time.Duration) {
	r.m.latency.WithLabelValues(r.provider, family).Observe(took.Seconds())
}

// Admitted implements fleet.Observer.
func (r *FleetRecorder) Admitted(family string, fallback bool) {
	mode := FleetToShared
	if fallback {
		mode = FleetToFallback
	}
	r.m.admissions.WithLabelValues(r.provider, family, mode).Inc()
}

// FallbackChanged implements fleet.Observer.
func (r *FleetRecorder) FallbackChanged(fallback bool) {
	if fallback {
		r.m.fallback.WithLabelValues(r.provider).Set(1)
		r.m.transitions.WithLabelValues(r.provider, FleetToFallback).Inc()
		return
	}
	r.m.fallback.WithLabelValues(r.provider).Set(0)
	r.m.transitions.WithLabelValues(r.provider, FleetToShared).Inc()
}

// ShareChanged implements fleet.Observer.
func (r *FleetRecorder) ShareChanged(family string, shareQPS float64, members int) {
	r.m.share.WithLabelValues(r.provider, family).Set(shareQPS)
	r.m.members.WithLabelValues(r.provider).Set(float64(members))
}

// FleetState implements fleet.Observer.
func (r *FleetRecorder) FleetState(family string, _, rateQPS, usage float64) {
	r.m.rate.WithLabelValues(r.provider, family).Set(rateQPS)
	r.m.usage.WithLabelValues(r.provider, family).Set(usage)
}
