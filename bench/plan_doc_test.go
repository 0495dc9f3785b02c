package bench

import (
	"encoding/json"
	"fmt"
	"math"
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

// TestPlanAgainstRealAWSFromResults: every row of bench/RESULTS.plan.md's
// plan-against-real table holds the plan's instance lookups per hour from
// bench/results-plan-workload.json, the DescribeInstances per hour of
// cloudgate's row in the real run's file, their ratio and the verdict.
func TestPlanAgainstRealAWSFromResults(t *testing.T) {
	b, err := os.ReadFile("results-plan-workload.json")
	if err != nil {
		t.Fatal(err)
	}
	var plans []*Plan
	if err := json.Unmarshal(b, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("results-plan-workload.json: want one plan (%v)", err)
	}
	forecast := map[int]float64{}
	for _, pt := range plans[0].Points {
		forecast[pt.Nodes] = pt.InstanceReadsPerHour
	}
	md, err := os.ReadFile("RESULTS.plan.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(string(md), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 8 || !strings.HasPrefix(strings.TrimSpace(f[2]), "bench/RESULTS.real-aws") {
			continue
		}
		rows++
		n, _ := strconv.Atoi(strings.TrimSpace(f[1]))
		file := strings.TrimSpace(f[2])
		real := cloudgateDescribePerHour(t, "../"+file, n)
		p := math.Round(forecast[n]) // as plan prints it
		q := p / real
		verdict := "no"
		if q >= 0.85 && q <= 1.15 {
			verdict = "yes"
		}
		want := fmt.Sprintf("| %d | %s | %.0f | %.0f | %.2f | %s |", n, file, p, real, q, verdict)
		if strings.TrimSpace(line) != want {
			t.Errorf("RESULTS.plan.md row\n  %s\nthe files give\n  %s", strings.TrimSpace(line), want)
		}
	}
	if rows < 2 {
		t.Errorf("RESULTS.plan.md: %d plan-against-real rows, want one per node count and real run", rows)
	}
}

// cloudgateDescribePerHour is the DescribeInstances/h of cloudgate's row
// at n Nodes in a bench-real-aws results file.
func cloudgateDescribePerHour(t *testing.T, path string, n int) float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, "|")
		if len(f) > 5 && strings.TrimSpace(f[1]) == strconv.Itoa(n) && strings.HasPrefix(strings.TrimSpace(f[2]), "cloudgate AWS CCM") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f[4]), 64)
			if err != nil {
				t.Fatalf("%s: %d Nodes: DescribeInstances/h %q", path, n, f[4])
			}
			return v
		}
	}
	t.Fatalf("%s: no cloudgate row at %d Nodes", path, n)
	return 0
}
