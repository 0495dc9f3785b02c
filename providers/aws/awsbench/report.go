package awsbench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/cloudgate/cloudgate/bench/measure"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/aws/awsbatch"
)

// metadataTTL is cloudgate's default InstanceMetadata TTL; listInterval the
// default list refresh period (half of it).
func metadataTTL() time.Duration  { return provider.DefaultTTLs()["InstanceMetadata"] }
func listInterval() time.Duration { return metadataTTL() / 2 }

// missesPerHour runs the cloud-node controller's status loop on paper and
// returns the lookups per hour that reach the provider, averaged over
// paperHours hours after the first (which starts from a cold cache): one
// hour alone would hold a whole number of rounds plus a part that depends
// on where the hour falls in a round (up to ~4 % at 5,000 nodes). One
// worker (--concurrent-node-syncs=1) looks the n nodes up in order; a round
// starts measure.StatusPeriod after the previous one ended (wait.UntilWithContext
// is sliding); a lookup misses when no answer younger than ttl is cached
// (ttl 0: no cache) and then takes 1/rate seconds, the measured lookup
// rate; a hit takes no time.
func missesPerHour(n int, rate float64, ttl time.Duration) float64 {
	if n == 0 || !(rate > 0) {
		return 0
	}
	const hour = 3600.0
	from, to := hour, (1+paperHours)*hour
	fetched := make([]float64, n)
	for i := range fetched {
		fetched[i] = math.Inf(-1)
	}
	t, misses := 0.0, 0
	for t < to {
		for i := range n {
			if ttl > 0 && t-fetched[i] < ttl.Seconds() {
				continue
			}
			if t >= from && t < to {
				misses++
			}
			t += 1 / rate
			fetched[i] = t
		}
		t += measure.StatusPeriod.Seconds()
	}
	return float64(misses) / paperHours
}

// paperHours is how many hours missesPerHour averages.
const paperHours = 10

// perHour is a steady run's DescribeInstances per hour, derived:
//
//	aws:           misses/h (no cache) × DescribeInstances per lookup
//	aws+cloudgate: misses/h (TTL 10 min) × DescribeInstances per lookup
//	adapter:       (1h / batch.listInterval) × pages of a list refresh (mean of LegacyRecheck)
//
// with the per-lookup figures measured in the window.
func perHour(col string, r SteadyRun) float64 {
	switch col {
	case ColAdapter:
		return float64(r.ListPages) * (time.Hour.Seconds() / listInterval().Seconds())
	case ColCloudgate:
		return missesPerHour(r.Nodes, r.LookupRate, metadataTTL()) * perLookup(r)
	default:
		return missesPerHour(r.Nodes, r.LookupRate, 0) * perLookup(r)
	}
}

func perLookup(r SteadyRun) float64 {
	if r.Lookups == 0 {
		return 0
	}
	return float64(r.Describe) / float64(r.Lookups)
}

func steadyOf(runs []SteadyRun, n int, f func(SteadyRun) float64) measure.Spread {
	var v []float64
	for _, r := range runs {
		if r.Nodes == n {
			v = append(v, f(r))
		}
	}
	return measure.SpreadOf(v)
}

// shareOfBucket is v per hour as a percentage of the bucket's refill per hour.
func (r *Result) shareOfBucket(v float64) float64 { return 100 * v / r.BucketPerHour() }

// BucketPerHour is the DescribeInstances bucket's refill per hour.
func (r *Result) BucketPerHour() float64 { return r.Options.Bucket.Refill * 3600 }

// SteadyPerHour is the median derived DescribeInstances per hour of col at
// n nodes (NaN when not run).
func (r *Result) SteadyPerHour(col string, n int) float64 {
	return steadyOf(r.Steady[col], n, func(s SteadyRun) float64 { return perHour(col, s) }).Median
}

