package bench

// The fleet scenario (issue 16): several clusters, each with its own CCM
// controllers and its own cloudgate, and a background client share ONE
// simulated cloud account and its read quota. One cluster scales up while
// the others run steady. Columns:
//
//   - local-full: every cloudgate at Headroom × the account's quota (each
//     operator sized "95 % of the quota" as if alone): the fleet is throttled;
//   - local-split: every cloudgate at a static share, (Headroom × quota −
//     background) / clusters: no throttling, but the scale-up only gets its
//     share while the others' sits idle;
//   - shared: limits.shared on a real redis-server started by the run on
//     127.0.0.1, the fleet's budget Headroom × quota − background.
//
// The upstream implements neither batch nor list (what an unmodified
// provider gets: one read per node), so the run is bound by the read quota,
// not by 2 CPUs. Counting is the simulated cloud's own (calls and 429s),
// plus a per-member count at the wire to split reads by cluster.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
)

// Fleet scenario and column names.
const (
	ScenarioFleet   = "fleet"
	FleetLocalFull  = "local-full"
	FleetLocalSplit = "local-split"
	FleetShared     = "shared"
)

// FleetColumns are the fleet scenario's columns, in table order.
var FleetColumns = []string{FleetLocalFull, FleetLocalSplit, FleetShared}

// FleetOptions are the fleet scenario's knobs. Rates and durations are
// simulated unless marked real.
type FleetOptions struct {
	Columns []string
	Seeds   int
	Seed    int64

	// Clusters clusters of Nodes initialised nodes each (with routes);
	// ScaleupNodes (K) arrive at once in the first one after the steady
	// window.
	Clusters, Nodes, ScaleupNodes int

	// The account's quota (the simulated cloud's buckets).
	ReadQPS, WriteQPS     float64
	ReadBurst, WriteBurst int
	// BackgroundQPS is a client outside cloudgate (terraform, CI) reading
	// at a fixed pace (ListClusters) from the same account.
	BackgroundQPS float64
	// Headroom is the fraction of the quota an operator configures (0.95).
	Headroom        float64
	Latency, Jitter time.Duration
	KubeQPS         float64
	KubeBurst       int
	TimeFactor      float64

	// Warmup covers the clusters' cold start (every cache empty: a full
	// status sweep of every cluster at once); SteadyWindow is then measured
	// before the scale-up; QuiesceTimeout caps the scale-up.
	Warmup, SteadyWindow, QuiesceTimeout time.Duration

	// Chaos (shared column only): ChaosAfter the scale-up starts, Redis is
	// killed (SIGKILL, no persistence) and restarted ChaosOutage later.
	Chaos                   bool
	ChaosAfter, ChaosOutage time.Duration

	// Adaptive is limits.<family>.adaptive of every member (AIMD on a
	// throttling answer). Its recovery runs in real time (qps/30 per real
	// second), not compressed: at time × f a cut lasts f times longer in
	// simulated time than in a real cluster.
	Adaptive bool

	// RedisServer is the redis-server binary ("" finds it); RedisTimeout
	// (real) is limits.shared.redisTimeout.
	RedisServer  string
	RedisTimeout time.Duration
	// BackgroundShare is limits.shared.backgroundShare (0: none).
	BackgroundShare float64
}

// DefaultFleetOptions: 3 clusters × 1,000 nodes, 500 nodes scaling up, an
// account allowing 10 reads/s (burst 10) and 10 writes/s (burst 10), a
// background client at 1 read/s, 50 ms ± 20 ms latency, the CCM's
// defaults, real time uncompressed (the fleet's limiter runs on a real
// redis-server's clock: it cannot run in virtual time).
func DefaultFleetOptions() *FleetOptions {
	return &FleetOptions{
		Columns: slices.Clone(FleetColumns), Seeds: 1, Seed: 1,
		Clusters: 3, Nodes: 1000, ScaleupNodes: 500,
		ReadQPS: 10, ReadBurst: 10, WriteQPS: 10, WriteBurst: 10,
		BackgroundQPS: 1, Headroom: 0.95,
		Latency: 50 * time.Millisecond, Jitter: 20 * time.Millisecond,
		KubeQPS: 20, KubeBurst: 30, TimeFactor: 1,
		Warmup: 10 * time.Minute, SteadyWindow: 10 * time.Minute, QuiesceTimeout: 20 * time.Minute,
		ChaosAfter: 20 * time.Second, ChaosOutage: time.Minute,
		RedisTimeout: 50 * time.Millisecond, Adaptive: true, BackgroundShare: 0.5,
	}
}

// Validate names the first bad option and how to fix it.
func (o *FleetOptions) Validate() error {
	if len(o.Columns) == 0 {
		return fmt.Errorf("--columns: name at least one of %s", strings.Join(FleetColumns, ", "))
	}
	for _, c := range o.Columns {
		if !slices.Contains(FleetColumns, c) {
			return fmt.Errorf("--columns: unknown fleet column %q: want %s", c, strings.Join(FleetColumns, ", "))
		}
	}
	switch {
	case o.Seeds < 1:
		return fmt.Errorf("--seeds must be >= 1")
	case o.Clusters < 2:
		return fmt.Errorf("--clusters must be >= 2 (a fleet)")
	case o.Nodes < 1 || o.ScaleupNodes < 1:
		return fmt.Errorf("--nodes and --scaleup-nodes must be >= 1")
	case !(o.ReadQPS > 0) || !(o.WriteQPS > 0) || o.ReadBurst < 1 || o.WriteBurst < 1:
		return fmt.Errorf("--read-qps and --write-qps must be > 0, --read-burst and --write-burst >= 1")
	case o.BackgroundQPS < 0 || !(o.Headroom > 0) || o.Headroom > 1:
		return fmt.Errorf("--background-qps must be >= 0 and --headroom in (0, 1]")
	case o.Headroom*o.ReadQPS-o.BackgroundQPS <= 0:
		return fmt.Errorf("--background-qps %g leaves the clusters nothing of --headroom × --read-qps = %g", o.BackgroundQPS, o.Headroom*o.ReadQPS)
	case o.Latency < 0 || o.Jitter < 0:
		return fmt.Errorf("--latency and --jitter must be >= 0")
	case !(o.KubeQPS > 0) || o.KubeBurst < 1:
		return fmt.Errorf("--kube-qps must be > 0 and --kube-burst >= 1")
	case !(o.TimeFactor >= 1):
		return fmt.Errorf("--time-factor must be >= 1")
	case o.Warmup <= 0 || o.SteadyWindow <= 0 || o.QuiesceTimeout <= 0:
		return fmt.Errorf("--warmup, --steady-window and --quiesce-timeout must be > 0")
	case o.Chaos && (o.ChaosAfter < 0 || o.ChaosOutage <= 0):
		return fmt.Errorf("--chaos-after must be >= 0 and --chaos-outage > 0")
	case o.RedisTimeout <= 0 || o.RedisTimeout > 10*time.Second:
		return fmt.Errorf("--redis-timeout must be in (0, 10s]")
	case !(o.BackgroundShare >= 0 && o.BackgroundShare <= 1):
		return fmt.Errorf("--background-share must be in [0, 1] (0: no cap)")
	}
	return nil
}

