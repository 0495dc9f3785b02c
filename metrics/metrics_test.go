package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloudgate/cloudgate/internal/recorder"
)

// TestMetricsRegisters: a new set registers on a pedantic registry (every
// collector consistent), twice on two registries, and is its own set of
// collectors behind the provider's wiring.
func TestMetricsRegisters(t *testing.T) {
	a, b := New(), New()
	for _, m := range []*Metrics{a, b} {
		if err := m.Register(prometheus.NewPedanticRegistry()); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.Collectors()) == 0 {
		t.Fatal("no collectors")
	}
	if recorder.Of(a) == nil || recorder.Of(a) == recorder.Of(b) || recorder.Of(Default) == nil {
		t.Fatal("recorder.Of does not return each set's own collectors")
	}
}
