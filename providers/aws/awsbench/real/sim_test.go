//go:build linux

package real

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/cloudgate/cloudgate/bench"
	"github.com/cloudgate/cloudgate/bench/virtual"
)

// Prediction is the virtual-time simulator's figure for a column's
// settings: bench.Run (simcloud on EC2's cloud profile, the same
// controllers on a fake API server) with the column's node workers and the
// workload's Nodes, NotReady share, Services and scale-up.
type Prediction struct {
	// InstanceReadsPerHour are the instance lookups (one-by-one, batched
	// and list pages) per hour of the steady window: what DescribeInstances
	// carries on EC2.
	InstanceReadsPerHour float64
	InitSeconds          float64
	// Plan is `cloudgate-bench plan`'s forecast for cloudgate's column
	// (bench.RunPlan with the same settings; nil for the stock columns).
	Plan *bench.PlanPoint
}

// simColumn is the simulator's column for a real one: the stock AWS CCM is
// the provider-typical client (bare+client: a batcher and the SDK's
// retries), cloudgate's chart default is cloudgate:list (aws-batch
// batches and lists), with the node workers its chart's args set.
func simColumn(t *testing.T, col string) (name string, workers int) {
	switch col {
	case colTuned:
		return bench.ColBareClient, 10
	case colCloudgate:
		return bench.ColList, nodeSyncs(readArgs(t, "testdata/chart-cloudgate.args"))
	}
	return bench.ColBareClient, 1
}

// nodeSyncs is the cloud-node controller's workers args set
// (--concurrent-node-syncs; the CCM's default 1).
func nodeSyncs(args []string) int {
	n := 1
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--concurrent-node-syncs="); ok {
			if k, err := strconv.Atoi(v); err == nil && k > 0 {
				n = k
			}
		}
	}
	return n
}

// predict runs the simulator for column col at n Nodes.
func predict(t *testing.T, o *Options, col string, n int) Prediction {
	so := bench.DefaultOptions()
	if _, err := bench.ApplyCloud(so, "aws"); err != nil {
		t.Fatal(err)
	}
	simCol, workers := simColumn(t, col)
	so.Scenarios = []string{bench.ScenarioSteady, bench.ScenarioScaleup}
	so.Columns = []string{simCol}
	so.Nodes, so.Services, so.NotReadyPct, so.ScaleupNodes = n, o.Services, o.NotReadyPct, o.ScaleupNodes
	so.NodeWorkers, so.SteadyWindow = workers, o.Window
	so.SteadyChurn, so.SteadyChurnEvery = o.Churn, o.ChurnEvery
	so.NoRoutes = true // both charts leave routes off
	so.StatusPeriod = o.StatusPeriod
	so.Latency, so.Jitter, so.Seed = o.Latency, o.Jitter, o.Seed
	if o.ScaleupNodes == 0 {
		so.Scenarios = so.Scenarios[:1]
	}
	var rep *bench.Report
	err := virtual.Test(t, context.Background(), virtual.Options{}, func(ctx context.Context) error {
		var err error
		rep, err = bench.Run(ctx, so, logWriter{t})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var plan *bench.PlanPoint
	if col == colCloudgate {
		po := *so
		po.UpstreamSupports = bench.SupportsList // the aws-batch adapter batches and lists
		err := virtual.Test(t, context.Background(), virtual.Options{}, func(ctx context.Context) error {
			p, err := bench.RunPlan(ctx, &po, []int{n}, bench.PlanConfig{Cloud: "aws", ScaleupNodes: o.ScaleupNodes}, logWriter{t})
			if err == nil {
				plan = &p.Points[0]
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	p := Prediction{InitSeconds: math.NaN(), InstanceReadsPerHour: math.NaN(), Plan: plan}
	for _, s := range rep.Scenarios {
		side := s.Columns[simCol]
		switch s.Scenario {
		case bench.ScenarioSteady:
			if side.Steady == nil {
				t.Fatalf("simulated steady %s: no steady figures", simCol)
			}
			by := side.Steady.CallsPerHourByMethod
			p.InstanceReadsPerHour = bench.InstanceReads(by)
		case bench.ScenarioScaleup:
			if side.InitSeconds != nil {
				p.InitSeconds = *side.InitSeconds
			}
		}
	}
	return p
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// ratio is real/sim as text ("–" when either is missing).
func ratio(sim, real float64) string {
	if math.IsNaN(sim) || math.IsNaN(real) || real <= 0 || sim <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", sim/real)
}
