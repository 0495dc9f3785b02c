package provider

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/fake"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
	"github.com/cloudgate/cloudgate/metrics"
)

// Issue 30 section 3, items 1 and (a) with the real fleet limiter on a real
// redis-server: backgroundShare leaves background calls one token per
// 100 s, used up first; a full background batch then waits for it, and a
// critical lookup (a Node with the uninitialized taint) in the next batch
// must not wait behind it. On 760e41f it did, until waitTimeout, and the
// background batch's RetryError came first. No assertion on time: the
// order of answers is what is checked (c at once, or the background
// batch's RetryError after its 15 s waitTimeout).
func TestRegression30_BackgroundCapFleetRedis(t *testing.T) {
	r := fleettest.Start(t)
	cfg, err := LoadConfig(strings.NewReader(fleetConfigYAML(r, "acct-batchprio", 10) + "    backgroundShare: 0.001\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = metrics.New()
	cfg.Batch.MaxSize = 2
	// The background batch gives up after 15 s (an *api.RetryError), so
	// that Close, which waits for it, does not wait 100 s; c goes first
	// (at once) or the test fails with the background batch's error.
	cfg.Limits.Read.WaitTimeout = dur(15 * time.Second)
	cfg.NotFoundGuard.Enabled = boolp(false)
	up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}}
	c := mustNew(t, up, cfg)
	defer func() { _ = c.(interface{ Close() error }).Close() }()
	g := c.(*cloud).g
	i := v2(t, c)
	if g.batcher() == nil {
		t.Fatal("batching is off")
	}
	if _, ok := g.m.batchInstanceStatus.bucket.(*limiter.Bucket); ok {
		t.Fatal("limits.shared set but batches use a local bucket")
	}
	// Use up the background part (its burst): a background wait that does
	// not end within 500 ms has found it empty (the next token is 100 s
	// away); bounded.
	for n := 0; ; n++ {
		if n == 50 {
			t.Fatal("the background part never ran out")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := g.m.batchInstanceStatus.bucket.Wait(ctx, limiter.PriorityBackground)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	type answer struct {
		name string
		err  error
	}
	answers := make(chan answer, 3)
	lookup := func(ctx context.Context, name string, tainted bool) {
		node := testNode(name, "")
		if tainted {
			node.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Effect: v1.TaintEffectNoSchedule}}
		}
		go func() {
			_, err := i.InstanceMetadata(ctx, node)
			answers <- answer{name, err}
		}()
	}
	bg, stopBG := context.WithCancel(context.Background())
	defer stopBG()
	lookup(bg, "a", false)
	waitUntil(t, "a's batch waiting", func() bool { return g.batch.Pending() == 1 })
	lookup(bg, "b", false) // a, b: a full background batch, waiting on the background part
	waitUntil(t, "a and b in a full batch", func() bool { return g.batch.Pending() == 0 })
	lookup(context.Background(), "c", true)
	select {
	case a := <-answers:
		if a.name != "c" || a.err != nil {
			t.Fatalf("first answer: %s, %v; want the critical lookup c answered", a.name, a.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no answer in a minute")
	}
	if got := up.batchSizes(); len(got) != 1 || got[0] != 1 {
		t.Errorf("batch sizes %v, want [1]: c alone, the background batch still waiting", got)
	}
}
