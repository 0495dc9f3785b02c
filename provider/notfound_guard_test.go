package provider

// Issue 30, items 2 and 4: the not-found guard on every path, and a copy of
// every cached answer per caller.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	fakecloud "k8s.io/cloud-provider/fake"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
)

// answerKind classifies a guarded answer: "exists", "missing" (the caller
// is told the instance does not exist) or "retry" (held).
func answerKind(t *testing.T, exists bool, err error) string {
	t.Helper()
	var re *cloudproviderapi.RetryError
	switch {
	case errors.As(err, &re):
		return "retry"
	case errors.Is(err, cloudprovider.InstanceNotFound):
		if err != cloudprovider.InstanceNotFound {
			t.Errorf("InstanceNotFound came back wrapped (%v), not as the bare sentinel", err)
		}
		return "missing"
	case err != nil:
		t.Fatalf("unexpected error %v", err)
	case !exists:
		return "missing"
	}
	return "exists"
}

// v1Node is a NotReady Node for the lifecycle controller.
func v1Node(name, providerID string, created time.Time) *v1.Node {
	n := testNode(name, providerID)
	n.CreationTimestamp = metav1.NewTime(created)
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
	return n
}

// TestV1ByNameGuarded runs the real CloudNodeLifecycleController
// over cloudgate in front of an upstream with only v1 Instances: a NotReady
// Node without a provider ID goes through GetInstanceProviderID →
// Instances.InstanceID(name). One InstanceNotFound for a live instance must
// not delete it (on 760e41f it did, at the first pass); a removed instance's
// Node goes at the first pass at least confirmAfter after the first hold.
func TestV1ByNameGuarded(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	up.EnableInstancesV2 = false
	up.ExtIDErr = map[types.NodeName]error{}
	cfg := testConfig(clk)
	cg := mustNew(t, up, cfg)
	if _, ok := cg.InstancesV2(); ok {
		t.Fatal("the upstream must offer v1 Instances only")
	}
	node := v1Node("node-1", "", clk.Now().Add(-10*time.Second))
	client := fake.NewClientset(node)
	factory := informers.NewSharedInformerFactory(client, 0)
	lc, err := nodelifecycle.NewCloudNodeLifecycleController(factory.Core().V1().Nodes(), client, cg, time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	present := func() bool {
		_, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		return err == nil
	}

	// One "not found" for a live instance: held, then refuted. Run sets the
	// controller's event recorder and makes its first pass (the next one an
	// hour later, in real time); the test makes the others.
	up.ExtIDErr["node-1"] = cloudprovider.InstanceNotFound
	wg.Go(func() { lc.Run(ctx, controllersmetrics.NewControllerManagerMetrics("test")) })
	waitUntil(t, "the first lifecycle pass", func() bool { return up.Calls("InstanceID") > 0 })
	lc.MonitorNodes(ctx)
	if !present() {
		t.Fatal("the Node of a live instance was deleted on one InstanceID answer (the v1 by-name path is unguarded)")
	}
	delete(up.ExtIDErr, "node-1")
	for range 5 {
		clk.Step(10 * time.Second)
		lc.MonitorNodes(ctx)
		if !present() {
			t.Fatal("the Node of a live instance was deleted after its hold was refuted")
		}
	}
	if up.Calls("InstanceID") < 2 {
		t.Fatalf("InstanceID asked %d times: the hold was never re-read", up.Calls("InstanceID"))
	}

	// The instance is removed: the Node goes once a second answer at least
	// confirmAfter after the first agrees, here at a 45 s revisit.
	up.ExtIDErr["node-1"] = cloudprovider.InstanceNotFound
	clk.Step(time.Minute) // past every cached answer
	lc.MonitorNodes(ctx)
	if !present() {
		t.Fatal("deleted on the first answer after the removal")
	}
	clk.Step(45 * time.Second)
	lc.MonitorNodes(ctx)
	if present() {
		t.Fatal("the Node of a removed instance was not deleted at the first pass at least confirmAfter after the first hold")
	}
}

// TestV1GracePeriod is the verdict on "v1 InstanceExistsByProviderID
// has no grace period": confirmed on 760e41f (the v1 calls carry no Node, so
// the guard saw no creation time). The CCM hands cloudgate its informers
// (SetInformers, after Initialize); the guard now finds the Node in the node
// informer, by provider ID for InstanceExistsByProviderID and by name for
// InstanceID, and holds a young Node's "does not exist" through gracePeriod.
func TestV1GracePeriod(t *testing.T) {
	for _, byName := range []bool{false, true} {
		t.Run(fmt.Sprintf("byName=%v", byName), func(t *testing.T) {
			clk := newFakeClock()
			start := clk.Now()
			up := newCountingCloud()
			up.EnableInstancesV2 = false
			up.ExistsByProviderID = false
			up.ExtIDErr = map[types.NodeName]error{"node-1": cloudprovider.InstanceNotFound}
			cfg := testConfig(clk)
			// The registered factory's cloud, as the CCM builds it.
			l := &lazyCloud{cfg: cfg}
			l.upOnce.Do(func() { l.up = up })
			defer l.Close()
			pid := "fake://i-1"
			if byName {
				pid = ""
			}
			client := fake.NewClientset(v1Node("node-1", pid, start.Add(-10*time.Second)))
			factory := informers.NewSharedInformerFactory(client, 0)
			l.Initialize(nil, nil)
			l.SetInformers(factory)
			ctx, cancel := context.WithCancel(context.Background())
			defer func() { cancel(); factory.Shutdown() }()
			factory.Start(ctx.Done())
			factory.WaitForCacheSync(ctx.Done())
			inst, _ := l.Instances()
			ask := func() string {
				if byName {
					_, err := inst.InstanceID(ctx, "node-1")
					return answerKind(t, false, err)
				}
				exists, err := inst.InstanceExistsByProviderID(ctx, "fake://i-1")
				return answerKind(t, exists, err)
			}
			// gracePeriod 2 m from the Node's creation (10 s before start):
			// held through 110 s, whatever confirmAfter says.
			for _, at := range []time.Duration{0, 25 * time.Second, 60 * time.Second, 105 * time.Second} {
				clk.SetTime(start.Add(at))
				if got := ask(); got != "retry" {
					t.Fatalf("at %s (Node %s old): %s, want the answer held through gracePeriod (%s)", at, at+10*time.Second, got, cfg.NotFoundGuard.GracePeriod)
				}
			}
			clk.SetTime(start.Add(115 * time.Second))
			if got := ask(); got != "missing" {
				t.Fatalf("at 115 s (Node 125 s old): %s, want missing", got)
			}
		})
	}
}

// guardPath is one way a caller asks whether an instance exists.
type guardPath struct {
	name string
	// setup builds cloudgate over an upstream whose instance i-1 (node-1)
	// is missing while *missing is true; ask asks once.
	setup func(t *testing.T, cfg *Config, missing func() bool) (ask func() (bool, error))
}

func guardPaths() []guardPath {
	v2Exists := func(providerID string) func(t *testing.T, cfg *Config, missing func() bool) func() (bool, error) {
		return func(t *testing.T, cfg *Config, missing func() bool) func() (bool, error) {
			up := newCountingCloud()
			up.existsHook = func(*v1.Node) (bool, error) { return !missing(), nil }
			c := mustNew(t, up, cfg)
			node := testNode("node-1", providerID)
			node.CreationTimestamp = metav1.NewTime(time.Unix(0, 0))
			return func() (bool, error) { return v2(t, c).InstanceExists(context.Background(), node) }
		}
	}
	return []guardPath{
		{"v2 by provider ID", v2Exists("fake://i-1")},
		{"v2 by name", v2Exists("")},
		{"v1 by provider ID", func(t *testing.T, cfg *Config, missing func() bool) func() (bool, error) {
			up := &v1Hooked{countingCloud: newCountingCloud(), missing: missing}
			up.EnableInstancesV2 = false
			c := mustNew(t, up, cfg)
			inst, _ := c.Instances()
			return func() (bool, error) { return inst.InstanceExistsByProviderID(context.Background(), "fake://i-1") }
		}},
		{"v1 by name (InstanceID)", func(t *testing.T, cfg *Config, missing func() bool) func() (bool, error) {
			up := &v1Hooked{countingCloud: newCountingCloud(), missing: missing}
			up.EnableInstancesV2 = false
			c := mustNew(t, up, cfg)
			inst, _ := c.Instances()
			return func() (bool, error) {
				id, err := inst.InstanceID(context.Background(), "node-1")
				return err == nil && id != "", err
			}
		}},
		{"batch", func(t *testing.T, cfg *Config, missing func() bool) func() (bool, error) {
			up := &hookedBatchCloud{batchCloud: &batchCloud{Cloud: &fakecloud.Cloud{Provider: "fake"}, missing: map[string]bool{}}, missing: missing}
			c := mustNew(t, up, cfg)
			node := testNode("node-1", "fake://i-1")
			node.CreationTimestamp = metav1.NewTime(time.Unix(0, 0))
			return func() (bool, error) { return v2(t, c).InstanceExists(context.Background(), node) }
		}},
	}
}

// v1Hooked answers InstanceID and InstanceExistsByProviderID from missing.
type v1Hooked struct {
	*countingCloud
	missing func() bool
}

func (v *v1Hooked) Instances() (cloudprovider.Instances, bool) { return v, true }

func (v *v1Hooked) InstanceID(_ context.Context, _ types.NodeName) (string, error) {
	v.count("InstanceID")
	if v.missing() {
		return "", fmt.Errorf("describe node-1: %w", cloudprovider.InstanceNotFound) // wrapped, as providers do
	}
	return "i-1", nil
}

func (v *v1Hooked) InstanceExistsByProviderID(context.Context, string) (bool, error) {
	v.count("InstanceExistsByProviderID")
	return !v.missing(), nil
}

// hookedBatchCloud answers its batches from missing.
type hookedBatchCloud struct {
	*batchCloud
	missing func() bool
}

func (h *hookedBatchCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return h, true }

func (h *hookedBatchCloud) BatchInstanceStatus(ctx context.Context, nodes []*v1.Node) ([]InstanceStatus, error) {
	m := h.missing()
	h.mu.Lock()
	for _, n := range nodes {
		h.batchCloud.missing[n.Name] = m
	}
	h.mu.Unlock()
	return h.batchCloud.BatchInstanceStatus(ctx, nodes)
}

// TestSlowRevisitsConfirm: on every path, checks every 5 s to 10
// min: a removed instance is reported missing at the first check at least
// confirmAfter after the first hold (on 760e41f never at 45 s or slower: the
// hold restarted when the previous check was older than 2·confirmAfter+1 s);
// a live instance answered "not found" once is never reported missing.
func TestSlowRevisitsConfirm(t *testing.T) {
	intervals := []time.Duration{5 * time.Second, 21 * time.Second, 45 * time.Second, 2 * time.Minute, 10 * time.Minute}
	var liveChecks, removedChecks int
	defer func() {
		t.Logf("checks: live instance never missing on one answer=%d, removed instance missing at the first check confirmAfter after the first hold=%d (%d paths x %d revisit intervals)",
			liveChecks, removedChecks, len(guardPaths()), len(intervals))
	}()
	for _, p := range guardPaths() {
		for _, every := range intervals {
			for _, live := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/every %s/live=%v", p.name, every, live), func(t *testing.T) {
					clk := newFakeClock()
					cfg := testConfig(clk)
					cfg.Batch.SendAtOnce = boolp(true)
					confirm := cfg.NotFoundGuard.ConfirmAfter.Duration
					checks := 0
					ask := p.setup(t, cfg, func() bool { return !live || checks == 0 })
					first := clk.Now()
					for checks = 0; checks*int(every/time.Second) <= int((confirm+3*every)/time.Second); checks++ {
						clk.SetTime(first.Add(time.Duration(checks) * every))
						exists, err := ask()
						got := answerKind(t, exists, err)
						at := time.Duration(checks) * every
						if live {
							liveChecks++
						} else if at >= confirm {
							removedChecks++
						}
						switch {
						case live && got == "missing":
							t.Fatalf("at %s: a live instance answered \"not found\" once was reported missing", at)
						case live:
						case checks == 0 && got != "retry":
							t.Fatalf("first answer: %s, want it held", got)
						case at < confirm && got != "retry":
							t.Fatalf("at %s: %s, want held (confirmAfter %s)", at, got, confirm)
						case at >= confirm && got != "missing":
							t.Fatalf("at %s (first check at least confirmAfter after the first hold): %s, want missing", at, got)
						case got == "missing":
							return
						}
					}
					if !live {
						t.Fatal("never reported missing")
					}
				})
			}
		}
	}
}

