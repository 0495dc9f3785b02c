package recorder

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cloudgate/cloudgate/limiter"
)

// Shadow-mode read results (the result label of cloudgate_shadow_reads_total):
// how cloudgate would have answered a read it passed straight through.
const (
	// ShadowHit: a fresh entry of the shadow cache would have answered.
	ShadowHit = "hit"
	// ShadowMiss: a call of its own would have gone upstream.
	ShadowMiss = "miss"
	// ShadowBatched: the read would have joined (or opened) a batch call.
	ShadowBatched = "batched"
	// ShadowRejected: the family's breaker would have rejected it (a stale
	// answer or an error, no upstream call).
	ShadowRejected = "rejected"
	// ShadowWaitTimeout: the token wait would have outlasted
	// limits.<family>.waitTimeout (a retryable error, no upstream call).
	ShadowWaitTimeout = "wait_timeout"
)

// shadowMetrics are the collectors of shadow mode (mode: shadow): every call
// goes to the upstream as without cloudgate, and these count what
// cloudgate would have done instead.
type shadowMetrics struct {
	calls             *prometheus.CounterVec
	reads             *prometheus.CounterVec
	divergences       *prometheus.CounterVec
	wait              *prometheus.HistogramVec
	breakerState      *prometheus.GaugeVec
	breakerRejections *prometheus.CounterVec
}

func newShadowMetrics() *shadowMetrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	return &shadowMetrics{
		calls: counter("shadow_upstream_calls_total",
			"Shadow mode: upstream calls cloudgate would have made (a batch counts once, as BatchInstanceStatus), by family and method.",
			"provider", "family", "method"),
		reads: counter("shadow_reads_total",
			"Shadow mode: reads the controllers made, by how cloudgate would have answered them (hit, miss, batched, rejected, wait_timeout).",
			"provider", "method", "result"),
		divergences: counter("shadow_divergences_total",
			"Shadow mode: reads a fresh cached answer would have answered that differ from the upstream's live answer (value, or not-found versus found): the staleness the cache would have served.",
			"provider", "method"),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "shadow_wait_seconds",
			Help:    "Shadow mode: token waits the would-be upstream calls would have had, by family (0 when a token was there).",
			Buckets: []float64{0, .001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"provider", "family"}),
		breakerState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "shadow_breaker_state",
			Help: "Shadow mode: the state the family's circuit breaker would be in, fed by the live outcomes (0 closed, 1 half-open, 2 open).",
		}, []string{"provider", "family"}),
		breakerRejections: counter("shadow_breaker_rejections_total",
			"Shadow mode: calls the family's circuit breaker would have rejected.", "provider", "family"),
	}
}

func (s *shadowMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.calls, s.reads, s.divergences, s.wait, s.breakerState, s.breakerRejections}
}

// ShadowRecorder records one cloudgate's shadow-mode predictions under its
// provider label.
type ShadowRecorder struct {
	m        *shadowMetrics
	provider string
}

// Shadow returns the shadow-mode recorder of the instance labelled provider.
func (m *Metrics) Shadow(provider string) *ShadowRecorder {
	return &ShadowRecorder{m: m.shadow, provider: provider}
}

// ShadowMethod is one method's shadow counters, resolved once: they are
// counted on every call the controllers make.
type ShadowMethod struct {
	reads      [5]prometheus.Counter // by shadowResults index
	divergence prometheus.Counter
	call       prometheus.Counter
}

var shadowResults = [...]string{ShadowHit, ShadowMiss, ShadowBatched, ShadowRejected, ShadowWaitTimeout}

// Method returns method's counters; calls counts the method's would-be
// upstream calls under family.
func (r *ShadowRecorder) Method(family, method string) *ShadowMethod {
	sm := &ShadowMethod{
		divergence: r.m.divergences.WithLabelValues(r.provider, method),
		call:       r.m.calls.WithLabelValues(r.provider, family, method),
	}
	for i, res := range shadowResults {
		sm.reads[i] = r.m.reads.WithLabelValues(r.provider, method, res)
	}
	return sm
}

// Read counts one read with result (one of the Shadow* results).
func (s *ShadowMethod) Read(result string) {
	for i, res := range shadowResults {
		if res == result {
			s.reads[i].Inc()
			return
		}
	}
}

// Diverged counts one would-be cached answer that differs from the live one.
func (s *ShadowMethod) Diverged() { s.divergence.Inc() }

