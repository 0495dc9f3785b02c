//go:build linux

package real

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/bench"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/provider/floor"
	"github.com/cloudgate/cloudgate/providers/aws/awsbatch"
)

// The shapes of cloudgate's DescribeInstances (ec2sim.DescribeShapes): the
// provider's own listings (no filter; not node lookups, not in the floor),
// aws-batch's batches by instance ID and by private DNS name, and its list
// (tag-key pages and the legacy-tag page).
const (
	shapeProviderList = "all +paged"
	shapeByID         = "filter:instance-id +paged"
	shapeByName       = "filter:instance-state-name,private-dns-name +paged"
)

// floorTolerance is how far above the floor cloudgate's node lookups may be.
const floorTolerance = 1.2

// floorOf is the floor of cloudgate's DescribeInstances per hour at n
// Nodes: the run's knobs and cloudgate.yaml as cloudgate resolves it (list
// interval, batch size, the lifecycle TTLs).
func floorOf(o *Options, cfg *provider.Config, n int) (floor.Floor, floor.Workload, error) {
	ttls := cfg.TTLs()
	w := floor.Workload{
		Nodes:        n,
		NotReady:     int(math.Round(float64(n) * o.NotReadyPct / 100)), // as populate holds them
		PageSize:     1000,                                              // EC2's MaxResults, aws-batch's pages
		MaxBatch:     min(cfg.Batch.MaxSize, awsbatch.MaxBatchSize),
		ChurnEvery:   o.ChurnEvery,
		JoinPerStep:  o.Churn,
		LeavePerStep: o.Churn,
		LifecycleTTL: min(ttls["InstanceExists"], ttls["InstanceShutdown"]),
	}
	if cfg.Batch.ListPrefetch {
		w.ListInterval = cfg.Batch.ListInterval.Duration
	}
	f, err := floor.PerHour(w)
	return f, w, err
}

// nodeLookups is cloudgate's DescribeInstances per hour less the
// provider's own listings.
func nodeLookups(f *Figures) float64 { return f.PerHour[describe] - f.Shapes[shapeProviderList] }

// floorTable sets cloudgate's node lookups beside their floor, by purpose
// (list pages, lookups by name for joining Nodes, batches by instance ID for
// the lifecycle checks and the leaving Nodes), for cloudgate's column.
func floorTable(b *bytes.Buffer, o *Options, figs []*Figures) {
	text, err := os.ReadFile("testdata/chart-cloudgate.yaml")
	if err != nil {
		fmt.Fprintf(b, "\nFloor: not computed (%v)\n", err)
		return
	}
	cfg, err := resolvedText(string(text))
	if err != nil {
		fmt.Fprintf(b, "\nFloor: not computed (%v)\n", err)
		return
	}
	header := false
	for _, f := range figs {
		if f.Column != colCloudgate {
			continue
		}
		fl, w, err := floorOf(o, cfg, f.Nodes)
		if err != nil {
			fmt.Fprintf(b, "\nFloor at %d Nodes: not computed (%v)\n", f.Nodes, err)
			continue
		}
		if !header {
			header = true
			fmt.Fprintf(b, "\nNode lookups against their floor (provider/floor): list pages (%d per page, one refresh per batch.listInterval %v), one call per churn step for the joining Nodes and one for the leaving ones, one batch of all NotReady Nodes per the shortest lifecycle TTL (%v: min of InstanceExists' and InstanceShutdown's); cloudgate's DescribeInstances less the provider's own listings (%q, %s), by shape: the list (tag-key and legacy-tag pages), by private DNS name (joining Nodes), by instance ID (lifecycle checks, leaving Nodes, status lookups the list missed). Goal: within %.1f×.\n\n",
				w.PageSize, w.ListInterval, w.LifecycleTTL, shapeProviderList, "not in the floor", floorTolerance)
			fmt.Fprintf(b, "| nodes | NotReady | floor/h: list + join + leave + lifecycle = total | cloudgate/h: list + by name + by ID = lookups | provider's own listings/h | lookups / floor | within %.1f× |\n", floorTolerance)
			fmt.Fprintf(b, "|---:|---:|---|---|---:|---:|---|\n")
		}
		lookups := nodeLookups(f)
		byName, byID := f.Shapes[shapeByName], f.Shapes[shapeByID]
		list := lookups - byName - byID
		r := lookups / fl.Total()
		ok := "yes"
		if r > floorTolerance {
			ok = "**no**"
		}
		fmt.Fprintf(b, "| %d | %d | %.0f + %.0f + %.0f + %.0f = %.0f | %.0f + %.0f + %.0f = %.0f | %.0f | %.2f | %s |\n",
			f.Nodes, w.NotReady, fl.List, fl.Join, fl.Leave, fl.Lifecycle, fl.Total(), list, byName, byID, lookups, f.Shapes[shapeProviderList], r, ok)
	}
}

// resolvedText is resolved without a test: cloudgate.yaml text as
// cloudgate resolves it.
func resolvedText(text string) (*provider.Config, error) {
	c, err := provider.LoadConfig(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	return c.Resolve(provider.ResolveOptions{})
}

// TestSimulatorListsAsTheAdapter: the simulator's aws profile walks the
// list as aws-batch does (live instances only; the legacy-tag page on every
// LegacyRecheck-th walk while it finds none).
func TestSimulatorListsAsTheAdapter(t *testing.T) {
	p := bench.CloudProfiles["aws"]
	if !p.ListAlive || !p.ListTrailingPage || p.ListTrailingEvery != awsbatch.LegacyRecheck {
		t.Fatalf("aws profile: ListAlive %v, ListTrailingPage %v, ListTrailingEvery %d; aws-batch lists live instances and reads the legacy-tag page every %d walks",
			p.ListAlive, p.ListTrailingPage, p.ListTrailingEvery, awsbatch.LegacyRecheck)
	}
}

// TestFloorOfChartConfig: the harness's floor at the default knobs and
// cloudgate's chart configuration is the hand-computed one (1,000 Nodes:
// 12 list pages + 12 + 12 + 120 lifecycle batches; 5,000: 60 + 12 + 12 +
// 120), and the table sets the lookups beside it.
func TestFloorOfChartConfig(t *testing.T) {
	text, err := os.ReadFile("testdata/chart-cloudgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := resolvedText(string(text))
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	for n, want := range map[int]floor.Floor{1000: {List: 12, Join: 12, Leave: 12, Lifecycle: 120}, 5000: {List: 60, Join: 12, Leave: 12, Lifecycle: 120}} {
		got, w, err := floorOf(o, cfg, n)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%d Nodes: floor %+v, want %+v (workload %+v)", n, got, want, w)
		}
	}
	var b bytes.Buffer
	floorTable(&b, o, []*Figures{{Column: colCloudgate, Nodes: 1000, PerHour: map[string]float64{describe: 200},
		Shapes: map[string]float64{shapeProviderList: 20, shapeByName: 12, shapeByID: 132}, Window: time.Hour}})
	if want := "| 1000 | 10 | 12 + 12 + 12 + 120 = 156 | 36 + 12 + 132 = 180 | 20 | 1.15 | yes |"; !strings.Contains(b.String(), want) {
		t.Fatalf("table lacks %q:\n%s", want, b.String())
	}
}
