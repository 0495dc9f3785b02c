// Package bench is cloudgate's load benchmark: it drives the real
// cloud-controller-manager controllers (node, node lifecycle, route,
// service) from k8s.io/cloud-provider against a fake API server and the
// quota-limited simulated cloud (bench/simcloud), and compares, in the same
// run, on the same simulated cloud and seed, five columns:
//
//   - bare: the simcloud provider as a CCM runs it by default
//     (--concurrent-node-syncs=1, kube client 20 QPS / burst 30), with no
//     client-side limit or retry;
//   - bare+client: the same provider with a provider-typical client (a token
//     bucket at the quota, Retry-After honoured in whole seconds, bounded
//     retries with backoff);
//   - cloudgate:cache: cloudgate's DefaultConfig (limits at the quota) over
//     a provider that implements neither batching nor listing: what any
//     unmodified provider gets;
//   - cloudgate:batch: the same over a provider that implements
//     provider.BatchInstances;
//   - cloudgate:list: the same with batch.listPrefetch over a provider that
//     also implements provider.InstanceLister.
//
// Each column runs the same simulated time, or until quiescence, and
// reports the time to each condition next to a lower bound with its
// formula. bench/cmd/cloudgate-bench is the command line; docs/bench.md explains
// the scenarios.
//
// Time is virtual: Run must be called inside a testing/synctest bubble
// (package bench/virtual hosts one, for a command as for a test), where the
// clock advances only when every goroutine of the simulated world is
// durably blocked. Controller periods, quotas, latencies and cloudgate's
// durations are the real ones, uncompressed, and the machine's speed or
// load cannot change a figure. The simulated cloud is served in memory
// (no socket: a goroutine blocked on one would stall the clock). The
// fleet scenario (RunFleet) is the exception: its limiter runs on a real
// redis-server's clock, so it runs in real time.
package bench

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloudgate/cloudgate/bench/measure"
	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/provider"
)

// Scenario names.
const (
	ScenarioSteady  = "steady"
	ScenarioScaleup = "scaleup"
	ScenarioChurn   = "churn"
	ScenarioChaos   = "chaos"
	// ScenarioChaosZone is the chaos zone-outage variant (chaos_zone.go).
	ScenarioChaosZone = "chaos-zone"
	// ScenarioStress is scaleup with 100 node workers: not a CCM default,
	// a stress case.
	ScenarioStress = "stress"
	// ScenarioSweep is steady at every SweepNodes count.
	ScenarioSweep = "sweep"
	// ScenarioScale is the steady status sweep at every ScaleNodes count,
	// measured per round (scale.go; RunScale, not Run): not a default.
	ScenarioScale = "scale"
)

// DefaultScenarios are run when none is named.
var DefaultScenarios = []string{ScenarioSteady, ScenarioScaleup, ScenarioChurn}

// Column names.
const (
	ColBare       = "bare"
	ColBareClient = "bare+client"
	ColCache      = "cloudgate:cache"
	ColBatch      = "cloudgate:batch"
	ColList       = "cloudgate:list"
	// ColConfig is the column of a user's --config (with --upstream-supports).
	ColConfig = "cloudgate:config"
	// ColShadow is cloudgate:batch in mode: shadow, and ColShadowCache
	// cloudgate:cache in mode: shadow (shadow.go): the upstream gets every
	// call as in bare; Side.ShadowCalls is what cloudgate predicts.
	ColShadow      = "cloudgate:shadow"
	ColShadowCache = "cloudgate:shadow-cache"
)

// AllColumns are the default columns, in table order.
var AllColumns = []string{ColBare, ColBareClient, ColCache, ColBatch, ColList}

// Upstream capabilities (--upstream-supports).
const (
	SupportsNone  = "none"
	SupportsBatch = "batch"
	SupportsList  = "list" // list implies batch
)

