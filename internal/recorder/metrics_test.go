package recorder

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cloudgate/cloudgate/limiter"
)

type fixedSource Snapshot

func (s fixedSource) Snapshot() Snapshot { return Snapshot(s) }

func TestRecorderExportsEventsAndState(t *testing.T) {
	m := New()
	reg := prometheus.NewPedanticRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	r := m.Recorder("simcloud")
	r.Init([]string{"read"}, []string{"read"})
	r.SetSource(fixedSource{
		Caches:   []CacheState{{Name: "InstanceMetadata", Entries: 42}},
		Buckets:  []BucketState{{Name: "read", ConfiguredQPS: 1, EffectiveQPS: 0.5, Tokens: 3, Waiting: 2}},
		Breakers: []BreakerState{{Family: "read", State: limiter.StateOpen}},
	})
	read := r.BucketObserver("read")
	for range 30 {
		read.WaitDone(limiter.PriorityNormal, time.Millisecond, nil) // 30 tokens granted this minute
	}
	r.CacheObserver("InstanceMetadata").Hit()
	r.UpstreamCall("read", "InstanceMetadata", ResultThrottled, time.Millisecond)
	read.Throttled(2 * time.Second)
	r.Requests("InstanceMetadata").Observe(nil)

	expect := `
# HELP cloudgate_quota_utilization_ratio Upstream calls admitted in the last minute divided by what the bucket's configured rate allows in a minute.
# TYPE cloudgate_quota_utilization_ratio gauge
cloudgate_quota_utilization_ratio{bucket="read",provider="simcloud"} 0.5
# HELP cloudgate_breaker_state Circuit-breaker state: 0 closed, 1 half-open, 2 open.
# TYPE cloudgate_breaker_state gauge
cloudgate_breaker_state{family="read",provider="simcloud"} 2
# HELP cloudgate_cache_entries Entries held by a cache (fresh, or kept for stale-if-error).
# TYPE cloudgate_cache_entries gauge
cloudgate_cache_entries{cache="InstanceMetadata",provider="simcloud"} 42
# HELP cloudgate_throttled_total Throttling answers (HTTP 429 and equivalents) the cloud returned, by bucket.
# TYPE cloudgate_throttled_total counter
cloudgate_throttled_total{bucket="read",provider="simcloud"} 1
# HELP cloudgate_cache_hits_total Reads answered from a fresh cache entry.
# TYPE cloudgate_cache_hits_total counter
cloudgate_cache_hits_total{cache="InstanceMetadata",provider="simcloud"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expect),
		"cloudgate_quota_utilization_ratio", "cloudgate_breaker_state", "cloudgate_cache_entries",
		"cloudgate_throttled_total", "cloudgate_cache_hits_total"); err != nil {
		t.Fatal(err)
	}
	// Init created the event-driven series at zero.
	if got := testutil.ToFloat64(m.rateChanges.WithLabelValues("simcloud", "read")); got != 0 {
		t.Fatalf("rate changes = %v", got)
	}
	if n := testutil.CollectAndCount(m.breakerTransitions); n != 6 {
		t.Fatalf("breaker transition series = %d, want the 6 from/to pairs at zero", n)
	}
	if n := testutil.CollectAndCount(m.notFoundConfirmations); n != 2 {
		t.Fatalf("not-found confirmation series = %d, want confirmed and refuted at zero", n)
	}
	r.NotFoundConfirmation("refuted")
	if got := testutil.ToFloat64(m.notFoundConfirmations.WithLabelValues("simcloud", "refuted")); got != 1 {
		t.Fatalf("refuted = %v, want 1", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("metric lint: %v %v", problems, err)
	}
}
