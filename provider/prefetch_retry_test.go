package provider

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
)

// flakyListCloud lists one instance, or fails while down.
type flakyListCloud struct {
	*fake.Cloud
	down  atomic.Bool
	lists atomic.Int64
}

func (l *flakyListCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }

func (l *flakyListCloud) ListInstances(context.Context, string) ([]InstanceRecord, string, error) {
	l.lists.Add(1)
	if l.down.Load() {
		return nil, "", errors.New("503 service unavailable")
	}
	return []InstanceRecord{{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a"}}}, "", nil
}

// Issue 21 item 2: a list refresh that failed (an outage) is retried as
// soon as the cloud answers another call — after interval/30 at the
// earliest — not a whole listInterval later.
func TestListRefreshRetriedWhenCloudAnswers(t *testing.T) {
	for _, answer := range []bool{true, false} {
		up := &flakyListCloud{Cloud: &fake.Cloud{Provider: "fake"}}
		up.down.Store(true)
		clk := newFakeClock()
		cfg := testConfig(clk)
		cfg.Batch.ListPrefetch = true
		cfg.Batch.ListInterval = dur(5 * time.Minute)
		c := mustNew(t, up, cfg)
		g := c.(*cloud).g
		stop := make(chan struct{})
		c.Initialize(nil, stop)
		waitUntil(t, "the failed list", func() bool { return g.listFailed.Load() })
		up.down.Store(false)
		if answer { // the outage ends: a node read is answered
			if _, err := v2(t, c).InstanceMetadata(context.Background(), testNode("b", "fake://b")); err != nil {
				t.Fatal(err)
			}
		}
		waitUntil(t, "the retry timer", clk.HasWaiters)
		clk.Step(10 * time.Second) // interval/30
		if answer {
			waitUntil(t, "a second list once the cloud answered", func() bool { return up.lists.Load() == 2 })
		} else {
			time.Sleep(20 * time.Millisecond)
			if n := up.lists.Load(); n != 1 {
				t.Fatalf("%d lists 10 s after the failure with no answer from the cloud; want 1 (the next at the interval)", n)
			}
		}
		close(stop)
		_ = c.(interface{ Close() error }).Close()
	}
}