// Options are the benchmark's knobs. Rates and durations are simulated.
type Options struct {
	Scenarios []string
	Columns   []string
	// Seeds runs every scenario this many times (seeds Seed, Seed+1, ...)
	// and reports medians and spreads.
	Seeds int
	Seed  int64

	// Nodes, Services and NotReadyPct size the steady cluster.
	Nodes       int
	Services    int
	NotReadyPct float64
	// SteadyWindow is the measured steady-state window, after the first
	// full resync (one status period plus one minute).
	SteadyWindow time.Duration
	// SteadyChurn Nodes join and as many Ready ones leave every
	// SteadyChurnEvery, from the controllers' start through the steady
	// window (0: none): a cluster's everyday turnover, as
	// make bench-real-aws runs it. A joining Node is uninitialised; a
	// leaving one's instance is gone and the Node NotReady, so the
	// lifecycle controller deletes it.
	SteadyChurn      int
	SteadyChurnEvery time.Duration
	// StatusPeriod is the CCM's --node-status-update-frequency (0: its
	// 5-minute default).
	StatusPeriod time.Duration
	// NoRoutes runs the CCM without its route controller
	// (--configure-cloud-routes=false, as the AWS charts install it).
	NoRoutes bool

	// ScaleupNodes is K, the nodes that arrive at once in scaleup (and stress).
	ScaleupNodes int
	// StressWorkers is --concurrent-node-syncs of the stress scenario.
	StressWorkers int
	// QuiesceTimeout caps how long a column may take to reach quiescence
	// (the same cap for every column).
	QuiesceTimeout time.Duration

	// Churn: ChurnNodes nodes; ChurnRate join and as many leave every
	// ChurnInterval for ChurnDuration, then the drain until quiescence.
	ChurnNodes    int
	ChurnRate     int
	ChurnInterval time.Duration
	ChurnDuration time.Duration

	// ChaosNodes is the chaos cluster's size.
	ChaosNodes int
	// ChaosZoneNodes is the chaos-zone cluster's size (a third goes down).
	ChaosZoneNodes int
	// ChaosTimeline records and prints each chaos column's timeline from
	// the outage's start to quiescence (a debug output; JSON "timeline").
	ChaosTimeline bool

	// SweepNodes are the node counts of the sweep scenario.
	SweepNodes []int

	// ScaleNodes are the node counts of the scale scenario; ScaleWindow
	// is the least simulated time its measured rounds cover at each (at
	// least one round, whatever its length).
	ScaleNodes  []int
	ScaleWindow time.Duration
	// ScaleServices are the scale clusters' LB services (default 0: the
	// v0.37.2 service controller syncs every LB service once per Node key
	// at start-up, N x M comparisons of N nodes at one virtual instant).
	ScaleServices int
	// ScaleFullCCM also runs the route and node lifecycle controllers in
	// the scale scenario (off by default: see scale.go).
	ScaleFullCCM bool
	// ScaleRepeats runs every column this many times per size and
	// reports the median run with the spread (the sweep order is random).
	ScaleRepeats int

	// The simulated cloud: quota (calls per second, bursts in calls), its
	// largest batch and list page, and its latency (base + uniform jitter).
	ReadQPS, WriteQPS     float64
	ReadBurst, WriteBurst int
	CloudMaxBatch         int
	// CloudListPage is the simulated cloud's ListInstances page size (0:
	// simcloud.DefaultListPageSize).
	CloudListPage   int
	Latency, Jitter time.Duration
	// CloudListTrailingPage, CloudListTrailingEvery, CloudListAlive and
	// CloudLBSnapshot are the upstream's own calls of the aws profile
	// (simcloud.ClientConfig's ListTrailingPage, ListTrailingEvery,
	// ListAlive and LBInstanceSnapshot).
	CloudListTrailingPage  bool
	CloudListTrailingEvery int
	CloudListAlive         bool
	CloudLBSnapshot        time.Duration
	// CloudTerminates: a Node leaving in the steady churn leaves its
	// instance terminated, still described (EC2), instead of deleted.
	CloudTerminates bool
	// CloudProviderBatcher is the bare columns' provider's own batching of
	// lookups by ID (simcloud.ClientConfig.IDBatcher).
	CloudProviderBatcher simcloud.IDBatcher

	// The CCM: kube client QPS/burst per controller, workers.
	KubeQPS        float64
	KubeBurst      int
	NodeWorkers    int
	ServiceWorkers int

	// ConfigFile is a cloudgate.yaml to benchmark (column cloudgate:config)
	// instead of the three default cloudgate columns; UpstreamSupports is
	// what the user's provider implements (none, batch, list): only that is
	// simulated.
	ConfigFile       string
	UpstreamSupports string

	// Sample is how often (simulated) the time series are sampled; 0 picks
	// about 300 points per run.
	Sample time.Duration

	// Meter (may be nil) shows each scenario's share of runs done and the
	// real time left.
	Meter *Meter

	onRegistry func(*prometheus.Registry)
}

