// Package gcebench measures the unmodified GCE cloud provider alone and behind cloudgate's
// default install (upstream gce-batch: batch and list prefetch on) on gcesim (Compute Engine's
// documented per-project, per-minute rate quotas), driven by bench's cluster: the real
// cloud-node, cloud-node-lifecycle and route controllers of k8s.io/cloud-provider on a fake
// API server, each with a kube client limited like a real CCM's (20 QPS, burst 30), one node
// worker (--concurrent-node-syncs=1).
//
// Columns:
//
//	gce            the GCE provider alone, CCM defaults
//	gce+cloudgate  cloudgate's DefaultConfig in front of gce-batch (the default install)
//
// Everything runs in real time: the provider reaches gcesim over loopback HTTP through
// clients it builds itself (google.golang.org/api's transport, the metadata client), so the
// controllers cannot run on a virtual clock. The steady figures are counts, which do not
// depend on the machine's speed: one status round is measured (every call gcesim answered
// from the controllers' start until N lookups were answered) and the hour is that round's
// per-node calls × 12 status periods (5 min) for the provider alone, and one measured list
// refresh × 12 refreshes (cloudgate's list interval: 5 min, half the InstanceMetadata TTL) for
// cloudgate. The scale-ups' times are real seconds (the machine's load enters them; the load
// average is printed) next to the kube client's lower bound.
package gcebench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/bench"
	"github.com/cloudgate/cloudgate/bench/measure"
	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/gce/gcebatch"
	"github.com/cloudgate/cloudgate/providers/gce/gcesim"
)

// Column names, in table order.
const (
	ColGCE       = "gce"
	ColCloudgate = "gce+cloudgate"
)

// Columns are both columns.
var Columns = []string{ColGCE, ColCloudgate}

const (
	clusterName = "bench"
	// statusPeriod is --node-status-update-frequency's default; listInterval cloudgate's
	// default list refresh (half the InstanceMetadata TTL of 10 min).
	statusPeriod = 5 * time.Minute
	listInterval = 5 * time.Minute
)

// Options are the benchmark's knobs.
type Options struct {
	Sizes []int // steady node counts (and the clusters 500 nodes join)
	Join  int   // nodes joining each steady size's cluster (0: none)
	// RouteNodes join an empty cluster with the route controller on (0: no such run).
	RouteNodes int
	Seed       int64
	Timeout    time.Duration // per scale-up
	Progress   io.Writer
}

// DefaultOptions are the table's: 1,000 and 5,000 nodes, 500 joining, 1,000 with routes.
func DefaultOptions() *Options {
	return &Options{Sizes: []int{1000, 5000}, Join: 500, RouteNodes: 1000, Seed: 1, Timeout: 15 * time.Minute}
}

// Steady is one column's measured status round at one size.
type Steady struct {
	Nodes int
	Round map[string]int // gcesim calls by method, controllers' start to the round's end
	// Throttled are the round's calls gcesim answered with a quota error, by method.
	Throttled map[string]int
	Lookups   int64 // InstanceMetadata calls of the round
	// ListPages is one list refresh's aggregatedList pages (cloudgate only).
	ListPages int
}

// Scaleup is one column's scale-up.
type Scaleup struct {
	Existing, Joining, Initialized int
	Routes                         int     // routes in gcesim at the end (route runs)
	Seconds                        float64 // until every node was initialised (and routed); NaN: timed out
	Calls, Throttled               map[string]int
}

// Result is the whole benchmark.
type Result struct {
	Options *Options
	Steady  map[string][]Steady
	Join    map[string][]Scaleup
	Routes  map[string]*Scaleup
	Load    [2]string
	Started time.Time
}