// clusterBudget is what the cloudgates may use together: the configured
// fraction of the quota minus the background client's pace.
func (o *FleetOptions) clusterBudget() float64 { return o.Headroom*o.ReadQPS - o.BackgroundQPS }

// memberRead is a member's limits.read (qps, burst) in column col.
func (o *FleetOptions) memberRead(col string) (float64, int) {
	switch col {
	case FleetLocalFull:
		return o.Headroom * o.ReadQPS, o.ReadBurst
	case FleetLocalSplit:
		return o.clusterBudget() / float64(o.Clusters), max(1, int(math.Ceil(float64(o.ReadBurst)/float64(o.Clusters))))
	}
	// shared: the fleet's budget. Its burst leaves room for the background
	// client's call and for the bunching of arrivals (see arrivalMargin).
	return o.clusterBudget(), max(1, int(math.Floor(o.Headroom*float64(o.ReadBurst)))-1-o.arrivalMargin(o.ReadQPS))
}

// arrivalMargin is the tokens by which calls admitted at the fleet's pace can
// arrive early at the cloud's bucket: the latency's spread (2 × Jitter) and
// a real scheduling delay of 5 ms on a loaded machine, which time × f makes
// f times longer in simulated time (at × 20 and 10 calls/s: 1.4 tokens).
// One cloudgate alone rarely meets it; a fleet budget that is exactly the
// quota's burst does, so the shared column's bursts keep this margin.
func (o *FleetOptions) arrivalMargin(qps float64) int {
	return int(math.Ceil((2*o.Jitter.Seconds() + 0.005*o.TimeFactor) * qps))
}

// memberWrite is a member's limits.write (qps, burst) in column col.
func (o *FleetOptions) memberWrite(col string) (float64, int) {
	switch col {
	case FleetLocalFull:
		return o.Headroom * o.WriteQPS, o.WriteBurst
	case FleetLocalSplit:
		return o.Headroom * o.WriteQPS / float64(o.Clusters), max(1, int(math.Ceil(float64(o.WriteBurst)/float64(o.Clusters))))
	}
	// shared: as reads, without a background client.
	return o.Headroom * o.WriteQPS, max(1, int(math.Floor(o.Headroom*float64(o.WriteBurst)))-o.arrivalMargin(o.WriteQPS))
}

// memberYAML is the cloudgate.yaml of one member, as an operator writes it
// (uncompressed: the benchmark compresses it like every other column).
func (o *FleetOptions) memberYAML(col string, r *redisServer, account string) string {
	rq, rb := o.memberRead(col)
	wq, wb := o.memberWrite(col)
	y := fmt.Sprintf("upstream: {name: %s}\nbatch: {enabled: false}\nlimits:\n  read:  {qps: %g, burst: %d, adaptive: %t}\n  write: {qps: %g, burst: %d, adaptive: %t}\n",
		simcloud.ProviderName, rq, rb, o.Adaptive, wq, wb, o.Adaptive)
	if col == FleetShared {
		y += fmt.Sprintf("  shared:\n    account: %s\n    redis: {address: %q, passwordFile: %q}\n    redisTimeout: %s\n",
			account, r.Addr, r.PasswordFile, o.RedisTimeout)
		if o.BackgroundShare > 0 {
			y += fmt.Sprintf("    backgroundShare: %g\n", o.BackgroundShare)
		}
	}
	return y
}

// options is the single-cluster Options the shared helpers take (the
// cloud, the bounds, the compression of a cloudgate config).
func (o *FleetOptions) options() *Options {
	b := DefaultOptions()
	b.ReadQPS, b.ReadBurst, b.WriteQPS, b.WriteBurst = o.ReadQPS, o.ReadBurst, o.WriteQPS, o.WriteBurst
	b.Latency, b.Jitter, b.KubeQPS, b.KubeBurst = o.Latency, o.Jitter, o.KubeQPS, o.KubeBurst
	b.CloudMaxBatch = 1 // the provider implements no batch: one node per read
	b.UpstreamSupports = SupportsNone
	return b
}

// FleetReport is the fleet scenario's result.
type FleetReport struct {
	Scenario   string                 `json:"scenario"`
	Conditions string                 `json:"conditions"`
	Options    FleetOptionsJSON       `json:"options"`
	Configs    map[string]string      `json:"configs"` // column -> member cloudgate.yaml (shared: Redis address elided)
	Columns    map[string]*FleetSide  `json:"columns"` // medians
	Runs       map[string][]FleetSide `json:"runs"`
	// Spread is [min, max] over seeds per column and figure.
	Spread map[string]map[string][2]float64 `json:"spread"`
}

// FleetOptionsJSON are the options in the report.
type FleetOptionsJSON struct {
	Seeds           int     `json:"seeds"`
	Seed            int64   `json:"seed"`
	Clusters        int     `json:"clusters"`
	Nodes           int     `json:"nodes"`
	ScaleupNodes    int     `json:"scaleup_nodes"`
	ReadQPS         float64 `json:"read_qps"`
	ReadBurst       int     `json:"read_burst"`
	WriteQPS        float64 `json:"write_qps"`
	WriteBurst      int     `json:"write_burst"`
	BackgroundQPS   float64 `json:"background_qps"`
	Headroom        float64 `json:"headroom"`
	TimeFactor      float64 `json:"time_factor"`
	Chaos           bool    `json:"chaos"`
	Adaptive        bool    `json:"adaptive"`
	RedisTimeout    string  `json:"redis_timeout"`
	BackgroundShare float64 `json:"background_share"`
}

