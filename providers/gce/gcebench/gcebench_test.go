package gcebench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs the whole benchmark at small sizes and checks what holds at any size: every
// joining Node initialised (and routed) in both columns; the provider alone looks Nodes up
// with instances.get, cloudgate's round is answered from aggregatedList pages; the report
// has a row per size, column and method.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controllers for about half a minute")
	}
	o := &Options{Sizes: []int{40}, Join: 15, RouteNodes: 20, Seed: 1, Timeout: 3 * time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range Columns {
		st := res.Steady[col]
		if len(st) != 1 || st[0].Lookups < 40 {
			t.Fatalf("%s: steady %+v, want one round of 40 lookups", col, st)
		}
		for _, su := range append(res.Join[col], *res.Routes[col]) {
			if su.Initialized != su.Joining || su.Seconds != su.Seconds { // NaN: timed out
				t.Errorf("%s: %d of %d joining nodes initialised (%.1fs)", col, su.Initialized, su.Joining, su.Seconds)
			}
		}
		if got := res.Routes[col].Routes; got != 20 {
			t.Errorf("%s: %d routes in gcesim, want 20", col, got)
		}
	}
	gce, cg := res.Steady[ColGCE][0], res.Steady[ColCloudgate][0]
	if gce.Round["compute.instances.get"] != 40 || gce.PerHour(ColGCE)["compute.instances.get"] != 480 {
		t.Errorf("gce round %v, hour %v; want 40 instances.get, 480 an hour", gce.Round, gce.PerHour(ColGCE))
	}
	if cg.Round["compute.instances.get"] != 0 || cg.ListPages != 1 || cg.PerHour(ColCloudgate)["compute.instances.aggregatedList"] != 12 {
		t.Errorf("gce+cloudgate round %v, list pages %d, hour %v; want no instances.get, 1 page, 12 an hour", cg.Round, cg.ListPages, cg.PerHour(ColCloudgate))
	}
	var out bytes.Buffer
	Report(&out, res, "test")
	for _, row := range []string{
		"| 40 | gce | compute.instances.get | 40 | 0 | 480 | 0.53% (read) |",
		"| 40 | gce+cloudgate | compute.instances.aggregatedList | 1 | 0 | 12 | 0.01% (list) |",
		"| kubernetes#21563 (reported) |",
	} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("report has no row %q:\n%s", row, out.String())
		}
	}
}