// saturation is the node count at which col's derived steady calls fill
// the bucket's refill, and how it was computed.
func (r *Result) saturation(col string) string {
	sizes := r.sortedSizes()
	if len(sizes) == 0 {
		return "—"
	}
	n := sizes[0]
	runs := r.Steady[col]
	b := r.BucketPerHour()
	if col == ColAdapter {
		// pages = ceil(N/1000) + 1/LegacyRecheck per refresh (the
		// legacy-tag page on one refresh in LegacyRecheck; checked
		// against the measured pages), refreshes 1h/listInterval.
		refreshes := time.Hour.Seconds() / listInterval().Seconds()
		legacy := 1.0 / awsbatch.LegacyRecheck
		nsat := (b/refreshes - legacy) * pageSize
		return fmt.Sprintf("≈ %.0f (pages/refresh ceil(N/1000)+%.2f = bucket/h ÷ %.0f refreshes/h)", nsat, legacy, refreshes)
	}
	perNode := r.SteadyPerHour(col, n) / float64(n)
	if !(perNode > 0) {
		return "—"
	}
	// The provider's batcher serialises one worker's lookups: its calls
	// cannot exceed the lookup rate × calls per lookup.
	capPerHour := steadyOf(runs, n, func(s SteadyRun) float64 { return s.LookupRate * perLookup(s) * 3600 }).Median
	s := fmt.Sprintf("%.0f (bucket/h ÷ %.2f calls/node/h at %d nodes)", b/perNode, perNode, n)
	if capPerHour < b {
		s += fmt.Sprintf("; but one worker's lookups cap it at %.0f calls/h (%.0f %%): past ~%.0f nodes the status rounds outgrow the 5-min period instead",
			capPerHour, 100*capPerHour/b, steadyOf(runs, n, func(s SteadyRun) float64 { return s.LookupRate }).Median*measure.StatusPeriod.Seconds())
	}
	return s
}

// WriteMarkdown writes the tables, the conditions and the formulas.
func (r *Result) WriteMarkdown(w io.Writer) {
	o := r.Options
	commit := r.Commit
	if commit == "" {
		commit = "unknown (not built from a git checkout)"
	}
	side := "one column at a time"
	if o.Parallel {
		side = "the columns side by side, each on its own simulated account and cluster"
	}
	fmt.Fprintf(w, "Conditions: %s UTC, commit %s, GOMAXPROCS %d, load average (1/5/15 min) %s at start, %s at end; real time, no compression; %s.\n",
		r.Started.UTC().Format("2006-01-02 15:04"), commit, runtime.GOMAXPROCS(0), r.Load[0], r.Load[1], side)
	fmt.Fprintf(w, "EC2 latency: %s.\n", r.describeLatency())
	fmt.Fprintf(w, "EC2: ec2sim, DescribeInstances bucket %d tokens refilled at %g/s (%.0f calls/h), HTTP 503 RequestLimitExceeded when empty. "+
		"CCM: cloud-node (--concurrent-node-syncs=1, --node-status-update-frequency=5m) and cloud-node-lifecycle (5 s) controllers, "+
		"kube client %g QPS / burst %d, routes off, no LoadBalancer services. cloudgate: DefaultConfig, limits.read %g/s burst %d; "+
		"aws+cloudgate batching off; adapter: awsbatch, batching on, batch.listPrefetch (on by default; listInterval %v).\n\n",
		o.Bucket.Size, o.Bucket.Refill, r.BucketPerHour(), measure.KubeQPS, measure.KubeBurst, o.Bucket.Refill, o.Bucket.Size, listInterval())

	switch {
	case len(r.sortedSizes()) > 0 && o.Cycles > 0:
		r.writeMeasured(w)
		r.writePerRound(w)
		if o.Hour > 0 {
			r.writeHour(w)
		}
	case len(r.sortedSizes()) > 0:
		r.writeSteady(w)
	}
	r.writeScaleup(w)
}

