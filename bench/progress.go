package bench

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Meter prints one progress line per scenario: the share of its runs
// (column × seed) done and an estimate of the real time left, from the
// real time its finished runs took. On a terminal the line is rewritten
// in place (carriage return); elsewhere every update is a plain line, so a
// log file reads top to bottom.
type Meter struct {
	w        io.Writer
	terminal bool
	now      func() time.Time // real time (the bench clock is virtual)

	mu          sync.Mutex
	scenario    string
	done, total int
	start       time.Time
}

// NewMeter writes to w; terminal rewrites one line in place; now is the
// real clock (virtual.RealNow inside a bubble, where time.Now is virtual).
func NewMeter(w io.Writer, terminal bool, now func() time.Time) *Meter {
	return &Meter{w: w, terminal: terminal, now: now}
}

// begin starts a scenario of total runs.
func (m *Meter) begin(scenario string, total int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.scenario, m.done, m.total, m.start = scenario, 0, total, m.now()
	m.print("")
}

// step records one finished run (label: the column and seed).
func (m *Meter) step(label string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done >= m.total { // a run outside Run's scenarios
		return
	}
	m.done++
	m.print(label)
	if m.done == m.total && m.terminal {
		fmt.Fprintln(m.w)
	}
}

// line is the progress line: "steady  40% (2/5 runs)  ~1m10s left".
func (m *Meter) line(last string) string {
	pct := 0
	if m.total > 0 {
		pct = 100 * m.done / m.total
	}
	s := fmt.Sprintf("%-10s %3d%% (%d/%d runs)", m.scenario, pct, m.done, m.total)
	switch {
	case m.done == m.total:
		s += fmt.Sprintf("  done in %v", m.now().Sub(m.start).Round(time.Second))
	case m.done > 0:
		left := m.now().Sub(m.start) / time.Duration(m.done) * time.Duration(m.total-m.done)
		s += fmt.Sprintf("  ~%v left", left.Round(time.Second))
	default:
		s += "  estimating time left"
	}
	if last != "" {
		s += "  (" + last + " done)"
	}
	return s
}

func (m *Meter) print(last string) {
	if m.terminal {
		// \033[K clears what a longer previous line left behind.
		fmt.Fprintf(m.w, "\r%s\033[K", m.line(last))
		return
	}
	fmt.Fprintln(m.w, m.line(last))
}
