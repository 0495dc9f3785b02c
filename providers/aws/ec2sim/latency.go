package ec2sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// ActionLatency is the simulated service time of one action: every answer
// (also an error or a RequestLimitExceeded) waits Base plus a uniform draw
// from [0, Jitter), and a successful answer PerItem more for each instance
// (zone, topology) it returns.
//
// AWS publishes no latency figures for the EC2 API, so the values are the
// caller's assumption; awsbench states the ones it uses next to its tables.
type ActionLatency struct {
	Base    time.Duration
	Jitter  time.Duration
	PerItem time.Duration
}

// Latency is the per-action latency model of a simulated endpoint. The zero
// value adds no latency.
type Latency struct {
	// Actions sets an action's latency; actions not listed get Default.
	Actions map[string]ActionLatency
	Default ActionLatency
	// Seed seeds the jitter's random source, so a run's draws repeat.
	Seed uint64
}

func (a ActionLatency) validate(field string) error {
	if a.Base < 0 || a.Jitter < 0 || a.PerItem < 0 {
		return fmt.Errorf("ec2sim: %s: Base, Jitter and PerItem must be >= 0 (got %v, %v, %v)", field, a.Base, a.Jitter, a.PerItem)
	}
	return nil
}

func (l *Latency) validate() error {
	if err := l.Default.validate("Config.Latency.Default"); err != nil {
		return err
	}
	for name, a := range l.Actions {
		if err := a.validate(fmt.Sprintf("Config.Latency.Actions[%q]", name)); err != nil {
			return err
		}
	}
	return nil
}

func (l *Latency) zero() bool {
	if l.Default != (ActionLatency{}) {
		return false
	}
	for _, a := range l.Actions {
		if a != (ActionLatency{}) {
			return false
		}
	}
	return true
}

// latencyModel draws the service times of a running endpoint.
type latencyModel struct {
	cfg Latency
	mu  sync.Mutex
	rng *rand.Rand
}

func newLatencyModel(cfg Latency) *latencyModel {
	if cfg.zero() {
		return nil
	}
	return &latencyModel{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x65633273696d))}
}

// draw is the service time of one answer of action with items results.
// A nil model draws 0.
func (m *latencyModel) draw(action string, items int) time.Duration {
	if m == nil {
		return 0
	}
	a, ok := m.cfg.Actions[action]
	if !ok {
		a = m.cfg.Default
	}
	d := a.Base + time.Duration(items)*a.PerItem
	if a.Jitter > 0 {
		m.mu.Lock()
		d += time.Duration(m.rng.Int64N(int64(a.Jitter)))
		m.mu.Unlock()
	}
	return d
}

// wait sleeps d or until ctx ends (the client gave up or the server closes).
func wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