func (r *Result) writeSteady(w io.Writer) {
	o := r.Options
	fmt.Fprintf(w, "**Steady state** (N initialised Ready nodes; window %v from the controllers' start; medians [min–max] over seeds):\n\n", o.Window)
	tab := measure.NewTable("nodes", "column", "seeds", "DescribeInstances in window", "RequestLimitExceeded", "status lookups (rate /s)",
		"DescribeInstances per lookup", "**DescribeInstances / h** (derived)", "share of bucket")
	for _, n := range r.sortedSizes() {
		for _, col := range o.Columns {
			runs := r.Steady[col]
			seeds := 0
			for _, s := range runs {
				if s.Nodes == n {
					seeds++
				}
			}
			if seeds == 0 {
				continue
			}
			ph := steadyOf(runs, n, func(s SteadyRun) float64 { return perHour(col, s) })
			share := ph.Map(r.shareOfBucket)
			lk := steadyOf(runs, n, func(s SteadyRun) float64 { return float64(s.Lookups) })
			rate := steadyOf(runs, n, func(s SteadyRun) float64 { return s.LookupRate })
			tab.Row(fmt.Sprint(n), col, fmt.Sprint(seeds),
				steadyOf(runs, n, func(s SteadyRun) float64 { return float64(s.Describe) }).Format("%.0f"),
				steadyOf(runs, n, func(s SteadyRun) float64 { return float64(s.Throttled) }).Format("%.0f"),
				lk.Format("%.0f")+" ("+rate.Format("%.1f")+")",
				steadyOf(runs, n, perLookup).Format("%.3f"), ph.Format("%.0f"), share.Format("%.2f %%"))
		}
	}
	tab.Write(w)
	fmt.Fprintln(w)
	for _, n := range r.sortedSizes() {
		a, g := r.SteadyPerHour(ColAWS, n), r.SteadyPerHour(ColAdapter, n)
		if a > 0 && g > 0 {
			fmt.Fprintf(w, "- %d nodes: aws alone / with the adapter = %.0f / %.0f = **%.0f× fewer** DescribeInstances per hour.\n", n, a, g, a/g)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "**Node count that saturates the DescribeInstances bucket** (steady calls per hour = refill per hour):")
	fmt.Fprintln(w)
	for _, col := range o.Columns {
		fmt.Fprintf(w, "- %s: %s\n", col, r.saturation(col))
	}
}

func (r *Result) writeScaleup(w io.Writer) {
	o := r.Options
	if len(r.Scaleup) > 0 {
		fmt.Fprintf(w, "\n**Scale-up**: %d nodes arrive at once (their instances exist; no provider ID, private-DNS names, uninitialized taint); medians [min–max] over %d seeds:\n\n", o.ScaleupNodes, o.Seeds)
		tab := measure.NewTable("column", "initialised", "time to all (s)", "bound (s)", "measured / bound", "DescribeInstances", "RequestLimitExceeded")
		for _, col := range o.Columns {
			runs := r.Scaleup[col]
			of := func(f func(ScaleupRun) float64) measure.Spread {
				v := make([]float64, 0, len(runs))
				for _, s := range runs {
					v = append(v, f(s))
				}
				return measure.SpreadOf(v)
			}
			tab.Row(col,
				of(func(s ScaleupRun) float64 { return float64(s.Initialized) }).Format("%.0f")+fmt.Sprintf("/%d", o.ScaleupNodes),
				of(func(s ScaleupRun) float64 { return s.Seconds }).Format("%.1f"), fmt.Sprintf("%.1f", r.Bound.Seconds),
				of(func(s ScaleupRun) float64 { return s.Seconds / r.Bound.Seconds }).Format("%.2f"),
				of(func(s ScaleupRun) float64 { return float64(s.Describe) }).Format("%.0f"),
				of(func(s ScaleupRun) float64 { return float64(s.Throttled) }).Format("%.0f"))
		}
		tab.Write(w)
		fmt.Fprintf(w, "\nBound (bench.InitBound, B = %d, EC2's largest DescribeInstances page; RTT = the latency's base, %v): %s\n", pageSize, o.Latency.Default.Base, r.Bound.Formula)
	}
	fmt.Fprintln(w)
	nodes, differ := 0, 0
	for _, sc := range r.StateChecks {
		nodes += sc.Nodes
		differ += sc.Differ
	}
	fmt.Fprintf(w, "**Node state** (provider ID, labels, addresses, taints) compared across the columns of each seed: %d comparisons (%d scenario×seed), %d nodes differ.\n",
		nodes, len(r.StateChecks), differ)
}
