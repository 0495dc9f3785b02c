package awsbench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/bench/measure"
	"github.com/cloudgate/cloudgate/providers/aws/awsbatch"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

func TestMissesPerHour(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		rate float64
		ttl  time.Duration
		want float64
	}{
		// One node, 1 s a lookup: a round every 301 s (the period starts
		// when the round ends); 3612 ... 39431 in hours 2-11: 120 / 10.
		{"no cache", 1, 1, 0, 12},
		// TTL = two periods: every other round hits (601 s apart): 3606 ...
		// 39065, 60 / 10.
		{"ttl 10m", 1, 1, 10 * time.Minute, 6},
		// Rounds of 1,000 s outgrow the TTL: every lookup misses, as with
		// no cache (rounds 1,300 s apart: 2 or 3 of them in the hour).
		{"rounds longer than the ttl", 1000, 1, 10 * time.Minute, -1},
		{"no rate", 10, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := missesPerHour(tc.n, tc.rate, tc.ttl)
			want := tc.want
			if want < 0 {
				want = missesPerHour(tc.n, tc.rate, 0)
			}
			if got != want {
				t.Errorf("missesPerHour(%d, %g, %v) = %g, want %g", tc.n, tc.rate, tc.ttl, got, want)
			}
		})
	}
	// The steady rate of a loop without cache is N per cycle (round +
	// period). A single hour of 5,000 nodes in 772 s rounds (1,072 s
	// cycles) holds 17,487 or as few as 15,000 lookups depending on where
	// it falls; the ten-hour average is within 1 % of 5,000 × 3600 / 1072.
	n, round := 5000, 772.0
	want := float64(n) * 3600 / (round + measure.StatusPeriod.Seconds())
	if got := missesPerHour(n, float64(n)/round, 0); math.Abs(got/want-1) > 0.01 {
		t.Errorf("missesPerHour(%d, rounds of %gs, no cache) = %.0f, want %.0f ± 1 %% (the steady rate)", n, round, got, want)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"unknown column", func(o *Options) { o.Columns = []string{"gcp"} }, "-columns"},
		{"no seeds", func(o *Options) { o.Seeds = 0 }, "-seeds"},
		{"short window", func(o *Options) { o.Window = time.Millisecond }, "-window"},
		{"bad size", func(o *Options) { o.Sizes = []int{0} }, "-sizes"},
		{"no bucket", func(o *Options) { o.Bucket.Refill = 0 }, "-bucket"},
		{"cycles alone", func(o *Options) { o.Cycles = 1 }, "-parallel"},
		{"cycles, adapter only", func(o *Options) { o.Cycles, o.Parallel, o.Columns = 1, true, []string{ColAdapter} }, "-cycles needs a column"},
		{"cycles, no derive window", func(o *Options) { o.Cycles, o.Parallel, o.DeriveWindow = 1, true, 0 }, "-derive-window"},
		{"negative latency", func(o *Options) { o.Latency.Default.Jitter = -time.Second }, "-latency"},
		{"hour without cycles", func(o *Options) { o.Parallel, o.Hour = true, time.Hour }, "-hour needs -cycles"},
		{"negative warm-up", func(o *Options) { o.Warmup = -time.Second }, "-hour-warmup"},
		{"warm-up shorter than the derivation", func(o *Options) {
			o.Parallel, o.Cycles, o.Hour, o.Warmup = true, 1, time.Hour, time.Second
		}, "-hour-warmup must be >= -derive-window"},
		{"sizes side by side alone", func(o *Options) { o.SizesParallel = true }, "-sizes-parallel needs -parallel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mod(o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("DefaultOptions().Validate() = %v", err)
	}
}

