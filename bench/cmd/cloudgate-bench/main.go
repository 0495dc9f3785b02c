// Command cloudgate-bench drives the real cloud-controller-manager
// controllers against a simulated, quota-limited cloud with five columns
// (bare CCM defaults, a provider-typical client, cloudgate cache, batch and
// list), prints them side by side with lower bounds, and plans quotas
// ("plan"). See docs/bench.md.
//
//	cloudgate-bench                                  # all default scenarios
//	cloudgate-bench --scenario steady --nodes 10000 --read-qps 20 --config cloudgate.yaml
//	cloudgate-bench --json results.json --metrics-addr 127.0.0.1:9464
//	cloudgate-bench --seeds 3 --html report.html
//	cloudgate-bench --scenario scale --scale-nodes 1000,5000,20000,50000,100000
//	cloudgate-bench plan --config cloudgate.yaml --quota-read 20 --quota-write 5 --upstream-supports none
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/bench"
	"github.com/cloudgate/cloudgate/bench/virtual"
)

// The garbage collector's settings when the environment sets none: the
// simulation allocates mostly short-lived copies of Nodes (the lifecycle
// controller deep-copies every Node each 5 s, the route controller lists
// them each 10 s), and at GOGC 100 the collector took a quarter of plan's
// CPU at 20,000 Nodes. GOGC 400 cuts that; the memory limit keeps a large
// run's heap from growing 5x its live size past it (the collector runs
// more often near it instead). GC never moves a figure: the simulation
// runs on virtual time.
const (
	defaultGCPercent   = 400
	defaultMemoryLimit = 8 << 30
)

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
}

