package bench

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cloudgate/cloudgate/bench/measure"
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
	return measure.MissingNumbers(numberRE.FindAllString(text, -1), results)
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

// boundRE matches a stated staleness bound: "≤ 5.5 m", "at most 10 m".
var boundRE = regexp.MustCompile(`(?:≤|at most) [\d.,]+ ?(?:m|s|min)\b`)

// measuredPages are the pages whose "## Measured" section quotes
// bench/RESULTS.md: README's headline and docs/bench.md's full list.
var measuredPages = []string{"../README.md", "../docs/bench.md"}

// generatedResults is bench/RESULTS.md followed by the generated files
// results.sh appends to it as they are (bench/RESULTS.aws-rounds.md, from
// make bench-results-aws with OUT set), bench/RESULTS.real-aws.md (make
// bench-real-aws) and bench/RESULTS.real-aws-scenarios.md (make
// bench-real-aws-scenario): a page may quote a file that its own target wrote after
// RESULTS.md was last regenerated.
func generatedResults(t *testing.T) []byte {
	t.Helper()
	var all []byte
	for _, f := range []string{"RESULTS.md", "RESULTS.aws-rounds.md", "RESULTS.real-aws.md", "RESULTS.real-aws-sim.md", "RESULTS.plan.md", "RESULTS.real-aws-scenarios.md", "RESULTS.real-aws-floor.md", "RESULTS.real-aws-heldout.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(append(all, b...), '\n')
	}
	return all
}

// TestReadmeMeasuredFromResults: every number in the "Measured" section of
// README.md and docs/bench.md appears in bench/RESULTS.md.
func TestReadmeMeasuredFromResults(t *testing.T) {
	results := generatedResults(t)
	for _, page := range measuredPages {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		section := markdownSection(string(md), "Measured")
		if section == "" {
			t.Fatalf(`%s has no "## Measured" section`, page)
		}
		// A staleness bound ("≤ 5.5 m", "at most 10 m old") is a setting's
		// consequence stated next to the figure, not a measurement.
		section = boundRE.ReplaceAllString(section, "")
		nums := numberRE.FindAllString(section, -1)
		if len(nums) < 10 {
			t.Fatalf("%s's Measured section quotes %d numbers: the section was not found whole", page, len(nums))
		}
		if missing := missingNumbers(section, string(results)); len(missing) > 0 {
			t.Errorf("%s's Measured section quotes %d numbers that bench/RESULTS.md does not contain "+
				"(quote only what make bench-results produced, or regenerate): %s", page, len(missing), strings.Join(missing, ", "))
		}
		t.Logf("%d numbers in %s's Measured section checked against bench/RESULTS.md", len(nums), page)
	}
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

// TestReadmeRowsFromResults: a number a page quotes for a
// row ("Row `steady reads / h`: bare 18,360, ...") must be in that row of
// bench/RESULTS.md, not merely somewhere in the file; and every row of an AWS
// table (| nodes | column | ... |) in a Measured section must be in the row of
// bench/RESULTS.md's "cloudgate on AWS" tables for that size and column.
func TestReadmeRowsFromResults(t *testing.T) {
	results := string(generatedResults(t))
	checked, awsRows := 0, 0
	for _, page := range measuredPages {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		section := markdownSection(string(md), "Measured")
		for _, q := range rowQuotes(section) {
			lines := rowLines(results, q[0])
			if lines == "" {
				t.Errorf("%s's Measured section quotes row %q, which no line of bench/RESULTS.md starts with", page, q[0])
				continue
			}
			if missing := missingNumbers(q[1], lines); len(missing) > 0 {
				t.Errorf("%s quotes %s for row %q, not in that row of bench/RESULTS.md", page, strings.Join(missing, ", "), q[0])
			}
			checked += len(numberRE.FindAllString(q[1], -1))
		}
		awsRows += checkAWSTable(t, page, section, results)
	}
	if checked < 20 {
		t.Fatalf("%d numbers checked in their rows: the row quotes were not found", checked)
	}
	if awsRows < 6 {
		t.Errorf("%d AWS table rows (| nodes | column | ... |) checked in the Measured sections: the tables were not found", awsRows)
	}
	t.Logf("%d numbers checked in their rows; %d AWS table rows", checked, awsRows)
}

// checkAWSTable checks each row of an AWS table (| nodes | `column` | figures... |)
// in section against bench/RESULTS.md's rows for that size and column, and
// returns how many rows it checked.
func checkAWSTable(t *testing.T, page, section, results string) int {
	t.Helper()
	awsRows := 0
	for _, line := range strings.Split(section, "\n") {
		line = strings.TrimSpace(line)
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 || !strings.HasPrefix(line, "| ") || strings.Contains(line, "---") {
			continue
		}
		nodes := strings.ReplaceAll(strings.TrimSpace(cells[0]), ",", "")
		if !regexp.MustCompile(`^\d+$`).MatchString(nodes) {
			continue // the header
		}
		// The row's key: the size, then any cells up to the column (in
		// backticks), a scenario's knob ("85 %", "30s") among them.
		k := 1
		for k < len(cells)-1 && !strings.HasPrefix(strings.TrimSpace(cells[k]), "`") {
			k++
		}
		if !strings.HasPrefix(strings.TrimSpace(cells[k]), "`") {
			k = 1 // no column in backticks: the size and the next cell
		}
		key := "| " + nodes + " |"
		for _, c := range cells[1 : k+1] {
			key += " " + strings.Trim(strings.TrimSpace(c), "`") + " |"
		}
		var want strings.Builder
		for _, l := range strings.Split(results, "\n") {
			if strings.HasPrefix(l, key) {
				want.WriteString(l + "\n")
			}
		}
		if want.Len() == 0 {
			t.Errorf("%s's AWS table row %q: bench/RESULTS.md has no row %s", page, line, key)
			continue
		}
		// The figure cells (numbers only); a cell of prose (what to
		// configure, a staleness bound) is not a measurement.
		var figs []string
		for _, c := range cells[k+1:] {
			if strings.Trim(numberRE.ReplaceAllString(c, ""), " ;*×%") == "" {
				figs = append(figs, c)
			}
		}
		if len(figs) == 0 {
			t.Errorf("%s's AWS table row %q has no figure cell", page, line)
		}
		if missing := missingNumbers(strings.Join(figs, "|"), want.String()); len(missing) > 0 {
			t.Errorf("%s's AWS table row %q quotes %s, not in bench/RESULTS.md's rows %s", page, line, strings.Join(missing, ", "), key)
		}
		awsRows++
	}
	return awsRows
}