// Call counts one would-be upstream call of the method.
func (s *ShadowMethod) Call() { s.call.Inc() }

// Wait records the token wait one would-be call of family would have had.
func (r *ShadowRecorder) Wait(family string, d time.Duration) {
	r.m.wait.WithLabelValues(r.provider, family).Observe(d.Seconds())
}

// BreakerRejected counts one call family's breaker would have rejected.
func (r *ShadowRecorder) BreakerRejected(family string) {
	r.m.breakerRejections.WithLabelValues(r.provider, family).Inc()
}

// Init exports every family's breaker state (closed) and zero rejections, so
// the dashboard's panels have series before the first event.
func (r *ShadowRecorder) Init(families []string) {
	for _, f := range families {
		r.m.breakerState.WithLabelValues(r.provider, f).Set(float64(limiter.StateClosed))
		r.m.breakerRejections.WithLabelValues(r.provider, f)
		r.m.wait.WithLabelValues(r.provider, f)
	}
}

// BreakerObserver returns the observer of family's shadow breaker: it
// exports the state as cloudgate_shadow_breaker_state.
func (r *ShadowRecorder) BreakerObserver(family string) limiter.BreakerObserver {
	return shadowBreakerObserver{g: r.m.breakerState.WithLabelValues(r.provider, family)}
}

type shadowBreakerObserver struct{ g prometheus.Gauge }

func (o shadowBreakerObserver) StateChanged(_, to limiter.State) { o.g.Set(float64(to)) }

// ShadowTotals are one instance's shadow-mode figures so far (for tests,
// the benchmark and logs; dashboards read the metrics).
type ShadowTotals struct {
	// Calls are the would-be upstream calls by method.
	Calls map[string]float64
	// Reads are the reads by method and result.
	Reads map[string]map[string]float64
	// Divergences by method.
	Divergences map[string]float64
	// WaitSeconds and Waits are the sum and count of would-be token waits
	// by family.
	WaitSeconds, Waits map[string]float64
	// Rejections and BreakerState by family.
	Rejections, BreakerState map[string]float64
}

// TotalCalls is the sum of Calls.
func (t ShadowTotals) TotalCalls() float64 {
	var n float64
	for _, v := range t.Calls {
		n += v
	}
	return n
}

// ShadowTotals reads the shadow metrics of the instance labelled provider.
func (m *Metrics) ShadowTotals(provider string) ShadowTotals {
	t := ShadowTotals{
		Calls: map[string]float64{}, Reads: map[string]map[string]float64{}, Divergences: map[string]float64{},
		WaitSeconds: map[string]float64{}, Waits: map[string]float64{}, Rejections: map[string]float64{}, BreakerState: map[string]float64{},
	}
	s := m.shadow
	each(s.calls, provider, func(l map[string]string, d *dto.Metric) { t.Calls[l["method"]] += d.GetCounter().GetValue() })
	each(s.reads, provider, func(l map[string]string, d *dto.Metric) {
		if t.Reads[l["method"]] == nil {
			t.Reads[l["method"]] = map[string]float64{}
		}
		t.Reads[l["method"]][l["result"]] += d.GetCounter().GetValue()
	})
	each(s.divergences, provider, func(l map[string]string, d *dto.Metric) { t.Divergences[l["method"]] += d.GetCounter().GetValue() })
	each(s.wait, provider, func(l map[string]string, d *dto.Metric) {
		t.WaitSeconds[l["family"]] += d.GetHistogram().GetSampleSum()
		t.Waits[l["family"]] += float64(d.GetHistogram().GetSampleCount())
	})
	each(s.breakerRejections, provider, func(l map[string]string, d *dto.Metric) { t.Rejections[l["family"]] += d.GetCounter().GetValue() })
	each(s.breakerState, provider, func(l map[string]string, d *dto.Metric) { t.BreakerState[l["family"]] = d.GetGauge().GetValue() })
	return t
}

// each calls f with the labels and value of every series of c whose
// provider label is provider.
func each(c prometheus.Collector, provider string, f func(map[string]string, *dto.Metric)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for pm := range ch {
		var d dto.Metric
		if pm.Write(&d) != nil {
			continue
		}
		labels := map[string]string{}
		for _, lp := range d.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		if labels["provider"] == provider {
			f(labels, &d)
		}
	}
}