// Run runs o.
func Run(ctx context.Context, o *Options) (*Result, error) {
	p := o.Progress
	if p == nil {
		p = io.Discard
	}
	// The metadata server (the provider's token-url client's own token; 404 to everything
	// else) is process-wide (GCE_METADATA_HOST): one gcesim answers it for every column.
	md, err := gcesim.Start(gcesim.Config{})
	if err != nil {
		return nil, err
	}
	defer md.Close()
	os.Setenv("GCE_METADATA_HOST", md.MetadataHost())
	res := &Result{Options: o, Steady: map[string][]Steady{}, Join: map[string][]Scaleup{}, Routes: map[string]*Scaleup{}, Started: time.Now()}
	res.Load[0] = loadavg()
	for _, n := range o.Sizes {
		if err := parallel(func(col string) error {
			st, err := runSteady(ctx, o, col, n, p)
			if err != nil {
				return err
			}
			res.add(func() { res.Steady[col] = append(res.Steady[col], *st) })
			return nil
		}); err != nil {
			return nil, err
		}
		if o.Join > 0 {
			if err := parallel(func(col string) error {
				su, err := runScaleup(ctx, o, col, n, o.Join, false, p)
				if err != nil {
					return err
				}
				res.add(func() { res.Join[col] = append(res.Join[col], *su) })
				return nil
			}); err != nil {
				return nil, err
			}
		}
	}
	if o.RouteNodes > 0 {
		if err := parallel(func(col string) error {
			su, err := runScaleup(ctx, o, col, 0, o.RouteNodes, true, p)
			if err != nil {
				return err
			}
			res.add(func() { res.Routes[col] = su })
			return nil
		}); err != nil {
			return nil, err
		}
	}
	res.Load[1] = loadavg()
	return res, nil
}

var resMu sync.Mutex

func (r *Result) add(f func()) { resMu.Lock(); f(); resMu.Unlock() }