// TestComparison runs a small version of the table (200 nodes steady, 40
// scaling up, one seed) and checks its structural invariants: every column
// leaves every node in the same state, the adapter column is never
// throttled, and it sends fewer DescribeInstances than the provider alone.
// No timing is asserted.
func TestComparison(t *testing.T) {
	o := DefaultOptions()
	o.Sizes = []int{200}
	o.Seeds, o.LargeSeeds = 1, 1
	o.Window = 3 * time.Second
	o.ScaleupNodes = 40
	o.ScaleupTimeout = 3 * time.Minute
	var log strings.Builder
	o.Progress = &log
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	if len(res.StateChecks) != 2 {
		t.Fatalf("%d node-state checks, want 2 (steady, scaleup)", len(res.StateChecks))
	}
	for _, sc := range res.StateChecks {
		want := 200
		if sc.Scenario == "scaleup" {
			want = 40
		}
		if sc.Nodes != want || sc.Differ != 0 {
			t.Errorf("%s seed %d: %d nodes compared, %d differ; want %d compared, 0 differ", sc.Scenario, sc.Seed, sc.Nodes, sc.Differ, want)
		}
	}
	for _, col := range AllColumns {
		for _, r := range res.Scaleup[col] {
			if r.Initialized != r.Expected {
				t.Errorf("scaleup %s: %d of %d nodes initialised", col, r.Initialized, r.Expected)
			}
		}
	}
	for _, r := range res.Steady[ColAdapter] {
		if r.Throttled != 0 {
			t.Errorf("steady adapter: %d RequestLimitExceeded, want 0", r.Throttled)
		}
		// One page by cluster tag a refresh; the legacy tag's on one refresh in LegacyRecheck.
		if want := 1 + 1.0/awsbatch.LegacyRecheck; math.Abs(r.ListPages-want) > 1e-9 {
			t.Errorf("steady adapter: a list refresh of 200 instances took %.3f pages on average, want %.3f", r.ListPages, want)
		}
	}
	for _, r := range res.Scaleup[ColAdapter] {
		if r.Throttled != 0 {
			t.Errorf("scaleup adapter: %d RequestLimitExceeded, want 0", r.Throttled)
		}
	}
	aws, adapter := res.Steady[ColAWS][0], res.Steady[ColAdapter][0]
	if adapter.Describe >= aws.Describe {
		t.Errorf("steady window: adapter %d DescribeInstances, aws alone %d: want fewer", adapter.Describe, aws.Describe)
	}
	if a, g := res.SteadyPerHour(ColAWS, 200), res.SteadyPerHour(ColAdapter, 200); !(g < a) {
		t.Errorf("derived per hour: adapter %g, aws alone %g: want fewer", g, a)
	}
	if sa, sg := res.Scaleup[ColAWS][0].Describe, res.Scaleup[ColAdapter][0].Describe; sg >= sa {
		t.Errorf("scaleup: adapter %d DescribeInstances, aws alone %d: want fewer", sg, sa)
	}
	var md strings.Builder
	res.WriteMarkdown(&md)
	for _, want := range []string{"| 200 | aws |", "| 200 | aws+cloudgate+adapter |", "0 nodes differ", "Bound (bench.InitBound"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// TestCycles runs the columns side by side over one whole status cycle
// (50 nodes, 20 ms EC2 latency; the controllers' periods compressed ×30 so
// a cycle takes seconds — the tables run uncompressed) and checks what a
// cycle must hold: the window ends at the first lookup of round 2, so aws
// alone and aws+cloudgate (a cold cache) sent exactly one DescribeInstances
// per node, every column ended a round, and the adapter sent fewer.
func TestCycles(t *testing.T) {
	o := DefaultOptions()
	o.Sizes = []int{50}
	o.Seeds, o.LargeSeeds = 1, 1
	o.ScaleupNodes = 20
	o.Parallel, o.Cycles = true, 1
	o.Window, o.DeriveWindow = 2*time.Minute, 2*time.Second
	o.Latency = ec2sim.Latency{Default: ec2sim.ActionLatency{Base: 20 * time.Millisecond, Jitter: 10 * time.Millisecond}}
	o.timeFactor = 30
	var log strings.Builder
	o.Progress = &log
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	for _, col := range AllColumns {
		r := res.Steady[col][0]
		if len(r.RoundEnds) < 1 || r.Early == nil {
			t.Errorf("%s: %d rounds ended, early counters %v; want >= 1 and some", col, len(r.RoundEnds), r.Early != nil)
		}
		if col == ColAdapter {
			continue
		}
		if r.Lookups != 51 || r.Describe != 50 || r.Throttled != 0 {
			t.Errorf("%s over one cycle of 50 nodes: %d lookups, %d DescribeInstances, %d throttled; want 51 (the next round's first), 50, 0",
				col, r.Lookups, r.Describe, r.Throttled)
		}
	}
	aws, adapter := res.Steady[ColAWS][0], res.Steady[ColAdapter][0]
	if adapter.Describe >= aws.Describe {
		t.Errorf("adapter: %d DescribeInstances in %.1fs; aws alone %d in %.1fs; want fewer calls",
			adapter.Describe, adapter.Window, aws.Describe, aws.Window)
	}
	for _, sc := range res.StateChecks {
		if sc.Differ != 0 {
			t.Errorf("%s: %d of %d nodes differ across the columns", sc.Scenario, sc.Differ, sc.Nodes)
		}
	}
	var md strings.Builder
	res.WriteMarkdown(&md)
	for _, want := range []string{"measured", "| 50 | aws |", "an assumption", "side by side"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the markdown lacks %q:\n%s", want, md.String())
		}
	}
}

// TestRoundPerHour: the derivation from the measured round counts
// DescribeInstances per miss (the cold start's), not per lookup of a window
// whose second round was all cache hits (which would halve it).
func TestRoundPerHour(t *testing.T) {
	r := SteadyRun{Nodes: 1000, LookupRate: 1000 / 155.0, Describe: 1000, Lookups: 2001,
		Early: &SteadyRun{Describe: 129, Lookups: 129}}
	got, want := roundPerHour(ColCloudgate, r), missesPerHour(1000, 1000/155.0, metadataTTL())
	if got != want {
		t.Errorf("roundPerHour = %g, want %g (misses/h × 1 call per miss)", got, want)
	}
	if half := perHour(ColCloudgate, r); !(half < 0.6*want) {
		t.Errorf("the whole window's per-lookup ratio gives %g; the test expects it to halve %g", half, want)
	}
}
