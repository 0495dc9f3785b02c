package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
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

// The fleet scenario's run: its members, one column, its bound.

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
		y := *side.InitSeconds / side.BoundAllOthers.Seconds
		side.OverBoundAllOthers = &y
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
