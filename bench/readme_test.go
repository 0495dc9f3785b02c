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

// rowRE finds a quoted table row in README prose: "Row `steady reads / h`:"
// (or "row `...`"); the numbers after it, up to the next row mention, a
// header mention, a semicolon or the bullet's end, belong to that row.
var rowRE = regexp.MustCompile("[Rr]ows?\\s+`([^`]+)`")

var (
	parenRE    = regexp.MustCompile(`\([^()]*\)`)
	sentenceRE = regexp.MustCompile("\\.\\s+[A-Z`]")
)

// rowQuotes splits a README section into (row label, text quoting it).
func rowQuotes(section string) [][2]string {
	var out [][2]string
	for _, bullet := range strings.Split(section, "\n- ") {
		locs := rowRE.FindAllStringSubmatchIndex(bullet, -1)
		for i, l := range locs {
			end := len(bullet)
			if i+1 < len(locs) {
				end = locs[i+1][0]
			}
			text := bullet[l[1]:end]
			for _, stop := range []string{";", "header `", "(bound", "against the header", "within", "(docs/"} {
				if j := strings.Index(text, stop); j >= 0 {
					text = text[:j]
				}
			}
			// An aside in parentheses is prose about other rows (the
			// whole-file check covers it); a sentence ends the quote.
			text = parenRE.ReplaceAllString(text, " ")
			if j := sentenceRE.FindStringIndex(text); j != nil {
				text = text[:j[0]+1]
			}
			out = append(out, [2]string{strings.Join(strings.Fields(bullet[l[2]:l[3]]), " "), text})
		}
	}
	return out
}

// rowLines are the lines of results that carry the row label (a table row
// of the load benchmark's text tables starts with it, right-aligned).
func rowLines(results, label string) string {
	var b strings.Builder
	for _, line := range strings.Split(results, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " |"), label) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// TestReadmeRowsFromResults (issue 32 item 5): a number README quotes for a
// row ("Row `steady reads / h`: bare 18,360, ...") must be in that row of
// bench/RESULTS.md, not merely somewhere in the file; and every row of
// README's AWS table (| nodes | column | ... |) must be in the row of
// bench/RESULTS.md's "cloudgate on AWS" tables for that size and column.
func TestReadmeRowsFromResults(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	resultsB, err := os.ReadFile("RESULTS.md")
	if err != nil {
		t.Fatal(err)
	}
	results := string(resultsB)
	section := markdownSection(string(readme), "Measured")
	checked := 0
	for _, q := range rowQuotes(section) {
		lines := rowLines(results, q[0])
		if lines == "" {
			t.Errorf("README's Measured section quotes row %q, which no line of bench/RESULTS.md starts with", q[0])
			continue
		}
		if missing := missingNumbers(q[1], lines); len(missing) > 0 {
			t.Errorf("README quotes %s for row %q, not in that row of bench/RESULTS.md", strings.Join(missing, ", "), q[0])
		}
		checked += len(numberRE.FindAllString(q[1], -1))
	}
	if checked < 20 {
		t.Fatalf("%d numbers checked in their rows: README's row quotes were not found", checked)
	}
	// README's AWS table: | nodes | `column` | figures... |
	aws := markdownSection(string(readme), "cloudgate on AWS")
	awsRows := 0
	for _, line := range strings.Split(aws, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(line), "| ") || strings.Contains(line, "---") {
			continue
		}
		nodes := strings.ReplaceAll(strings.TrimSpace(cells[0]), ",", "")
		col := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if !regexp.MustCompile(`^\d+$`).MatchString(nodes) {
			continue // the header
		}
		var want strings.Builder
		for _, l := range strings.Split(results, "\n") {
			if strings.HasPrefix(l, "| "+nodes+" | "+col+" |") {
				want.WriteString(l + "\n")
			}
		}
		if want.Len() == 0 {
			t.Errorf("README's AWS table row %q: bench/RESULTS.md has no row | %s | %s |", line, nodes, col)
			continue
		}
		// The figure cells (numbers only); a cell of prose (what to
		// configure, a staleness bound) is not a measurement.
		var figs []string
		for _, c := range cells[2:] {
			if strings.Trim(numberRE.ReplaceAllString(c, ""), " ;*×%") == "" {
				figs = append(figs, c)
			}
		}
		if len(figs) == 0 {
			t.Errorf("README's AWS table row %q has no figure cell", line)
		}
		if missing := missingNumbers(strings.Join(figs, "|"), want.String()); len(missing) > 0 {
			t.Errorf("README's AWS table row %q quotes %s, not in bench/RESULTS.md's rows for %s nodes, %s", line, strings.Join(missing, ", "), nodes, col)
		}
		awsRows++
	}
	if awsRows == 0 {
		t.Error("README's \"cloudgate on AWS\" section has no table row (| nodes | column | ... |) to check")
	}
	t.Logf("%d numbers checked in their rows; %d AWS table rows", checked, awsRows)
}
