package fleet

import "time"

// Observer receives a fleet member's events; the metrics package implements
// it. It hands out one FamilyObserver per family (as workqueue's
// MetricsProvider hands out one metric per queue), so that per-call events
// carry no family name. Methods must be cheap and must not block; they are
// called without any lock held that a Fleet or Limiter method would need.
//
// A nil Observer in Options means "discard all events".
type Observer interface {
	// FallbackChanged is called when the member falls back to its local
	// shares (true) and when it rejoins the shared budget (false).
	FallbackChanged(fallback bool)
	// RedisError is called after each Redis call that failed or timed out,
	// whether or not it switched the member to fallback.
	RedisError()
	// StopAt is called at each transition to fallback and back: when the
	// member, in fallback with failureMode closed, will admit nothing unless
	// Redis answers first (its claim may be freed then); the zero time when
	// no stop is coming (on the shared budget, failureMode open, or a member
	// that never reached Redis).
	StopAt(at time.Time)
	// Family returns the observer of one family's Limiter; it is called
	// once per Limiter.
	Family(family string) FamilyObserver
}

// FamilyObserver receives one family's events (see Observer).
type FamilyObserver interface {
	// RedisAdmission is called after each admission round trip to Redis
	// that got an answer (granted or not), with how long it took.
	RedisAdmission(took time.Duration)
	// Admitted is called once per call admitted: from the fleet's budget
	// (fallback false) or from the local fallback bucket (true).
	Admitted(fallback bool)
	// ShareChanged is called when the member's static share of the family
	// changes: the rate it falls back to, in calls per second, and the
	// number of live members it was computed from (0: none known, minShare).
	ShareChanged(shareQPS float64, members int)
	// FleetState is called after each heartbeat that reached Redis: the
	// family's configured quota and current fleet-wide rate (after AIMD) in
	// calls per second, and the fleet's admissions over the last minute
	// divided by what the quota allows in that time.
	FleetState(quotaQPS, rateQPS, usage float64)
}

type nopObserver struct{}

func (nopObserver) FallbackChanged(bool)                 {}
func (nopObserver) RedisError()                          {}
func (nopObserver) StopAt(time.Time)                     {}
func (nopObserver) Family(string) FamilyObserver         { return nopObserver{} }
func (nopObserver) RedisAdmission(time.Duration)         {}
func (nopObserver) Admitted(bool)                        {}
func (nopObserver) ShareChanged(float64, int)            {}
func (nopObserver) FleetState(float64, float64, float64) {}
