package awsbench

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/cloudgate/cloudgate/bench/measure"
	"github.com/cloudgate/cloudgate/provider"
)

// Per status round: the columns sweep their status rounds at
// different paces (the provider alone makes one lookup at a time, a cached
// column answers most from memory), so calls per hour compare unequal
// work. One status round — every initialised Node's InstanceMetadata once —
// is the same work in every column: DescribeInstances per round is the
// window's DescribeInstances over its status rounds (status lookups / N).

// configures is what a user sets for the column, and staleness what its
// answers may be behind EC2 (each field's age bound). While EC2 fails (the
// breaker open) a positive answer may be served cache.staleIfError past its
// bound: InstanceMetadata until TTL + staleIfError after EC2 gave it.
func configures(col string) (configures, staleness string) {
	ttl := provider.DefaultTTLs()
	stale := provider.DefaultConfig().Cache.StaleIfError.Duration
	failing := fmt.Sprintf("; while EC2 fails a positive answer up to %v (staleIfError) past its bound, InstanceMetadata ≤ %v", stale, ttl["InstanceMetadata"]+stale)
	switch col {
	case ColAWS:
		return "nothing: the stock AWS CCM (`--cloud-provider=aws`)",
			"none: every status round and every lifecycle check asks EC2"
	case ColCloudgate:
		return "`upstream.name: aws` (cloudgate's defaults; the provider has no batch or list interface)",
			fmt.Sprintf("addresses, type, zone (InstanceMetadata) ≤ %v (TTL); exists ≤ %v, shutdown ≤ %v; \"does not exist\" ≤ %v%s",
				ttl["InstanceMetadata"], ttl["InstanceExists"], ttl["InstanceShutdown"], provider.DefaultConfig().Cache.NegativeTTL.Duration, failing)
	case ColAdapter:
		return "`upstream.name: aws-batch`: **the default install** (the chart's default; `batch.listPrefetch` is on by default)",
			fmt.Sprintf("InstanceMetadata ≤ %v while list refreshes succeed (every %v + up to 10 %% jitter), ≤ %v (TTL) while EC2 answers; exists ≤ %v, shutdown ≤ %v; \"does not exist\" ≤ %v%s (a listed one ≤ %v)",
				time.Duration(float64(listInterval())*1.1), listInterval(), ttl["InstanceMetadata"], ttl["InstanceExists"], ttl["InstanceShutdown"],
				provider.DefaultConfig().Cache.NegativeTTL.Duration, failing, time.Duration(float64(listInterval())*1.1)+stale)
	}
	return "", ""
}

// perRound is a run's DescribeInstances per status round.
func perRound(s SteadyRun) float64 {
	if s.Lookups == 0 || s.Nodes == 0 {
		return math.NaN()
	}
	return float64(s.Describe) / (float64(s.Lookups) / float64(s.Nodes))
}

// writePerRound is the per-round table of cycles mode.
func (r *Result) writePerRound(w io.Writer) {
	o := r.Options
	fmt.Fprintln(w, "**Per status round** (equal work: one round is every Node's InstanceMetadata once; the same windows as the table above; "+
		"DescribeInstances per round = DescribeInstances / (status lookups / N); medians [min–max] over seeds):")
	fmt.Fprintln(w)
	tab := measure.NewTable("nodes", "column", "what the user configures", "staleness it accepts", "status rounds", "**DescribeInstances / status round**", "aws alone / column")
	for _, n := range r.sortedSizes() {
		base := steadyOf(r.Steady[ColAWS], n, perRound).Median
		for _, col := range o.Columns {
			seeds := 0
			for _, s := range r.Steady[col] {
				if s.Nodes == n {
					seeds++
				}
			}
			if seeds == 0 {
				continue
			}
			of := func(f func(SteadyRun) float64) measure.Spread { return steadyOf(r.Steady[col], n, f) }
			pr := of(perRound)
			ratio := "—"
			if base > 0 && pr.Median > 0 {
				ratio = fmt.Sprintf("%.0f×", base/pr.Median)
			}
			conf, stale := configures(col)
			tab.Row(fmt.Sprint(n), col, conf, stale,
				of(func(s SteadyRun) float64 { return float64(s.Lookups) / float64(s.Nodes) }).Format("%.2f"),
				"**"+pr.Format("%.1f")+"**", ratio)
		}
	}
	tab.Write(w)
	fmt.Fprintln(w)
}