// FleetSide is one column's figures (one seed, or the medians).
type FleetSide struct {
	Seed      int64   `json:"seed,omitempty"`
	Seeds     int     `json:"seeds"`
	MemberQPS float64 `json:"member_read_qps"`

	// Throttled answers counted by the simulated cloud: during the cold
	// start (warm-up), and in the measured part (steady window and
	// scale-up), of which the background client's.
	ThrottledWarmup     int64 `json:"throttled_warmup"`
	Throttled           int64 `json:"throttled"`
	ThrottledBackground int64 `json:"throttled_background"`

	// Served reads per simulated second in the steady window: each
	// cluster's and the background client's; quota utilisation then.
	SteadyReadsPerSec   []float64 `json:"steady_reads_per_second"`
	BackgroundPerSec    float64   `json:"background_reads_per_second"`
	SteadyUtilization   float64   `json:"steady_quota_utilization"`
	OthersScaleupPerSec float64   `json:"others_reads_per_second_during_scaleup"`
	// OwnOtherScaleupPerSec: the scaling cluster's reads of its existing
	// nodes during the scale-up (their status refreshes); part of the
	// bound's "others".
	OwnOtherScaleupPerSec float64 `json:"own_other_reads_per_second_during_scaleup"`
	// BackgroundScaleupPerSec: the background client's reads during the
	// scale-up, the only "others" of the bound.
	BackgroundScaleupPerSec float64 `json:"background_reads_per_second_during_scaleup"`
	// BoundAllOthers is the bound with Q = quota − every other read
	// measured meanwhile: printed, labelled, not asserted.
	BoundAllOthers *Bound `json:"bound_all_others,omitempty"`

	// The scale-up: time until every new node is initialised, its bound
	// (Q = quota − the others' measured use during the scale-up),
	// measured/bound, time to quiescence of the scaling cluster, and the
	// account's quota utilisation until the nodes were initialised.
	InitSeconds        *float64 `json:"init_seconds"`
	QuiesceSeconds     *float64 `json:"quiesce_seconds"`
	Bound              *Bound   `json:"bound,omitempty"`
	OverBound          *float64 `json:"over_bound"`
	ScaleupUtilization float64  `json:"scaleup_quota_utilization"`
	NodesInitialized   int      `json:"nodes_initialized"`
	TimedOut           bool     `json:"timed_out"`

	// Writes joined on request IDs with the cloud's write log.
	WritesSent       int64 `json:"writes_sent"`
	WritesLanded     int64 `json:"writes_landed"`
	WritesLost       int64 `json:"writes_lost"`
	WritesDuplicated int64 `json:"writes_duplicated"`

	// ScaleupCalls are the cloud's calls by method from the scale-up's
	// start until the new nodes were initialised (every member and the
	// background client); ScaleupControllerCalls the scaling cluster's
	// controllers' calls to cloudgate then.
	ScaleupCalls           map[string]int64 `json:"scaleup_calls_by_method,omitempty"`
	ScaleupControllerCalls map[string]int64 `json:"scaleup_controller_calls,omitempty"`
	// ThrottledByMethod splits Throttled by the cloud's API method.
	ThrottledByMethod map[string]int64 `json:"throttled_by_method,omitempty"`

	// Fallback transitions (cloudgate_fleet_fallback_transitions_total
	// summed over members; shared only).
	FallbackTransitions float64 `json:"fallback_transitions"`
	// RedisErrors: failed or timed-out Redis calls (served locally, each
	// without a switch; cloudgate_fleet_redis_errors_total summed).
	RedisErrors float64     `json:"redis_errors"`
	Chaos       *FleetChaos `json:"chaos,omitempty"`
}

// FleetChaos is the chaos variant's evidence.
type FleetChaos struct {
	// Seconds (simulated) from the scale-up's start.
	KilledAt    float64 `json:"redis_killed_at"`
	RestartedAt float64 `json:"redis_restarted_at"`
	// MembersFellBack saw cloudgate_fleet_fallback = 1 while Redis was down;
	// MembersRejoined saw it back at 0 after the restart, the last one
	// RejoinSeconds (simulated) after it.
	MembersFellBack int      `json:"members_fell_back"`
	MembersRejoined int      `json:"members_rejoined"`
	RejoinSeconds   *float64 `json:"rejoin_seconds"`
	// Throttled answers from the kill until every member rejoined (plus
	// one simulated minute), and the fallback bound for them: the members'
	// local bursts at the switch (Σ share × burst = the burst) plus the
	// fleet's fresh burst at the rejoin (Redis restarts empty), per family.
	ThrottledAroundOutage int64 `json:"throttled_around_outage"`
	FallbackBound         int64 `json:"fallback_bound"`
	// Over the outage, served reads per simulated second of all members
	// against the fleet's budget (the fallback shares sum to it).
	OutageReadsPerSec float64 `json:"outage_reads_per_second"`
}

// readCounter counts a member's reads at the wire: served, throttled.
type readCounter struct {
	next              http.RoundTripper
	served, throttled atomic.Int64
	// old holds the instance IDs and node names present before the
	// scale-up; servedOld counts the served reads of one of them.
	old       atomic.Pointer[map[string]bool]
	servedOld atomic.Int64
}

func (t *readCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if !isWriteRequest(req) && err == nil {
		if resp.StatusCode == http.StatusTooManyRequests {
			t.throttled.Add(1)
		} else {
			t.served.Add(1)
			if old := t.old.Load(); old != nil && ((*old)[strings.TrimPrefix(req.URL.Path, "/v1/instances/")] ||
				(req.URL.Path == "/v1/instances" && (*old)[req.URL.Query().Get("name")])) {
				t.servedOld.Add(1)
			}
		}
	}
	return resp, err
}

// fleetMember is one cluster with its cloudgate.
type fleetMember struct {
	name   string
	client *simcloud.Cloud
	cloud  cloudprovider.Interface
	reg    *prometheus.Registry
	reads  *readCounter
	wire   *wireLog
	c      *Cluster
}

func (m *fleetMember) close() {
	if m.c != nil {
		m.c.Stop()
	}
	if cl, ok := m.cloud.(interface{ Close() error }); ok {
		_ = cl.Close()
	}
	m.client.Close()
}

// newFleetMember builds member name's cloudgate from its cloudgate.yaml
// (compressed by f) over a simcloud client that implements neither batch nor
// list, and its cluster.
func newFleetMember(o *FleetOptions, name, yaml string, srv *simcloud.Server, dir string) (*fleetMember, error) {
	f := o.TimeFactor
	base := o.options()
	m := &fleetMember{name: name, reads: &readCounter{}, wire: &wireLog{}}
	cc := simcloud.ClientConfig{
		Endpoint: srv.URL(), APIKey: "bench", ClusterName: name, Timeout: clientTimeoutAt(f), MaxBatchSize: 1,
		WrapTransport: func(next http.RoundTripper) http.RoundTripper {
			m.reads.next = &wireTransport{next: next, log: m.wire}
			return m.reads
		},
	}
	var err error
	if m.client, err = simcloud.NewClient(cc); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		m.client.Close()
		return nil, err
	}
	base.ConfigFile = file
	cfg, err := base.cloudgateConfig(ColConfig)
	if err != nil {
		m.client.Close()
		return nil, err
	}
	compressConfig(cfg, f)
	compressFleet(cfg, f)
	mt := metrics.New()
	m.reg = prometheus.NewRegistry()
	if err := mt.Register(m.reg); err != nil {
		m.client.Close()
		return nil, err
	}
	cfg.Metrics = mt
	cloud, err := provider.New(withSupports(m.client, SupportsNone), cfg)
	if err != nil {
		m.client.Close()
		return nil, err
	}
	m.cloud = cloud
	m.c, err = NewCluster(ClusterConfig{
		Name: name, Server: srv, Cloud: cloud, TimeFactor: f,
		NodeWorkers: 1, ServiceWorkers: 1, KubeQPS: o.KubeQPS, KubeBurst: o.KubeBurst,
	})
	if err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

