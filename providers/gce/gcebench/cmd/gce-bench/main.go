// Command gce-bench runs the GCE benchmark (package gcebench) and prints its markdown
// report: the GCE provider alone and behind cloudgate's default install on gcesim.
// bench/gce-results.sh writes it to providers/gce/RESULTS.gce.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cloudgate/cloudgate/providers/gce/gcebench"
)

func main() {
	o := gcebench.DefaultOptions()
	sizes := flag.String("sizes", "1000,5000", "steady node counts, comma-separated")
	flag.IntVar(&o.Join, "join", o.Join, "nodes joining each steady size's cluster (0: none)")
	flag.IntVar(&o.RouteNodes, "route-nodes", o.RouteNodes, "nodes joining an empty cluster with the route controller on (0: none)")
	flag.Int64Var(&o.Seed, "seed", o.Seed, "seed (instance zones)")
	flag.DurationVar(&o.Timeout, "timeout", o.Timeout, "limit of each run")
	flag.Parse()
	o.Sizes = nil
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "-sizes: %q is not a node count >= 1\n", s)
			os.Exit(2)
		}
		o.Sizes = append(o.Sizes, n)
	}
	o.Progress = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	res, err := gcebench.Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gce-bench:", err)
		os.Exit(1)
	}
	gcebench.Report(os.Stdout, res, os.Getenv("CLOUDGATE_COMMIT"))
}
