//go:build linux

// Package real measures the figure a platform team decides on: every EC2
// and load-balancing action per hour, and its share of the account's
// buckets, for the whole CCM workload, from the binaries they would run:
// the stock AWS cloud-controller-manager (k8s.io/cloud-provider-aws,
// unmodified, at its chart's settings and tuned as a large cluster runs
// it) and cloudgate's AWS CCM (providers/aws, with the configuration its
// chart renders), each on its own real etcd + kube-apiserver (testkit/e2e)
// against ec2sim with EC2's documented buckets, in real time.
//
// The workload: N Nodes (1 % NotReady, held so), LoadBalancer Services
// (classic ELB and NLB) whose backends follow Node churn (Churn join and
// Churn leave every ChurnEvery: a leaving Node's instance is terminated and
// the Node goes NotReady, so the CCM's lifecycle controller deletes it),
// then K Nodes joining at once. No kubelets: the harness writes what they
// would (Node registration, the Ready condition).
//
// `make bench-real-aws` runs TestBenchRealAWS (an hour's window per size,
// not in make test) and writes bench/RESULTS.real-aws.md; TestBenchRealAWSSmall
// runs the same harness at 100 Nodes for a few minutes in make test, so it
// cannot rot.
package real

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/bench"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// Options are the harness's knobs (the results file prints them).
type Options struct {
	Nodes       []int
	NotReadyPct float64
	// Services LoadBalancer Services, the first NLBServices of them NLBs
	// (the rest the provider's default, a classic ELB).
	Services, NLBServices int
	Churn                 int
	ChurnEvery            time.Duration
	// Warmup runs from the CCM's start (its controllers' first full sync
	// and first status round); Window is measured after it.
	Warmup, Window time.Duration
	ScaleupNodes   int
	ScaleupTimeout time.Duration
	// Bucket is every action's bucket but those in Buckets.
	Bucket  ec2sim.Bucket
	Buckets map[string]ec2sim.Bucket
	// Latency + a uniform draw from [0, Jitter) per answer.
	Latency, Jitter time.Duration
	Seed            int64
	// LaunchLag: a Node joining after populate has an instance EC2 does
	// not describe for this long, and registers NotReady until then.
	LaunchLag time.Duration
	// StatusPeriod is --node-status-update-frequency (0: the CCM's 5m
	// default; only the short test sets it).
	StatusPeriod time.Duration
	Columns      []string
	// SizesParallel runs every size's columns at once (3 × len(Nodes)
	// worlds on one machine) instead of one size after the other.
	SizesParallel bool
	// Predict runs the virtual-time simulator for every column and size
	// (sim_test.go) and prints its figures beside the real ones.
	Predict bool
}

// EC2's documented buckets ("Request throttling for the Amazon EC2 API"):
// a non-mutating action 100 tokens refilled at 20/s; ec2sim gives each
// action its own bucket of that size, as EC2 does per action.
func DefaultOptions() *Options {
	return &Options{
		Nodes: []int{1000, 5000}, NotReadyPct: 1, Services: 20, NLBServices: 10,
		Churn: 10, ChurnEvery: 5 * time.Minute,
		Warmup: 5 * time.Minute, Window: time.Hour,
		ScaleupNodes: 500, ScaleupTimeout: 30 * time.Minute,
		Bucket:  ec2sim.NonMutatingBucket,
		Latency: 40 * time.Millisecond, Jitter: 20 * time.Millisecond, Seed: 1,
		Columns: []string{colStock, colTuned, colCloudgate}, Predict: true,
	}
}

// The columns.
const (
	colStock     = "stock AWS CCM (chart defaults)"
	colTuned     = "stock AWS CCM (tuned: 10 node workers)"
	colCloudgate = "cloudgate AWS CCM (chart defaults)"
)

// What the charts render (testdata, checked against the charts by
// charts/test's TestBenchRealAWSArgs): the stock AWS chart's args and
// cloudgate's chart's args and cloudgate.yaml. The paths are the Pods'
// mounts, rewritten to the run's files.
const (
	chartConfigPath     = "/etc/cloudgate/cloudgate.yaml"
	chartUpstreamConfig = "/etc/cloudgate-upstream/cloud.conf"
)

