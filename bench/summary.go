package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/cloudgate/cloudgate/provider"
)

// WriteSummary writes at most five plain lines: what cloudgate's default
// install (cloudgate:list; cloudgate:cache for a provider that neither
// batches nor lists) saved against the stock CCM with a provider-typical
// client (bare+client, the fair baseline), at what staleness, and where
// the HTML report is (html; "" for none).
func (r *Report) WriteSummary(w io.Writer, html string) {
	seeds := fmt.Sprintf("seed %d", r.FirstSeed)
	if r.Seeds > 1 {
		seeds = fmt.Sprintf("medians of seeds %d-%d", r.FirstSeed, r.FirstSeed+int64(r.Seeds)-1)
	}
	fmt.Fprintf(w, "\nSummary, cloudgate's default install against the stock CCM with a provider-typical client (bare+client), %s:\n", seeds)
	lines := 0 // at most two scenario lines (steady, scaleup)
	for _, s := range r.Scenarios {
		base, okB := s.Columns[ColBareClient]
		cg, okC := s.Columns[ColList]
		cache, okCache := s.Columns[ColCache]
		if !okB || !okC || lines == 2 {
			continue
		}
		switch {
		case s.Scenario == ScenarioSteady && base.Steady != nil && cg.Steady != nil:
			line := fmt.Sprintf("  steady, %d nodes: cloud reads/h %.0f -> %.0f (%s)", s.Nodes, base.Steady.ReadsPerHour, cg.Steady.ReadsPerHour, saved(base.Steady.ReadsPerHour, cg.Steady.ReadsPerHour))
			if okCache && cache.Steady != nil {
				line += fmt.Sprintf("; %.0f (%s) over a provider that neither batches nor lists", cache.Steady.ReadsPerHour, saved(base.Steady.ReadsPerHour, cache.Steady.ReadsPerHour))
			}
			fmt.Fprintln(w, line)
			lines++
		case s.Scenario == ScenarioScaleup:
			fmt.Fprintf(w, "  scaleup, %d new nodes: initialised in %s s (bare+client %s s), upstream calls %d -> %d, throttled %d -> %d\n",
				s.Nodes, secs(cg.InitSeconds, cg.TimedOut), secs(base.InitSeconds, base.TimedOut), base.UpstreamCalls, cg.UpstreamCalls, base.Throttled, cg.Throttled)
			lines++
		}
	}
	ttl := provider.DefaultTTLs()["InstanceMetadata"]
	fmt.Fprintf(w, "  at what staleness: node answers at most %s old (%s while the cloud fails); a \"does not exist\" is confirmed, never served stale\n",
		minutes(ttl), minutes(ttl+provider.DefaultConfig().Cache.StaleIfError.Duration))
	if html != "" {
		fmt.Fprintf(w, "  HTML report: %s\n", html)
	}
}

// saved is "-87 %": the change from base to v.
func saved(base, v float64) string {
	if base == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.0f %%", 100*(v-base)/base)
}

// minutes is d as "10 min" (or d's own form when not whole minutes).
func minutes(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return d.String()
}
