package fleet

import "time"

// Observer receives fleet events; the metrics package implements it. Methods
// must be cheap and must not block; they are called without any lock held
// that a Fleet or Limiter method would need.
//
// A nil Observer in Options means "discard all events".
type Observer interface {
	// RedisAdmission is called after each admission round trip to Redis
	// that got an answer (granted or not), with how long it took.
	RedisAdmission(family string, took time.Duration)
	// Admitted is called once per call admitted: from the fleet's budget
	// (fallback false) or from the local fallback bucket (true).
	Admitted(family string, fallback bool)
	// FallbackChanged is called when the member falls back to its local
	// shares (true) and when it rejoins the shared budget (false).
	FallbackChanged(fallback bool)
	// ShareChanged is called when the member's static share of family
	// changes: the rate it falls back to, in calls per second, and the
	// number of live members it was computed from (0: none known, minShare).
	ShareChanged(family string, shareQPS float64, members int)
	// FleetState is called after each heartbeat that reached Redis: the
	// family's configured quota and current fleet-wide rate (after AIMD) in
	// calls per second, and the fleet's admissions over the last minute
	// divided by what the quota allows in that time.
	FleetState(family string, quotaQPS, rateQPS, usage float64)
}

type nopObserver struct{}

func (nopObserver) RedisAdmission(string, time.Duration)         {}
func (nopObserver) Admitted(string, bool)                        {}
func (nopObserver) FallbackChanged(bool)                         {}
func (nopObserver) ShareChanged(string, float64, int)            {}
func (nopObserver) FleetState(string, float64, float64, float64) {}
