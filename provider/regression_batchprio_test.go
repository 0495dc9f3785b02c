package provider

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/fake"

	"github.com/cloudgate/cloudgate/limiter"
)

// prioRecorder records the priority of every token wait of one method.
type prioRecorder struct {
	limiter.Admitter
	mu    sync.Mutex
	prios []limiter.Priority
}

func (r *prioRecorder) Wait(ctx context.Context, p limiter.Priority) error {
	r.mu.Lock()
	r.prios = append(r.prios, p)
	r.mu.Unlock()
	return r.Admitter.Wait(ctx, p)
}

// Issue 24 suspected item: a caller that joins another caller's lookup of
// the same node in an open batch raises the batch's priority, so a critical
// lookup (a node not yet initialised) never rides a background batch. Here
// a background InstanceShutdown of node a opens the batch, the cloud-node
// controller's critical InstanceMetadata of a (tainted) joins a's slot, and
// a lookup of b fills the batch (maxSize 2): its token wait must be
// critical. Before the fix the slot kept the first caller's priority and
// the batch waited as background.
func TestRegression24_BatchJoinRaisesPriority(t *testing.T) {
	for attempt := 1; ; attempt++ {
		prio, joined := batchJoinPriority(t)
		if !joined {
			// The critical caller reached the batcher after the batch was
			// sent: not the case under test; try again (bounded).
			if attempt == 20 {
				t.Fatal("the critical lookup never joined the open batch in 20 attempts")
			}
			continue
		}
		if prio != limiter.PriorityCritical {
			t.Fatalf("batch token wait at priority %v after a critical lookup joined; want %v", prio, limiter.PriorityCritical)
		}
		return
	}
}

// batchJoinPriority runs the scenario once: the priority of the batch's
// token wait, and whether the critical lookup joined that batch.
func batchJoinPriority(t *testing.T) (limiter.Priority, bool) {
	t.Helper()
	up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}}
	cfg := testConfig(newFakeClock()) // the clock never moves: the batch goes when full
	cfg.Batch.MaxSize = 2
	// The old rule (wait for maxSize or maxWait): a's lookup stays in the
	// open batch for the others to join; with sendAtOnce it would go alone.
	cfg.Batch.SendAtOnce = boolp(false)
	c := mustNew(t, up, cfg)
	g := c.(*cloud).g
	i := v2(t, c)
	if g.batcher() == nil {
		t.Fatal("batching is off")
	}
	rec := &prioRecorder{Admitter: g.m.batchInstanceStatus.bucket}
	g.m.batchInstanceStatus.bucket = rec

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	run := func(f func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- f() }()
	}
	run(func() error { _, err := i.InstanceShutdown(context.Background(), testNode("a", "")); return err })
	waitUntil(t, "a's lookup in the open batch", func() bool { return g.batch.Pending() == 1 })
	tainted := testNode("a", "")
	tainted.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Effect: v1.TaintEffectNoSchedule}}
	run(func() error { _, err := i.InstanceMetadata(context.Background(), tainted); return err })
	time.Sleep(20 * time.Millisecond) // let it join a's slot (checked below, not assumed)
	run(func() error { _, err := i.InstanceExists(context.Background(), testNode("b", "")); return err })
	waitUntil(t, "the full batch sent", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return len(rec.prios) >= 1 })
	// A critical lookup that came too late is alone in a new open batch.
	late := g.batch.Pending() == 1
	if late {
		// Send it: b's lookup again fills it.
		run(func() error { _, err := i.InstanceExists(context.Background(), testNode("c", "")); return err })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.prios[0], !late
}