// parallel runs f for both columns side by side, each on its own gcesim and cluster.
func parallel(f func(col string) error) error {
	errs := make([]error, len(Columns))
	var wg sync.WaitGroup
	for i, col := range Columns {
		wg.Go(func() { errs[i] = f(col) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// rig is one column on its own gcesim and cluster.
type rig struct {
	sim     *gcesim.Server
	cluster *bench.Cluster
	count   *counting
	lister  provider.InstanceLister
}

func newRig(o *Options, col string, routes bool) (*rig, error) {
	sim, err := gcesim.Start(gcesim.Config{})
	if err != nil {
		return nil, err
	}
	conf := []byte(fmt.Sprintf("[global]\napi-endpoint = %s\ntoken-url = %s\nproject-id = %s\nlocal-zone = %s\nnetwork-name = default\nsubnetwork-name = default\nmultizone = true\n",
		sim.APIEndpoint(), sim.TokenURL(), sim.Project(), sim.Zones()[0]))
	r := &rig{sim: sim}
	var cloud cloudprovider.Interface
	switch col {
	case ColGCE:
		cloud, err = cloudprovider.GetCloudProvider("gce", strings.NewReader(string(conf)))
	case ColCloudgate:
		var up *gcebatch.Cloud
		if up, err = gcebatch.New(conf); err == nil {
			r.lister = up.BatchInstances()
			cfg := provider.DefaultConfig()
			cfg.Metrics = metrics.New()
			cloud, err = provider.New(up, cfg)
		}
	default:
		err = fmt.Errorf("unknown column %q", col)
	}
	if err != nil {
		sim.Close()
		return nil, err
	}
	r.count = &counting{Interface: cloud}
	r.cluster, err = bench.NewCluster(bench.ClusterConfig{
		Name: clusterName, Ground: newGround(sim, o.Seed), Cloud: r.count, TimeFactor: 1,
		NodeWorkers: measure.NodeWorkers, ServiceWorkers: 1, KubeQPS: measure.KubeQPS, KubeBurst: measure.KubeBurst,
		NoRoutes: !routes, CloudInit: true,
	})
	if err != nil {
		sim.Close()
		return nil, err
	}
	return r, nil
}

func (r *rig) close() {
	r.cluster.Stop()
	r.sim.Close()
}

func runSteady(ctx context.Context, o *Options, col string, n int, p io.Writer) (*Steady, error) {
	r, err := newRig(o, col, false)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if _, err := r.cluster.AddNodes(n, true, false); err != nil {
		return nil, err
	}
	before, beforeT := r.sim.Calls(), r.sim.Throttled()
	if err := r.cluster.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(o.Timeout)
	for r.count.lookups.Load() < int64(n) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("steady %d/%s: %d of %d lookups after %v", n, col, r.count.lookups.Load(), n, o.Timeout)
		}
		if err := bench.Wait(ctx, 50*time.Millisecond, func() {}); err != nil {
			return nil, err
		}
	}
	st := &Steady{Nodes: n, Round: diff(r.sim.Calls(), before), Throttled: diff(r.sim.Throttled(), beforeT), Lookups: r.count.lookups.Load()}
	if r.lister != nil {
		b := r.sim.Calls()["compute.instances.aggregatedList"]
		for tok := ""; ; {
			_, next, err := r.lister.ListInstances(ctx, tok)
			if err != nil {
				return nil, fmt.Errorf("one list refresh: %w", err)
			}
			if tok = next; tok == "" {
				break
			}
		}
		st.ListPages = r.sim.Calls()["compute.instances.aggregatedList"] - b
	}
	fmt.Fprintf(p, "steady %d/%s: round %v, throttled %v, %d lookups, list pages %d\n", n, col, st.Round, st.Throttled, st.Lookups, st.ListPages)
	return st, nil
}

// runScaleup starts a cluster of existing initialised nodes, waits for their first status
// round, then adds joining nodes at once and times them until every one is initialised
// (and, with routes, has its route in gcesim).
func runScaleup(ctx context.Context, o *Options, col string, existing, joining int, routes bool, p io.Writer) (*Scaleup, error) {
	r, err := newRig(o, col, routes)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if existing > 0 {
		if _, err := r.cluster.AddNodes(existing, true, false); err != nil {
			return nil, err
		}
	}
	if err := r.cluster.Start(); err != nil {
		return nil, err
	}
	for r.count.lookups.Load() < int64(existing) {
		if err := bench.Wait(ctx, 50*time.Millisecond, func() {}); err != nil {
			return nil, err
		}
	}
	if err := bench.Wait(ctx, 2*time.Second, func() {}); err != nil { // the provider and cloudgate settle
		return nil, err
	}
	before, beforeT := r.sim.Calls(), r.sim.Throttled()
	su := &Scaleup{Existing: existing, Joining: joining, Seconds: math.NaN()}
	label := fmt.Sprintf("scale-up %d+%d/%s (routes %t)", existing, joining, col, routes)
	start := time.Now()
	insts, err := r.cluster.AddNodes(joining, false, false)
	if err != nil {
		return nil, err
	}
	joined := map[string]bool{}
	for _, in := range insts {
		joined[in.NodeName] = true
	}
	last := start
	for {
		nodes, err := r.cluster.Nodes()
		if err != nil {
			return nil, err
		}
		su.Initialized = 0
		for i := range nodes {
			if joined[nodes[i].Name] && initialized(&nodes[i]) {
				su.Initialized++
			}
		}
		if routes {
			su.Routes = len(r.sim.Routes())
		}
		if su.Initialized == joining && (!routes || su.Routes >= joining) {
			su.Seconds = time.Since(start).Seconds()
			break
		}
		if time.Since(start) > o.Timeout {
			break
		}
		if time.Since(last) > 10*time.Second {
			last = time.Now()
			fmt.Fprintf(p, "  %s: t=%.0fs, %d/%d initialized, %d routes\n", label, time.Since(start).Seconds(), su.Initialized, joining, su.Routes)
		}
		if err := bench.Wait(ctx, 100*time.Millisecond, func() {}); err != nil {
			return nil, err
		}
	}
	su.Calls, su.Throttled = diff(r.sim.Calls(), before), diff(r.sim.Throttled(), beforeT)
	fmt.Fprintf(p, "%s: %d/%d initialized, %d routes in %.1fs; calls %v; throttled %v\n", label, su.Initialized, joining, su.Routes, su.Seconds, su.Calls, su.Throttled)
	return su, nil
}

func initialized(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return false
		}
	}
	return len(n.Status.Addresses) > 0
}

func diff(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func loadavg() string {
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

// counting counts the controllers' InstanceMetadata calls (the status round's lookups).
type counting struct {
	cloudprovider.Interface
	lookups atomic.Int64
}

// SetInformers forwards the CCM's informers (the GCE provider and cloudgate use them).
func (c *counting) SetInformers(f informers.SharedInformerFactory) {
	if iu, ok := c.Interface.(cloudprovider.InformerUser); ok {
		iu.SetInformers(f)
	}
}

func (c *counting) InstancesV2() (cloudprovider.InstancesV2, bool) {
	v2, ok := c.Interface.InstancesV2()
	if !ok || v2 == nil {
		return nil, ok
	}
	return &countingV2{InstancesV2: v2, c: c}, true
}

type countingV2 struct {
	cloudprovider.InstancesV2
	c *counting
}

func (v *countingV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	md, err := v.InstancesV2.InstanceMetadata(ctx, node)
	v.c.lookups.Add(1)
	return md, err
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
