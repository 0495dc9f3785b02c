package awsbench

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

// TestHour runs -hour at a tiny scale (20 and 30 nodes side by side, every
// column, 5 ms EC2 latency, the controllers' periods compressed ×30 so a
// status cycle (100 ms batcher idle a lookup, then the 10 s period) takes
// ~12 s; a 20 s window after a 2 s warm-up) and checks
// that the measured-vs-derived report is produced and consistent with the
// counters: each window lies after the warm-up and inside the run, its
// counts are at most the run's, aws alone sends one DescribeInstances per
// lookup, the printed per-hour figures and ratios are the counters'. With
// -cycles 1 the cycles end inside the run; with -cycles 3 they do not, and
// the cycles' figures must read "—" rather than the whole run's.
// No timing is asserted.
func TestHour(t *testing.T) {
	for _, tc := range []struct {
		cycles int
		open   bool
	}{{1, false}, {3, true}} {
		t.Run("cycles "+strconv.Itoa(tc.cycles), func(t *testing.T) {
			o := DefaultOptions()
			o.Sizes = []int{20, 30}
			o.Seeds, o.LargeSeeds = 1, 1
			o.ScaleupNodes = 0
			o.Parallel, o.SizesParallel, o.Cycles = true, true, tc.cycles
			o.Window, o.DeriveWindow = 2*time.Minute, time.Second
			o.Hour, o.Warmup = 20*time.Second, 2*time.Second
			o.Latency = ec2sim.Latency{Default: ec2sim.ActionLatency{Base: 5 * time.Millisecond}}
			o.timeFactor = 30
			var log strings.Builder
			o.Progress = &log
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			res, err := Run(ctx, o)
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, log.String())
			}
			checks := 0
			for _, col := range AllColumns {
				if len(res.Steady[col]) != 2 {
					t.Fatalf("%s: %d steady runs, want 2 (one per size)", col, len(res.Steady[col]))
				}
				for _, r := range res.Steady[col] {
					h := r.Hour
					if h == nil {
						t.Fatalf("%s/%d: no measured window", col, r.Nodes)
					}
					checks++
					if h.Start < o.Warmup.Seconds() || !(h.Window > 0) {
						t.Errorf("%s/%d: window from %.2fs for %.2fs; want from >= the %v warm-up, > 0 long", col, r.Nodes, h.Start, h.Window, o.Warmup)
					}
					if h.Throttled != 0 || h.Describe < 0 || h.Lookups < 0 {
						t.Errorf("%s/%d: window %d DescribeInstances, %d throttled, %d lookups; want >= 0 and none throttled", col, r.Nodes, h.Describe, h.Throttled, h.Lookups)
					}
					if col == ColAdapter {
						continue
					}
					if r.CycleOpen != tc.open {
						t.Errorf("%s/%d: cycles open = %v, want %v", col, r.Nodes, r.CycleOpen, tc.open)
					}
					if !r.CycleOpen && (r.Describe != int64(r.Nodes) || r.Lookups != int64(r.Nodes)+1) {
						t.Errorf("%s/%d over one cycle: %d DescribeInstances, %d lookups; want N, N+1", col, r.Nodes, r.Describe, r.Lookups)
					}
					if r.CycleOpen && (!math.IsNaN(measuredPerHour(r)) || !math.IsNaN(cycleRoundsPerHour(r))) {
						t.Errorf("%s/%d: open cycles give %g/h, %g rounds/h; want NaN", col, r.Nodes, measuredPerHour(r), cycleRoundsPerHour(r))
					}
					// Round 2 (~12-15 s after the start) falls in the window;
					// aws alone sends one call a lookup (a lookup counted at
					// its start may reach EC2 after an edge: ±1 each).
					if d := h.Describe - h.Lookups; h.Lookups < int64(r.Nodes) || (col == ColAWS && (d < -2 || d > 2)) {
						t.Errorf("%s/%d: window %d lookups, %d DescribeInstances; want >= N lookups (aws alone: one call each, ±2)", col, r.Nodes, h.Lookups, h.Describe)
					}
				}
			}
			if a, g := res.Steady[ColAWS][1].Hour.Describe, res.Steady[ColAdapter][1].Hour.Describe; g >= a {
				t.Errorf("30 nodes, measured window: adapter %d DescribeInstances, aws alone %d; want fewer", g, a)
			}
			if len(res.LoadSamples) != 0 {
				t.Errorf("%d load samples in a 22 s run; want none (one a minute)", len(res.LoadSamples))
			}

			// The report: one row per size and column whose figures are
			// the counters'.
			var md strings.Builder
			res.WriteMarkdown(&md)
			rows := hourRows(t, md.String())
			if len(rows) != 6 {
				t.Fatalf("%d rows in the hour table, want 6:\n%s", len(rows), md.String())
			}
			for _, r := range res.Steady[ColAWS] {
				row := rows[strconv.Itoa(r.Nodes)+"|"+ColAWS]
				h := r.Hour
				checkCell(t, row, 2, h.Window, 0.5)
				checkCell(t, row, 3, float64(h.Lookups)/float64(r.Nodes), 0.005)
				checkCell(t, row, 6, float64(h.Describe)*3600/h.Window, 0.5)
				if tc.open {
					if row[7] != "—" || row[8] != "—" || row[12] != "—" {
						t.Errorf("aws/%d, open cycles: cycles cells %q %q %q; want —", r.Nodes, row[7], row[8], row[12])
					}
				} else {
					checkCell(t, row, 7, measuredPerHour(r), 0.5)
					checkCell(t, row, 8, float64(h.Describe)*3600/h.Window/measuredPerHour(r), 0.0005)
				}
				checkCell(t, row, 9, roundPerHour(ColAWS, r), 0.5)
				checks++
			}
			for _, want := range []string{"Steady hour, measured", "6 worlds at once", "paper loop on the measured round"} {
				if !strings.Contains(md.String(), want) {
					t.Errorf("the markdown lacks %q:\n%s", want, md.String())
				}
			}
			t.Logf("%d window invariants checked", checks)
		})
	}
}

// hourRows are the hour table's rows by "nodes|column", bold marks off.
func hourRows(t *testing.T, md string) map[string][]string {
	t.Helper()
	_, table, ok := strings.Cut(md, "**Steady hour, measured**")
	if !ok {
		t.Fatalf("no hour table:\n%s", md)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| nodes") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.Trim(strings.TrimSpace(c), "*"))
		}
		rows[cells[0]+"|"+cells[1]] = cells
	}
	return rows
}

func checkCell(t *testing.T, row []string, i int, want, tol float64) {
	t.Helper()
	got, err := strconv.ParseFloat(row[i], 64)
	if err != nil || math.Abs(got-want) > tol {
		t.Errorf("row %v cell %d = %q, want %g ± %g", row[:2], i, row[i], want, tol)
	}
}