type column struct {
	name      string
	bin       string
	args      []string
	cloudgate bool
	config    string // cloudgate.yaml (cloudgate only)
}

func readArgs(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func columns(t *testing.T, o *Options, stockBin, cloudgateBin string) []column {
	// The stock chart's args and --configure-cloud-routes=false, as AWS's
	// examples run it: with the chart's args alone the CCM exits at start
	// ("invalid CIDR": the route controller, on by default, wants
	// --cluster-cidr), so every stock install sets one of the two.
	stock := append(readArgs(t, "testdata/chart-stock.args"), "--configure-cloud-routes=false")
	cfg, err := os.ReadFile("testdata/chart-cloudgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]column{
		colStock: {name: colStock, bin: stockBin, args: stock},
		// --concurrent-node-status-updates: the status loop's workers
		// (k8s.io/cloud-provider 1.30+); 10 as for the node syncs.
		colTuned:     {name: colTuned, bin: stockBin, args: append(slices.Clone(stock), "--concurrent-node-syncs=10", "--concurrent-node-status-updates=10")},
		colCloudgate: {name: colCloudgate, bin: cloudgateBin, args: readArgs(t, "testdata/chart-cloudgate.args"), cloudgate: true, config: string(cfg)},
	}
	var out []column
	for _, c := range o.Columns {
		col, ok := all[c]
		if !ok {
			t.Fatalf("unknown column %q", c)
		}
		out = append(out, col)
	}
	return out
}

// Figures are one column's measurements at one size.
type Figures struct {
	Column string
	Nodes  int
	// PerHour is every action's requests over the window, scaled to an
	// hour ("elb:" and "elbv2:" prefix the load-balancing APIs).
	PerHour map[string]float64
	// Errors are the window's error answers by action (not-found answers
	// the provider expects included); Throttled its RequestLimitExceeded.
	Errors    map[string]int64
	Throttled int64
	// DescribeMean and DescribePeak are the DescribeInstances bucket's
	// share used: the window's mean rate, and its busiest minute, over
	// the bucket's refill.
	DescribeMean, DescribePeak float64
	// BusiestOther is the EC2 action other than DescribeInstances with the
	// highest mean share, and that share.
	BusiestOther     string
	BusiestOtherMean float64
	// InitSeconds: the K Nodes' time to initialise (-1: not all in time).
	InitSeconds float64
	// P99 is the p99 of the AWS provider's EC2 and ELB requests over the
	// window (cloudprovider_aws_api_request_duration_seconds: the bucket
	// bound the 99th percentile falls in), in seconds.
	P99 float64
	// RSSStart, RSSEnd: the CCM's resident memory at the window's ends.
	RSSStart, RSSEnd int64
	// Services is how many Services had a load balancer at the window's end.
	Services  int
	Staleness string
	Window    time.Duration
	// Sim is the simulator's prediction for the same settings (nil: none).
	Sim *Prediction
	// Shapes are the window's DescribeInstances per hour by request shape
	// (ec2sim.DescribeShapes), ShapeIDs the mean instance IDs each named:
	// who asked (a by-ID lookup, a filtered batch, a paged list).
	Shapes, ShapeIDs map[string]float64
	// Upstream are cloudgate's calls to its upstream per hour by method
	// (cloudgate_upstream_calls_total; cloudgate's column only).
	Upstream map[string]float64
}

// starting lets one world start at a time: control planes started all at
// once on a small machine miss their readiness deadline, and a CCM's
// first sync is not slowed by another world's Node creation.
var starting sync.Mutex

// runColumn runs one column at n Nodes and returns its figures. Its
// warm-up and window count from its own CCM's start.
func runColumn(ctx context.Context, t *testing.T, o *Options, col column, n int, etcdBin, apiserverBin string) *Figures {
	w := func() *world {
		starting.Lock()
		defer starting.Unlock() // a Fatal too
		w := newWorld(ctx, t, o, col, etcdBin, apiserverBin)
		began := time.Now()
		w.populate(ctx, n)
		t.Logf("%s at %d: cluster populated in %.1fs", col.name, n, time.Since(began).Seconds())
		w.startCCM(ctx)
		return w
	}()
	start := time.Now()
	bg, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.sampler(bg) })
	wg.Go(func() { w.churn(bg) })
	defer func() { stop(); wg.Wait() }()

	sleep(ctx, t, o.Warmup-time.Since(start))
	s0, m0, rss0, t0 := w.sim.AllStats(), w.mustMetrics(), w.rss(), time.Now()
	sh0 := w.sim.DescribeShapes()
	t.Logf("%s at %d: window starts (%.0fs after the CCM started; RSS %.0f MiB)", col.name, n, t0.Sub(start).Seconds(), mib(rss0))
	sleep(ctx, t, o.Window)
	s1, m1, rss1, t1 := w.sim.AllStats(), w.mustMetrics(), w.rss(), time.Now()
	sh1 := w.sim.DescribeShapes()
	stop()
	wg.Wait()
	if done, err := w.ccm.Exited(); done {
		t.Fatalf("%s: the CCM exited: %v\n%s", col.name, err, e2e.Tail(w.ccm.Log, 40))
	}
	if w.churnErr != nil {
		t.Fatalf("%s: churn: %v", col.name, w.churnErr)
	}
	for a, v := range s1 {
		if v.Invalid > 0 {
			t.Errorf("%s: ec2sim answered %s InvalidAction %d times: the provider calls an action it does not simulate", col.name, a, v.Invalid)
		}
	}
	svcs, err := w.ingressed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f := &Figures{Column: col.name, Nodes: n, PerHour: map[string]float64{}, Errors: map[string]int64{},
		RSSStart: rss0, RSSEnd: rss1, Services: svcs, Window: t1.Sub(t0), Staleness: staleness(t, col)}
	secs := t1.Sub(t0).Seconds()
	for a, v := range s1 {
		d := v.Requests - s0[a].Requests
		if d != 0 {
			f.PerHour[a] = float64(d) * 3600 / secs
		}
		if e := v.Errors - s0[a].Errors; e != 0 {
			f.Errors[a] = e
		}
		f.Throttled += v.Throttled - s0[a].Throttled
	}
	refill := o.Buckets[describe].Refill
	if refill == 0 {
		refill = o.Bucket.Refill
	}
	f.DescribeMean = float64(s1[describe].Requests-s0[describe].Requests) / secs / refill
	f.DescribePeak = peakShare(w.samples, t0, t1, describe, refill)
	for a, v := range s1 {
		if a == describe || strings.Contains(a, ":") {
			continue
		}
		r := o.Buckets[a].Refill
		if r == 0 {
			r = o.Bucket.Refill
		}
		if share := float64(v.Requests-s0[a].Requests) / secs / r; share > f.BusiestOtherMean {
			f.BusiestOther, f.BusiestOtherMean = a, share
		}
	}
	f.P99 = p99(m0, m1, "cloudprovider_aws_api_request_duration_seconds")
	f.Shapes, f.ShapeIDs = map[string]float64{}, map[string]float64{}
	for k, v := range sh1 {
		if d := v.Requests - sh0[k].Requests; d > 0 {
			f.Shapes[k] = float64(d) * 3600 / secs
			f.ShapeIDs[k] = float64(v.IDs-sh0[k].IDs) / float64(d)
		}
	}
	if col.cloudgate {
		f.Upstream = map[string]float64{}
		for method, d := range counterDelta(m0, m1, "cloudgate_upstream_calls_total", "method") {
			f.Upstream[method] = d * 3600 / secs
		}
	}
	t.Logf("%s at %d: window %.0fs: %v", col.name, n, secs, f.PerHour)

	// The scale-up, after the window: K Nodes join at once.
	if o.ScaleupNodes > 0 {
		from := time.Now()
		names, err := w.joinNames(ctx, o.ScaleupNodes, false)
		if err != nil {
			t.Fatal(err)
		}
		f.InitSeconds, err = w.initialised(ctx, names, from, o.ScaleupTimeout)
		if err != nil {
			t.Logf("%s at %d: scale-up: %v", col.name, n, err)
			f.InitSeconds = -1
		}
		t.Logf("%s at %d: %d Nodes initialised in %.1fs", col.name, n, o.ScaleupNodes, f.InitSeconds)
	}
	return f
}

