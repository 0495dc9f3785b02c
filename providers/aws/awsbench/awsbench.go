// Package awsbench measures the unmodified AWS cloud provider alone, behind
// cloudgate, and behind cloudgate with the awsbatch adapter, on the
// simulated EC2 (ec2sim, with EC2's documented DescribeInstances bucket),
// driven by bench's cluster: the real cloud-node and cloud-node-lifecycle
// (and service) controllers of k8s.io/cloud-provider on a fake API server,
// each with a kube client limited like a real CCM's (20 QPS, burst 30).
//
// Columns:
//
//	aws                    the AWS provider alone: its describe-instance batcher, the SDK's retryer, CCM defaults
//	aws+cloudgate          cloudgate's DefaultConfig in front (cache and limiter; no batch interface)
//	aws+cloudgate+adapter  cloudgate in front of awsbatch (batch, batch.listPrefetch)
//
// Everything runs in real time: the AWS provider's batcher and the SDK's
// retryer have their own real-time timers, which a compressed clock would
// distort, and the provider's HTTP client (an unexported package variable
// of cloud-provider-aws with a real net.Dialer) cannot be pointed at an
// in-memory transport, so virtual time is out of reach. ec2sim answers
// after a per-action latency (Options.Latency). With Options.Cycles the
// columns run side by side and each is measured over whole status cycles
// (cycles.go); the hour is then measured, with the previous derivation
// from a short window printed next to it.
package awsbench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/bench"
	"github.com/cloudgate/cloudgate/bench/measure"
	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/aws/awsbatch"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

// Column names, in table order.
const (
	ColAWS       = "aws"
	ColCloudgate = "aws+cloudgate"
	ColAdapter   = "aws+cloudgate+adapter"
)

// AllColumns are the three columns.
var AllColumns = []string{ColAWS, ColCloudgate, ColAdapter}

// The CCM's defaults (status period, kube client, node workers) are package
// measure's, shared with bench.
const (
	clusterName = "bench"
	describe    = "DescribeInstances"
	// pageSize is the most instances one DescribeInstances page returns
	// (MaxResults 1,000): the cloud's largest batch B of the bound.
	pageSize = 1000
)

// Options are the benchmark's knobs.
type Options struct {
	// Sizes are the steady-state node counts.
	Sizes []int
	// Seeds runs every size and the scale-up with seeds Seed, Seed+1, ...;
	// sizes of at least LargeFrom nodes run LargeSeeds seeds.
	Seeds, LargeSeeds, LargeFrom int
	Seed                         int64
	Columns                      []string
	// Window is the measured steady window, real time, from the
	// controllers' start (the status loop's first round starts at once).
	Window time.Duration
	// ScaleupNodes arrive at once (0: no scale-up); each column gets
	// ScaleupTimeout to initialise them.
	ScaleupNodes   int
	ScaleupTimeout time.Duration
	// Bucket is EC2's DescribeInstances bucket (size, refill per second).
	Bucket ec2sim.Bucket
	// Progress gets a line every few seconds (nil: none).
	Progress io.Writer
	// Latency is ec2sim's per-action latency (zero: none).
	Latency ec2sim.Latency
	// Parallel runs the columns of a steady size, and of a scale-up seed,
	// side by side, each on its own simulated account and cluster.
	Parallel bool
	// Cycles > 0 (needs Parallel): each steady column other than the
	// adapter is measured over this many whole status cycles (a round of N
	// lookups and the period until the next round starts); the adapter
	// column, whose calls come from list refreshes, over the longest of
	// them. Window then caps the run. 0: every column over Window.
	Cycles int
	// DeriveWindow is the start of the window the hour is also derived
	// from, as before the measured cycles (cycles mode only).
	DeriveWindow time.Duration
	// Hour > 0 (needs Cycles): every steady column is also counted over
	// this real-time window, starting Warmup after its controllers' start
	// (hour.go); the cycles of the same run give the derivation it is
	// compared with. The run ends when every window has.
	Hour, Warmup time.Duration
	// SizesParallel runs the steady groups of every size (and seed) side
	// by side (needs Parallel): 3 × len(Sizes) worlds at once.
	SizesParallel bool
	// timeFactor compresses the controllers' periods (tests only, to fit
	// whole status cycles in seconds; 0: real time, as every table runs).
	timeFactor float64
}

