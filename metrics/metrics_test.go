package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
	if a.Recorders() == nil || a.Recorders() == b.Recorders() || Default.Recorders() == nil {
		t.Fatal("Recorders does not return each set's own collectors")
	}
}
