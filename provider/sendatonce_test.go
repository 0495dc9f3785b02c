package provider

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
)

// Issue 21 item 1: batching adds no latency when there is nothing to
// batch, and a token is spent on every lookup that waited for it.

// TestBatchTokenEmptyAccumulates: with batch.sendAtOnce (the default) a
// lone lookup goes at once with the bucket's token; lookups that arrive
// while the bucket is empty join one batch, sent when the next token comes.
func TestBatchTokenEmptyAccumulates(t *testing.T) {
	up := &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}}
	clk := newFakeClock()
	cfg := testConfig(clk)
	cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = 1, 1
	cfg.Limits.Read.WaitTimeout = dur(time.Minute)
	cfg.NotFoundGuard.Enabled = boolp(false)
	c := mustNew(t, up, cfg)
	i, g := v2(t, c), c.(*cloud).g

	if _, err := i.InstanceMetadata(context.Background(), testNode("a", "")); err != nil {
		t.Fatal(err) // no clock step: sent at once
	}
	errs := make(chan error, 3)
	for _, name := range []string{"b", "c", "d"} {
		go func() {
			md, err := i.InstanceMetadata(context.Background(), testNode(name, ""))
			if err == nil && md.ProviderID != "fake://"+name {
				err = fmt.Errorf("%s got %s", name, md.ProviderID)
			}
			errs <- err
		}()
	}
	waitUntil(t, "b, c, d in one batch waiting for the token", func() bool { return g.batcher().Pending() == 3 })
	if got := up.batchSizes(); len(got) != 1 {
		t.Fatalf("batch sizes %v before the token came, want [1]", got)
	}
	clk.Step(time.Second) // the next token
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := up.batchSizes(); fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("batch sizes %v, want [1 3]: one token for the three that waited", got)
	}
}

// listingBatchCloud answers batches and lists; its first list blocks
// until release is closed.
type listingBatchCloud struct {
	*batchCloud
	release chan struct{}
	lists   atomic.Int64
}

func (l *listingBatchCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }

func (l *listingBatchCloud) ListInstances(ctx context.Context, _ string) ([]InstanceRecord, string, error) {
	if l.lists.Add(1) == 1 {
		select {
		case <-l.release:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	return []InstanceRecord{{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a", Zone: "listed"}}}, "", nil
}

// TestLookupWaitsForFirstList: a lookup that misses while the first list
// refresh is in flight waits for it instead of a call of its own (behind
// the AWS adapter, the status loop's first round raced the first list and
// cost more DescribeInstances than the AWS provider alone).
func TestLookupWaitsForFirstList(t *testing.T) {
	up := &listingBatchCloud{batchCloud: &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}}, release: make(chan struct{})}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	defer func() { _ = c.(interface{ Close() error }).Close() }()
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(nil, stop)
	waitUntil(t, "the first list in flight", func() bool { return up.lists.Load() == 1 })
	type answer struct {
		zone string
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		md, err := v2(t, c).InstanceMetadata(context.Background(), testNode("a", "fake://a"))
		if err != nil {
			done <- answer{"", err}
			return
		}
		done <- answer{md.Zone, nil}
	}()
	// Without the wait the lookup is sent at once, in a batch of its own,
	// and answers zone-a before the list ends; give it the chance (a
	// bounded poll, no timing asserted).
	for k := 0; k < 100 && len(up.batchSizes()) == 0; k++ {
		time.Sleep(time.Millisecond)
	}
	close(up.release)
	a := <-done
	if a.err != nil || a.zone != "listed" {
		t.Fatalf("InstanceMetadata = zone %q, %v; want the listed answer", a.zone, a.err)
	}
	if got := up.batchSizes(); len(got) != 0 {
		t.Fatalf("batch calls %v while the first list was in flight, want none", got)
	}
}