// DefaultOptions: 1,000, 5,000 and 20,000 nodes, three seeds (one at
// 20,000), a 20 s window, a 1,000-node scale-up, EC2's documented bucket.
func DefaultOptions() *Options {
	return &Options{
		Sizes: []int{1000, 5000, 20000}, Seeds: 3, LargeSeeds: 1, LargeFrom: 20000, Seed: 1,
		Columns: slices.Clone(AllColumns), Window: 20 * time.Second,
		ScaleupNodes: 1000, ScaleupTimeout: 10 * time.Minute, Bucket: ec2sim.NonMutatingBucket, DeriveWindow: 20 * time.Second,
	}
}

// Validate names the first bad option.
func (o *Options) Validate() error {
	for _, c := range o.Columns {
		if !slices.Contains(AllColumns, c) {
			return fmt.Errorf("-columns: unknown column %q: want %s", c, strings.Join(AllColumns, ", "))
		}
	}
	switch {
	case len(o.Columns) == 0:
		return fmt.Errorf("-columns: name at least one of %s", strings.Join(AllColumns, ", "))
	case o.Seeds < 1 || o.LargeSeeds < 1:
		return fmt.Errorf("-seeds and -large-seeds must be >= 1")
	case o.Window < time.Second:
		return fmt.Errorf("-window must be >= 1s")
	case o.ScaleupNodes < 0 || o.ScaleupTimeout <= 0:
		return fmt.Errorf("-scaleup-nodes must be >= 0 and -scaleup-timeout > 0")
	case o.Bucket.Size < 1 || !(o.Bucket.Refill > 0):
		return fmt.Errorf("-bucket must be >= 1 and -refill > 0")
	case o.Cycles < 0:
		return fmt.Errorf("-cycles must be >= 0")
	case o.Cycles > 0 && !o.Parallel:
		return fmt.Errorf("-cycles needs -parallel (the adapter column is measured over the other columns' window)")
	case o.Cycles > 0 && !slices.ContainsFunc(o.Columns, func(c string) bool { return c != ColAdapter }):
		return fmt.Errorf("-cycles needs a column other than %s (the adapter column's window is theirs)", ColAdapter)
	case o.Cycles > 0 && (o.DeriveWindow <= 0 || o.DeriveWindow > o.Window):
		return fmt.Errorf("-derive-window must be > 0 and <= -table-window")
	case o.Hour < 0 || o.Warmup < 0:
		return fmt.Errorf("-hour and -hour-warmup must be >= 0")
	case o.Hour > 0 && o.Cycles == 0:
		return fmt.Errorf("-hour needs -cycles (the derivation the measured hour is compared with)")
	case o.Hour > 0 && o.Warmup < o.DeriveWindow:
		return fmt.Errorf("-hour-warmup must be >= -derive-window (the derivation's window comes before the measured one)")
	case o.SizesParallel && !o.Parallel:
		return fmt.Errorf("-sizes-parallel needs -parallel")
	}
	if err := validLatency(o.Latency); err != nil {
		return err
	}
	for _, n := range o.Sizes {
		if n < 1 {
			return fmt.Errorf("-sizes: every node count must be >= 1")
		}
	}
	return nil
}

func (o *Options) seedsFor(n int) int {
	if o.LargeFrom > 0 && n >= o.LargeFrom {
		return o.LargeSeeds
	}
	return o.Seeds
}

// SteadyRun is one column's measured steady window.
type SteadyRun struct {
	Nodes  int
	Seed   int64
	Window float64 // seconds, real
	// EC2's counters over the window.
	Describe, Throttled, Other int64
	// Lookups are the controllers' InstanceMetadata calls; LookupRate
	// their rate (calls/s, first to last call of the window).
	Lookups    int64
	LookupRate float64
	// ListPages is what a list refresh of the adapter costs on average,
	// measured by running awsbatch.LegacyRecheck of them after the window
	// (adapter column only): the legacy-tag page is read on one of them.
	ListPages float64
	state     map[string]nodeState
	// Cycles mode (cycles.go): the ends of complete status rounds
	// (seconds from the start), the cycles measured, and the counters at
	// DeriveWindow the previous method derived the hour from.
	RoundEnds []float64
	Cycles    int
	Early     *SteadyRun
	// CycleOpen: the cycles had not ended when an -hour run ended; the
	// counters above are then those of the whole run, not of the cycles.
	CycleOpen bool
	// Hour is the window measured after the warm-up (Options.Hour).
	Hour *HourRun
}