func main() {
	tuneGC()
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cloudgate-bench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "plan" {
		return runPlan(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "fleet" {
		return runFleet(args[1:], stdout, stderr)
	}
	full := fullFlag(args)
	o := bench.QuickOptions()
	if full {
		o = bench.DefaultOptions()
	}
	fs := flag.NewFlagSet("cloudgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Bool("full", full, "the full sweep's sizes and windows (bench/RESULTS.md's: 2,000 steady nodes for 1 h, 1,000 scaling up, 1,000 churning for 6 min) instead of the first run's (1,000 for 30 min, 500, 500 for 3 min); size flags still override")
	scenarios := fs.String("scenario", strings.Join(o.Scenarios, ","), "comma-separated scenarios: steady, scaleup, churn, chaos, chaos-zone (a zone outage), stress (100 node workers), sweep (steady at --sweep-nodes), scale (the status sweep per round at --scale-nodes; alone)")
	columns := fs.String("columns", strings.Join(o.Columns, ","), "comma-separated columns: bare, bare+client, cloudgate:cache, cloudgate:batch, cloudgate:list")
	fs.IntVar(&o.Seeds, "seeds", o.Seeds, "run every scenario with this many seeds (seed, seed+1, ...) and report medians and spreads")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "first seed of the simulated cloud's random draws")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "nodes in the steady cluster (N)")
	fs.Float64Var(&o.NotReadyPct, "not-ready-pct", o.NotReadyPct, "percentage of steady nodes that are NotReady (the lifecycle controller checks each every 5 s): 0, 1, 10")
	fs.IntVar(&o.Services, "services", o.Services, "LoadBalancer services (M)")
	fs.DurationVar(&o.SteadyWindow, "steady-window", o.SteadyWindow, "simulated steady-state window after the first full resync (>= 1h for calls per hour)")
	fs.IntVar(&o.SteadyChurn, "steady-churn", o.SteadyChurn, "steady scenario: Nodes that join, and Ready Nodes that leave, every --steady-churn-every (0: none)")
	fs.DurationVar(&o.SteadyChurnEvery, "steady-churn-every", 5*time.Minute, "steady scenario: the period of --steady-churn")
	fs.IntVar(&o.ScaleupNodes, "scaleup-nodes", o.ScaleupNodes, "nodes arriving at once in scaleup and stress (K)")
	fs.IntVar(&o.StressWorkers, "stress-workers", o.StressWorkers, "--concurrent-node-syncs of the stress scenario")
	fs.DurationVar(&o.QuiesceTimeout, "quiesce-timeout", o.QuiesceTimeout, "simulated cap on the wait for quiescence (the same for every column)")
	fs.IntVar(&o.ChaosNodes, "chaos-nodes", o.ChaosNodes, "nodes in the chaos cluster")
	fs.IntVar(&o.ChaosZoneNodes, "chaos-zone-nodes", o.ChaosZoneNodes, "nodes in the chaos-zone cluster (a third goes NotReady)")
	fs.BoolVar(&o.ChaosTimeline, "chaos-timeline", false, "chaos: record and print each column's timeline from the outage to quiescence (breaker, bucket rates, controller call outcomes, upstream requests, Node deletions, conditions)")
	fs.IntVar(&o.ChurnNodes, "churn-nodes", o.ChurnNodes, "nodes in the churn cluster")
	fs.IntVar(&o.ChurnRate, "churn-rate", o.ChurnRate, "nodes joining (and as many leaving) per churn interval")
	fs.DurationVar(&o.ChurnInterval, "churn-interval", o.ChurnInterval, "simulated time between churn steps")
	fs.DurationVar(&o.ChurnDuration, "churn-duration", o.ChurnDuration, "simulated length of churn (the drain to quiescence follows)")
	sweep := fs.String("sweep-nodes", joinInts(o.SweepNodes), "node counts of the sweep scenario")
	scaleNodes := fs.String("scale-nodes", joinInts(o.ScaleNodes), "node counts of the scale scenario")
	fs.IntVar(&o.ScaleServices, "scale-services", o.ScaleServices, "scale: LB services (default 0: the service controller's start-up node sync costs N x M x N)")
	fs.IntVar(&o.ScaleRepeats, "scale-repeats", o.ScaleRepeats, "scale: run every column this many times per size and report the median run with [min-max] (the status sweep's node order is random)")
	fs.BoolVar(&o.ScaleFullCCM, "scale-full-ccm", false, "scale: also run the route and node lifecycle controllers (their CPU per period grows with N)")
	fs.DurationVar(&o.ScaleWindow, "scale-window", o.ScaleWindow, "scale: the least simulated time the measured status rounds cover at each node count (at least one round)")
	fs.Float64Var(&o.ReadQPS, "read-qps", o.ReadQPS, "the simulated cloud's read quota (calls per second)")
	fs.IntVar(&o.ReadBurst, "read-burst", o.ReadBurst, "the simulated cloud's read burst")
	fs.Float64Var(&o.WriteQPS, "write-qps", o.WriteQPS, "the simulated cloud's write quota (calls per second)")
	fs.IntVar(&o.WriteBurst, "write-burst", o.WriteBurst, "the simulated cloud's write burst")
	fs.IntVar(&o.CloudMaxBatch, "cloud-max-batch", o.CloudMaxBatch, "the largest batch the simulated cloud accepts (B of the bounds)")
	fs.DurationVar(&o.Latency, "latency", o.Latency, "the simulated cloud's base latency (simulated time)")
	fs.DurationVar(&o.Jitter, "jitter", o.Jitter, "uniform jitter added to the latency")
	fs.Float64Var(&o.KubeQPS, "kube-qps", o.KubeQPS, "each controller's kube client QPS (CCM default 20)")
	fs.IntVar(&o.KubeBurst, "kube-burst", o.KubeBurst, "each controller's kube client burst (CCM default 30)")
	fs.IntVar(&o.NodeWorkers, "node-workers", o.NodeWorkers, "--concurrent-node-syncs (CCM default 1)")
	fs.IntVar(&o.ServiceWorkers, "service-workers", o.ServiceWorkers, "--concurrent-service-syncs (CCM default 1)")
	fs.StringVar(&o.ConfigFile, "config", "", "benchmark this cloudgate.yaml (column cloudgate:config) instead of the default policy; its upstream is ignored")
	fs.StringVar(&o.UpstreamSupports, "upstream-supports", o.UpstreamSupports, "what your provider implements, simulated for --config: none, batch (BatchInstances) or list (also InstanceLister)")
	htmlOut := fs.String("html", "", "write a self-contained HTML report with plots to this file")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	metricsAddr := fs.String("metrics-addr", "", "serve the running cloudgate's Prometheus metrics on this address (e.g. 127.0.0.1:9464)")
	verbose := fs.Bool("v", false, "show the controllers' logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Scenarios = splitList(*scenarios)
	o.Columns = splitList(*columns)
	if o.ConfigFile != "" && *columns == strings.Join(bench.AllColumns, ",") {
		o.Columns = []string{bench.ColBare, bench.ColBareClient, bench.ColConfig}
	}
	var err error
	if o.SweepNodes, err = parseInts(*sweep); err != nil {
		return fmt.Errorf("--sweep-nodes: %w", err)
	}
	if o.ScaleNodes, err = parseInts(*scaleNodes); err != nil {
		return fmt.Errorf("--scale-nodes: %w", err)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if !*verbose {
		quietKlog()
	}
	if len(o.Scenarios) == 1 && o.Scenarios[0] == bench.ScenarioScale {
		if *htmlOut != "" || *metricsAddr != "" || o.Seeds != 1 {
			return errors.New("--scenario scale: --html, --metrics-addr and --seeds are not supported (one seed; its counts are deterministic)")
		}
		return runScale(o, *jsonOut, stdout, stderr)
	}
	if *metricsAddr != "" {
		stop, err := serveMetrics(*metricsAddr, o, stderr)
		if err != nil {
			return err
		}
		defer stop()
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	start := time.Now()
	// The per-column detail goes to stderr with -v; otherwise one progress
	// line per scenario.
	detail := io.Discard
	if *verbose {
		detail = stderr
	}
	o.Meter = bench.NewMeter(stderr, isTerminal(stderr), virtual.RealNow)
	return host(ctx, func(ctx context.Context) error {
		rep, err := bench.Run(ctx, o, detail)
		if err != nil {
			return err
		}
		rep.WriteTable(stdout)
		fmt.Fprintf(stdout, "\n(run took %v real time, in virtual time)\n", virtual.RealNow().Sub(start).Round(time.Second))
		if *jsonOut != "" {
			if err := rep.WriteJSON(*jsonOut); err != nil {
				return err
			}
		}
		if *htmlOut != "" {
			if err := rep.WriteHTML(*htmlOut); err != nil {
				return err
			}
		}
		rep.WriteSummary(stdout, *htmlOut)
		return rep.Check()
	})
}

// fullFlag reports whether args set --full (-full, --full=true): it
// chooses the defaults the other flags start from, so it is read first.
func fullFlag(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "full" {
			continue
		}
		if !hasVal {
			return true
		}
		b, err := strconv.ParseBool(val)
		return err == nil && b
	}
	return false
}

// isTerminal reports whether w is a terminal (a character device), where
// the progress line is rewritten in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// runScale runs the scale scenario and prints its tables.
func runScale(o *bench.Options, jsonOut string, stdout, stderr io.Writer) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	start := time.Now()
	return host(ctx, func(ctx context.Context) error {
		rep, err := bench.RunScale(ctx, o, stderr)
		if err != nil {
			return err
		}
		rep.WriteTable(stdout)
		fmt.Fprintf(stdout, "\n(run took %v real time, in virtual time)\n", virtual.RealNow().Sub(start).Round(time.Second))
		if jsonOut != "" {
			if err := rep.WriteJSON(jsonOut); err != nil {
				return err
			}
		}
		return rep.Check()
	})
}

// host runs a simulation in virtual time: from main, in a synctest bubble
// hosted by testing.Main (it ends the process when fn returns); the
// command's tests replace it with one on their *testing.T.
var host = func(ctx context.Context, fn virtual.Func) error {
	return virtual.Main(ctx, virtual.Options{}, fn)
}

// runPlan is "cloudgate-bench plan": the steady state at each node count
// with the user's policy, on the user's cloud profile and quota, and the
// forecast from it.
func runPlan(args []string, stdout, stderr io.Writer) error {
	o := bench.DefaultOptions()
	o.SteadyWindow = 30 * time.Minute
	fs := flag.NewFlagSet("cloudgate-bench plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.ConfigFile, "config", "", "your cloudgate.yaml (default: DefaultConfig with limits at the quota)")
	cloud := fs.String("cloud", "simcloud", "cloud profile: simcloud (20 reads/s, burst 20, pages of 500) or aws (EC2's documented buckets: non-mutating 20/s, burst 100; unfiltered DescribeInstances 10/s, burst 50; pages of 1,000); --quota-* flags override its quota")
	fs.Float64Var(&o.ReadQPS, "quota-read", o.ReadQPS, "your account's read quota (calls per second; default: the cloud profile's)")
	fs.IntVar(&o.ReadBurst, "quota-read-burst", o.ReadBurst, "your account's read burst (default: the cloud profile's)")
	fs.Float64Var(&o.WriteQPS, "quota-write", o.WriteQPS, "your account's write quota (calls per second)")
	fs.IntVar(&o.WriteBurst, "quota-write-burst", o.WriteBurst, "your account's write burst")
	supports := fs.String("upstream-supports", bench.SupportsNone, "what your provider implements: none, batch (BatchInstances) or list (also InstanceLister); only that is simulated; a comma-separated list plans each")
	nodes := fs.String("nodes", "1000,2000,5000,10000", "node counts to sweep")
	fs.IntVar(&o.Services, "services", o.Services, "LoadBalancer services")
	fs.Float64Var(&o.NotReadyPct, "not-ready-pct", o.NotReadyPct, "percentage of NotReady nodes")
	fs.IntVar(&o.NodeWorkers, "node-workers", o.NodeWorkers, "the CCM's --concurrent-node-syncs")
	fs.Float64Var(&o.KubeQPS, "kube-qps", o.KubeQPS, "the CCM's kube client QPS per controller (--kube-api-qps)")
	fs.IntVar(&o.KubeBurst, "kube-burst", o.KubeBurst, "the CCM's kube client burst (--kube-api-burst)")
	scaleup := fs.Int("scaleup-nodes", 500, "K of the scale-up forecast: Nodes joining at once")
	fs.DurationVar(&o.SteadyWindow, "steady-window", o.SteadyWindow, "simulated steady window per node count")
	fs.IntVar(&o.SteadyChurn, "churn", o.SteadyChurn, "Nodes that join, and Ready Nodes that leave, every --churn-every: your cluster's turnover (0: none)")
	fs.DurationVar(&o.SteadyChurnEvery, "churn-every", 5*time.Minute, "the period of --churn")
	fs.DurationVar(&o.StatusPeriod, "status-period", 5*time.Minute, "the CCM's --node-status-update-frequency")
	routes := fs.Bool("routes", true, "the CCM runs its route controller (--configure-cloud-routes; the AWS charts turn it off)")
	fs.DurationVar(&o.Latency, "latency", o.Latency, "the simulated cloud's base latency")
	fs.DurationVar(&o.Jitter, "jitter", o.Jitter, "uniform jitter added to the latency")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed of the simulated cloud")
	htmlOut := fs.String("html", "", "write the plan with its plot to this HTML file (one --upstream-supports only)")
	jsonOut := fs.String("json", "", "write the plans as a JSON array to this file")
	verbose := fs.Bool("v", false, "show the controllers' logs")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the simulation to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.NoRoutes = !*routes
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// The profile sets the quota; a --quota-read(-burst) given as well wins.
	readQPS, readBurst := o.ReadQPS, o.ReadBurst
	if _, err := bench.ApplyCloud(o, *cloud); err != nil {
		return err
	}
	if set["quota-read"] {
		o.ReadQPS = readQPS
	}
	if set["quota-read-burst"] {
		o.ReadBurst = readBurst
	}
	counts, err := parseInts(*nodes)
	if err != nil {
		return fmt.Errorf("--nodes: %w", err)
	}
	cols := splitList(*supports)
	if len(cols) == 0 {
		return fmt.Errorf("--upstream-supports: name none, batch or list")
	}
	if len(cols) > 1 && *htmlOut != "" {
		return fmt.Errorf("--html: one --upstream-supports at a time (got %q)", *supports)
	}
	if !*verbose {
		quietKlog()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	// The profile starts outside the bubble (its writer goroutine must not
	// be one of the bubble's) and stops inside fn: virtual.Main ends the
	// process when fn returns.
	stop := func() {}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		stop = func() { pprof.StopCPUProfile(); f.Close() }
	}
	cfg := bench.PlanConfig{Cloud: *cloud, ScaleupNodes: *scaleup}
	return host(ctx, func(ctx context.Context) error {
		defer stop()
		return writePlan(ctx, o, cols, counts, cfg, *jsonOut, *htmlOut, stdout, stderr)
	})
}

func writePlan(ctx context.Context, o *bench.Options, cols []string, counts []int, cfg bench.PlanConfig, jsonOut, htmlOut string, stdout, stderr io.Writer) error {
	var plans []*bench.Plan
	for i, col := range cols {
		oc := *o
		oc.UpstreamSupports = col
		p, err := bench.RunPlan(ctx, &oc, counts, cfg, stderr)
		if err != nil {
			return err
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		p.WriteTable(stdout)
		plans = append(plans, p)
	}
	if jsonOut != "" {
		b, err := json.MarshalIndent(plans, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if htmlOut != "" {
		if err := plans[0].WriteHTML(htmlOut); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "HTML plan: %s\n", htmlOut)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, v := range splitList(s) {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not a whole number", v)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// quietKlog silences the controllers' logs.
func quietKlog() {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
}

// currentGatherer serves the registry of the cloudgate run in progress (an
// empty one between runs).
type currentGatherer struct {
	p atomic.Pointer[prometheus.Registry]
}

func (g *currentGatherer) Gather() ([]*dto.MetricFamily, error) {
	if r := g.p.Load(); r != nil {
		return r.Gather()
	}
	return nil, nil
}

func serveMetrics(addr string, o *bench.Options, stderr io.Writer) (func(), error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, errors.New("--metrics-addr: use a loopback address such as 127.0.0.1:9464")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	g := &currentGatherer{}
	bench.OnRegistry(o, func(r *prometheus.Registry) { g.p.Store(r) })
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(stderr, "serving cloudgate metrics on http://%s/metrics\n", ln.Addr())
	return func() { _ = srv.Close() }, nil
}
