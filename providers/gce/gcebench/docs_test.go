package gcebench

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// docs/gce.md's "Measured" section may quote only what make bench-results-gce wrote into
// providers/gce/RESULTS.gce.md: each of its table rows must be a row of the file, and every
// number of its prose must occur there, so a figure typed by hand (or left from an older run)
// fails.

const (
	docsPath    = "../../../docs/gce.md"
	resultsPath = "../RESULTS.gce.md"
	measuredSec = "Measured"
)

var numberRE = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?`)

// section is the text of md's "## title" section, up to the next second-level heading.
func section(md, title string) string {
	start := strings.Index(md, "\n## "+title)
	if start < 0 {
		return ""
	}
	rest := md[start+1:]
	if end := strings.Index(rest[3:], "\n## "); end >= 0 {
		rest = rest[:end+3]
	}
	return rest
}

// unquoted returns the table rows of text that are not rows of results and the numbers of its
// other lines that do not occur in results as whole numbers.
func unquoted(text, results string) (rows, numbers []string) {
	have := map[string]bool{}
	for _, l := range strings.Split(results, "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "|"):
			if !have[l] {
				rows = append(rows, l)
			}
		case strings.HasPrefix(l, "## "), strings.HasPrefix(l, "```"):
		default:
			for _, raw := range numberRE.FindAllString(l, -1) {
				n := strings.TrimRight(raw, ".,")
				re := regexp.MustCompile(`(?:^|[^\d.,])` + regexp.QuoteMeta(n) + `(?:$|[^\d]|[.,](?:$|[^\d]))`)
				if !re.MatchString(results) {
					numbers = append(numbers, raw)
				}
			}
		}
	}
	return rows, numbers
}

// TestDocsQuoteResults: docs/gce.md quotes providers/gce/RESULTS.gce.md row for row.
func TestDocsQuoteResults(t *testing.T) {
	docs, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	results, err := os.ReadFile(resultsPath)
	if err != nil {
		t.Fatal(err)
	}
	sec := section(string(docs), measuredSec)
	if sec == "" {
		t.Fatalf("%s has no \"## %s\" section", docsPath, measuredSec)
	}
	quoted := 0
	for _, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "| ") {
			quoted++
		}
	}
	if quoted < 4 {
		t.Errorf("%s's %q section quotes %d table rows; want the results' rows", docsPath, measuredSec, quoted)
	}
	rows, numbers := unquoted(sec, string(results))
	for _, r := range rows {
		t.Errorf("%s: row not in %s (regenerate with make bench-results-gce and quote it): %s", docsPath, resultsPath, r)
	}
	for _, n := range numbers {
		t.Errorf("%s: figure %s is not in %s", docsPath, n, resultsPath)
	}
	t.Logf("%d rows checked against %s", quoted, resultsPath)
}

// TestUnquoted: the check finds a changed row and a hand-typed figure.
func TestUnquoted(t *testing.T) {
	results := "# x\n| 1,000 | gce | compute.instances.get | 1,000 | 0 | 12,000 | 13.33% (read) |\nKnobs: seed 1, 500 joining.\n"
	for _, tc := range []struct {
		text          string
		rows, numbers int
	}{
		{"| 1,000 | gce | compute.instances.get | 1,000 | 0 | 12,000 | 13.33% (read) |\n500 nodes join.", 0, 0},
		{"| 1,000 | gce | compute.instances.get | 1,000 | 0 | 12,001 | 13.33% (read) |", 1, 0},
		{"about 12,000 gets an hour, 13.3% of the quota", 0, 1},
		{"501 nodes join", 0, 1},
	} {
		rows, numbers := unquoted(tc.text, results)
		if len(rows) != tc.rows || len(numbers) != tc.numbers {
			t.Errorf("unquoted(%q) = %q, %q; want %d rows, %d numbers", tc.text, rows, numbers, tc.rows, tc.numbers)
		}
	}
}