// compressFleet compresses the fleet's periods that cloudgateConfig leaves
// real-time: the AIMD recovery (30 s to the quota, and the cooldown between
// cuts with it; uncompressed, one cut would last f times longer in simulated
// time) and the heartbeat (so that members fall, are held and rejoin in
// simulated seconds). redisTimeout stays real: it bounds a real round trip.
// The local columns' buckets still recover at qps/30 per real second
// (cloudgate.yaml has no recovery setting per family): after a throttling
// answer that penalises them, local-full most (RESULTS.fleet.md says so).
func compressFleet(cfg *provider.Config, f float64) {
	if s := cfg.Limits.Shared; s != nil {
		if s.Heartbeat.Duration == 0 {
			s.Heartbeat.Duration = scale(fleet.DefaultHeartbeat, f)
		}
		if s.Recovery.Duration == 0 {
			s.Recovery.Duration = scale(fleet.DefaultRecovery, f)
		}
	}
}

// gauge sums a metric's values in reg (0 when absent).
func gauge(reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return v
}

// RunFleet runs the fleet scenario: every column with every seed.
func RunFleet(ctx context.Context, o *FleetOptions, progress io.Writer) (*FleetReport, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	rep := &FleetReport{
		Scenario: ScenarioFleet, Configs: map[string]string{}, Columns: map[string]*FleetSide{},
		Runs: map[string][]FleetSide{}, Spread: map[string]map[string][2]float64{},
		Options: FleetOptionsJSON{
			Seeds: o.Seeds, Seed: o.Seed, Clusters: o.Clusters, Nodes: o.Nodes, ScaleupNodes: o.ScaleupNodes,
			ReadQPS: o.ReadQPS, ReadBurst: o.ReadBurst, WriteQPS: o.WriteQPS, WriteBurst: o.WriteBurst,
			BackgroundQPS: o.BackgroundQPS, Headroom: o.Headroom, TimeFactor: o.TimeFactor, Chaos: o.Chaos,
			Adaptive: o.Adaptive, RedisTimeout: o.RedisTimeout.String(), BackgroundShare: o.BackgroundShare,
		},
	}
	rep.Conditions = fmt.Sprintf("%d clusters × %d nodes (CCM defaults: --concurrent-node-syncs 1, kube client %g/%d; no LB services) "+
		"and a background client reading %g/s, on one account allowing %g reads/s (burst %d) and %g writes/s (burst %d), "+
		"latency %v ± %v; after a %v cold start and a %v steady window, %d nodes join cluster 1 at once; "+
		"the provider implements neither batch nor list (one read per node); limits adaptive (AIMD) %t, shared redisTimeout %v (real) and backgroundShare %g; %s",
		o.Clusters, o.Nodes, o.KubeQPS, o.KubeBurst, o.BackgroundQPS, o.ReadQPS, o.ReadBurst, o.WriteQPS, o.WriteBurst,
		o.Latency, o.Jitter, o.Warmup, o.SteadyWindow, o.ScaleupNodes, o.Adaptive, o.RedisTimeout, o.BackgroundShare, fleetClock(o.TimeFactor))
	if o.Chaos {
		rep.Scenario = "fleet-chaos"
		rep.Conditions += fmt.Sprintf("; shared: Redis killed %v into the scale-up, restarted %v later", o.ChaosAfter, o.ChaosOutage)
	}
	for _, col := range o.Columns {
		y := o.memberYAML(col, &redisServer{Addr: "REDIS:6379", PasswordFile: "/path/to/redis-password"}, "bench-account")
		rep.Configs[col] = y
	}
	for i := 0; i < o.Seeds; i++ {
		seed := o.Seed + int64(i)
		for _, col := range o.Columns {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			s, err := runFleetColumn(ctx, o, col, seed, progress)
			if err != nil {
				return nil, fmt.Errorf("fleet/%s (seed %d): %w", col, seed, err)
			}
			rep.Runs[col] = append(rep.Runs[col], *s)
		}
	}
	for _, col := range o.Columns {
		rep.Columns[col], rep.Spread[col] = medianFleet(rep.Runs[col])
	}
	return rep, nil
}