// DefaultOptions is the full sweep (cloudgate-bench --full, bench/RESULTS.md): 2,000 nodes and 20 services in
// steady (1 h window; 5,000 and more with --nodes or the sweep, at a lower
// time factor for fidelity), 1,000 nodes scaling up, 1,000 churning; a cloud
// allowing 20 reads/s (burst 20) and 5 writes/s (burst 5) with 50 ms ± 20 ms
// latency; the CCM's defaults; one seed.
func DefaultOptions() *Options {
	return &Options{
		Scenarios: slices.Clone(DefaultScenarios),
		Columns:   slices.Clone(AllColumns),
		Seeds:     1,
		Seed:      1,
		Nodes:     2000,
		Services:  20,
		// 1 % NotReady: the lifecycle controller's 5 s checks of NotReady
		// Nodes dominate a real cluster's steady reads.
		NotReadyPct:      1,
		SteadyWindow:     time.Hour,
		ScaleupNodes:     1000,
		StressWorkers:    100,
		QuiesceTimeout:   15 * time.Minute,
		ChurnNodes:       1000,
		ChurnRate:        10,
		ChurnInterval:    30 * time.Second,
		ChurnDuration:    6 * time.Minute,
		ChaosNodes:       200,
		ChaosZoneNodes:   900,
		SweepNodes:       []int{1000, 5000, 20000, 50000},
		ScaleNodes:       []int{1000, 5000, 20000, 50000, 100000},
		ScaleWindow:      30 * time.Minute,
		ScaleRepeats:     1,
		ReadQPS:          20,
		ReadBurst:        20,
		WriteQPS:         5,
		WriteBurst:       5,
		CloudMaxBatch:    500,
		Latency:          50 * time.Millisecond,
		Jitter:           20 * time.Millisecond,
		KubeQPS:          measure.KubeQPS, // the CCM's defaults
		KubeBurst:        measure.KubeBurst,
		NodeWorkers:      measure.NodeWorkers,
		ServiceWorkers:   1,
		UpstreamSupports: SupportsNone,
	}
}

// QuickOptions is make run's first run: DefaultOptions with smaller
// clusters and windows (1,000 steady nodes for 30 min, 500 scaling up,
// 500 churning for 3 min), so that it fits a coffee break on 2 cores.
// The full sweep (DefaultOptions, cloudgate-bench --full) is what
// bench/RESULTS.md reports.
func QuickOptions() *Options {
	o := DefaultOptions()
	o.Nodes = 1000
	o.SteadyWindow = 30 * time.Minute
	o.ScaleupNodes = 500
	o.ChurnNodes = 500
	o.ChurnDuration = 3 * time.Minute
	return o
}