// TestBatchFillAfterInvalidation is the verdict on "a batch answer
// can confirm after an invalidation": confirmed on 760e41f. A batch sent
// before the guard's re-read (here 1 s after the first hold, answering the
// same one-off "not found") returns between the re-read's invalidation and
// its read; fill stored it with cache.Put, skipping the epoch check, so the
// re-read was answered from it and the live instance was reported missing
// on two answers 1 s apart. fill now stores with PutSince (marks taken
// before the batch was sent): the re-read goes upstream.
func TestBatchFillAfterInvalidation(t *testing.T) {
	clk := newFakeClock()
	cfg := testConfig(clk)
	missing := true
	up := &hookedBatchCloud{batchCloud: &batchCloud{Cloud: &fakecloud.Cloud{Provider: "fake"}, missing: map[string]bool{}}, missing: func() bool { return missing }}
	c := mustNew(t, up, cfg)
	g := enf(c)
	i := v2(t, c).(*instancesV2)
	node := testNode("node-1", "fake://i-1")
	node.CreationTimestamp = metav1.NewTime(time.Unix(0, 0))
	key := keyOfNode(node)
	ctx := context.Background()

	if exists, err := i.InstanceExists(ctx, node); answerKind(t, exists, err) != "retry" {
		got := answerKind(t, exists, err)
		t.Fatalf("first answer %s, want held", got)
	}
	clk.Step(time.Second)
	late := g.fillMarks() // a batch sent now, answering the same one-off "not found"
	missing = false       // the instance exists: the cloud answers so from now on
	clk.Step(cfg.NotFoundGuard.ConfirmAfter.Duration)
	// The hold is due: the guard's re-read, as InstanceExists builds it,
	// with the late batch landing between its invalidation and its read.
	exists, err := g.nf.check(key, node.CreationTimestamp.Time, false, nil, func() (bool, error) {
		invalidate(g.inst.exists.c, key)
		g.fill(key, InstanceStatus{Err: cloudprovider.InstanceNotFound}, late)
		return g.inst.exists.read(ctx, i.up, node, cloudprovider.InstancesV2.InstanceExists)
	})
	if got := answerKind(t, exists, err); got != "exists" {
		t.Fatalf("re-read answered %s: a batch sent before the re-read confirmed the hold", got)
	}
}