// runFleetColumn runs one column with one seed on a fresh account.
func runFleetColumn(ctx context.Context, o *FleetOptions, col string, seed int64, progress io.Writer) (*FleetSide, error) {
	f := o.TimeFactor
	base := o.options()
	srv, err := newServer(base, seed, f, false)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	dir, err := os.MkdirTemp("", "cloudgate-bench-fleet-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var rs *redisServer
	if col == FleetShared {
		if rs, err = startRedis(o.RedisServer); err != nil {
			return nil, err
		}
		defer rs.Close()
	}
	label := fmt.Sprintf("fleet/%s seed %d", col, seed)
	if o.Chaos && col == FleetShared {
		label = fmt.Sprintf("fleet-chaos/%s seed %d", col, seed)
	}
	real := func(d time.Duration) time.Duration { return scale(d, f) }
	simSince := func(t time.Time) float64 { return time.Since(t).Seconds() * f }

	account := fmt.Sprintf("bench-fleet-%d", seed)
	members := make([]*fleetMember, o.Clusters)
	defer func() {
		for _, m := range members {
			if m != nil {
				m.close()
			}
		}
	}()
	for i := range members {
		name := fmt.Sprintf("cluster-%d", i+1)
		if members[i], err = newFleetMember(o, name, o.memberYAML(col, rs, account), srv, dir); err != nil {
			return nil, err
		}
		insts, err := members[i].c.AddNodes(o.Nodes, true, true)
		if err != nil {
			return nil, err
		}
		old := map[string]bool{}
		for _, in := range insts {
			old[in.ID], old[in.NodeName] = true, true
		}
		members[i].reads.old.Store(&old)
	}
	fmt.Fprintf(progress, "%s: %d clusters × %d nodes, member read limit %g/s (time x%g)\n", label, o.Clusters, o.Nodes, first(o.memberRead(col)), f)

	// The background client: a fixed pace, outside cloudgate.
	bgClient, err := simcloud.NewClient(simcloud.ClientConfig{Endpoint: srv.URL(), APIKey: "bench", ClusterName: "background", Timeout: clientTimeoutAt(f)})
	if err != nil {
		return nil, err
	}
	defer bgClient.Close()
	bgCtx, bgStop := context.WithCancel(ctx)
	var bgServed, bgThrottled atomic.Int64
	var bgWG sync.WaitGroup
	if o.BackgroundQPS > 0 {
		bgWG.Add(1)
		go func() {
			defer bgWG.Done()
			cl, _ := bgClient.Clusters()
			tick := time.NewTicker(time.Duration(float64(time.Second) / (o.BackgroundQPS * f)))
			defer tick.Stop()
			for {
				select {
				case <-bgCtx.Done():
					return
				case <-tick.C:
					_, err := cl.ListClusters(bgCtx)
					if ae, ok := err.(*simcloud.APIError); ok && ae.Throttled() {
						bgThrottled.Add(1)
					} else if err == nil {
						bgServed.Add(1)
					}
				}
			}
		}()
	}
	defer func() { bgStop(); bgWG.Wait() }()

	w := newInitWatch()
	for i, m := range members {
		if i == 0 {
			err = m.c.Start(w.handler())
		} else {
			err = m.c.Start()
		}
		if err != nil {
			return nil, err
		}
	}
	start := time.Now()
	sleep := func(d time.Duration) error {
		return Wait(ctx, real(d), func() {
			cnt := srv.Counters()
			fmt.Fprintf(progress, "  %s: t=%.0fs, %d reads, %d throttled\n", label, simSince(start), cnt.ReadCalls, cnt.TotalThrottled())
		})
	}
	type snap struct {
		at        time.Time
		cnt       simcloud.Counters
		served    []int64
		ownOld    int64 // the scaling cluster's reads of its existing nodes
		bg, bgThr int64
	}
	take := func() snap {
		s := snap{at: time.Now(), cnt: srv.Counters(), bg: bgServed.Load(), bgThr: bgThrottled.Load()}
		for _, m := range members {
			s.served = append(s.served, m.reads.served.Load())
			if len(s.served) == 1 {
				s.ownOld = m.reads.servedOld.Load()
			}
		}
		return s
	}
	if err := sleep(o.Warmup); err != nil {
		return nil, err
	}
	side := &FleetSide{Seed: seed, Seeds: 1}
	side.MemberQPS, _ = o.memberRead(col)
	a := take()
	side.ThrottledWarmup = a.cnt.TotalThrottled()
	if err := sleep(o.SteadyWindow); err != nil {
		return nil, err
	}
	b := take()
	win := b.at.Sub(a.at).Seconds() * f
	var steadyTotal float64
	for i := range members {
		v := float64(b.served[i]-a.served[i]) / win
		side.SteadyReadsPerSec = append(side.SteadyReadsPerSec, v)
		steadyTotal += v
	}
	side.BackgroundPerSec = float64(b.bg-a.bg) / win
	side.SteadyUtilization = (steadyTotal + side.BackgroundPerSec) / o.ReadQPS

	// The scale-up in cluster 1.
	members[0].c.ResetKubeRequests()
	from := time.Now()
	members[0].c.rec.reset()
	insts, err := members[0].c.AddNodes(o.ScaleupNodes, false, false)
	if err != nil {
		return nil, err
	}
	for _, inst := range insts {
		w.expect(inst.NodeName, from)
	}
	var ch *chaosRun
	if o.Chaos && col == FleetShared {
		ch = startFleetChaos(ctx, o, rs, members, srv, from, progress, label)
	}
	deadline := from.Add(real(o.QuiesceTimeout))
	var initAt snap
	lastPrint := time.Now()
	for {
		q, err := members[0].c.Quiescence()
		if err != nil {
			return nil, err
		}
		if q.NodesInitialized && side.InitSeconds == nil {
			v := simSince(from)
			side.InitSeconds = &v
			initAt = take()
			side.ScaleupCalls = map[string]int64{}
			for m, v := range initAt.cnt.Calls {
				if d := v - b.cnt.Calls[m]; d > 0 {
					side.ScaleupCalls[m] = d
				}
			}
			side.ScaleupControllerCalls = members[0].c.rec.snapshot().Calls
		}
		if q.All() && side.InitSeconds != nil {
			v := simSince(from)
			side.QuiesceSeconds = &v
			break
		}
		if time.Now().After(deadline) {
			side.TimedOut = true
			fmt.Fprintf(progress, "  %s: not quiescent after %v simulated (%+v)\n", label, o.QuiesceTimeout, q)
			break
		}
		if time.Since(lastPrint) > 5*time.Second {
			lastPrint = time.Now()
			n, of, _ := w.done()
			cnt := srv.Counters()
			fmt.Fprintf(progress, "  %s: scale-up t=%.0fs, %d/%d initialized, %d reads, %d throttled\n", label, simSince(from), n, of, cnt.ReadCalls, cnt.TotalThrottled())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	if ch != nil {
		// Let the outage end and every member rejoin before judging.
		if err := ch.wait(ctx); err != nil {
			return nil, err
		}
	}
	end := take()
	side.NodesInitialized = members[0].c.countInitialized(nodeNames(insts))
	side.Throttled = end.cnt.TotalThrottled() - a.cnt.TotalThrottled()
	side.ThrottledBackground = end.bgThr - a.bgThr
	side.ThrottledByMethod = map[string]int64{}
	for m, v := range end.cnt.Throttled {
		if d := v - a.cnt.Throttled[m]; d > 0 {
			side.ThrottledByMethod[m] = d
		}
	}
	if side.InitSeconds != nil {
		t := initAt.at.Sub(from).Seconds() * f
		var others float64
		for i := 1; i < len(members); i++ {
			others += float64(initAt.served[i] - b.served[i])
		}
		others += float64(initAt.bg - b.bg)
		side.OthersScaleupPerSec = others / t
		// The scaling cluster keeps refreshing its existing nodes meanwhile:
		// those reads are not available to the new nodes either. (Its other
		// reads, e.g. a second read of a new node, count as scale-up work.)
		side.OwnOtherScaleupPerSec = float64(initAt.ownOld-b.ownOld) / t
		var all float64
		for i := range members {
			all += float64(initAt.served[i] - b.served[i])
		}
		all += float64(initAt.bg - b.bg)
		side.ScaleupUtilization = all / t / o.ReadQPS
		// The bound's Q leaves out only what cloudgate does not control
		// (the background client); the other readings are printed labelled.
		side.BackgroundScaleupPerSec = float64(initAt.bg-b.bg) / t
		perNode := perNodeRequests(map[string][]Side{"": {{NodeKubeRequests: members[0].c.KubeRequests(ClientNode)}}}, o.ScaleupNodes)
		side.Bound = fleetBound(base, o.ScaleupNodes, o.ReadQPS, side.BackgroundScaleupPerSec, perNode)
		side.BoundAllOthers = fleetBound(base, o.ScaleupNodes, o.ReadQPS, side.OthersScaleupPerSec+side.OwnOtherScaleupPerSec, perNode)
		x := *side.InitSeconds / side.Bound.Seconds
		side.OverBound = &x
	}
	var wire []wireEntry
	for _, m := range members {
		wire = append(wire, m.wire.snapshot()...)
		side.FallbackTransitions += gauge(m.reg, "cloudgate_fleet_fallback_transitions_total")
		side.RedisErrors += gauge(m.reg, "cloudgate_fleet_redis_errors_total")
	}
	var js ChaosSide
	joinWrites(&js, wire, srv.WriteLog())
	side.WritesSent, side.WritesLanded, side.WritesLost, side.WritesDuplicated = js.WritesSent, js.WritesLanded, js.WritesLost, js.WritesDuplicated
	if ch != nil {
		side.Chaos = ch.result(o)
	}
	fmt.Fprintf(progress, "%s: init %s (bound %s), throttled %d (warm-up %d), writes lost %d; throttled by method %v; scale-up cloud calls %v, controller calls %v\n",
		label, secs(side.InitSeconds, false), boundSecs(side.Bound), side.Throttled, side.ThrottledWarmup, side.WritesLost, side.ThrottledByMethod, side.ScaleupCalls, side.ScaleupControllerCalls)
	return side, nil
}

func first(a float64, _ int) float64 { return a }

func boundSecs(b *Bound) string {
	if b == nil {
		return "-"
	}
	return fmt.Sprintf("%.1fs", b.Seconds)
}

func nodeNames(insts []simcloud.Instance) []string {
	out := make([]string, len(insts))
	for i, in := range insts {
		out[i] = in.NodeName
	}
	return out
}

// fleetBound is initBound with Q = the quota minus others, the reads the
// new nodes cannot have: for the bound, only the load outside cloudgate's
// control (the background client, measured during the scale-up); the
// clusters' own reads are what the policy under test chose to admit, so
// subtracting them (the labelled second reading) is no lower bound. The
// kube side counts the node controller's requests per node (perNode,
// measured on its clientset; 2 per node when not measured).
func fleetBound(o *Options, k int, quota, others float64, perNode map[string]int) *Bound {
	q := quota - others
	calls := float64(k) // the provider implements no batch: a read per node
	cloud := math.Inf(1)
	if q > 0 {
		cloud = math.Max(0, calls-float64(o.ReadBurst))/q + o.Latency.Seconds()
	}
	r, e := 2, 0
	if len(perNode) > 0 {
		r = 0
		for key, v := range perNode {
			r += v
			if strings.HasSuffix(key, " events") {
				e += v
			}
		}
	}
	kube := math.Max(0, float64(r*k-e-o.KubeBurst)) / o.KubeQPS
	b := &Bound{Cloud: cloud, Kube: kube, Seconds: math.Max(cloud, kube)}
	b.Formula = fmt.Sprintf("max(cloud = max(0, K/B - S)/(Q - others) + RTT = max(0, %d/1 - %d)/(%g - %.2f) + %v = %.1fs, "+
		"kube = max(0, rK - e - burst)/QPS with r = %d requests per node measured, e = %d = max(0, %d - %d - %d)/%g = %.1fs) = %.1fs",
		k, o.ReadBurst, quota, others, o.Latency, cloud, r, e, r*k, e, o.KubeBurst, o.KubeQPS, kube, b.Seconds)
	return b
}

// chaosRun kills and restarts Redis during the scale-up and watches every
// member's cloudgate_fleet_fallback.
type chaosRun struct {
	srv                   *simcloud.Server
	members               []*fleetMember
	f                     float64
	from                  time.Time
	done                  chan struct{}
	err                   error
	killedAt, restartedAt time.Time
	fellBack, rejoined    []bool
	rejoinAt              time.Time
	thrBefore, thrAfter   int64
	outageReads           float64
}

func startFleetChaos(ctx context.Context, o *FleetOptions, rs *redisServer, members []*fleetMember, srv *simcloud.Server, from time.Time, progress io.Writer, label string) *chaosRun {
	c := &chaosRun{srv: srv, members: members, f: o.TimeFactor, from: from, done: make(chan struct{}),
		fellBack: make([]bool, len(members)), rejoined: make([]bool, len(members))}
	served := func() int64 {
		var n int64
		for _, m := range members {
			n += m.reads.served.Load()
		}
		return n
	}
	go func() {
		defer close(c.done)
		if !sleepCtx(ctx, scale(o.ChaosAfter, c.f)) {
			c.err = ctx.Err()
			return
		}
		c.thrBefore = srv.Counters().TotalThrottled()
		c.killedAt = time.Now()
		readsAt := served()
		rs.Kill()
		fmt.Fprintf(progress, "  %s: Redis killed at t=%.0fs\n", label, c.killedAt.Sub(from).Seconds()*c.f)
		outageEnd := c.killedAt.Add(scale(o.ChaosOutage, c.f))
		poll := func(until time.Time, check func(i int, fallback bool)) bool {
			for time.Now().Before(until) {
				for i, m := range members {
					check(i, gauge(m.reg, "cloudgate_fleet_fallback") > 0)
				}
				if !sleepCtx(ctx, 10*time.Millisecond) {
					return false
				}
			}
			return true
		}
		if !poll(outageEnd, func(i int, fb bool) { c.fellBack[i] = c.fellBack[i] || fb }) {
			c.err = ctx.Err()
			return
		}
		c.outageReads = float64(served()-readsAt) / (time.Since(c.killedAt).Seconds() * c.f)
		if err := rs.Restart(); err != nil {
			c.err = err
			return
		}
		c.restartedAt = time.Now()
		fmt.Fprintf(progress, "  %s: Redis restarted at t=%.0fs\n", label, c.restartedAt.Sub(from).Seconds()*c.f)
		// Members rejoin at their next heartbeat (1 s real); allow 10 s real.
		limit := time.Now().Add(10 * time.Second)
		_ = poll(limit, func(i int, fb bool) {
			if !fb && !c.rejoined[i] {
				c.rejoined[i] = true
				c.rejoinAt = time.Now()
			}
			if fb {
				c.rejoined[i] = false
			}
		})
		// Throttling caused by the switch back settles within a simulated minute.
		if !sleepCtx(ctx, scale(time.Minute, c.f)) {
			c.err = ctx.Err()
			return
		}
		c.thrAfter = srv.Counters().TotalThrottled()
	}()
	return c
}

func (c *chaosRun) wait(ctx context.Context) error {
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *chaosRun) result(o *FleetOptions) *FleetChaos {
	sim := func(t time.Time) float64 { return t.Sub(c.from).Seconds() * c.f }
	r := &FleetChaos{KilledAt: sim(c.killedAt), RestartedAt: sim(c.restartedAt),
		ThrottledAroundOutage: c.thrAfter - c.thrBefore, OutageReadsPerSec: c.outageReads}
	for i := range c.members {
		if c.fellBack[i] {
			r.MembersFellBack++
		}
		if c.rejoined[i] {
			r.MembersRejoined++
		}
	}
	if r.MembersRejoined == len(c.members) {
		v := c.rejoinAt.Sub(c.restartedAt).Seconds() * c.f
		r.RejoinSeconds = &v
	}
	r.FallbackBound = 2 * int64(o.ReadBurst+o.WriteBurst)
	return r
}

// medianFleet is the median of each figure over runs, and the spreads.
func medianFleet(runs []FleetSide) (*FleetSide, map[string][2]float64) {
	out := &FleetSide{Seeds: len(runs), MemberQPS: runs[0].MemberQPS}
	spread := map[string][2]float64{}
	med := func(name string, get func(FleetSide) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = get(r)
		}
		spread[name] = [2]float64{slices.Min(v), slices.Max(v)}
		return median(v)
	}
	medPtr := func(name string, get func(FleetSide) *float64) *float64 {
		v := make([]float64, 0, len(runs))
		for _, r := range runs {
			p := get(r)
			if p == nil {
				return nil // not reached in some seed
			}
			v = append(v, *p)
		}
		m := med(name, func(s FleetSide) float64 { return *get(s) })
		return &m
	}
	i64 := func(name string, get func(FleetSide) int64) int64 {
		return int64(math.Round(med(name, func(s FleetSide) float64 { return float64(get(s)) })))
	}
	out.ThrottledWarmup = i64("throttled_warmup", func(s FleetSide) int64 { return s.ThrottledWarmup })
	out.Throttled = i64("throttled", func(s FleetSide) int64 { return s.Throttled })
	out.ThrottledBackground = i64("throttled_background", func(s FleetSide) int64 { return s.ThrottledBackground })
	for i := range runs[0].SteadyReadsPerSec {
		out.SteadyReadsPerSec = append(out.SteadyReadsPerSec, med(fmt.Sprintf("steady_reads_%d", i+1), func(s FleetSide) float64 { return s.SteadyReadsPerSec[i] }))
	}
	out.BackgroundPerSec = med("background_reads", func(s FleetSide) float64 { return s.BackgroundPerSec })
	out.SteadyUtilization = med("steady_utilization", func(s FleetSide) float64 { return s.SteadyUtilization })
	out.OthersScaleupPerSec = med("others_scaleup", func(s FleetSide) float64 { return s.OthersScaleupPerSec })
	out.OwnOtherScaleupPerSec = med("own_other_scaleup", func(s FleetSide) float64 { return s.OwnOtherScaleupPerSec })
	out.ScaleupUtilization = med("scaleup_utilization", func(s FleetSide) float64 { return s.ScaleupUtilization })
	out.InitSeconds = medPtr("init_seconds", func(s FleetSide) *float64 { return s.InitSeconds })
	out.QuiesceSeconds = medPtr("quiesce_seconds", func(s FleetSide) *float64 { return s.QuiesceSeconds })
	out.OverBound = medPtr("over_bound", func(s FleetSide) *float64 { return s.OverBound })
	if b := medPtr("bound_seconds", func(s FleetSide) *float64 {
		if s.Bound == nil {
			return nil
		}
		return &s.Bound.Seconds
	}); b != nil {
		out.Bound = &Bound{Seconds: *b, Formula: "median over seeds; per seed: " + runs[0].Bound.Formula}
	}
	out.NodesInitialized = int(i64("nodes_initialized", func(s FleetSide) int64 { return int64(s.NodesInitialized) }))
	for _, r := range runs {
		out.TimedOut = out.TimedOut || r.TimedOut
	}
	out.WritesSent = i64("writes_sent", func(s FleetSide) int64 { return s.WritesSent })
	out.WritesLanded = i64("writes_landed", func(s FleetSide) int64 { return s.WritesLanded })
	// Violations are summed over seeds, never hidden by a median.
	for _, r := range runs {
		out.WritesLost += r.WritesLost
		out.WritesDuplicated += r.WritesDuplicated
	}
	out.FallbackTransitions = med("fallback_transitions", func(s FleetSide) float64 { return s.FallbackTransitions })
	out.RedisErrors = med("redis_errors", func(s FleetSide) float64 { return s.RedisErrors })
	if runs[0].Chaos != nil {
		c := &FleetChaos{FallbackBound: runs[0].Chaos.FallbackBound, MembersFellBack: len(runs[0].SteadyReadsPerSec), MembersRejoined: len(runs[0].SteadyReadsPerSec)}
		var rej []float64
		for _, r := range runs {
			// The least over seeds: one seed where a member did not fall
			// back or rejoin shows.
			c.MembersFellBack = min(c.MembersFellBack, r.Chaos.MembersFellBack)
			c.MembersRejoined = min(c.MembersRejoined, r.Chaos.MembersRejoined)
			c.ThrottledAroundOutage = max(c.ThrottledAroundOutage, r.Chaos.ThrottledAroundOutage)
			if r.Chaos.RejoinSeconds != nil {
				rej = append(rej, *r.Chaos.RejoinSeconds)
			}
		}
		c.KilledAt = med("chaos_killed_at", func(s FleetSide) float64 { return s.Chaos.KilledAt })
		c.RestartedAt = med("chaos_restarted_at", func(s FleetSide) float64 { return s.Chaos.RestartedAt })
		c.OutageReadsPerSec = med("chaos_outage_reads", func(s FleetSide) float64 { return s.Chaos.OutageReadsPerSec })
		spread["chaos_throttled"] = [2]float64{float64(slices.MinFunc(runs, func(a, b FleetSide) int { return int(a.Chaos.ThrottledAroundOutage - b.Chaos.ThrottledAroundOutage) }).Chaos.ThrottledAroundOutage), float64(c.ThrottledAroundOutage)}
		if len(rej) == len(runs) {
			m := med("chaos_rejoin", func(s FleetSide) float64 { return *s.Chaos.RejoinSeconds })
			c.RejoinSeconds = &m
		}
		out.Chaos = c
	}
	return out, spread
}

// Check returns an error naming every fleet invariant the run broke: a
// write lost or duplicated, a scale-up below its bound (the bound would be
// wrong), a column that did not finish; in chaos, a member that did not fall
// back or rejoin, or throttling beyond the fallback bound.
func (r *FleetReport) Check() error {
	var bad []string
	for _, col := range FleetColumns {
		runs := r.Runs[col]
		for _, s := range runs {
			if s.WritesLost > 0 || s.WritesDuplicated > 0 {
				bad = append(bad, fmt.Sprintf("%s seed %d: %d writes lost, %d duplicated", col, s.Seed, s.WritesLost, s.WritesDuplicated))
			}
			if s.WritesSent == 0 {
				bad = append(bad, fmt.Sprintf("%s seed %d: no write sent: the writes-lost check was not exercised", col, s.Seed))
			}
			if s.TimedOut || s.InitSeconds == nil {
				bad = append(bad, fmt.Sprintf("%s seed %d: scale-up not done within the timeout", col, s.Seed))
			}
			if s.OverBound != nil && *s.OverBound < 1 {
				bad = append(bad, fmt.Sprintf("%s seed %d: scale-up %.1fs beat its bound %.1fs: the bound is wrong", col, s.Seed, *s.InitSeconds, s.Bound.Seconds))
			}
			if c := s.Chaos; c != nil {
				n := len(s.SteadyReadsPerSec)
				if c.MembersFellBack != n || c.MembersRejoined != n {
					bad = append(bad, fmt.Sprintf("%s seed %d: %d/%d members fell back, %d/%d rejoined", col, s.Seed, c.MembersFellBack, n, c.MembersRejoined, n))
				}
				if c.ThrottledAroundOutage > c.FallbackBound {
					bad = append(bad, fmt.Sprintf("%s seed %d: %d throttled answers around the outage, over the fallback bound %d", col, s.Seed, c.ThrottledAroundOutage, c.FallbackBound))
				}
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("fleet invariants broken:\n  %s", strings.Join(bad, "\n  "))
	}
	return nil
}

// WriteJSON writes the report to path.
func (r *FleetReport) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// WriteMarkdown writes the table: one row per figure, one column per
// fleet column, medians with [min–max] over seeds.
func (r *FleetReport) WriteMarkdown(w io.Writer) {
	var cols []string
	for _, c := range FleetColumns {
		if _, ok := r.Columns[c]; ok {
			cols = append(cols, c)
		}
	}
	fmt.Fprintf(w, "Conditions: %s. Seeds %d..%d; median [min–max] over %d seed(s).\n\n", r.Conditions, r.Options.Seed, r.Options.Seed+int64(r.Options.Seeds)-1, r.Options.Seeds)
	fmt.Fprintf(w, "| | %s |\n|---|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	row := func(name string, cell func(col string, s *FleetSide, sp map[string][2]float64) string) {
		fmt.Fprintf(w, "| %s |", name)
		for _, c := range cols {
			fmt.Fprintf(w, " %s |", cell(c, r.Columns[c], r.Spread[c]))
		}
		fmt.Fprintln(w)
	}
	withSpread := func(v float64, sp [2]float64, format string, seeds int) string {
		s := fmt.Sprintf(format, v)
		if seeds > 1 {
			s += fmt.Sprintf(" ["+format+"–"+format+"]", sp[0], sp[1])
		}
		return s
	}
	seeds := r.Options.Seeds
	row("limits.read.qps of each member", func(_ string, s *FleetSide, _ map[string][2]float64) string {
		return fmt.Sprintf("%.3g", s.MemberQPS)
	})
	row("throttled answers, steady window + scale-up (simcloud)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return "**" + withSpread(float64(s.Throttled), sp["throttled"], "%.0f", seeds) + "**"
	})
	row("… of which the background client's", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(float64(s.ThrottledBackground), sp["throttled_background"], "%.0f", seeds)
	})
	row("throttled answers in the cold start (all clusters sweep at once)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(float64(s.ThrottledWarmup), sp["throttled_warmup"], "%.0f", seeds)
	})
	row("steady reads/s per cluster (served)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		var parts []string
		for _, v := range s.SteadyReadsPerSec {
			parts = append(parts, fmt.Sprintf("%.2f", v))
		}
		return strings.Join(parts, " / ")
	})
	row("steady quota utilisation (all clusters + background)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(100*s.SteadyUtilization, [2]float64{100 * sp["steady_utilization"][0], 100 * sp["steady_utilization"][1]}, "%.0f%%", seeds)
	})
	row("others' reads/s during the scale-up (measured)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(s.OthersScaleupPerSec, sp["others_scaleup"], "%.2f", seeds)
	})
	row("… and the scaling cluster's reads/s of its existing nodes", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(s.OwnOtherScaleupPerSec, sp["own_other_scaleup"], "%.2f", seeds)
	})
	row(fmt.Sprintf("scale-up: %d nodes initialised (s)", r.Options.ScaleupNodes), func(_ string, s *FleetSide, sp map[string][2]float64) string {
		if s.InitSeconds == nil {
			return "not reached"
		}
		return "**" + withSpread(*s.InitSeconds, sp["init_seconds"], "%.0f", seeds) + "**"
	})
	row("bound, Q = quota − the background client's reads (s)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		if s.Bound == nil {
			return "-"
		}
		return withSpread(s.Bound.Seconds, sp["bound_seconds"], "%.0f", seeds)
	})
	row("(reading, not a bound: Q = quota − every other read measured meanwhile) (s)", func(_ string, s *FleetSide, _ map[string][2]float64) string {
		if s.BoundAllOthers == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f", s.BoundAllOthers.Seconds)
	})
	row("measured / bound", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		if s.OverBound == nil {
			return "-"
		}
		return "**" + withSpread(*s.OverBound, sp["over_bound"], "%.2f", seeds) + "×**"
	})
	row("quota utilisation during the scale-up", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		return withSpread(100*s.ScaleupUtilization, [2]float64{100 * sp["scaleup_utilization"][0], 100 * sp["scaleup_utilization"][1]}, "%.0f%%", seeds)
	})
	row("scaling cluster quiescent (routes written) (s)", func(_ string, s *FleetSide, sp map[string][2]float64) string {
		if s.QuiesceSeconds == nil {
			return "not reached"
		}
		return withSpread(*s.QuiesceSeconds, sp["quiesce_seconds"], "%.0f", seeds)
	})
	row("writes sent / landed / lost (request-ID join; lost summed over seeds)", func(_ string, s *FleetSide, _ map[string][2]float64) string {
		return fmt.Sprintf("%d / %d / **%d**", s.WritesSent, s.WritesLanded, s.WritesLost)
	})
	row("Redis fallback transitions (all members)", func(col string, s *FleetSide, sp map[string][2]float64) string {
		if col != FleetShared {
			return "-"
		}
		return withSpread(s.FallbackTransitions, sp["fallback_transitions"], "%.0f", seeds)
	})
	row("Redis calls failed or over redisTimeout (served locally; all members)", func(col string, s *FleetSide, sp map[string][2]float64) string {
		if col != FleetShared {
			return "-"
		}
		return withSpread(s.RedisErrors, sp["redis_errors"], "%.0f", seeds)
	})
	if c := r.Columns[FleetShared]; c != nil && c.Chaos != nil {
		ch := c.Chaos
		fmt.Fprintf(w, "\nChaos (shared): Redis killed at %.0fs of the scale-up, restarted at %.0fs (simulated). "+
			"Members in fallback during the outage: %d/%d (least over seeds); rejoined after the restart: %d/%d, the last after %s (simulated; the heartbeat is 1 s simulated). "+
			"Throttled answers from the kill until a simulated minute after the rejoin: %d (most over seeds) against the fallback bound %d "+
			"(2 × (read burst + write burst): the members' local bursts at the switch, then the fresh fleet burst at the rejoin). "+
			"Reads served by the members during the outage: %.2f/s against their shares' sum %.3g/s.\n",
			ch.KilledAt, ch.RestartedAt, ch.MembersFellBack, r.Options.Clusters, ch.MembersRejoined, r.Options.Clusters,
			secs(ch.RejoinSeconds, false), ch.ThrottledAroundOutage, ch.FallbackBound, ch.OutageReadsPerSec, c.MemberQPS)
	}
	if c := r.Columns[FleetShared]; c != nil && c.Bound != nil {
		fmt.Fprintf(w, "\nBound (shared, first seed): %s.\n", c.Bound.Formula)
	}
}

// fleetClock says how the fleet scenario's time runs: in real time (its
// limiter runs on a real redis-server's clock, so it cannot run in
// virtual time like the other scenarios), compressed or not.
func fleetClock(f float64) string {
	if f == 1 {
		return "real time, uncompressed (the limiter runs on redis-server's clock; not virtual time like the other scenarios)"
	}
	return fmt.Sprintf("real time compressed × %g (the limiter runs on redis-server's clock; simulated seconds reported; the machine's load enters the figures)", f)
}
