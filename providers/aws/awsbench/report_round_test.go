package awsbench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/provider"
)

// TestConfiguresStalenessWhileFailing: the per-round table's staleness text
// states the bound the cache keeps while EC2 fails (TTL + staleIfError; a
// listed answer the list's freshness + staleIfError), never the TTL as if
// it held always.
func TestConfiguresStalenessWhileFailing(t *testing.T) {
	ttl := provider.DefaultTTLs()["InstanceMetadata"]
	stale := provider.DefaultConfig().Cache.StaleIfError.Duration
	listed := time.Duration(float64(listInterval())*1.1) + stale
	for col, want := range map[string][]string{
		ColCloudgate: {fmt.Sprintf("InstanceMetadata ≤ %v", ttl+stale)},
		ColAdapter:   {fmt.Sprintf("InstanceMetadata ≤ %v", ttl+stale), fmt.Sprintf("a listed one ≤ %v", listed), "while EC2 answers"},
	} {
		_, s := configures(col)
		for _, w := range want {
			if !strings.Contains(s, w) {
				t.Errorf("%s: staleness %q lacks %q", col, s, w)
			}
		}
		if strings.Contains(s, "always") {
			t.Errorf("%s: staleness %q: no bound holds always (staleIfError extends it while EC2 fails)", col, s)
		}
	}
}