func (w *world) mustMetrics() []e2e.Sample {
	if done, err := w.ccm.Exited(); done {
		w.t.Fatalf("%s: the CCM exited: %v\n%s", w.col.name, err, e2e.Tail(w.ccm.Log, 20))
	}
	s, err := w.metrics()
	if err != nil {
		w.t.Fatalf("%s: %v", w.col.name, err)
	}
	return s
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func sleep(ctx context.Context, t *testing.T, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}

// peakShare is the busiest minute's share of action's bucket among the
// samples in [from, to]: for each sample, the requests of the minute
// before it (the nearest sample at least a minute earlier).
func peakShare(samples []sample, from, to time.Time, action string, refill float64) float64 {
	peak := 0.0
	for i, s := range samples {
		if s.at.Before(from.Add(time.Minute)) || s.at.After(to) {
			continue
		}
		j := i
		for j > 0 && s.at.Sub(samples[j].at) < time.Minute {
			j--
		}
		dt := s.at.Sub(samples[j].at).Seconds()
		if dt <= 0 {
			continue
		}
		r := float64(s.stats[action].Requests-samples[j].stats[action].Requests) / dt / refill
		peak = max(peak, r)
	}
	return peak
}

// p99 is the upper bound of the histogram bucket the 99th percentile of
// name's observations between two scrapes falls in, all label sets
// together (NaN without observations).
func p99(before, after []e2e.Sample, name string) float64 {
	counts := map[float64]float64{}
	for sign, ss := range map[float64][]e2e.Sample{-1: before, 1: after} {
		for _, s := range ss {
			if s.Name != name+"_bucket" {
				continue
			}
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if err != nil {
				continue
			}
			counts[le] += sign * s.Value
		}
	}
	les := make([]float64, 0, len(counts))
	for le := range counts {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) == 0 || counts[les[len(les)-1]] <= 0 {
		return math.NaN()
	}
	total := counts[les[len(les)-1]] // +Inf: every observation
	for _, le := range les {
		if counts[le] >= 0.99*total {
			return le
		}
	}
	return math.Inf(1)
}

// staleness is how old an answer the column's CCM may give the
// controllers, from the configuration it runs with. While EC2 fails (the
// family's breaker open) a positive answer may be served until
// TTL+cache.staleIfError after the upstream gave it; a listed answer's TTL
// is cut to the list's freshness (listInterval × 1.1), so it lasts that
// plus staleIfError (provider.read, cache.PutSinceFor).
// resolved is cloudgate.yaml text as cloudgate resolves it.
func resolved(t *testing.T, text string) *provider.Config {
	t.Helper()
	c, err := provider.LoadConfig(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Resolve(provider.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func staleness(t *testing.T, col column) string {
	if !col.cloudgate {
		return "none: every lookup asks EC2 (the provider's own batcher merges concurrent ones)"
	}
	r := resolved(t, col.config)
	ttl, stale := r.TTLs()["InstanceMetadata"], r.Cache.StaleIfError.Duration
	s := fmt.Sprintf("InstanceMetadata up to %v old", ttl)
	failing := ""
	if r.Batch.ListPrefetch {
		listed := time.Duration(float64(r.Batch.ListInterval.Duration) * 1.1)
		s = fmt.Sprintf("node answers from a list refreshed every %v (at most %v old while refreshes succeed)", r.Batch.ListInterval.Duration, listed)
		failing = fmt.Sprintf(", a listed one up to %v", listed+stale)
	}
	return s + fmt.Sprintf("; \"does not exist\" never from the cache; up to %v old while EC2 fails (InstanceMetadata TTL %v + cache.staleIfError %v%s)",
		ttl+stale, ttl, stale, failing)
}

// runAll runs every column at every size, the columns of a size side by
// side (each its own control plane, account and CCM), sizes one after the
// other (or side by side too: SizesParallel).
func runAll(t *testing.T, o *Options, cols []column, etcdBin, apiserverBin string) []*Figures {
	ctx, cancel := context.WithTimeout(context.Background(), o.Warmup+o.Window+o.ScaleupTimeout+30*time.Minute)
	defer cancel()
	var out []*Figures
	var mu sync.Mutex
	// The group returns when every parallel subtest in it has (ctx must
	// live until then).
	t.Run("runs", func(t *testing.T) {
		for _, n := range o.Nodes {
			t.Run(fmt.Sprintf("nodes=%d", n), func(t *testing.T) {
				if o.SizesParallel {
					t.Parallel()
				}
				for _, col := range cols {
					t.Run(col.name, func(t *testing.T) {
						t.Parallel()
						f := runColumn(ctx, t, o, col, n, etcdBin, apiserverBin)
						if o.Predict {
							p := predict(t, o, col.name, n)
							f.Sim = &p
						}
						mu.Lock()
						out = append(out, f)
						mu.Unlock()
					})
				}
			})
		}
	})
	return out
}

// setAWSEnv gives the CCM processes static credentials (an instance
// profile, on a cluster) and keeps them off any real AWS configuration.
func setAWSEnv(t *testing.T) {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": ccmAccessKey, "AWS_SECRET_ACCESS_KEY": ec2sim.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		"AWS_REGION": "", "AWS_PROFILE": "",
	} {
		old, had := os.LookupEnv(k)
		os.Setenv(k, v)
		t.Cleanup(func() {
			if had {
				os.Setenv(k, old)
			} else {
				os.Unsetenv(k)
			}
		})
	}
}

// report renders the figures as the results file's tables.
func report(o *Options, figs []*Figures) string {
	var b bytes.Buffer
	slices.SortFunc(figs, func(a, c *Figures) int {
		if a.Nodes != c.Nodes {
			return a.Nodes - c.Nodes
		}
		return slices.Index(o.Columns, a.Column) - slices.Index(o.Columns, c.Column)
	})
	fmt.Fprintf(&b, "| nodes | column | EC2 calls/h | DescribeInstances/h | sim | sim/real | ELB+ELBv2 calls/h | DescribeInstances bucket mean / peak minute | busiest other EC2 bucket | RequestLimitExceeded | %d Nodes initialised in | sim | sim/real | p99 AWS request | CCM RSS start → end | LBs ready | staleness accepted |\n", o.ScaleupNodes)
	fmt.Fprintf(&b, "|---:|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, f := range figs {
		ec2, lb := 0.0, 0.0
		for a, v := range f.PerHour {
			if strings.Contains(a, ":") {
				lb += v
			} else {
				ec2 += v
			}
		}
		init := "not all in time"
		if f.InitSeconds >= 0 {
			init = fmt.Sprintf("%.1f s", f.InitSeconds)
		}
		sim := Prediction{InstanceReadsPerHour: math.NaN(), InitSeconds: math.NaN()}
		if f.Sim != nil {
			sim = *f.Sim
		}
		fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %s | %s | %.0f | %.1f %% / %.1f %% | %s %.1f %% | %d | %s | %s | %s | %s | %.0f → %.0f MiB | %d/%d | %s |\n",
			f.Nodes, f.Column, ec2, f.PerHour[describe], num(sim.InstanceReadsPerHour, "%.0f"), ratio(sim.InstanceReadsPerHour, f.PerHour[describe]), lb,
			100*f.DescribeMean, 100*f.DescribePeak, orDash(f.BusiestOther), 100*f.BusiestOtherMean, f.Throttled,
			init, num(sim.InitSeconds, "%.1f s"), ratio(sim.InitSeconds, f.InitSeconds), secs(f.P99), mib(f.RSSStart), mib(f.RSSEnd), f.Services, o.Services, f.Staleness)
	}
	planTable(&b, o, figs)
	floorTable(&b, o, figs)
	fmt.Fprintf(&b, "\nEvery action per hour (window %v after a %v warm-up), errors in the window in brackets:\n\n", o.Window, o.Warmup)
	for _, f := range figs {
		var parts []string
		for _, a := range slices.Sorted(mapsKeys(f.PerHour)) {
			p := fmt.Sprintf("%s %.0f", a, f.PerHour[a])
			if e := f.Errors[a]; e != 0 {
				p += fmt.Sprintf(" (%d errors)", e)
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(&b, "- %d Nodes, %s: %s\n", f.Nodes, f.Column, strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, "\nDescribeInstances per hour by what the request carried (mean instance IDs named in brackets), and cloudgate's calls to its upstream per hour by method:\n\n")
	for _, f := range figs {
		var parts []string
		for _, k := range slices.Sorted(mapsKeys(f.Shapes)) {
			parts = append(parts, fmt.Sprintf("%s %.0f (%.1f)", k, f.Shapes[k], f.ShapeIDs[k]))
		}
		fmt.Fprintf(&b, "- %d Nodes, %s: %s\n", f.Nodes, f.Column, strings.Join(parts, ", "))
		if f.Upstream != nil {
			parts = nil
			for _, k := range slices.Sorted(mapsKeys(f.Upstream)) {
				parts = append(parts, fmt.Sprintf("%s %.0f", k, f.Upstream[k]))
			}
			fmt.Fprintf(&b, "  - upstream calls: %s\n", strings.Join(parts, ", "))
		}
	}
	return b.String()
}

// counterDelta sums counter name's growth from m0 to m1 by one label.
func counterDelta(m0, m1 []e2e.Sample, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m1 {
		if s.Name == name {
			out[s.Labels[label]] += s.Value
		}
	}
	for _, s := range m0 {
		if s.Name == name {
			out[s.Labels[label]] -= s.Value
		}
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func num(v float64, format string) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf(format, v)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func secs(s float64) string {
	switch {
	case math.IsNaN(s):
		return "–"
	case math.IsInf(s, 1):
		return "> largest bucket"
	}
	return fmt.Sprintf("%g s", s)
}

// planTolerance is how far `cloudgate-bench plan`'s forecast of
// cloudgate's DescribeInstances per hour may be from the real run's.
const planTolerance = 0.15

// planInstanceReads is a plan point's instance lookups per hour (one by
// one, batched, list pages): what DescribeInstances carries on EC2.
func planInstanceReads(pt *bench.PlanPoint) float64 { return pt.InstanceReadsPerHour }

// planOff is the plan's forecast over the real figure, minus one.
func planOff(f *Figures) (float64, bool) {
	if f.Sim == nil || f.Sim.Plan == nil || f.PerHour[describe] <= 0 {
		return 0, false
	}
	return planInstanceReads(f.Sim.Plan)/f.PerHour[describe] - 1, true
}

// planTable sets `cloudgate-bench plan`'s forecast for cloudgate's column
// beside the real run.
func planTable(b *bytes.Buffer, o *Options, figs []*Figures) {
	var rows []*Figures
	for _, f := range figs {
		if _, ok := planOff(f); ok {
			rows = append(rows, f)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n`cloudgate-bench plan --cloud aws --upstream-supports list --not-ready-pct %g --services %d --churn %d --churn-every %v --routes=false --steady-window %v --scaleup-nodes %d --nodes N` against cloudgate's column (within %.0f %%: the forecast a user plans with):\n\n",
		o.NotReadyPct, o.Services, o.Churn, o.ChurnEvery, o.Window, o.ScaleupNodes, 100*planTolerance)
	fmt.Fprintf(b, "| nodes | plan: instance reads/h | real: DescribeInstances/h | plan/real | within %.0f %% | plan: quota needed, steady / %d-Node scale-up (reads/s) | real: DescribeInstances mean / peak minute (reads/s) | plan: binding limit | plan: setting to change |\n", 100*planTolerance, o.ScaleupNodes)
	fmt.Fprintf(b, "|---:|---:|---:|---:|---|---:|---:|---|---|\n")
	refill := o.Buckets[describe].Refill
	if refill == 0 {
		refill = o.Bucket.Refill
	}
	for _, f := range rows {
		pt := f.Sim.Plan
		off, _ := planOff(f)
		ok := "yes"
		if math.Abs(off) > planTolerance {
			ok = "**no**"
		}
		fmt.Fprintf(b, "| %d | %.0f | %.0f | %.2f | %s | %.2f / %.2f | %.2f / %.2f | %s | %s |\n", f.Nodes, planInstanceReads(pt), f.PerHour[describe], 1+off, ok,
			pt.NeedSteady, pt.NeedScaleup, f.DescribeMean*refill, f.DescribePeak*refill, pt.Binding, pt.Setting)
	}
}