// Validate names the first bad option and how to fix it.
func (o *Options) Validate() error {
	if len(o.Scenarios) == 0 {
		return errors.New("--scenario: name at least one of steady, scaleup, churn, chaos, chaos-zone, stress, sweep, scale")
	}
	for _, s := range o.Scenarios {
		switch s {
		case ScenarioSteady, ScenarioScaleup, ScenarioChurn, ScenarioChaos, ScenarioChaosZone, ScenarioStress, ScenarioSweep:
		case ScenarioScale:
			if len(o.Scenarios) > 1 {
				return errScaleAlone
			}
		default:
			return fmt.Errorf("--scenario: unknown scenario %q: want steady, scaleup, churn, chaos, chaos-zone, stress, sweep or scale", s)
		}
	}
	if len(o.Columns) == 0 {
		return errors.New("--columns: name at least one column")
	}
	for _, c := range o.Columns {
		if !slices.Contains(AllColumns, c) && c != ColConfig && c != ColShadow && c != ColShadowCache {
			return fmt.Errorf("--columns: unknown column %q: want bare, bare+client, cloudgate:cache, cloudgate:batch, cloudgate:list, cloudgate:shadow, cloudgate:shadow-cache (or cloudgate:config with --config)", c)
		}
		if c == ColConfig && o.ConfigFile == "" {
			return errors.New("--columns: cloudgate:config needs --config FILE")
		}
	}
	switch o.UpstreamSupports {
	case SupportsNone, SupportsBatch, SupportsList:
	default:
		return fmt.Errorf("--upstream-supports: %q: want none, batch or list", o.UpstreamSupports)
	}
	switch {
	case o.Seeds < 1:
		return errors.New("--seeds must be >= 1")
	case o.NotReadyPct < 0 || o.NotReadyPct > 100:
		return errors.New("--not-ready-pct must be between 0 and 100")
	case o.Nodes < 1 || o.ScaleupNodes < 1 || o.ChurnNodes < 1:
		return errors.New("--nodes, --scaleup-nodes and --churn-nodes must be >= 1")
	case o.ChaosNodes < 20:
		return errors.New("--chaos-nodes must be >= 20")
	case o.ChaosZoneNodes < 60:
		return errors.New("--chaos-zone-nodes must be >= 60")
	case o.StatusPeriod < 0:
		return errors.New("--status-period must be >= 0 (0: the CCM's 5m default)")
	case o.SteadyChurn < 0 || (o.SteadyChurn > 0 && o.SteadyChurnEvery <= 0):
		return errors.New("--steady-churn must be >= 0, and with it --steady-churn-every > 0 (e.g. 5m)")
	case o.Services < 0 || o.ScaleServices < 0:
		return errors.New("--services and --scale-services must be >= 0")
	case !(o.ReadQPS > 0) || !(o.WriteQPS > 0) || o.ReadBurst < 1 || o.WriteBurst < 1:
		return errors.New("--read-qps and --write-qps must be > 0, --read-burst and --write-burst >= 1")
	case o.CloudMaxBatch < 1:
		return errors.New("--cloud-max-batch must be >= 1")
	case o.Latency < 0 || o.Jitter < 0:
		return errors.New("--latency and --jitter must be >= 0")
	case !(o.KubeQPS > 0) || o.KubeBurst < 1:
		return errors.New("--kube-qps must be > 0 and --kube-burst >= 1")
	case o.NodeWorkers < 1 || o.ServiceWorkers < 1 || o.StressWorkers < 1:
		return errors.New("--node-workers, --service-workers and --stress-workers must be >= 1")
	case o.SteadyWindow < time.Minute || o.ChurnDuration <= 0 || o.ChurnInterval <= 0 || o.QuiesceTimeout <= 0:
		return errors.New("--steady-window must be >= 1m; --churn-duration, --churn-interval and --quiesce-timeout > 0")
	case o.Sample < 0:
		return errors.New("--sample must be >= 0")
	}
	for _, n := range o.SweepNodes {
		if n < 1 {
			return errors.New("--sweep-nodes: every count must be >= 1")
		}
	}
	for _, n := range o.ScaleNodes {
		if n < 1 {
			return errors.New("--scale-nodes: every count must be >= 1")
		}
	}
	if o.ScaleRepeats < 1 {
		return errors.New("--scale-repeats must be >= 1")
	}
	if o.ScaleWindow < 0 {
		return errors.New("--scale-window must be >= 0 (0 measures one round per size)")
	}
	if o.ConfigFile != "" {
		if _, err := o.cloudgateConfig(ColConfig); err != nil {
			return err
		}
	}
	return nil
}

