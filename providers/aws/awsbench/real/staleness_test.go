//go:build linux

package real

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestStalenessWhileFailing: the staleness column states the bound the
// cache keeps while EC2 fails, InstanceMetadata's TTL + cache.staleIfError
// (a listed answer: the list's freshness + staleIfError), from the
// configuration the column's CCM runs with, not staleIfError alone.
func TestStalenessWhileFailing(t *testing.T) {
	cfg, err := os.ReadFile("testdata/chart-cloudgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := resolved(t, string(cfg))
	ttl, stale := r.TTLs()["InstanceMetadata"], r.Cache.StaleIfError.Duration
	listed := time.Duration(float64(r.Batch.ListInterval.Duration)*1.1) + stale
	got := staleness(t, column{cloudgate: true, config: string(cfg)})
	for _, want := range []string{
		fmt.Sprintf("up to %v old while EC2 fails", ttl+stale),
		fmt.Sprintf("a listed one up to %v", listed),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("staleness %q lacks %q", got, want)
		}
	}
	// Every committed run's text says the same (rewritten by this rule).
	for _, f := range []string{"../../../../bench/RESULTS.real-aws.md", "../../../../bench/RESULTS.real-aws-cloudgate.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "| cloudgate AWS CCM") && strings.Contains(line, "while EC2 fails") && !strings.HasSuffix(strings.TrimSpace(line), "| "+got+" |") {
				t.Errorf("%s: a cloudgate row's staleness is not %q:\n%s", f, got, line)
			}
		}
	}
}