// TestWrappedNotFound: a provider that wraps InstanceNotFound (the
// AWS provider's InstanceMetadata does, with %w) — per call or per node of a
// batch — still gets negative caching and the guard, and controllers get
// the bare sentinel, comparable with == (cloudprovider.GetInstanceProviderID
// compares InstanceID's error so). On 760e41f the wrapped error was neither
// cached nor guarded, and a batch's wrapped per-node error reached
// InstanceExists callers as an error instead of "does not exist".
func TestWrappedNotFound(t *testing.T) {
	wrapped := fmt.Errorf("InvalidInstanceID.NotFound: %w", cloudprovider.InstanceNotFound)
	t.Run("per call", func(t *testing.T) {
		clk := newFakeClock()
		up := newCountingCloud()
		up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) { return nil, wrapped }
		c := mustNew(t, up, testConfig(clk))
		node := testNode("node-1", "fake://i-1")
		for range 2 {
			_, err := v2(t, c).InstanceMetadata(context.Background(), node)
			if err != cloudprovider.InstanceNotFound {
				t.Fatalf("InstanceMetadata error %v, want the bare cloudprovider.InstanceNotFound", err)
			}
		}
		if n := up.Calls("InstanceMetadata"); n != 1 {
			t.Errorf("upstream asked %d times; a wrapped InstanceNotFound must be cached as a negative answer", n)
		}
	})
	t.Run("batch", func(t *testing.T) {
		clk := newFakeClock()
		bc := &wrappingBatchCloud{batchCloud: &batchCloud{Cloud: &fakecloud.Cloud{Provider: "fake"}, missing: map[string]bool{"node-1": true}}, err: wrapped}
		c := mustNew(t, bc, testConfig(clk))
		node := testNode("node-1", "fake://i-1")
		node.CreationTimestamp = metav1.NewTime(time.Unix(0, 0))
		exists, err := v2(t, c).InstanceExists(context.Background(), node)
		if got := answerKind(t, exists, err); got != "retry" {
			t.Fatalf("first wrapped not-found from a batch: %s, want held", got)
		}
		clk.Step(time.Minute)
		exists, err = v2(t, c).InstanceExists(context.Background(), node)
		if got := answerKind(t, exists, err); got != "missing" {
			t.Fatalf("a removed instance, wrapped not-found: %s, want missing", got)
		}
		_, err = v2(t, c).InstanceMetadata(context.Background(), node)
		if err != cloudprovider.InstanceNotFound {
			t.Fatalf("InstanceMetadata from a batch: %v, want the bare sentinel", err)
		}
	})
}

