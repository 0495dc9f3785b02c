package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestMeter: plain lines off a terminal, one rewritten line on one, and a
// time-left estimate from the runs done so far.
func TestMeter(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	var plain bytes.Buffer
	m := NewMeter(&plain, false, clock)
	m.begin("steady", 4)
	now = now.Add(10 * time.Second)
	m.step("bare seed 1")
	now = now.Add(30 * time.Second)
	m.step("bare+client seed 1")
	m.step("x")
	m.step("y")
	m.step("beyond") // a run past the scenario's count prints nothing
	lines := strings.Split(strings.TrimSpace(plain.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), plain.String())
	}
	want := []string{
		"steady       0% (0/4 runs)  estimating time left",
		"steady      25% (1/4 runs)  ~30s left  (bare seed 1 done)",
		"steady      50% (2/4 runs)  ~40s left  (bare+client seed 1 done)",
	}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d = %q, want %q", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[4], "100% (4/4 runs)  done in 40s") {
		t.Errorf("last line %q: want 100 %% done in 40s", lines[4])
	}
	if strings.Contains(plain.String(), "\r") {
		t.Error("plain output has a carriage return")
	}

	var term bytes.Buffer
	m = NewMeter(&term, true, clock)
	m.begin("churn", 1)
	m.step("bare seed 1")
	out := term.String()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") || strings.Count(out, "\r") != 2 {
		t.Errorf("terminal output %q: want two in-place updates and one final newline", out)
	}

	var nilMeter *Meter
	nilMeter.begin("x", 1) // a nil Meter is off
	nilMeter.step("x")
}
