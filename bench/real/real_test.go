//go:build linux

// Package real checks the load benchmark's simulator against reality: the
// real cloud-controller-manager binary (bench/cmd/cloud-controller-manager) on a
// real etcd + kube-apiserver (testkit/e2e), against simcloud served over
// HTTP, in real time, next to the virtual-time simulator's figure for the
// same settings. `make bench-real` runs it and writes bench/RESULTS.real.md;
// it is not part of `make test` (it runs for half an hour to an hour per
// size: the window is sized from the size).
package real

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cloudgate/cloudgate/bench"
	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/bench/virtual"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// The measured settings: the CCM's defaults (status every 5 min, one node
// worker, kube client 20 QPS / burst 30, routes every 10 s, lifecycle every
// 5 s) and the simulator's default cloud (20 reads/s burst 20, 5 writes/s
// burst 5, 50 ms ± 20 ms, batches of 500); no LoadBalancer services, no
// NotReady Node (nothing in the cluster would keep a Node NotReady without
// kubelets: only the CCM's controllers run).
const (
	clusterName  = "kubernetes" // the CCM's --cluster-name default
	clusterCIDR  = "10.128.0.0/9"
	scaleupNodes = 200
)

// warmup is the simulator's: the first full resync, one status period plus
// a minute.
var warmup = 6 * time.Minute

// The window is sized per size from the simulator's predicted status round
// (status period + the sweep of N lookups at one node worker, the slower
// column's): windowRounds of them with a margin for the real sweep being
// slower than the predicted one, rounded up to whole status periods (the
// list refresh follows the same 5-minute step), and never shorter than
// minWindow. minWindow covers one expiry of cloudgate's 10-minute
// InstanceMetadata TTL, so the cloudgate column's per-round figure is an
// average over the TTL's cycle, as the simulator's hour is.
const (
	minRounds    = 3   // each column must complete at least this many status rounds in its window
	windowRounds = 3.3 // predicted rounds the window is sized for
	windowStep   = 5 * time.Minute
	minWindow    = 11 * time.Minute
)

// windowFor is the measured window for a size whose slower column's
// simulated status round lasts round.
func windowFor(round time.Duration) time.Duration {
	w := time.Duration(float64(round) * windowRounds)
	w = (w + windowStep - 1) / windowStep * windowStep
	return max(w, minWindow)
}

// Columns: the provider alone (bare) and the default cloudgate column:
// DefaultConfig with limits at 90 % of the quota, the file an operator
// writes, given to both the real CCM and the simulator (cloudgate:config,
// upstream implements batch and list: simcloud does).
const (
	colBare      = bench.ColBare
	colCloudgate = "cloudgate (default)"
)

// figures are one column's measurements at one size.
type figures struct {
	// RoundSeconds is the simulated status round (3600 / rounds per hour).
	RoundSeconds  float64
	CallsPerRound float64
	Rounds        float64
	ReadsPerRound float64
	Throttled     int64
	InitSeconds   float64
	Calls         map[string]int64
}

