package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// scaleConditions is the simulated cloud and CCM the scale figures hold under.
func scaleConditions(o *Options) string {
	return fmt.Sprintf("simulated cloud quota %g reads/s (burst %d), %g writes/s (burst %d), largest batch %d, latency %v + up to %v jitter; "+
		"CCM defaults: kube client %g QPS / burst %d, --concurrent-node-syncs %d, status every %v, lifecycle %v, routes %v",
		o.ReadQPS, o.ReadBurst, o.WriteQPS, o.WriteBurst, o.CloudMaxBatch, o.Latency, o.Jitter,
		o.KubeQPS, o.KubeBurst, o.NodeWorkers, nodeStatusUpdateFrequency, nodeMonitorPeriod, routeReconcilePeriod)
}

// WriteTable prints one table per node count with its limits.
func (r *ScaleReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "cloudgate-bench scale: the steady status sweep per node count, virtual time, seed %d, %d LB services\n", r.Seed, r.Services)
	fmt.Fprintf(w, "%s\n", r.Conditions)
	fmt.Fprintf(w, "world: %s\n", r.World)
	fmt.Fprintf(w, "cloudgate: %s\n", r.Policy)
	fmt.Fprintf(w, "Each column: N initialised nodes; the first sweep (cold caches) warms up; then whole status rounds are measured\n"+
		"(a round = one sweep + the 5m period the loop sleeps after it), as many as cover %.0f min at the bare model's pace, the same for\n"+
		"every column. Counts and times are simulated and machine-independent. heap/node = (live heap after GC at the window's end minus\n"+
		"the same once the column's world is torn down) minus bare's, / N: what the provider holds beyond the bare client. CPU = the process's\n"+
		"user+system time (getrusage) over the window, whole simulation included: machine-dependent, shown with the load average.\n", r.Window/60)
	for i := range r.Sizes {
		r.Sizes[i].write(w)
	}
}

func (s *ScaleResult) write(w io.Writer) {
	runs := ""
	if len(s.Columns) > 0 && s.Columns[0].Runs > 1 {
		runs = fmt.Sprintf("; each column ran %d times: the median run (by upstream calls), [min-max] of calls and reads", s.Columns[0].Runs)
	}
	fmt.Fprintf(w, "\n== scale/%d: %d nodes (%d NotReady), %d round(s) measured after a warm-up sweep; model sweep %.1f s%s\n",
		s.Nodes, s.Nodes, s.NotReady, s.Rounds, s.Model, runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "column\tcalls/round\tinstance reads/round\tcalls/h\tsweep s\tround s\trounds/h\tread quota\tthrottled\tMD cache entries\tevictions\theap/node\tCPU/upstream call\tCPU/lookup\t")
	for _, c := range s.Columns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f\t%.1f\t%.1f\t%.2f\t%.1f%%\t%d\t%s\t%s\t%s\t%s\t%s\t\n",
			c.Column, spread(c.CallsPerRound, c.CallsPerRoundMin, c.CallsPerRoundMax, c.Runs), spread(c.InstanceReadsPerRound, c.ReadsPerRoundMin, c.ReadsPerRoundMax, c.Runs), c.CallsPerHour, c.SweepSeconds, c.RoundSeconds, c.RoundsPerHour,
			100*c.QuotaUtilization, c.Throttled, optCount(c.CacheEntries), optCount(c.CacheEvictions),
			optBytes(c.HeapPerNode), optDur(c.CPUPerUpstreamCall), optDur(c.CPUPerLookup))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "   real time %.0f s for the %d columns; load average %s; peak RSS %.2f GB\n", s.WallSeconds, len(s.Columns), s.LoadAvg, float64(s.MaxRSSBytes)/1e9)
	for _, l := range s.Limits {
		fmt.Fprintf(w, "   limit: %s\n", l)
	}
}

// spread prints v, with [min-max] over several runs.
func spread(v, lo, hi float64, runs int) string {
	if runs < 2 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.0f [%.0f-%.0f]", v, lo, hi)
}

func optCount(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *v)
}

func optBytes(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f B", *v)
}

// optDur prints seconds as µs or ms.
func optDur(v *float64) string {
	switch {
	case v == nil:
		return "-"
	case *v >= 1e-3:
		return fmt.Sprintf("%.2f ms", *v*1e3)
	default:
		return fmt.Sprintf("%.0f µs", *v*1e6)
	}
}

// WriteJSON writes the report to path.
func (r *ScaleReport) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Check fails when a size's figures are not sane: every column's status
// lookups are N per measured round (equal work, counted at every round
// edge too) and bare sends one instance read per lookup.
func (r *ScaleReport) Check() error {
	var errs []string
	for _, s := range r.Sizes {
		for _, c := range s.Columns {
			if want := int64(s.Nodes * s.Rounds); c.StatusLookups != want {
				errs = append(errs, fmt.Sprintf("scale/%d/%s: %d status lookups over %d rounds, want %d", s.Nodes, c.Column, c.StatusLookups, s.Rounds, want))
			}
			// bare sends every lookup (lifecycle checks of NotReady nodes too).
			if c.Column == ColBare && c.InstanceReads < c.StatusLookups {
				errs = append(errs, fmt.Sprintf("scale/%d/bare: %d instance reads for %d status lookups, want at least one each", s.Nodes, c.InstanceReads, c.StatusLookups))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("scale: %s", strings.Join(errs, "; "))
	}
	return nil
}