// wrappingBatchCloud answers a missing node with a wrapped InstanceNotFound.
type wrappingBatchCloud struct {
	*batchCloud
	err error
}

func (w *wrappingBatchCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return w, true }

func (w *wrappingBatchCloud) BatchInstanceStatus(ctx context.Context, nodes []*v1.Node) ([]InstanceStatus, error) {
	out, err := w.batchCloud.BatchInstanceStatus(ctx, nodes)
	for i := range out {
		if out[i].Err == cloudprovider.InstanceNotFound {
			out[i].Err = w.err
		}
	}
	return out, err
}

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
			g, err := newEnforcer(up, cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			g.bind(g)
			c := &cloud{g: g.gate, r: g}
			node := testNode("node-1", "fake://i-1")
			if tc.age > 0 {
				node.CreationTimestamp = metav1.NewTime(start.Add(-tc.age))
			}
			if tc.deleted {
				g.fill(nodeKey{byProviderID: true, id: "fake://i-1"}, InstanceStatus{Deleted: true}, g.fillMarks())
				g.inst.exists.c.Invalidate(nodeKey{byProviderID: true, id: "fake://i-1"}) // the read itself asks upstream
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

// A "terminated" answer counts only if no "exists" answer for its key came
// after the call it answers was sent: a stale one (a batch sent before an
// instance was re-created under the same name-based provider ID, answered
// after the new instance was described as existing) must not let the next
// "does not exist" through at once; it is held as any other. A
// "terminated" answer to a call sent after the "exists" one still counts.
func TestStaleTerminatedDoesNotPassNotFound(t *testing.T) {
	clk := newFakeClock()
	cfg := DefaultConfig().NotFoundGuard
	nf := newNotFoundGuard(cfg, 0, clk, nil)
	key := nodeKey{byProviderID: true, id: "gce://p/z/vm-1"}
	never := func() (bool, error) { t.Fatal("re-read at the first answer"); return false, nil }

	sent := nf.mark() // a batch is sent
	nf.refute(key)    // the re-created instance is described as existing
	nf.markDeleted(key, sent)
	if ex, err := nf.check(key, time.Time{}, false, nil, never); answerKind(t, ex, err) != "retry" {
		t.Fatalf("after a stale terminated answer: %v, %v; want the first \"does not exist\" held", ex, err)
	}

	key2 := nodeKey{byProviderID: true, id: "gce://p/z/vm-2"}
	nf.refute(key2)
	nf.markDeleted(key2, nf.mark()) // sent after the exists answer
	if ex, err := nf.check(key2, time.Time{}, false, nil, never); answerKind(t, ex, err) != "missing" {
		t.Fatalf("after a current terminated answer: %v, %v; want \"does not exist\" passed at once", ex, err)
	}
}

// TestContestedHoldStartsAfresh: a batch or list call sent before a hold
// began answers "exists" after it (markExists refuses: the held "does not
// exist" may be the newer answer). The "exists" may be the newer one too —
// an instance re-created under the node name — so the hold's first answer
// no longer counts: confirmAfter later, one fresh "does not exist" must
// not confirm it (TestHistory seed 6: a re-created Node's InstanceID
// InstanceNotFound passed on two answers 0 s apart). The next check asks
// again and holds from that answer; a second one confirmAfter later
// confirms, and an "exists" re-read refutes.
func TestContestedHoldStartsAfresh(t *testing.T) {
	for _, refuted := range []bool{false, true} {
		t.Run(fmt.Sprintf("refuted=%v", refuted), func(t *testing.T) {
			clk := newFakeClock()
			nf := newNotFoundGuard(DefaultConfig().NotFoundGuard, 0, clk, testConfig(clk).Metrics.Recorders().Recorder("test"))
			key := nodeKey{id: "node-6"}
			rereads := 0
			reread := func(exists bool) func() (bool, error) {
				return func() (bool, error) { rereads++; return exists, nil }
			}
			never := func() (bool, error) { t.Fatal("re-read before the hold is due"); return false, nil }
			expect := func(step, want string, ex bool, err error) {
				t.Helper()
				if got := answerKind(t, ex, err); got != want {
					t.Fatalf("%s: got %s (%v), want %s", step, got, err, want)
				}
			}

			sent := nf.mark() // a batch (or list page) is sent
			ex, err := nf.check(key, time.Time{}, false, nil, never)
			expect("the first \"does not exist\"", "retry", ex, err)
			if nf.markExists(key, sent) {
				t.Fatal("an \"exists\" to a call sent before the hold refuted it (and may be cached over it)")
			}
			clk.Step(20 * time.Second)
			ex, err = nf.check(key, time.Time{}, false, nil, reread(refuted))
			if refuted {
				expect("the contested hold's re-read says exists", "exists", ex, err)
				return
			}
			expect("confirmAfter after a contested hold", "retry", ex, err)
			if rereads != 1 {
				t.Fatalf("a contested hold asked again %d times, want 1 (its fresh answer is the new first)", rereads)
			}
			clk.Step(19 * time.Second)
			ex, err = nf.check(key, time.Time{}, false, nil, never)
			expect("19 s after the fresh first", "retry", ex, err)
			clk.Step(time.Second)
			ex, err = nf.check(key, time.Time{}, false, nil, reread(false))
			expect("confirmAfter after the fresh first", "missing", ex, err)
		})
	}
}

// TestConcurrentRereadsConfirmOnlyTheirHold: two checks find one hold due
// and ask again at once. The first re-read to answer begins a fresh hold
// (the due one was contested, or an "exists" refuted it meanwhile and a
// check held again); the second, answering after it, found the old hold
// due, but its answer is no second one confirmAfter after the fresh hold's
// first: it must hold, not confirm on two answers moments apart (TestHistory
// seed 3: three answers 1.4 s apart).
func TestConcurrentRereadsConfirmOnlyTheirHold(t *testing.T) {
	for _, how := range []string{"contested", "refuted"} {
		t.Run(how, func(t *testing.T) {
			clk := newFakeClock()
			nf := newNotFoundGuard(DefaultConfig().NotFoundGuard, 0, clk, testConfig(clk).Metrics.Recorders().Recorder("test"))
			key := nodeKey{byProviderID: true, id: "sim://node-0-1"}
			never := func() (bool, error) { t.Fatal("re-read before the hold is due"); return false, nil }
			missing := func() (bool, error) { return false, nil }
			sent := nf.mark()
			if ex, err := nf.check(key, time.Time{}, false, nil, never); answerKind(t, ex, err) != "retry" {
				t.Fatalf("the first \"does not exist\": %v, %v; want held", ex, err)
			}
			if how == "contested" {
				nf.markExists(key, sent) // a list page read before the hold
			} else {
				clk.Step(20 * time.Second) // the hold is due
			}
			ex, err := nf.check(key, time.Time{}, false, nil, func() (bool, error) {
				// While this check asks again, another one's answer begins a
				// fresh hold.
				if how == "refuted" {
					nf.refute(key)
				}
				clk.Step(300 * time.Millisecond)
				ex, err := nf.check(key, time.Time{}, false, nil, missing)
				if answerKind(t, ex, err) != "retry" {
					t.Fatalf("the concurrent check: %v, %v; want held (a fresh first)", ex, err)
				}
				clk.Step(300 * time.Millisecond)
				return false, nil
			})
			if got := answerKind(t, ex, err); got != "retry" {
				t.Fatalf("the re-read answering after the fresh hold began: %s (%v), want held", got, err)
			}
			clk.Step(20 * time.Second)
			if ex, err := nf.check(key, time.Time{}, false, nil, missing); answerKind(t, ex, err) != "missing" {
				t.Fatalf("confirmAfter after the fresh first: %v, %v; want \"does not exist\"", ex, err)
			}
		})
	}
}

// TestHoldSoonAfterExistsAsksAgain: a "does not exist" that begins a hold
// within negativeTTL of an "exists" answer may be a cached one given
// before it (InstanceID's cache, after a batch said the instance exists):
// it is no first answer since the instance last existed. The guard asks
// again at once and holds from that fresh answer; otherwise a minute later
// one fresh "does not exist" and its re-read, moments apart, confirmed it
// (TestHistory seed 5).
func TestHoldSoonAfterExistsAsksAgain(t *testing.T) {
	clk := newFakeClock()
	nf := newNotFoundGuard(DefaultConfig().NotFoundGuard, 30*time.Second, clk, testConfig(clk).Metrics.Recorders().Recorder("test"))
	key := nodeKey{id: "node-11"}
	rereads := 0
	missing := func() (bool, error) { rereads++; return false, nil }
	nf.refute(key) // a batch says the instance exists
	clk.Step(5 * time.Second)
	ex, err := nf.check(key, time.Time{}, false, nil, missing)
	if answerKind(t, ex, err) != "retry" || rereads != 1 {
		t.Fatalf("a \"does not exist\" 5 s after an \"exists\": %v, %v after %d re-reads; want held from a fresh answer (1 re-read)", ex, err, rereads)
	}
	clk.Step(19 * time.Second)
	if ex, err := nf.check(key, time.Time{}, false, nil, missing); answerKind(t, ex, err) != "retry" || rereads != 1 {
		t.Fatalf("19 s after the fresh first: %v, %v after %d re-reads; want held", ex, err, rereads)
	}
	clk.Step(time.Second)
	if ex, err := nf.check(key, time.Time{}, false, nil, missing); answerKind(t, ex, err) != "missing" {
		t.Fatalf("confirmAfter after the fresh first: %v, %v; want \"does not exist\"", ex, err)
	}
	// Long after an "exists", a hold's first answer is taken as it is.
	nf.refute(key)
	clk.Step(time.Minute)
	rereads = 0
	if ex, err := nf.check(key, time.Time{}, false, nil, missing); answerKind(t, ex, err) != "retry" || rereads != 0 {
		t.Fatalf("a minute after an \"exists\": %v, %v after %d re-reads; want held at once", ex, err, rereads)
	}
}
