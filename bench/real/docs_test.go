//go:build linux

package real

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cloudgate/cloudgate/bench/measure"
)

// docsSection is docs/bench.md's section on this benchmark: the prose that
// quotes bench/RESULTS.real.md.
const docsSection = "## The simulator against a real API server — `make bench-real`"

// decimalRE matches a measured figure as the section writes it: a number
// with a fraction (1,033.0; 0.926; 36.6). Settings and counts (5 min, 200
// Nodes, 20 QPS) are whole numbers and are not checked.
var decimalRE = regexp.MustCompile(`\d[\d,]*\.\d+`)

// TestDocsQuoteResults: every figure docs/bench.md's make bench-real section
// quotes is in bench/RESULTS.real.md, as a whole number (0.75 is not found
// in 0.751), so the prose cannot drift from the file make bench-real wrote.
func TestDocsQuoteResults(t *testing.T) {
	md, err := os.ReadFile("../../docs/bench.md")
	if err != nil {
		t.Fatal(err)
	}
	results, err := os.ReadFile("../RESULTS.real.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(md), "\n"+docsSection+"\n")
	if start < 0 {
		t.Fatalf("docs/bench.md has no %q section", docsSection)
	}
	section := string(md[start+len(docsSection)+2:])
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	nums := decimalRE.FindAllString(section, -1)
	if len(nums) < 8 {
		t.Fatalf("docs/bench.md's make bench-real section quotes %d figures: the section was not found whole", len(nums))
	}
	if missing := missingFigures(nums, string(results)); len(missing) > 0 {
		t.Errorf("docs/bench.md's make bench-real section quotes %d figures bench/RESULTS.real.md does not hold "+
			"(quote what make bench-real wrote, or regenerate it): %s", len(missing), strings.Join(missing, ", "))
	}
	t.Logf("%d figures in docs/bench.md's make bench-real section checked against bench/RESULTS.real.md", len(nums))
}

// missingFigures returns the figures (thousands separators dropped) that
// results does not hold as a whole number.
func missingFigures(nums []string, results string) []string {
	return measure.MissingNumbers(nums, results)
}

// TestMissingFigures: the check finds a hand-typed figure and a shortened
// one, and accepts quoted ones whatever their thousands separators.
func TestMissingFigures(t *testing.T) {
	results := "| 1000 | bare | 1033.0 | 1036.9 | 1.004 |\n| init | 38.1 | 0.751 |"
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"bare 1,033.0 real, 1,036.9 simulated (1.004)", nil},
		{"init 38.1 s (0.751)", nil},
		{"bare 1,033.1 real", []string{"1,033.1"}},  // a typo
		{"init 0.75 of the real", []string{"0.75"}}, // not the file's 0.751
	} {
		got := missingFigures(decimalRE.FindAllString(tc.text, -1), results)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("missingFigures(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}