// ScaleupRun is one column's scale-up.
type ScaleupRun struct {
	Seed                  int64
	Initialized, Expected int
	// Seconds until every node was initialised (NaN: timed out).
	Seconds                    float64
	Describe, Throttled, Other int64
	state                      map[string]nodeState
}

// Result is the whole benchmark.
type Result struct {
	Options *Options
	Steady  map[string][]SteadyRun // by column
	Scaleup map[string][]ScaleupRun
	Bound   *bench.Bound
	// StateChecks: per scenario ("steady/N", "scaleup"), the nodes whose
	// state (provider ID, labels, addresses, taints) was compared across
	// columns per seed, and how many differed.
	StateChecks []StateCheck
	Started     time.Time
	Load        [2]string // uptime at start and end
	// LoadSamples are the 1-min load averages sampled every minute while
	// steady runs went (hour mode only).
	LoadSamples []float64
	// Commit is the source revision (vcs.revision of the build; "" unknown).
	Commit string
}

// StateCheck is one node-state comparison across the columns of one seed.
type StateCheck struct {
	Scenario string
	Seed     int64
	Nodes    int // nodes compared (in every column)
	Differ   int // nodes whose state differs in some column, or missing
}

// Run runs o and returns the result.
func Run(ctx context.Context, o *Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	setAWSEnv()
	res := &Result{Options: o, Steady: map[string][]SteadyRun{}, Scaleup: map[string][]ScaleupRun{}, Started: time.Now()}
	res.Load[0] = uptime()
	res.Commit = commit()
	if err := runSteadies(ctx, o, res, progress); err != nil {
		return nil, err
	}
	if o.ScaleupNodes > 0 {
		res.Bound = bench.InitBound(&bench.Options{
			ReadQPS: o.Bucket.Refill, ReadBurst: o.Bucket.Size, CloudMaxBatch: pageSize, KubeQPS: measure.KubeQPS, KubeBurst: measure.KubeBurst,
			Latency: o.Latency.Default.Base, // RTT: the least a round trip takes (a lower bound)
		}, o.ScaleupNodes)
		for s := range o.Seeds {
			seed := o.Seed + int64(s)
			states := map[string]map[string]nodeState{}
			runs, err := runScaleups(ctx, o, seed, progress)
			if err != nil {
				return nil, err
			}
			for i, col := range o.Columns {
				states[col] = runs[i].state
				res.Scaleup[col] = append(res.Scaleup[col], *runs[i])
			}
			res.StateChecks = append(res.StateChecks, compareStates("scaleup", seed, o.Columns, states))
		}
	}
	res.Load[1] = uptime()
	return res, nil
}

// setAWSEnv: static credentials, no instance-metadata service, no shared
// config; the provider reaches ec2sim through its own [ServiceOverride].
func setAWSEnv() {
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": ec2sim.AccessKeyID, "AWS_SECRET_ACCESS_KEY": ec2sim.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		os.Setenv(k, v)
	}
}

func uptime() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// rig is one column on a fresh simulated EC2 and cluster.
type rig struct {
	sim     *ec2sim.Server
	cluster *bench.Cluster
	count   *counting
	lister  provider.InstanceLister // adapter column only
}

func (r *rig) close() {
	r.cluster.Stop()
	r.sim.Close()
}