// clientTimeout is the simcloud client's per-request timeout.
const clientTimeout = 10 * time.Second

// upstreamSupports is what the column's upstream implements.
func (o *Options) upstreamSupports(col string) string {
	switch col {
	case ColCache, ColShadowCache:
		return SupportsNone
	case ColBatch, ColShadow:
		return SupportsBatch
	case ColList:
		return SupportsList
	case ColConfig:
		return o.UpstreamSupports
	}
	return SupportsList // bare columns: the provider as it is (unused)
}

// cloudgateConfig is a cloudgate column's policy: for the default columns DefaultConfig() with limits set to the simulated quota
// (as an operator would set them), batching off for cloudgate:cache and
// list prefetch on for cloudgate:list; for cloudgate:config the user's file.
func (o *Options) cloudgateConfig(col string) (*provider.Config, error) {
	var cfg *provider.Config
	if col == ColConfig {
		fh, err := os.Open(o.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		defer fh.Close()
		if cfg, err = provider.LoadConfig(fh); err != nil {
			return nil, fmt.Errorf("--config %s: %w", o.ConfigFile, err)
		}
	} else {
		cfg = provider.DefaultConfig()
		// README's advice: the rate 10 % below the quota (arrival jitter
		// otherwise meets the cloud's bucket empty now and then).
		cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = o.ReadQPS*quotaHeadroom, o.ReadBurst
		cfg.Limits.Write.QPS, cfg.Limits.Write.Burst = o.WriteQPS*quotaHeadroom, o.WriteBurst
		off := false
		switch col {
		case ColCache, ColShadowCache:
			cfg.Batch.Enabled = &off
		case ColList:
			cfg.Batch.ListPrefetch = true
		}
		if col == ColShadow || col == ColShadowCache {
			cfg.Mode = provider.ModeShadow
		}
	}
	cfg.Upstream = provider.UpstreamConfig{}
	methods := map[string]provider.MethodConfig{}
	for name, ttl := range provider.DefaultTTLs() {
		methods[name] = provider.MethodConfig{TTL: &provider.Duration{Duration: ttl}}
	}
	for name, m := range cfg.Methods {
		methods[name] = m
	}
	cfg.Methods = methods
	return cfg, cfg.Validate()
}

// policyString describes the cloudgate columns' policy.
func policyString(o *Options) string {
	if o.ConfigFile != "" {
		return fmt.Sprintf("cloudgate:config from %s, upstream implements %s", o.ConfigFile, o.UpstreamSupports)
	}
	return fmt.Sprintf("DefaultConfig() with limits.read %g/s burst %d and limits.write %g/s burst %d (90 %% of the quota's rate, README's headroom); "+
		"cache: batching off (upstream implements neither batch nor list); batch: batching on (upstream implements BatchInstances); "+
		"list: batching on + batch.listPrefetch (upstream implements BatchInstances and InstanceLister)",
		o.ReadQPS*quotaHeadroom, o.ReadBurst, o.WriteQPS*quotaHeadroom, o.WriteBurst)
}

// OnRegistry makes the benchmark tell fn each cloudgate run's metrics
// registry when the run starts (cloudgate-bench --metrics-addr serves it).
func OnRegistry(o *Options, fn func(*prometheus.Registry)) { o.onRegistry = fn }

// quotaHeadroom is the share of the quota the default cloudgate columns
// configure as their rate (README: "Headroom below the quota").
const quotaHeadroom = 0.9

// statusPeriod is the status loop's period: StatusPeriod or the CCM's
// default.
func (o *Options) statusPeriod() time.Duration {
	if o.StatusPeriod > 0 {
		return o.StatusPeriod
	}
	return nodeStatusUpdateFrequency
}
