package bench

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// README's "Measured" section may quote only what make bench-results wrote
// into bench/RESULTS.md: every number in it must appear there, so a figure
// typed by hand (or left over from an older run) fails.

// numberRE matches a number as written in prose: digits with thousands
// separators and an optional fraction (20,409; 148.45; 0.1).
var numberRE = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`)

// markdownSection is the text of the "## title" section of md, up to the
// next second-level heading ("" if there is none).
func markdownSection(md, title string) string {
	start := strings.Index(md, "\n## "+title+"\n")
	if start < 0 {
		return ""
	}
	rest := md[start+len("\n## "+title+"\n"):]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

// missingNumbers returns the numbers of text (thousands separators dropped)
// that do not occur in results as a whole number: not as part of a longer
// one (1.0 is not found in 1.00, 36 not in 360).
func missingNumbers(text, results string) []string {
	var missing []string
	seen := map[string]bool{}
	for _, raw := range numberRE.FindAllString(text, -1) {
		n := strings.TrimRight(strings.ReplaceAll(raw, ",", ""), ".")
		if seen[n] {
			continue
		}
		seen[n] = true
		re := regexp.MustCompile(`(?:^|[^\d.,])` + regexp.QuoteMeta(n) + `(?:$|[^\d.]|\.(?:$|[^\d]))`)
		if !re.MatchString(results) {
			missing = append(missing, raw)
		}
	}
	return missing
}

// TestMissingNumbers: the check itself finds a hand-typed figure and
// accepts quoted ones, whatever their thousands separators.
func TestMissingNumbers(t *testing.T) {
	results := "steady reads / h   18360   10052\n  init / bound  1.00x  1.44x [1.44-1.45]\nquota 25.5%, 360 calls, 0.1%."
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"bare 18,360, cache 10,052 reads/h", nil},
		{"1.00x and 1.44x [1.44–1.45], 25.5 % and 0.1 %.", nil},
		{"bare 18,361 reads/h", []string{"18,361"}},           // a typo
		{"cache 1.0× the bound", []string{"1.0"}},             // not the 1.00 of the file
		{"36 calls", []string{"36"}},                          // only inside 360
		{"0.1 and 25 and 1.44.", []string{"25"}},              // 25 only inside 25.5
		{"bare 11,400 reads/h (old run)", []string{"11,400"}}, // a stale figure
	} {
		got := missingNumbers(tc.text, results)
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("missingNumbers(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestReadmeMeasuredFromResults: every number in README.md's "Measured"
// section appears in bench/RESULTS.md.
func TestReadmeMeasuredFromResults(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	results, err := os.ReadFile("RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	section := markdownSection(string(readme), "Measured")
	if section == "" {
		t.Fatal(`README.md has no "## Measured" section`)
	}
	nums := numberRE.FindAllString(section, -1)
	if len(nums) < 20 {
		t.Fatalf("README's Measured section quotes %d numbers: the section was not found whole", len(nums))
	}
	if missing := missingNumbers(section, string(results)); len(missing) > 0 {
		t.Errorf("README.md's Measured section quotes %d numbers that bench/RESULTS.md does not contain "+
			"(quote only what make bench-results produced, or regenerate): %s", len(missing), strings.Join(missing, ", "))
	}
	t.Logf("%d numbers in README's Measured section checked against bench/RESULTS.md", len(nums))
}