func newRig(o *Options, col string, seed int64) (*rig, error) {
	lat := o.Latency
	lat.Seed = uint64(seed)
	sim, err := ec2sim.Start(ec2sim.Config{Region: region, Zones: zones, Default: o.Bucket, Latency: lat})
	if err != nil {
		return nil, err
	}
	conf := []byte(fmt.Sprintf(`[Global]
Zone = us-east-1a
VPC = vpc-0sim
SubnetID = subnet-0sim
KubernetesClusterID = %s

[ServiceOverride "1"]
Service = EC2
Region = us-east-1
URL = %s
SigningRegion = us-east-1
SigningName = ec2
`, clusterName, sim.URL))
	r := &rig{sim: sim}
	cloud, err := buildColumn(o, col, conf, r)
	if err != nil {
		sim.Close()
		return nil, err
	}
	r.count = &counting{Interface: cloud, done: make(chan struct{})}
	r.cluster, err = bench.NewCluster(bench.ClusterConfig{
		Name: clusterName, Ground: newGround(sim, seed), Cloud: r.count, TimeFactor: max(1, o.timeFactor),
		NodeWorkers: measure.NodeWorkers, ServiceWorkers: 1, KubeQPS: measure.KubeQPS, KubeBurst: measure.KubeBurst,
		NoRoutes: true, CloudInit: true,
	})
	if err != nil {
		sim.Close()
		return nil, err
	}
	return r, nil
}

// buildColumn is the column's provider: the AWS provider from its own
// cloud config, alone or behind cloudgate's DefaultConfig with the read
// limit at EC2's bucket (as an operator would set it).
func buildColumn(o *Options, col string, conf []byte, r *rig) (cloudprovider.Interface, error) {
	cfg := provider.DefaultConfig()
	cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = o.Bucket.Refill, o.Bucket.Size
	cfg.Metrics = metrics.New()
	switch col {
	case ColAWS:
		return cloudprovider.GetCloudProvider("aws", strings.NewReader(string(conf)))
	case ColCloudgate:
		up, err := cloudprovider.GetCloudProvider("aws", strings.NewReader(string(conf)))
		if err != nil {
			return nil, err
		}
		off := false
		cfg.Batch.Enabled = &off // the upstream has no batch interface anyway
		return provider.New(up, cfg)
	case ColAdapter:
		up, err := awsbatch.New(conf)
		if err != nil {
			return nil, err
		}
		v2, _ := up.InstancesV2()
		lister, ok := v2.(provider.InstanceLister)
		if !ok {
			return nil, fmt.Errorf("awsbatch's InstancesV2 is not a provider.InstanceLister")
		}
		r.lister = lister
		cfg.Batch.ListPrefetch = true
		return provider.New(up, cfg)
	}
	return nil, fmt.Errorf("unknown column %q", col)
}

// ec2Counts are EC2's counters: DescribeInstances' requests and
// throttles, and the requests of every other EC2 action. The load
// balancing APIs' actions are not EC2's: they have their own quota.
func (r *rig) ec2Counts() (calls, throttled, other int64) {
	for action, st := range r.sim.AllStats() {
		switch {
		case action == describe:
			calls, throttled = st.Requests, st.Throttled
		case ec2sim.IsEC2Action(action):
			other += st.Requests
		}
	}
	return calls, throttled, other
}

func runSteady(ctx context.Context, o *Options, col string, n int, seed int64, progress io.Writer) (*SteadyRun, error) {
	r, err := newRig(o, col, seed)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if _, err := r.cluster.AddNodes(n, true, false); err != nil {
		return nil, err
	}
	r.sim.ResetStats() // from the cloud's start: the adapter's first list refresh included
	if err := r.cluster.Start(); err != nil {
		return nil, err
	}
	start := time.Now()
	r.count.setStart(start)
	label := fmt.Sprintf("steady %d/%s seed %d", n, col, seed)
	if err := bench.Wait(ctx, o.Window, func() {
		d, t, _ := r.ec2Counts()
		fmt.Fprintf(progress, "  %s: t=%.0fs, %d lookups, %d DescribeInstances, %d throttled\n", label, time.Since(start).Seconds(), r.count.lookups.Load(), d, t)
	}); err != nil {
		return nil, err
	}
	res := &SteadyRun{Nodes: n, Seed: seed, Window: time.Since(start).Seconds()}
	res.Describe, res.Throttled, res.Other = r.ec2Counts()
	res.Lookups, res.LookupRate = r.count.rate()
	if r.lister != nil {
		if res.ListPages, err = listPagesPerRefresh(ctx, r); err != nil {
			return nil, err
		}
	}
	if res.state, err = nodeStates(r.cluster); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "%s: %d DescribeInstances, %d throttled, %d lookups (%.1f/s) in %.1fs\n", label, res.Describe, res.Throttled, res.Lookups, res.LookupRate, res.Window)
	return res, nil
}

