package recorder

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cloudgate/cloudgate/limiter/fleet"
)

var _ fleet.Observer = (*FleetRecorder)(nil)

func TestFleetRecorder(t *testing.T) {
	m := New()
	reg := prometheus.NewPedanticRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	r := m.Fleet("simcloud", "acct-1")
	r.Init([]string{"read"})
	read := r.Family("read")
	read.ShareChanged(25, 4)
	read.FleetState(100, 50, 0.75)
	read.Admitted(false)
	read.Admitted(false)
	read.Admitted(true)
	r.FallbackChanged(true)
	r.FallbackChanged(false)
	r.FallbackChanged(true)
	r.StopAt(time.Unix(1700000117, 500000000))
	read.RedisAdmission(300 * time.Microsecond)
	r.RedisError()

	expect := `
# HELP cloudgate_fleet_admissions_total Calls this member admitted, from the fleet's shared budget (mode shared) or from its local share (mode fallback: in fallback, or right after a failed admission round trip).
# TYPE cloudgate_fleet_admissions_total counter
cloudgate_fleet_admissions_total{account="acct-1",family="read",mode="fallback",provider="simcloud"} 1
cloudgate_fleet_admissions_total{account="acct-1",family="read",mode="shared",provider="simcloud"} 2
# HELP cloudgate_fleet_effective_rate The fleet-wide rate of a family after adaptive decreases (shared through Redis), in calls per second.
# TYPE cloudgate_fleet_effective_rate gauge
cloudgate_fleet_effective_rate{account="acct-1",family="read",provider="simcloud"} 50
# HELP cloudgate_fleet_fallback 1 while this member serves from its local share because Redis is unavailable or slow, 0 on the shared budget.
# TYPE cloudgate_fleet_fallback gauge
cloudgate_fleet_fallback{account="acct-1",provider="simcloud"} 1
# HELP cloudgate_fleet_fallback_transitions_total Switches between the shared budget and the local fallback share, by the mode switched to (fallback, shared).
# TYPE cloudgate_fleet_fallback_transitions_total counter
cloudgate_fleet_fallback_transitions_total{account="acct-1",provider="simcloud",to="fallback"} 2
cloudgate_fleet_fallback_transitions_total{account="acct-1",provider="simcloud",to="shared"} 1
# HELP cloudgate_fleet_members Registered members of the fleet as last seen in Redis, live or fallen (a fallen member's share is held from the budget); 0 when none is known.
# TYPE cloudgate_fleet_members gauge
cloudgate_fleet_members{account="acct-1",provider="simcloud"} 4
# HELP cloudgate_fleet_redis_errors_total Redis calls of this member that failed or exceeded redisTimeout; fallbackAfter of them in a row switch it to fallback.
# TYPE cloudgate_fleet_redis_errors_total counter
cloudgate_fleet_redis_errors_total{account="acct-1",provider="simcloud"} 1
# HELP cloudgate_fleet_share_rate This member's static share of a family's quota (weight / sum of registered members' weights, live or fallen), the rate it falls back to when Redis is unavailable, in calls per second.
# TYPE cloudgate_fleet_share_rate gauge
cloudgate_fleet_share_rate{account="acct-1",family="read",provider="simcloud"} 25
# HELP cloudgate_fleet_stop_timestamp_seconds While this member is in fallback with limits.shared.failureMode closed: the Unix time at which it admits nothing (the others may free its share then) unless Redis answers first; in the past once it has stopped. With failureMode closed and its heartbeats failing while its admissions still reach Redis: the time from which the first admission Redis does not answer stops it. 0 when no stop is coming (heartbeats answered, failureMode open, or a member that never reached Redis).
# TYPE cloudgate_fleet_stop_timestamp_seconds gauge
cloudgate_fleet_stop_timestamp_seconds{account="acct-1",provider="simcloud"} 1.7000001175e+09
# HELP cloudgate_fleet_usage_ratio Calls the whole fleet sharing this account admitted in the last minute, divided by what the family's quota allows in a minute.
# TYPE cloudgate_fleet_usage_ratio gauge
cloudgate_fleet_usage_ratio{account="acct-1",family="read",provider="simcloud"} 0.75
`
	names := []string{"cloudgate_fleet_admissions_total", "cloudgate_fleet_effective_rate", "cloudgate_fleet_fallback",
		"cloudgate_fleet_fallback_transitions_total", "cloudgate_fleet_members", "cloudgate_fleet_redis_errors_total", "cloudgate_fleet_share_rate", "cloudgate_fleet_stop_timestamp_seconds", "cloudgate_fleet_usage_ratio"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect), names...); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(m.fleet.latency, "cloudgate_fleet_redis_admission_duration_seconds"); n != 1 {
		t.Errorf("latency series = %d, want 1", n)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("metric lint: %v %v", problems, err)
	}
}
