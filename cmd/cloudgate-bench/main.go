// Command cloudgate-bench drives the real cloud-controller-manager
// controllers against a simulated, quota-limited cloud, once with the bare
// provider and once with cloudgate in front of it, and prints the two side
// by side. See docs/bench.md.
//
//	cloudgate-bench                                  # all default scenarios
//	cloudgate-bench --scenario steady --nodes 10000 --read-qps 20 --config cloudgate.yaml
//	cloudgate-bench --json results.json --metrics-addr 127.0.0.1:9464
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/bench"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cloudgate-bench:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	o := bench.DefaultOptions()
	fs := flag.NewFlagSet("cloudgate-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scenarios := fs.String("scenario", strings.Join(o.Scenarios, ","), "comma-separated scenarios: steady, scaleup, churn, chaos")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "nodes in the steady cluster (N)")
	fs.IntVar(&o.NotReady, "not-ready", o.NotReady, "NotReady nodes in the steady cluster (the lifecycle controller checks each every 5 s)")
	sides := fs.String("sides", strings.Join(o.Sides, ","), "comma-separated sides to run: bare, cloudgate")
	fs.IntVar(&o.Services, "services", o.Services, "LoadBalancer services (M)")
	fs.IntVar(&o.ScaleupNodes, "scaleup-nodes", o.ScaleupNodes, "nodes arriving at once in scaleup (K)")
	fs.IntVar(&o.ChaosNodes, "chaos-nodes", o.ChaosNodes, "nodes in the chaos cluster")
	fs.IntVar(&o.ChurnNodes, "churn-nodes", o.ChurnNodes, "nodes in the churn cluster")
	fs.IntVar(&o.ChurnRate, "churn-rate", o.ChurnRate, "nodes joining (and as many leaving) per churn interval")
	fs.DurationVar(&o.ChurnInterval, "churn-interval", o.ChurnInterval, "simulated time between churn steps")
	fs.DurationVar(&o.SteadyDuration, "steady-duration", o.SteadyDuration, "simulated length of steady")
	fs.DurationVar(&o.ChurnDuration, "churn-duration", o.ChurnDuration, "simulated length of churn")
	fs.DurationVar(&o.ScaleupTimeout, "scaleup-timeout", o.ScaleupTimeout, "simulated time after which scaleup stops waiting (a side cut off is reported as such)")
	fs.Float64Var(&o.ReadQPS, "read-qps", o.ReadQPS, "the simulated cloud's read quota (calls per second)")
	fs.IntVar(&o.ReadBurst, "read-burst", o.ReadBurst, "the simulated cloud's read burst")
	fs.Float64Var(&o.WriteQPS, "write-qps", o.WriteQPS, "the simulated cloud's write quota (calls per second)")
	fs.IntVar(&o.WriteBurst, "write-burst", o.WriteBurst, "the simulated cloud's write burst")
	fs.Float64Var(&o.TimeFactor, "time-factor", o.TimeFactor, "time compression: periods divided, quotas multiplied by it (1: real time)")
	fs.Float64Var(&o.ScaleupTimeFactor, "scaleup-time-factor", o.ScaleupTimeFactor, "time compression of scaleup (1: real time)")
	fs.IntVar(&o.NodeWorkers, "node-workers", o.NodeWorkers, "the node controller's --concurrent-node-syncs")
	fs.IntVar(&o.ServiceWorkers, "service-workers", o.ServiceWorkers, "the service controller's --concurrent-service-syncs")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed of the simulated cloud's random draws")
	fs.StringVar(&o.ConfigFile, "config", "", "benchmark this cloudgate.yaml instead of the default policy (its upstream is ignored)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	metricsAddr := fs.String("metrics-addr", "", "serve the running cloudgate's Prometheus metrics on this address (e.g. 127.0.0.1:9464)")
	verbose := fs.Bool("v", false, "show the controllers' logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Scenarios = nil
	for _, s := range strings.Split(*scenarios, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Scenarios = append(o.Scenarios, s)
		}
	}
	o.Sides = nil
	for _, s := range strings.Split(*sides, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Sides = append(o.Sides, s)
		}
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if !*verbose {
		quietKlog()
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
	rep, err := bench.Run(ctx, o, stderr)
	if err != nil {
		return err
	}
	rep.WriteTable(stdout)
	fmt.Fprintf(stdout, "\n(run took %v real time)\n", time.Since(start).Round(time.Second))
	if *jsonOut != "" {
		if err := rep.WriteJSON(*jsonOut); err != nil {
			return err
		}
	}
	return nil
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
