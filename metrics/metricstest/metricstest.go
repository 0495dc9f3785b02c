// Package metricstest reads cloudgate's Prometheus metrics in tests: the sum of the series of one
// metric whose labels match, from a registry holding a metrics.Metrics' collectors.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloudgate/cloudgate/metrics"
)

// Registry returns a new registry holding m's collectors.
func Registry(t testing.TB, m *metrics.Metrics) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	return reg
}

// Sum gathers g and adds up the values (counter, gauge or untyped) of the series of metric
// name that carry every label of labels with its value; series is how many matched.
func Sum(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (sum float64, series int) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, s := range mf.Metric {
			have := make(map[string]string, len(s.Label))
			for _, l := range s.Label {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got, ok := have[k]; !ok || got != v {
					continue next
				}
			}
			series++
			switch {
			case s.Counter != nil:
				sum += s.Counter.GetValue()
			case s.Gauge != nil:
				sum += s.Gauge.GetValue()
			case s.Untyped != nil:
				sum += s.Untyped.GetValue()
			}
		}
	}
	return sum, series
}

// Of is Sum over m's collectors.
func Of(t testing.TB, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	sum, _ := Sum(t, Registry(t, m), name, labels)
	return sum
}
