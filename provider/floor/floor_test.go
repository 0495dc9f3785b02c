package floor

import (
	"strings"
	"testing"
	"time"
)

// TestPerHourHandComputed checks the floor against cases worked by hand.
func TestPerHourHandComputed(t *testing.T) {
	bench := func(nodes, notReady int) Workload {
		return Workload{Nodes: nodes, NotReady: notReady, PageSize: 1000, MaxBatch: 200,
			ListInterval: 5 * time.Minute, ChurnEvery: 5 * time.Minute, JoinPerStep: 10, LeavePerStep: 10,
			LifecycleTTL: 30 * time.Second}
	}
	for _, tc := range []struct {
		name string
		w    Workload
		want Floor
	}{
		// 1 page × 12 refreshes; 12 churn steps, one call each way; 10
		// NotReady in one batch every 30 s: 120.
		{"1000 Nodes", bench(1000, 10), Floor{List: 12, Join: 12, Leave: 12, Lifecycle: 120}},
		// 5 pages × 12; 50 NotReady still one batch of 200.
		{"5000 Nodes", bench(5000, 50), Floor{List: 60, Join: 12, Leave: 12, Lifecycle: 120}},
		// 1,001 instances: 2 pages; 250 NotReady: 2 batches every 30 s.
		{"page and batch boundaries", bench(1001, 250), Floor{List: 24, Join: 12, Leave: 12, Lifecycle: 240}},
		// No list, no churn, no NotReady: nothing to look up.
		{"idle", Workload{Nodes: 100, PageSize: 1000, MaxBatch: 200, LifecycleTTL: time.Minute}, Floor{}},
		// A 1-minute TTL halves the lifecycle term; 45 joiners, batches of 20: 3 calls a step.
		{"longer TTL, small batches", Workload{Nodes: 100, NotReady: 5, PageSize: 1000, MaxBatch: 20,
			ListInterval: 10 * time.Minute, ChurnEvery: 10 * time.Minute, JoinPerStep: 45,
			LifecycleTTL: time.Minute}, Floor{List: 6, Join: 18, Leave: 0, Lifecycle: 60}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PerHour(tc.w)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("PerHour = %+v, want %+v", got, tc.want)
			}
		})
	}
	if f, _ := PerHour(bench(5000, 50)); f.Total() != 204 {
		t.Fatalf("5000 Nodes: total %v, want 204", f.Total())
	}
}

func TestPerHourNamesBadField(t *testing.T) {
	_, err := PerHour(Workload{Nodes: 10, NotReady: 11, PageSize: 1000, MaxBatch: 0, LifecycleTTL: time.Second})
	if err == nil || !strings.Contains(err.Error(), "NotReady") || !strings.Contains(err.Error(), "MaxBatch") {
		t.Fatalf("err = %v, want NotReady and MaxBatch named", err)
	}
}