func TestBenchReal(t *testing.T) {
	if os.Getenv("CLOUDGATE_BENCH_REAL") == "" {
		t.Skip("make bench-real runs this (real time, half an hour to an hour per size): set CLOUDGATE_BENCH_REAL=1")
	}
	etcdBin, apiserverBin, ccmBin := os.Getenv("CLOUDGATE_ETCD"), os.Getenv("CLOUDGATE_KUBE_APISERVER"), os.Getenv("CLOUDGATE_CCM")
	if etcdBin == "" || apiserverBin == "" || ccmBin == "" {
		t.Fatal("CLOUDGATE_ETCD, CLOUDGATE_KUBE_APISERVER and CLOUDGATE_CCM must name the binaries (make bench-real builds and sets them)")
	}
	var sizes []int
	for _, s := range strings.Split(envOr("CLOUDGATE_BENCH_REAL_NODES", "1000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			t.Fatalf("CLOUDGATE_BENCH_REAL_NODES: %q is not a node count", s)
		}
		sizes = append(sizes, n)
	}
	// CLOUDGATE_BENCH_REAL_SHORT=1 shortens warm-up and window to 20 s: a
	// smoke run of the plumbing (no status round fits in it, so the
	// rounds check is off and the file says so).
	short := os.Getenv("CLOUDGATE_BENCH_REAL_SHORT") != ""
	if short {
		warmup = 20 * time.Second
	}
	// CLOUDGATE_BENCH_REAL_PARALLEL=1 runs every size at once (one control
	// plane, cloud and CCM per column and size); the figures are call
	// counts per status round, and the rounds check fails the run if the
	// machine did not keep up.
	parallel := os.Getenv("CLOUDGATE_BENCH_REAL_PARALLEL") != ""
	o := bench.DefaultOptions()
	dir := t.TempDir()
	cgConfig := filepath.Join(dir, "cloudgate-policy.yaml")
	policy := fmt.Sprintf("limits:\n  read:\n    qps: %g\n    burst: %d\n  write:\n    qps: %g\n    burst: %d\n",
		o.ReadQPS*0.9, o.ReadBurst, o.WriteQPS*0.9, o.WriteBurst)
	e2e.WriteFile(t, cgConfig, policy)

	type row struct {
		n         int
		window    time.Duration
		sim, real map[string]figures
	}
	// The simulator first: its predicted round sizes each size's window.
	rows := make([]*row, len(sizes))
	for i, n := range sizes {
		r := &row{n: n, sim: simulate(t, o, n, cgConfig), real: map[string]figures{}}
		r.window = windowFor(time.Duration(max(r.sim[colBare].RoundSeconds, r.sim[colCloudgate].RoundSeconds) * float64(time.Second)))
		if short {
			r.window = 20 * time.Second
		}
		t.Logf("%d nodes: simulated status round bare %.0fs, cloudgate %.0fs: window %v", n, r.sim[colBare].RoundSeconds, r.sim[colCloudgate].RoundSeconds, r.window)
		rows[i] = r
	}
	var mu sync.Mutex
	loadBefore := loadavg()
	t.Run("sizes", func(t *testing.T) {
		for _, r := range rows {
			t.Run(fmt.Sprintf("nodes=%d", r.n), func(t *testing.T) {
				if parallel {
					t.Parallel()
				}
				for _, col := range []string{colBare, colCloudgate} {
					t.Run(col, func(t *testing.T) {
						t.Parallel()
						f := runReal(t, o, r.n, col, policy, r.window, etcdBin, apiserverBin, ccmBin)
						if !short && f.Rounds < minRounds {
							t.Errorf("%s at %d nodes completed %.2f status rounds in its %v window, fewer than %d: the per-round figure is not an average over enough rounds (a slower machine than the window was sized for?)",
								col, r.n, f.Rounds, r.window, minRounds)
						}
						mu.Lock()
						r.real[col] = f
						mu.Unlock()
					})
				}
			})
		}
	})
	loadAfter := loadavg()

	var b strings.Builder
	fmt.Fprintf(&b, "# The simulator against a real API server\n\n")
	cmd := "make bench-real BENCH_REAL_NODES=" + envOr("CLOUDGATE_BENCH_REAL_NODES", "1000")
	if parallel {
		cmd += " BENCH_REAL_PARALLEL=1"
	}
	if short {
		cmd += " (CLOUDGATE_BENCH_REAL_SHORT=1: a smoke run, no status round fits, the rounds check is off)"
	}
	fmt.Fprintf(&b, "Generated by `%s` (bench/real) at commit %s, %s.\n", cmd, envOr("CLOUDGATE_BENCH_REAL_COMMIT", "–"), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	mode := "one size after the other"
	if parallel {
		mode = "every size at once"
	}
	fmt.Fprintf(&b, "Both columns of a size run in parallel, %s, each on its own etcd + kube-apiserver, simcloud and CCM;\n", mode)
	fmt.Fprintf(&b, "machine: %d CPUs, 1-min load average %s before and %s after the runs.\n\n", runtime.NumCPU(), loadBefore, loadAfter)
	fmt.Fprintf(&b, "The real cloud-controller-manager binary\n")
	fmt.Fprintf(&b, "(bench/cmd/cloud-controller-manager) on a real etcd + kube-apiserver, against simcloud over HTTP on\n")
	fmt.Fprintf(&b, "127.0.0.1, in real time; Node objects bulk-created (initialised, Ready, with routes), no kubelets.\n")
	fmt.Fprintf(&b, "Next to it the virtual-time simulator (bench.Run, steady and scaleup scenarios) with the same settings.\n\n")
	fmt.Fprintf(&b, "Settings (both): CCM defaults (--node-status-update-frequency 5m, --concurrent-node-syncs 1, kube client 20 QPS / burst 30,\n")
	fmt.Fprintf(&b, "routes every 10 s, lifecycle every 5 s; controllers cloud-node, cloud-node-lifecycle, route, service); cloud quota reads %g/s\n", o.ReadQPS)
	fmt.Fprintf(&b, "burst %d, writes %g/s burst %d, latency %v ± %v, batches of %d; 0 LB services, 0 NotReady Nodes; seed %d.\n", o.ReadBurst, o.WriteQPS, o.WriteBurst, o.Latency, o.Jitter, o.CloudMaxBatch, o.Seed)
	fmt.Fprintf(&b, "Columns: **bare** (`--cloud-provider=simcloud`) and **cloudgate (default)** (`--cloud-provider=cloudgate`, this policy,\n")
	fmt.Fprintf(&b, "upstream simcloud, which implements batch and list; the simulator's cloudgate:config column with the same file):\n\n```yaml\n%s```\n\n", policy)
	fmt.Fprintf(&b, "Real: %v warm-up (the simulator's: one status period + 1 min), then a window per size of %g × the simulator's\n", warmup, windowRounds)
	fmt.Fprintf(&b, "status round (status period + sweep, the slower column's) rounded up to a multiple of %v, at least %v (one expiry of\n", windowStep, minWindow)
	fmt.Fprintf(&b, "cloudgate's 10-min InstanceMetadata TTL); the run fails if a column completes fewer than %d status rounds in its window.\n\n", minRounds)
	fmt.Fprintf(&b, "| nodes | simulated round bare (s) | simulated round cloudgate (s) | window |\n|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %v |\n", r.n, r.sim[colBare].RoundSeconds, r.sim[colCloudgate].RoundSeconds, r.window)
	}
	fmt.Fprintf(&b, "\nCalls per status round =\n")
	fmt.Fprintf(&b, "the cloud's calls in the window / (the node controller's InstanceMetadata calls in the window / N). Simulated: calls/h ÷\n")
	fmt.Fprintf(&b, "status rounds/h over the steady hour. Init: time from creating %d uninitialised Nodes (instances exist) until the last is\n", scaleupNodes)
	fmt.Fprintf(&b, "initialised (real: on the steady cluster after the window; simulated: the scaleup scenario, K=%d).\n\n", scaleupNodes)
	fmt.Fprintf(&b, "| nodes | column | calls/round real | calls/round sim | sim/real | reads/round real | status rounds in window (real) | throttled (real) | init %d s real | init s sim | sim/real |\n", scaleupNodes)
	fmt.Fprintf(&b, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		for _, col := range []string{colBare, colCloudgate} {
			re, si := r.real[col], r.sim[col]
			fmt.Fprintf(&b, "| %d | %s | %.1f | %.1f | %s | %.1f | %.2f | %d | %.1f | %.1f | %s |\n", r.n, col,
				re.CallsPerRound, si.CallsPerRound, ratio(si.CallsPerRound, re.CallsPerRound), re.ReadsPerRound, re.Rounds, re.Throttled,
				re.InitSeconds, si.InitSeconds, ratio(si.InitSeconds, re.InitSeconds))
		}
	}
	fmt.Fprintf(&b, "\nCalls by method in the window (real) and per simulated hour:\n\n")
	for _, r := range rows {
		for _, col := range []string{colBare, colCloudgate} {
			fmt.Fprintf(&b, "- %d nodes, %s: real %v; sim per hour %v\n", r.n, col, r.real[col].Calls, r.sim[col].Calls)
		}
	}
	fmt.Fprintf(&b, "\nGaps beyond 10 %% between the simulator and the real binary:\n\n")
	gaps := 0
	for _, r := range rows {
		for _, col := range []string{colBare, colCloudgate} {
			re, si := r.real[col], r.sim[col]
			if re.CallsPerRound > 0 && math.Abs(si.CallsPerRound/re.CallsPerRound-1) > 0.1 {
				gaps++
				fmt.Fprintf(&b, "- %d nodes, %s, calls/round: sim/real %s. Compare the calls by method above: the real figure is one window's, the simulator's an hour's average.\n",
					r.n, col, ratio(si.CallsPerRound, re.CallsPerRound))
			}
			if re.InitSeconds > 0 && math.Abs(si.InitSeconds/re.InitSeconds-1) > 0.1 {
				gaps++
				fmt.Fprintf(&b, "- %d nodes, %s, init: sim/real %s. Both pay the kube client's 20 QPS / burst 30 for the Node update, status patch and\n"+
					"  Event per Node, but the simulator's fake clientset answers each in zero time and its informer sees a new Node at once; the\n"+
					"  real CCM also pays each request's round trip to the kube-apiserver and etcd, the watch's delivery, and the CPU it shares\n"+
					"  with the other runs on this machine.\n",
					r.n, col, ratio(si.InitSeconds, re.InitSeconds))
			}
		}
	}
	if gaps == 0 {
		fmt.Fprintf(&b, "- none.\n")
	}
	fmt.Print(b.String())
	if out := os.Getenv("CLOUDGATE_BENCH_REAL_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// loadavg is the machine's 1-minute load average, as /proc/loadavg gives it.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "–"
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func ratio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", a/b)
}

// simulate runs the simulator's steady (n Nodes) and scaleup (200 Nodes)
// scenarios for both columns in virtual time.
func simulate(t *testing.T, base *bench.Options, n int, cgConfig string) map[string]figures {
	o := *base
	o.Scenarios = []string{bench.ScenarioSteady, bench.ScenarioScaleup}
	o.Columns = []string{bench.ColBare, bench.ColConfig}
	o.ConfigFile, o.UpstreamSupports = cgConfig, bench.SupportsList
	o.Nodes, o.Services, o.NotReadyPct, o.ScaleupNodes = n, 0, 0, scaleupNodes
	var rep *bench.Report
	err := virtual.Test(t, context.Background(), virtual.Options{}, func(ctx context.Context) error {
		var err error
		rep, err = bench.Run(ctx, &o, testWriter{t})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]figures{}
	for _, s := range rep.Scenarios {
		for simCol, col := range map[string]string{bench.ColBare: colBare, bench.ColConfig: colCloudgate} {
			side := s.Columns[simCol]
			f := out[col]
			switch s.Scenario {
			case bench.ScenarioSteady:
				if side.Steady == nil || side.StatusRoundsPerHour == nil {
					t.Fatalf("simulated steady %s: no steady figures", simCol)
				}
				perHour := side.Steady.ReadsPerHour + side.Steady.WritesPerHour
				f.CallsPerRound = perHour / *side.StatusRoundsPerHour
				f.ReadsPerRound = side.Steady.ReadsPerHour / *side.StatusRoundsPerHour
				f.Rounds = *side.StatusRoundsPerHour
				f.RoundSeconds = 3600 / *side.StatusRoundsPerHour
				f.Calls = map[string]int64{}
				for m, v := range side.Steady.CallsPerHourByMethod {
					f.Calls[m] = int64(v + 0.5)
				}
			case bench.ScenarioScaleup:
				if side.InitSeconds != nil {
					f.InitSeconds = *side.InitSeconds
				}
			}
			out[col] = f
		}
	}
	return out
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// runReal runs one column at n Nodes on its own control plane and cloud.
func runReal(t *testing.T, o *bench.Options, n int, col, policy string, window time.Duration, etcdBin, apiserverBin, ccmBin string) figures {
	// Set-up, warm-up, window, then the scale-up's 15-minute bound and slack.
	ctx, cancel := context.WithTimeout(context.Background(), warmup+window+45*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cp := e2e.StartControlPlane(ctx, t, dir, etcdBin, apiserverBin)
	fast, err := kubernetes.NewForConfig(&rest.Config{Host: cp.URL, BearerToken: cp.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile}, QPS: 2000, Burst: 2000})
	if err != nil {
		t.Fatal(err)
	}

	apiKey := e2e.RandomToken(t)
	sim, err := simcloud.NewServer(simcloud.ServerConfig{
		APIKey: simcloud.Secret(apiKey), Seed: o.Seed,
		ReadQPS: o.ReadQPS, ReadBurst: o.ReadBurst, WriteQPS: o.WriteQPS, WriteBurst: o.WriteBurst,
		MaxBatchSize: o.CloudMaxBatch, BaseLatency: o.Latency, Jitter: o.Jitter,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	cidrs := 0
	nextCIDR := func() string { // as the simulator's cluster numbers them
		i := cidrs
		cidrs++
		return fmt.Sprintf("10.%d.%d.0/24", 128+(i/256)%128, i%256)
	}
	insts, err := sim.AddInstances(n, clusterName)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	nodes := make([]*corev1.Node, len(insts))
	for i, inst := range insts {
		cidr := nextCIDR()
		if err := sim.AddRoute(simcloud.Route{Cluster: clusterName, Name: "r-" + inst.NodeName, TargetNode: inst.NodeName, DestinationCIDR: cidr}); err != nil {
			t.Fatal(err)
		}
		nodes[i] = initializedNode(inst, cidr)
	}
	createNodes(ctx, t, fast, nodes)
	t.Logf("%s: %d initialised Nodes created in %.1fs", col, n, time.Since(began).Seconds())

	simYAML := fmt.Sprintf("endpoint: %s\napiKey: %s\nclusterName: %s\n", sim.URL(), apiKey, clusterName)
	provider, cloudConfig := "simcloud", filepath.Join(dir, "cloud.yaml")
	if col == colBare {
		e2e.WriteFile(t, cloudConfig, simYAML)
	} else {
		provider = "cloudgate"
		e2e.WriteFile(t, cloudConfig, policy+"upstream:\n  name: simcloud\n  config: |\n"+indent(simYAML, "    "))
	}
	kubeconfig := filepath.Join(dir, "ccm.kubeconfig")
	cp.Kubeconfig(t, kubeconfig, cp.AdminToken)
	port := e2e.FreePort(t)
	sim.ResetCounters()
	ccm := e2e.StartProcess(t, dir, "cloud-controller-manager", ccmBin,
		"--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
		"--webhook-secure-port=0",
		"--cloud-provider="+provider, "--cloud-config="+cloudConfig,
		"--controllers=cloud-node,cloud-node-lifecycle,route,service",
		"--cluster-name="+clusterName, "--cluster-cidr="+clusterCIDR,
		"--allocate-node-cidrs=true", "--configure-cloud-routes=true",
		"--use-service-account-credentials=false",
		"--v=1",
	)
	https, ccmURL := ccm.WaitServing(ctx, t, port, cp.AdminToken, 2*time.Minute)
	started := time.Now()
	statusCalls := func() float64 {
		if col == colBare {
			// simcloud's InstanceMetadata is one GetInstance for a Node with a
			// provider ID, and no other controller calls GetInstance here
			// (no NotReady Node, no lifecycle check).
			return float64(sim.Counters().Calls[simcloud.MethodGetInstance])
		}
		code, body, err := e2e.Get(https, ccmURL+"/metrics", cp.AdminToken)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /metrics: HTTP %d, %v: %.300s", code, err, body)
		}
		s, err := e2e.ParseMetrics(body)
		if err != nil {
			t.Fatal(err)
		}
		v, k := e2e.Sum(s, "cloudgate_requests_total", map[string]string{"method": "InstanceMetadata"})
		if k == 0 {
			t.Fatal("/metrics has no cloudgate_requests_total{method=InstanceMetadata}")
		}
		return v
	}
	sleep(ctx, t, warmup-time.Since(started))
	c0, s0 := sim.Counters(), statusCalls()
	sleep(ctx, t, window)
	c1, s1 := sim.Counters(), statusCalls()
	if done, err := ccm.Exited(); done {
		t.Fatalf("the CCM exited: %v\n%s", err, e2e.Tail(ccm.Log, 40))
	}
	f := figures{Rounds: (s1 - s0) / float64(n), Calls: map[string]int64{}}
	for m, v := range c1.Calls {
		if d := v - c0.Calls[m]; d != 0 {
			f.Calls[m] = d
		}
	}
	for _, v := range c1.Throttled {
		f.Throttled += v
	}
	for _, v := range c0.Throttled {
		f.Throttled -= v
	}
	if f.Rounds > 0 {
		f.CallsPerRound = float64(c1.TotalCalls()-c0.TotalCalls()) / f.Rounds
		f.ReadsPerRound = float64(c1.ReadCalls-c0.ReadCalls) / f.Rounds
	}
	t.Logf("%s at %d nodes: %.2f status rounds in %v, %.1f calls/round, calls %v", col, n, f.Rounds, window, f.CallsPerRound, f.Calls)

	// Scale-up: 200 uninitialised Nodes at once (instances exist, pod
	// CIDRs, no routes yet), as the simulator's scaleup adds them.
	more, err := sim.AddInstances(scaleupNodes, clusterName+"-up")
	if err != nil {
		t.Fatal(err)
	}
	up := make([]*corev1.Node, len(more))
	for i, inst := range more {
		node := e2e.UninitializedNode(inst.NodeName)
		cidr := nextCIDR()
		node.Spec.PodCIDR, node.Spec.PodCIDRs = cidr, []string{cidr}
		node.Labels = map[string]string{corev1.LabelHostname: inst.NodeName}
		up[i] = node
	}
	from := time.Now()
	createNodes(ctx, t, fast, up)
	pending := map[string]bool{}
	for _, nd := range up {
		pending[nd.Name] = true
	}
	err = e2e.Poll(ctx, "scale-up Nodes initialised", 100*time.Millisecond, 15*time.Minute, func() (bool, error) {
		list, err := fast.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			nd := &list.Items[i]
			if pending[nd.Name] && nd.Spec.ProviderID != "" && !hasTaint(nd, e2e.UninitializedTaint) && len(nd.Status.Addresses) > 0 {
				delete(pending, nd.Name)
			}
		}
		return len(pending) == 0, fmt.Errorf("%d of %d not initialised", len(pending), scaleupNodes)
	})
	if err != nil {
		t.Fatal(err)
	}
	f.InitSeconds = time.Since(from).Seconds()
	t.Logf("%s: %d Nodes initialised in %.1fs", col, scaleupNodes, f.InitSeconds)
	return f
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == key {
			return true
		}
	}
	return false
}

func indent(s, pre string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pre + l
		}
	}
	return strings.Join(lines, "")
}

