package metrics

import (
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStripedCounterExposesAsCounterVec: a striped counter vector is
// scraped exactly as a prometheus.CounterVec counting the same events from
// many goroutines.
func TestStripedCounterExposesAsCounterVec(t *testing.T) {
	striped := newStripedCounterVec("requests_total", "Calls.", "provider", "method", "result")
	plain := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "requests_total", Help: "Calls."},
		[]string{"provider", "method", "result"})
	labels := [][]string{{"p", "InstanceMetadata", "ok"}, {"p", "InstanceMetadata", "error"}, {"q", "GetZone", "ok"}}
	for _, lv := range labels[1:] { // a series created at zero
		striped.WithLabelValues(lv...)
		plain.WithLabelValues(lv...)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			s, p := striped.WithLabelValues(labels[g%2]...), plain.WithLabelValues(labels[g%2]...)
			for range 1000 + g {
				s.Inc()
				p.Inc()
			}
		})
	}
	wg.Wait()
	if got, want := scrape(t, striped), scrape(t, plain); got != want {
		t.Fatalf("striped exposition:\n%s\nCounterVec's:\n%s", got, want)
	}
}

// scrape returns what a registry gathers from c, without the created
// timestamps (which it checks are there).
func scrape(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if m.Counter == nil || m.Counter.CreatedTimestamp == nil {
				t.Fatalf("%s: no created timestamp", mf.GetName())
			}
			m.Counter.CreatedTimestamp = nil
		}
		out.WriteString(mf.String())
	}
	return out.String()
}

// TestStripedCounterLayout: the stripes start on the second cache line,
// one per line.
func TestStripedCounterLayout(t *testing.T) {
	var c stripedCounter
	if off := unsafe.Offsetof(c.stripes); off != 64 {
		t.Fatalf("stripes at offset %d, want 64", off)
	}
	if size := unsafe.Sizeof(c.stripes[0]); size != 64 {
		t.Fatalf("a stripe is %d bytes, want 64", size)
	}
}
