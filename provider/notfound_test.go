package provider

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// TestNotFoundGuard: a single "does not exist" never reaches the caller as
// false; it is passed on only when a second upstream answer at least
// confirmAfter later agrees (and the Node is past its grace period); a
// terminated instance passes at once; enabled: false passes everything.
func TestNotFoundGuard(t *testing.T) {
	type step struct {
		at      time.Duration // since the start
		missing bool          // the upstream's answer
		want    string        // "exists", "missing", "retry"
	}
	cases := []struct {
		name     string
		disabled bool
		age      time.Duration // the Node's age at the start (0: no creation time)
		v1       bool          // InstanceExistsByProviderID instead of InstanceExists
		deleted  bool          // a batch/list answer described the instance as terminated
		steps    []step
		calls    int // upstream calls over the steps
	}{
		// A held answer stays cached (negativeTTL 30 s): the checks in
		// between cost no upstream call; at the first check confirmAfter
		// (20 s) after the first hold the guard asks again and that fresh
		// answer decides.
		{name: "one 404 for a live instance is held, then refuted", age: time.Hour, steps: []step{
			{0, true, "retry"}, {5 * time.Second, false, "retry"}, {20 * time.Second, false, "exists"}, {25 * time.Second, false, "exists"}}, calls: 2},
		{name: "a removed instance is confirmed after confirmAfter", age: time.Hour, steps: []step{
			{0, true, "retry"}, {5 * time.Second, true, "retry"}, {10 * time.Second, true, "retry"},
			{19 * time.Second, true, "retry"}, {20 * time.Second, true, "missing"}}, calls: 2},
		{name: "answers closer than confirmAfter never confirm", age: time.Hour, steps: []step{
			{0, true, "retry"}, {time.Second, true, "retry"}, {19 * time.Second, true, "retry"}, {19*time.Second + 500*time.Millisecond, true, "retry"}}, calls: 1},
		{name: "a young node is held through its grace period", age: 10 * time.Second, steps: []step{
			{0, true, "retry"}, {25 * time.Second, true, "retry"}, {60 * time.Second, true, "retry"},
			{100 * time.Second, true, "retry"}, {115 * time.Second, true, "missing"}}, calls: 4},
		{name: "v1 by provider ID", v1: true, steps: []step{
			{0, true, "retry"}, {10 * time.Second, true, "retry"}, {20 * time.Second, true, "missing"}}, calls: 2},
		{name: "v1 live instance", v1: true, steps: []step{
			{0, true, "retry"}, {time.Second, false, "retry"}, {20 * time.Second, false, "exists"}}, calls: 2},
		{name: "terminated is definitive", age: time.Hour, deleted: true, steps: []step{
			{0, true, "missing"}}, calls: 1},
		{name: "disabled passes the first answer", disabled: true, age: time.Hour, steps: []step{
			{0, true, "missing"}}, calls: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			start := clk.Now()
			up := newCountingCloud()
			missing := false
			up.existsHook = func(*v1.Node) (bool, error) { return !missing, nil }
			cfg := testConfig(clk)
			if tc.disabled {
				cfg.NotFoundGuard.Enabled = boolp(false)
			}
			g, err := newGate(up, cfg, gateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := &cloud{g: g, w: enforce{g}}
			node := testNode("node-1", "fake://i-1")
			if tc.age > 0 {
				node.CreationTimestamp = metav1.NewTime(start.Add(-tc.age))
			}
			if tc.deleted {
				g.fill(nodeKey{byProviderID: true, id: "fake://i-1"}, InstanceStatus{Deleted: true}, g.fillMarks())
				g.inst.exists.Invalidate(nodeKey{byProviderID: true, id: "fake://i-1"}) // the read itself asks upstream
			}
			for _, s := range tc.steps {
				clk.SetTime(start.Add(s.at))
				missing = s.missing
				up.Cloud.ExistsByProviderID = !s.missing
				var exists bool
				if tc.v1 {
					inst, _ := c.Instances()
					exists, err = inst.InstanceExistsByProviderID(context.Background(), "fake://i-1")
				} else {
					exists, err = v2(t, c).InstanceExists(context.Background(), node)
				}
				got := "exists"
				var re *cloudproviderapi.RetryError
				switch {
				case errors.As(err, &re):
					got = "retry"
				case err != nil:
					t.Fatalf("at %s: unexpected error %v", s.at, err)
				case !exists:
					got = "missing"
				}
				if got != s.want {
					t.Fatalf("at %s (upstream missing=%v): got %s, want %s", s.at, s.missing, got, s.want)
				}
			}
			calls := up.Calls("InstanceExists")
			if tc.v1 {
				calls = up.Calls("InstanceExistsByProviderID")
			}
			if calls != tc.calls {
				t.Errorf("upstream calls = %d, want %d (held answers stay cached; a due hold is asked again once)", calls, tc.calls)
			}
		})
	}
}