func sleep(ctx context.Context, t *testing.T, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}

// initializedNode is a Node the cloud-node controller initialised earlier,
// as the simulator's steady cluster starts: provider ID, labels,
// addresses, pod CIDR, Ready.
func initializedNode(inst simcloud.Instance, cidr string) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: inst.NodeName, Labels: map[string]string{
			corev1.LabelHostname:     inst.NodeName,
			corev1.LabelInstanceType: inst.Type, corev1.LabelInstanceTypeStable: inst.Type,
			corev1.LabelFailureDomainBetaZone: inst.Zone, corev1.LabelTopologyZone: inst.Zone,
			corev1.LabelFailureDomainBetaRegion: inst.Region, corev1.LabelTopologyRegion: inst.Region,
		}},
		Spec: corev1.NodeSpec{ProviderID: inst.ProviderID(), PodCIDR: cidr, PodCIDRs: []string{cidr}},
	}
	n.Status.Addresses = append([]corev1.NodeAddress(nil), inst.Addresses...)
	return n
}

// createNodes creates the Nodes with 16 clients in parallel, then sets
// each one's status (Ready, and the addresses of an initialised one): a
// Create ignores the status.
func createNodes(ctx context.Context, t *testing.T, c kubernetes.Interface, nodes []*corev1.Node) {
	work := make(chan *corev1.Node)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for nd := range work {
				st := nd.Status
				_, err := c.CoreV1().Nodes().Create(ctx, nd, metav1.CreateOptions{})
				if err == nil {
					// A patch, not an update: the CCM may change the Node
					// meanwhile (a scale-up Node is initialised at once).
					now := metav1.Now()
					st.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "BenchReal", LastHeartbeatTime: now, LastTransitionTime: now}}
					var patch []byte
					if patch, err = json.Marshal(map[string]any{"status": st}); err == nil {
						_, err = c.CoreV1().Nodes().Patch(ctx, nd.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
					}
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("node %s: %w", nd.Name, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, nd := range nodes {
		work <- nd
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}
