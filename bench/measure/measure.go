// Package measure holds what cloudgate's two load benchmarks share: bench (the CCM
// controllers against simcloud) and providers/aws/awsbench (the AWS provider against
// ec2sim). Both run the controllers with the CCM's defaults, report medians with their
// spread over seeds, and write Markdown tables; each of those is written once, here.
package measure

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The cloud-controller-manager's defaults (k8s.io/cloud-provider v0.37.2: the controllers'
// flags and config/v1alpha1/defaults.go), which every baseline column of both benchmarks
// runs with. A run that changes one says so in its conditions.
const (
	StatusPeriod  = 5 * time.Minute  // --node-status-update-frequency (cloud-node)
	MonitorPeriod = 5 * time.Second  // --node-monitor-period (cloud-node-lifecycle)
	RoutePeriod   = 10 * time.Second // --route-reconciliation-period (route)
	KubeQPS       = 20.0             // each controller's kube client: queries per second
	KubeBurst     = 30               // and burst
	NodeWorkers   = 1                // --concurrent-node-syncs
)

// Median is the median of v (the mean of the two middle values of an even count); 0 for
// none. v is not modified.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return SpreadOf(v).Median
}

// Spread is a median over seeds with the least and the largest value.
type Spread struct{ Median, Min, Max float64 }

// SpreadOf is v's median, minimum and maximum; NaN for each when v is empty (Format prints
// it as "—"). v is not modified.
func SpreadOf(v []float64) Spread {
	if len(v) == 0 {
		return Spread{math.NaN(), math.NaN(), math.NaN()}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{m, s[0], s[len(s)-1]}
}

// Map is the spread of f of each value (f must not decrease, e.g. a share of a quota).
func (s Spread) Map(f func(float64) float64) Spread { return Spread{f(s.Median), f(s.Min), f(s.Max)} }

// Format prints the median with format f, followed by " [min–max]" when they differ;
// "—" for an empty spread.
func (s Spread) Format(f string) string {
	if math.IsNaN(s.Median) {
		return "—"
	}
	if s.Min == s.Max {
		return fmt.Sprintf(f, s.Median)
	}
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", s.Median, s.Min, s.Max)
}

// Table is a Markdown table: a header row, then a row per Row call.
type Table struct {
	header []string
	rows   [][]string
}

// NewTable starts a table with these column headers.
func NewTable(header ...string) *Table { return &Table{header: header} }

// Row adds a row; a row with fewer cells than the header is padded with empty ones.
func (t *Table) Row(cells ...string) { t.rows = append(t.rows, cells) }

// Write writes the table, one line per row, each cell between "| " and " |" (an empty
// one as "| |"). A row with
// more cells than the header is an error (nothing is written).
func (t *Table) Write(w io.Writer) error {
	for i, r := range t.rows {
		if len(r) > len(t.header) {
			return fmt.Errorf("table row %d has %d cells, the header %d", i+1, len(r), len(t.header))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range t.header {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			if c == "" {
				b.WriteString(" |")
			} else {
				b.WriteString(" " + c + " |")
			}
		}
		b.WriteString("\n")
	}
	line(t.header)
	b.WriteString("|" + strings.Repeat("---|", len(t.header)) + "\n")
	for _, r := range t.rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MissingNumbers returns the numbers of nums (as quoted: thousands
// separators and a sentence's final dot are dropped before the search) that
// results does not hold as a whole number, not as part of a longer one (1.0
// is not found in 1.00, 36 not in 360): the check that a document quotes
// only what a results file holds.
func MissingNumbers(nums []string, results string) []string {
	var missing []string
	seen := map[string]bool{}
	for _, raw := range nums {
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
