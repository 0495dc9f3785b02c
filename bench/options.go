// Package bench is cloudgate's load benchmark: it drives the real
// cloud-controller-manager controllers (node, node lifecycle, route,
// service) from k8s.io/cloud-provider against a fake API server and the
// quota-limited simulated cloud (bench/simcloud), once with the bare
// simcloud provider and once with cloudgate in front of it, and reports
// upstream calls, throttling, controller-visible errors and latency side
// by side. cmd/cloudgate-bench is its command line; docs/bench.md explains
// the scenarios and how to benchmark your own cloudgate.yaml.
//
// Time is compressed by Options.TimeFactor: every controller period and
// every cloudgate duration is divided by it, every quota multiplied by it,
// and every reported time is in simulated seconds (real seconds × factor).
package bench

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cloudgate/cloudgate/provider"
)

// Scenario names.
const (
	ScenarioSteady  = "steady"
	ScenarioScaleup = "scaleup"
	ScenarioChurn   = "churn"
)

// DefaultScenarios are run when none is named.
var DefaultScenarios = []string{ScenarioSteady, ScenarioScaleup, ScenarioChurn}

const (
	sideBare      = "bare"
	sideCloudgate = "cloudgate"
)

// Options are the benchmark's knobs. Rates and durations are in simulated
// time; DefaultOptions gives a run of about a minute on two cores.
type Options struct {
	Scenarios []string
	// Nodes and Services size the steady and churn clusters.
	Nodes    int
	Services int
	// ScaleupNodes is K, the nodes that arrive at once in scaleup.
	ScaleupNodes int
	// ChurnNodes is the base cluster of churn; ChurnRate nodes join and
	// as many leave every ChurnInterval.
	ChurnNodes    int
	ChurnRate     int
	ChurnInterval time.Duration
	// ChaosNodes is the chaos cluster's size.
	ChaosNodes int
	// NotReady nodes of the steady cluster are NotReady (their instances
	// alive): the lifecycle controller checks each every monitor period.
	NotReady int
	// Sides to run: "bare", "cloudgate" or both (default).
	Sides []string
	// SteadyDuration and ChurnDuration are simulated run lengths.
	SteadyDuration time.Duration
	ChurnDuration  time.Duration
	// ScaleupTimeout bounds the wait for all K nodes (simulated).
	ScaleupTimeout time.Duration

	// The simulated cloud's quota (calls per simulated second; bursts in calls).
	ReadQPS    float64
	ReadBurst  int
	WriteQPS   float64
	WriteBurst int

	// TimeFactor compresses time (see the package doc) in steady, churn and
	// chaos. ScaleupTimeFactor is scaleup's: it has no period to compress,
	// and its physical limit ceil(K/B)/Q shrinks with the factor below what
	// the fake API server's CPU cost allows, so it runs in real time (1)
	// by default, the bare side cut off at ScaleupTimeout.
	TimeFactor        float64
	ScaleupTimeFactor float64
	// NodeWorkers is --concurrent-node-syncs (and status updates);
	// ServiceWorkers is --concurrent-service-syncs.
	NodeWorkers    int
	ServiceWorkers int
	Seed           int64

	// ConfigFile is a cloudgate.yaml to benchmark instead of the default
	// policy; its upstream is ignored (the simulated cloud is used).
	ConfigFile string

	// onRegistry is told each cloudgate run's metrics registry (for
	// --metrics-addr).
	onRegistry func(*prometheus.Registry)
}

// DefaultOptions is the default run: 5,000 nodes, 20 services, 1,000 nodes
// scaling up, a cloud allowing 20 reads/s and 5 writes/s, time ×60.
func DefaultOptions() *Options {
	return &Options{
		Scenarios:         append([]string(nil), DefaultScenarios...),
		Sides:             []string{sideBare, sideCloudgate},
		Nodes:             5000,
		Services:          20,
		ScaleupNodes:      1000,
		ChaosNodes:        200,
		ChurnNodes:        1000,
		ChurnRate:         10,
		ChurnInterval:     30 * time.Second,
		SteadyDuration:    11 * time.Minute,
		ChurnDuration:     6 * time.Minute,
		ScaleupTimeout:    time.Minute,
		ReadQPS:           20,
		ReadBurst:         20,
		WriteQPS:          5,
		WriteBurst:        5,
		TimeFactor:        60,
		ScaleupTimeFactor: 1,
		NodeWorkers:       100,
		ServiceWorkers:    1,
		Seed:              1,
	}
}

