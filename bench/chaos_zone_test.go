package bench

import (
	"strings"
	"testing"
	"time"
)

// TestChaosZoneOutage runs the chaos zone-outage variant small (60 Nodes:
// 20 go NotReady at once, the instances of 6 of them are terminated, 2 live
// ones are answered 404 once) on the real controllers in virtual time:
// through cloudgate (per-node calls, batches, list prefetch) every
// terminated instance's Node is deleted by the real lifecycle controller
// within its bound (existsTTL + confirmAfter + two revisit gaps of that
// Node, measured), no check due to pass a "does not exist" on is held
// again, and no live Node is deleted on its one-shot 404; the bare column
// (no guard) deletes a live Node on it, the baseline. Every invariant was
// checked; counts only, no timed assertion.
func TestChaosZoneOutage(t *testing.T) {
	o := smallOptions()
	o.Scenarios = []string{ScenarioChaosZone}
	o.ChaosZoneNodes = 60
	o.Columns = []string{ColBare, ColCache, ColBatch, ColList}
	rep := runVirtual(t, o)
	if err := rep.Check(); err != nil {
		t.Fatal(err) // an invariant checked 0 times
	}
	s := rep.Scenarios[0]
	var table strings.Builder
	rep.WriteTable(&table)
	t.Log("\n" + table.String())
	for _, col := range o.Columns {
		ch := s.Columns[col].ChaosSide
		if ch == nil || ch.Zone == nil {
			t.Fatalf("%s: no zone figures", col)
		}
		z := ch.Zone
		if z.NotReady != 20 || z.Removed != 6 || z.Hidden != 2 {
			t.Fatalf("%s: zone %d NotReady, %d terminated, %d hidden; want 20, 6, 2", col, z.NotReady, z.Removed, z.Hidden)
		}
		for inv, n := range ch.Checks {
			if n == 0 {
				t.Errorf("%s: invariant %s checked 0 times", col, inv)
			}
		}
		if z.RemovedDeleted != z.Removed {
			t.Errorf("%s: %d of %d terminated instances' Nodes deleted", col, z.RemovedDeleted, z.Removed)
		}
		if ch.HiddenAnswers == 0 {
			t.Errorf("%s: the one-shot 404 was never asked for", col)
		}
		t.Logf("%s: removal to deletion at most %.1fs, bound at most %.1fs, revisit gap at most %.1fs; checks %v",
			col, z.DeleteAfterRemovalMax, z.BoundMax, z.RevisitGapMax, ch.Checks)
		for _, inv := range ch.Violated {
			if inv == invLive404 && col == ColBare {
				// The baseline: a bare provider passes the 404 on and the
				// lifecycle controller deletes the live Node.
				t.Logf("%s: FINDING: live node deleted after a one-shot 404", col)
				continue
			}
			t.Errorf("%s: invariant %s violated", col, inv)
		}
		if col != ColBare {
			if _, ok := ch.Checks[invZoneHeldPast]; !ok {
				t.Errorf("%s: the guard's due checks were not judged", col)
			}
			// The bound is longer than the guard's own confirmAfter: the
			// Nodes are held for at least that long.
			if z.DeleteAfterRemovalMax < (20 * time.Second).Seconds() {
				t.Errorf("%s: a terminated instance's Node was deleted %.1fs after the removal, before confirmAfter (20s)", col, z.DeleteAfterRemovalMax)
			}
		}
	}
}