func runScaleup(ctx context.Context, o *Options, col string, seed int64, progress io.Writer) (*ScaleupRun, error) {
	r, err := newRig(o, col, seed)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := r.cluster.Start(); err != nil {
		return nil, err
	}
	// Let the provider and cloudgate settle (the adapter's first list
	// refresh, of no instances) before the nodes arrive.
	if err := bench.Wait(ctx, 2*time.Second, func() {}); err != nil {
		return nil, err
	}
	r.sim.ResetStats()
	k := o.ScaleupNodes
	label := fmt.Sprintf("scaleup %d/%s seed %d", k, col, seed)
	start := time.Now()
	if _, err := r.cluster.AddNodes(k, false, false); err != nil {
		return nil, err
	}
	res := &ScaleupRun{Seed: seed, Expected: k, Seconds: math.NaN()}
	deadline := start.Add(o.ScaleupTimeout)
	lastPrint := start
	for {
		nodes, err := r.cluster.Nodes()
		if err != nil {
			return nil, err
		}
		res.Initialized = 0
		for i := range nodes {
			if initialized(&nodes[i]) {
				res.Initialized++
			}
		}
		if res.Initialized == k {
			res.Seconds = time.Since(start).Seconds()
			break
		}
		if time.Now().After(deadline) {
			break
		}
		if time.Since(lastPrint) > 5*time.Second {
			lastPrint = time.Now()
			d, t, _ := r.ec2Counts()
			fmt.Fprintf(progress, "  %s: t=%.0fs, %d/%d initialized, %d DescribeInstances, %d throttled\n", label, time.Since(start).Seconds(), res.Initialized, k, d, t)
		}
		if err := bench.Wait(ctx, 100*time.Millisecond, func() {}); err != nil {
			return nil, err
		}
	}
	res.Describe, res.Throttled, res.Other = r.ec2Counts()
	if res.state, err = nodeStates(r.cluster); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "%s: %d/%d initialized in %.1fs, %d DescribeInstances, %d throttled\n", label, res.Initialized, k, res.Seconds, res.Describe, res.Throttled)
	return res, nil
}

func initialized(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return false
		}
	}
	return len(n.Status.Addresses) > 0
}

// nodeState is what the columns must agree on.
type nodeState struct {
	ProviderID string
	Labels     map[string]string
	Addresses  []v1.NodeAddress
	Taints     []v1.Taint
}

func nodeStates(c *bench.Cluster) (map[string]nodeState, error) {
	nodes, err := c.Nodes()
	if err != nil {
		return nil, err
	}
	out := make(map[string]nodeState, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		st := nodeState{ProviderID: n.Spec.ProviderID, Labels: n.Labels, Addresses: n.Status.Addresses}
		for _, t := range n.Spec.Taints {
			t.TimeAdded = nil // when, not what
			st.Taints = append(st.Taints, t)
		}
		if len(st.Addresses) == 0 {
			st.Addresses = nil
		}
		out[n.Name] = st
	}
	return out, nil
}

// compareStates compares every node's state in every column with the
// first column's.
func compareStates(scenario string, seed int64, cols []string, states map[string]map[string]nodeState) StateCheck {
	sc := StateCheck{Scenario: scenario, Seed: seed}
	names := map[string]bool{}
	for _, col := range cols {
		for name := range states[col] {
			names[name] = true
		}
	}
	for name := range names {
		sc.Nodes++
		ref, ok := states[cols[0]][name]
		same := ok
		for _, col := range cols[1:] {
			st, ok := states[col][name]
			same = same && ok && reflect.DeepEqual(st, ref)
		}
		if !same {
			sc.Differ++
		}
	}
	return sc
}

// sortedSizes are the steady sizes in the result, ascending.
func (r *Result) sortedSizes() []int {
	seen := map[int]bool{}
	for _, runs := range r.Steady {
		for _, s := range runs {
			seen[s.Nodes] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}
