package bench

// The fleet scenario: several clusters, each with its own CCM
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
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cloudgate/cloudgate/bench/simcloud"
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
	// OverBoundAllOthers is InitSeconds / BoundAllOthers: a reading, not
	// checked.
	OverBoundAllOthers *float64 `json:"over_bound_all_others,omitempty"`

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