// Validate names the first bad option.
func (o *Options) Validate() error {
	if len(o.Scenarios) == 0 {
		return errors.New("no scenario: name at least one of steady, scaleup, churn")
	}
	for _, s := range o.Scenarios {
		switch s {
		case ScenarioSteady, ScenarioScaleup, ScenarioChurn, ScenarioChaos:
		default:
			return fmt.Errorf("unknown scenario %q: want steady, scaleup, churn or chaos", s)
		}
	}
	if len(o.Sides) == 0 {
		return errors.New("no side: want bare, cloudgate or both")
	}
	for _, s := range o.Sides {
		if s != sideBare && s != sideCloudgate {
			return fmt.Errorf("unknown side %q: want bare or cloudgate", s)
		}
	}
	switch {
	case o.NotReady < 0 || o.NotReady > o.Nodes:
		return errors.New("not-ready must be between 0 and nodes")
	case o.Nodes < 1 || o.ScaleupNodes < 1 || o.ChurnNodes < 1:
		return errors.New("nodes, scaleup-nodes and churn-nodes must be >= 1")
	case o.ChaosNodes < 10:
		return errors.New("chaos-nodes must be >= 10")
	case o.Services < 0:
		return errors.New("services must be >= 0")
	case !(o.ReadQPS > 0) || !(o.WriteQPS > 0) || o.ReadBurst < 1 || o.WriteBurst < 1:
		return errors.New("read-qps and write-qps must be > 0, bursts >= 1")
	case !(o.TimeFactor >= 1) || !(o.ScaleupTimeFactor >= 1):
		return errors.New("time-factor and scaleup-time-factor must be >= 1")
	case o.NodeWorkers < 1 || o.ServiceWorkers < 1:
		return errors.New("node-workers and service-workers must be >= 1")
	case o.SteadyDuration <= 0 || o.ChurnDuration <= 0 || o.ChurnInterval <= 0 || o.ScaleupTimeout <= 0:
		return errors.New("durations must be > 0")
	}
	if o.ConfigFile != "" {
		if _, err := o.cloudgateConfig(); err != nil {
			return err
		}
	}
	return nil
}

// real converts a simulated duration to real time.
func (o *Options) real(d time.Duration) time.Duration { return scale(d, o.TimeFactor) }

// clientTimeout is the simcloud client's per-request timeout: 10 s simulated,
// at least 1 s real.
func (o *Options) clientTimeout() time.Duration {
	return max(o.real(10*time.Second), time.Second)
}

// defaultTTLs mirrors the default TTLs of provider/methods.go for the
// methods the controllers use, so they can be compressed with the rest.
var defaultTTLs = map[string]time.Duration{
	"InstanceExists":   time.Minute,
	"InstanceShutdown": 30 * time.Second,
	"InstanceMetadata": 10 * time.Minute,
	"GetLoadBalancer":  2 * time.Minute,
	"ListRoutes":       time.Minute,
}

// cloudgateConfig is the cloudgate policy of the benchmark: the user's
// cloudgate.yaml, or the defaults with limits just below the simulated
// cloud's quota and list prefetch on. Every duration is compressed and
// every rate multiplied by the time factor.
func (o *Options) cloudgateConfig() (*provider.Config, error) {
	var cfg *provider.Config
	if o.ConfigFile != "" {
		f, err := os.Open(o.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("--config: %w", err)
		}
		defer f.Close()
		if cfg, err = provider.LoadConfig(f); err != nil {
			return nil, fmt.Errorf("--config %s: %w", o.ConfigFile, err)
		}
	} else {
		cfg = provider.DefaultConfig()
		cfg.Limits.Read.QPS = o.ReadQPS * 0.95
		cfg.Limits.Read.Burst = max(1, o.ReadBurst*9/10)
		cfg.Limits.Write.QPS = o.WriteQPS * 0.95
		cfg.Limits.Write.Burst = max(1, o.WriteBurst*9/10)
		cfg.Batch.ListPrefetch = true
	}
	cfg.Upstream = provider.UpstreamConfig{}
	f := o.TimeFactor
	sd := func(d *provider.Duration) { d.Duration = scale(d.Duration, f) }
	cfg.Limits.Read.QPS *= f
	cfg.Limits.Write.QPS *= f
	sd(&cfg.Cache.NegativeTTL)
	sd(&cfg.Cache.StaleIfError)
	sd(&cfg.Breaker.Interval)
	sd(&cfg.Breaker.OpenTimeout)
	sd(&cfg.Batch.ListInterval)
	// A batch's max wait is a latency, not a period: compress it, but not
	// below 10 ms, or batches would not fill.
	cfg.Batch.MaxWait.Duration = max(scale(cfg.Batch.MaxWait.Duration, f), min(cfg.Batch.MaxWait.Duration, 10*time.Millisecond))
	methods := map[string]provider.MethodConfig{}
	for name, ttl := range defaultTTLs {
		methods[name] = provider.MethodConfig{TTL: &provider.Duration{Duration: ttl}}
	}
	for name, m := range cfg.Methods {
		methods[name] = m
	}
	for name, m := range methods {
		if m.TTL != nil {
			m.TTL = &provider.Duration{Duration: scale(m.TTL.Duration, f)}
		}
		m.QPS *= f
		methods[name] = m
	}
	cfg.Methods = methods
	return cfg, cfg.Validate()
}

// batchSize is B of the physical limit: cloudgate's batch size, capped by
// the simulated cloud's.
func (o *Options) batchSize() int {
	cfg, err := o.cloudgateConfig()
	if err != nil || cfg.Batch.Enabled != nil && !*cfg.Batch.Enabled {
		return 1
	}
	return min(cfg.Batch.MaxSize, 500)
}

// OnRegistry makes the benchmark tell fn each cloudgate run's metrics
// registry when the run starts (cloudgate-bench --metrics-addr serves it).
func OnRegistry(o *Options, fn func(*prometheus.Registry)) { o.onRegistry = fn }
