package bench

import (
	"sync"
	"time"
)

// Point is one sample of a run's time series (cumulative counters).
type Point struct {
	T           float64 `json:"t"` // simulated seconds since the run's start
	Reads       int64   `json:"reads"`
	Writes      int64   `json:"writes"`
	Throttled   int64   `json:"throttled"`
	Initialized int     `json:"initialized"`
	CacheHits   float64 `json:"cache_hits"`
	CacheTotal  float64 `json:"cache_lookups"`
	// ShadowCalls: a shadow column's predicted calls (Side.ShadowCalls).
	ShadowCalls float64 `json:"shadow_calls,omitempty"`
}

// Series is a run's samples, every Step simulated seconds.
type Series struct {
	Step   float64 `json:"step"`
	Points []Point `json:"points"`
}

// sampler samples a run's counters on a fixed simulated period.
type sampler struct {
	r    *colRun
	step time.Duration // real
	mu   sync.Mutex
	from time.Time
	pts  []Point
	done chan struct{}
	wg   sync.WaitGroup
}

func newSampler(r *colRun) *sampler {
	step := r.o.Sample
	if step == 0 {
		step = max(time.Second, r.o.SteadyWindow/300)
		if r.spec.name == ScenarioScaleup || r.spec.name == ScenarioStress {
			step = time.Second
		}
	}
	s := &sampler{r: r, step: step, from: time.Now(), done: make(chan struct{})}
	s.wg.Add(1)
	go s.loop()
	return s
}

func (s *sampler) loop() {
	defer s.wg.Done()
	t := time.NewTicker(s.step)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.done:
			return
		case <-t.C:
		}
	}
}

func (s *sampler) sample() {
	snap := s.r.snapshot()
	n, _, _ := s.r.w.done()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pts = append(s.pts, Point{
		T: snap.at.Sub(s.from).Seconds(), Reads: snap.cnt.ReadCalls, Writes: snap.cnt.WriteCalls,
		Throttled: snap.cnt.TotalThrottled(), Initialized: n, CacheHits: snap.hits, CacheTotal: snap.total,
		ShadowCalls: snap.shadowCalls,
	})
}

// restart forgets the samples so far (the counters were reset).
func (s *sampler) restart() {
	s.mu.Lock()
	s.pts, s.from = nil, time.Now()
	s.mu.Unlock()
}

func (s *sampler) stop() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
	s.sample()
}

func (s *sampler) series() *Series {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Series{Step: s.step.Seconds(), Points: append([]Point(nil), s.pts...)}
}
