package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// planDocSection is docs/bench.md's plan section, whose table quotes
// bench/results-plan.json (bash bench/plan-results.sh).
const planDocSection = "\"Will my quota hold at 10,000 nodes?\" — `plan`"

// planDocRow is the table row docs/bench.md prints for one plan point.
func planDocRow(p *Plan, pt *PlanPoint) string {
	by := pt.ReadsPerMinByPurpose
	setting, _, _ := strings.Cut(pt.Setting, ":")
	setting, _, _ = strings.Cut(setting, " (")
	return fmt.Sprintf("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %s | `%s` |",
		p.Column, commaInt(pt.Nodes), pt.ReadsPerMin, by[PurposeStatus], by[PurposeLifecycle], by[PurposeList], by[PurposeRoutes],
		pt.NeedSteady, pt.NeedScaleup, pt.Binding, setting)
}

// commaInt writes n with thousands separators (5,000).
func commaInt(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestPlanDocFromResults: every row of docs/bench.md's plan table is the
// row bench/results-plan.json gives for that column and node count, figure
// for figure, and every point of the file has its row.
func TestPlanDocFromResults(t *testing.T) {
	b, err := os.ReadFile("results-plan.json")
	if err != nil {
		t.Fatal(err)
	}
	var plans []*Plan
	if err := json.Unmarshal(b, &plans); err != nil {
		t.Fatalf("results-plan.json: %v", err)
	}
	want := map[string]string{} // "column nodes" -> row
	for _, p := range plans {
		for i := range p.Points {
			want[fmt.Sprintf("%s %d", p.Column, p.Points[i].Nodes)] = planDocRow(p, &p.Points[i])
		}
	}
	md, err := os.ReadFile("../docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	section := markdownSection(string(md), planDocSection)
	if section == "" {
		t.Fatalf("docs/bench.md has no section %q", planDocSection)
	}
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "cloudgate:") {
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(cells[1]), ",", ""))
		if err != nil {
			t.Errorf("docs/bench.md plan row %q: nodes %q", line, cells[1])
			continue
		}
		key := fmt.Sprintf("%s %d", strings.TrimSpace(cells[0]), n)
		w, ok := want[key]
		if !ok {
			t.Errorf("docs/bench.md plan row %q: results-plan.json has no %s", line, key)
			continue
		}
		if strings.TrimSpace(line) != w {
			t.Errorf("docs/bench.md plan row\n  %s\nresults-plan.json gives\n  %s", strings.TrimSpace(line), w)
		}
		delete(want, key)
		rows++
	}
	for k, w := range want {
		t.Errorf("results-plan.json's %s has no row in docs/bench.md's plan table: %s", k, w)
	}
	if rows == 0 {
		t.Fatal("no plan table rows found in docs/bench.md")
	}
	t.Logf("%d plan rows checked against results-plan.json", rows)
}
