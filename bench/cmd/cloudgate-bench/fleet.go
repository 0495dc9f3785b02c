package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cloudgate/cloudgate/bench"
)

type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}

// runFleet is "cloudgate-bench fleet": several clusters and a background
// client on one simulated account, one cluster scaling up, in the columns
// local-full, local-split and shared (limits.shared on a redis-server the
// run starts on 127.0.0.1). --chaos kills Redis mid-scale-up and restarts it.
//
//	cloudgate-bench fleet --seeds 3 --markdown fleet.md
//	cloudgate-bench fleet --chaos --columns shared --seeds 3
func runFleet(args []string, stdout, stderr io.Writer) error {
	o := bench.DefaultFleetOptions()
	fs := flag.NewFlagSet("cloudgate-bench fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	columns := fs.String("columns", "local-full,local-split,shared", "comma-separated fleet columns: local-full, local-split, shared")
	fs.IntVar(&o.Seeds, "seeds", o.Seeds, "run every column with this many seeds (seed, seed+1, ...) and report medians and spreads")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "first seed")
	fs.IntVar(&o.Clusters, "clusters", o.Clusters, "clusters sharing the account")
	fs.IntVar(&o.Nodes, "nodes", o.Nodes, "initialised nodes per cluster")
	fs.IntVar(&o.ScaleupNodes, "scaleup-nodes", o.ScaleupNodes, "nodes joining the first cluster at once (K)")
	fs.Float64Var(&o.ReadQPS, "read-qps", o.ReadQPS, "the account's read quota (calls per second)")
	fs.IntVar(&o.ReadBurst, "read-burst", o.ReadBurst, "the account's read burst")
	fs.Float64Var(&o.WriteQPS, "write-qps", o.WriteQPS, "the account's write quota")
	fs.IntVar(&o.WriteBurst, "write-burst", o.WriteBurst, "the account's write burst")
	fs.Float64Var(&o.BackgroundQPS, "background-qps", o.BackgroundQPS, "reads per second of a client outside cloudgate on the same account")
	fs.Float64Var(&o.Headroom, "headroom", o.Headroom, "fraction of the quota operators configure")
	fs.DurationVar(&o.Latency, "latency", o.Latency, "the simulated cloud's base latency")
	fs.DurationVar(&o.Jitter, "jitter", o.Jitter, "uniform jitter added to the latency")
	fs.Float64Var(&o.KubeQPS, "kube-qps", o.KubeQPS, "each controller's kube client QPS (CCM default 20)")
	fs.IntVar(&o.KubeBurst, "kube-burst", o.KubeBurst, "each controller's kube client burst (CCM default 30)")
	fs.Float64Var(&o.TimeFactor, "time-factor", o.TimeFactor, "time compression (periods and latency divided, quotas multiplied); 1, the default, runs uncompressed: above 1 the machine's load enters the figures")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "simulated cold start before the steady window")
	fs.DurationVar(&o.SteadyWindow, "steady-window", o.SteadyWindow, "simulated steady window measured before the scale-up")
	fs.DurationVar(&o.QuiesceTimeout, "quiesce-timeout", o.QuiesceTimeout, "simulated cap on the scale-up")
	fs.BoolVar(&o.Chaos, "chaos", o.Chaos, "shared column: kill Redis during the scale-up and restart it")
	fs.DurationVar(&o.ChaosAfter, "chaos-after", o.ChaosAfter, "simulated time into the scale-up when Redis is killed")
	fs.DurationVar(&o.ChaosOutage, "chaos-outage", o.ChaosOutage, "simulated time Redis stays down")
	fs.StringVar(&o.RedisServer, "redis-server", "", "redis-server binary (default: from PATH or /usr/bin)")
	fs.DurationVar(&o.RedisTimeout, "redis-timeout", o.RedisTimeout, "limits.shared.redisTimeout (real time)")
	fs.Float64Var(&o.BackgroundShare, "background-share", o.BackgroundShare, "limits.shared.backgroundShare of the shared column (0: no cap)")
	fs.BoolVar(&o.Adaptive, "adaptive", o.Adaptive, "limits.<family>.adaptive of every member (AIMD; its recovery is not time-compressed)")
	mdOut := fs.String("markdown", "", "also write the table as Markdown to this file")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	verbose := fs.Bool("v", false, "show the controllers' and the fleet's logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Columns = splitList(*columns)
	if err := o.Validate(); err != nil {
		return err
	}
	if !*verbose {
		quietKlog()
		// go-redis logs every refused dial while --chaos keeps Redis down.
		redis.SetLogger(discardRedisLog{})
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	start := time.Now()
	rep, err := bench.RunFleet(ctx, o, stderr)
	if err != nil {
		return err
	}
	rep.WriteMarkdown(stdout)
	fmt.Fprintf(stdout, "\n(run took %v real time)\n", time.Since(start).Round(time.Second))
	if *mdOut != "" {
		f, err := os.Create(*mdOut)
		if err != nil {
			return err
		}
		rep.WriteMarkdown(f)
		if err := f.Close(); err != nil {
			return err
		}
	}
	if *jsonOut != "" {
		if err := rep.WriteJSON(*jsonOut); err != nil {
			return err
		}
	}
	return rep.Check()
}
