package simcloud

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
)

func modelClient(t *testing.T, s *Server, cfg ClientConfig) *Cloud {
	t.Helper()
	cfg.Endpoint, cfg.APIKey, cfg.ClusterName = s.URL(), testKey, "kubernetes"
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A terminated instance stays described by ID and in lists, marked
// deleted; InstanceExists is false; its node name finds nothing.
func TestTerminatedInstanceStaysDescribed(t *testing.T) {
	s := startServer(t, ServerConfig{ReadQPS: negligibleQPS, ReadBurst: 100})
	insts := addInstances(t, s, 2, "node")
	if !s.TerminateInstance(insts[0].ID) || s.TerminateInstance("i-ghost") {
		t.Fatal("TerminateInstance: want true for a live instance, false for a missing one")
	}
	c := modelClient(t, s, ClientConfig{})
	b, l := batcher(t, c)
	v2, _ := c.InstancesV2()
	ctx := context.Background()
	byID := nodeByProviderID(insts[0].NodeName, insts[0].ProviderID())
	if ok, err := v2.InstanceExists(ctx, byID); ok || err != nil {
		t.Errorf("InstanceExists(terminated) = %v, %v; want false, nil", ok, err)
	}
	if md, err := v2.InstanceMetadata(ctx, byID); err != nil || md.ProviderID != insts[0].ProviderID() {
		t.Errorf("InstanceMetadata(terminated) = %v, %v; want its metadata", md, err)
	}
	if _, err := v2.InstanceMetadata(ctx, nodeByName(insts[0].NodeName)); err == nil {
		t.Error("InstanceMetadata by the terminated instance's node name: want InstanceNotFound")
	}
	res, err := b.BatchInstanceStatus(ctx, []*v1.Node{byID, nodeByProviderID(insts[1].NodeName, insts[1].ProviderID())})
	if err != nil || !res[0].Deleted || res[0].Err != nil || res[1].Deleted {
		t.Errorf("BatchInstanceStatus = %+v, %v; want the first Deleted, the second live", res, err)
	}
	recs, _ := listAll(t, l, nil)
	if len(recs) != 2 || !recs[0].Deleted || recs[0].NodeName != "" || recs[1].Deleted {
		t.Errorf("ListInstances = %+v; want the terminated one listed Deleted without a node name", recs)
	}
}

// ListTrailingPage adds one request, an empty page, to every walk, or with
// ListTrailingEvery to the first walk and every n-th after.
func TestListTrailingPage(t *testing.T) {
	s := startServer(t, ServerConfig{ReadQPS: negligibleQPS, ReadBurst: 100, ListPageSize: 2})
	addInstances(t, s, 3, "node")
	_, l := batcher(t, modelClient(t, s, ClientConfig{ListTrailingPage: true}))
	recs, pages := listAll(t, l, nil)
	if len(recs) != 3 || pages != 3 {
		t.Errorf("walk: %d records in %d pages; want 3 in 2 pages + 1 trailing", len(recs), pages)
	}
	if got := s.Counters().Calls[MethodListInstances]; got != 3 {
		t.Errorf("ListInstances calls = %d, want 3", got)
	}
	_, l = batcher(t, modelClient(t, s, ClientConfig{ListTrailingPage: true, ListTrailingEvery: 3}))
	var got []int
	for range 7 {
		_, pages := listAll(t, l, nil)
		got = append(got, pages)
	}
	if want := []int{3, 2, 2, 3, 2, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("pages per walk with ListTrailingEvery 3: %v, want %v", got, want)
	}
}

// ListAlive leaves terminated instances out before the page is cut, and the
// provider's own listing (lbSnapshot) still describes them.
func TestListAlive(t *testing.T) {
	s := startServer(t, ServerConfig{ReadQPS: negligibleQPS, ReadBurst: 100, ListPageSize: 2})
	insts := addInstances(t, s, 4, "node")
	s.TerminateInstance(insts[0].ID)
	s.TerminateInstance(insts[2].ID)
	_, l := batcher(t, modelClient(t, s, ClientConfig{ListAlive: true}))
	recs, pages := listAll(t, l, nil)
	if len(recs) != 2 || pages != 1 || recs[0].Deleted || recs[1].Deleted {
		t.Errorf("ListAlive walk: %+v in %d pages; want the 2 live instances in 1 page", recs, pages)
	}
	_, l = batcher(t, modelClient(t, s, ClientConfig{}))
	if recs, pages := listAll(t, l, nil); len(recs) != 4 || pages != 2 {
		t.Errorf("walk: %d records in %d pages; want all 4 in 2", len(recs), pages)
	}
}

// LBInstanceSnapshot lists every instance before a load balancer's update
// unless the last listing is young and holds every backend.
func TestLBInstanceSnapshot(t *testing.T) {
	s := startServer(t, ServerConfig{ReadQPS: negligibleQPS, ReadBurst: 100, WriteQPS: negligibleQPS, WriteBurst: 100})
	insts := addInstances(t, s, 3, "node")
	c := modelClient(t, s, ClientConfig{LBInstanceSnapshot: time.Hour})
	lb, _ := c.LoadBalancer()
	ctx := context.Background()
	nodes := []*v1.Node{nodeByProviderID(insts[0].NodeName, insts[0].ProviderID()), nodeByName("not-initialised-yet")}
	lists := func() int64 { return s.Counters().Calls[MethodListInstances] }
	if _, err := lb.EnsureLoadBalancer(ctx, "", service("u1", 80), nodes); err != nil {
		t.Fatal(err)
	}
	if err := lb.UpdateLoadBalancer(ctx, "", service("u1", 80), nodes); err != nil {
		t.Fatal(err)
	}
	if got := lists(); got != 1 {
		t.Errorf("after an ensure and an update with the same backends: %d listings, want 1", got)
	}
	nodes = append(nodes, nodeByProviderID(insts[1].NodeName, insts[1].ProviderID()))
	if err := lb.UpdateLoadBalancer(ctx, "", service("u1", 80), nodes); err != nil {
		t.Fatal(err)
	}
	if got := lists(); got != 1 {
		t.Errorf("a backend the listing holds: %d listings, want 1", got)
	}
	more := addInstances(t, s, 1, "late")
	nodes = append(nodes, nodeByProviderID(more[0].NodeName, more[0].ProviderID()))
	if err := lb.UpdateLoadBalancer(ctx, "", service("u1", 80), nodes); err != nil {
		t.Fatal(err)
	}
	if got := lists(); got != 2 {
		t.Errorf("a backend the listing lacks: %d listings, want 2", got)
	}
}

// IDBatcher merges concurrent lookups by ID into one BatchGetInstances,
// sent when none joined for Idle; a lone lookup waits out Idle; a missing
// instance is InstanceNotFound; a terminated one does not exist.
func TestIDBatcherMergesConcurrentLookups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := startServer(t, ServerConfig{InMemory: true, ReadQPS: 1000, ReadBurst: 1000})
		insts := addInstances(t, s, 4, "node")
		s.TerminateInstance(insts[3].ID)
		c, err := NewClient(ClientConfig{Endpoint: s.URL(), APIKey: "k", Transport: s.Transport(), IDBatcher: AWSDescribeBatcher})
		if err != nil {
			t.Fatal(err)
		}
		v2, _ := c.InstancesV2()
		ctx := context.Background()
		var wg sync.WaitGroup
		got := make([]bool, 5)
		errs := make([]error, 5)
		nodes := []*v1.Node{
			nodeByProviderID(insts[0].NodeName, insts[0].ProviderID()),
			nodeByProviderID(insts[1].NodeName, insts[1].ProviderID()),
			nodeByProviderID(insts[2].NodeName, insts[2].ProviderID()),
			nodeByProviderID(insts[3].NodeName, insts[3].ProviderID()),
			nodeByProviderID("ghost", "simcloud://zone-a/i-ghost"),
		}
		start := time.Now()
		for i, n := range nodes {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 50 * time.Millisecond) // each within Idle of the last
				got[i], errs[i] = v2.InstanceExists(ctx, n)
			})
		}
		wg.Wait()
		if want := []bool{true, true, true, false, false}; !slices.Equal(got, want) {
			t.Errorf("InstanceExists = %v (errors %v), want %v", got, errs, want)
		}
		if n := s.Counters().Calls[MethodBatchGetInstances]; n != 1 {
			t.Errorf("%d BatchGetInstances for five lookups within Idle of each other, want 1", n)
		}
		if took := time.Since(start); took != 200*time.Millisecond+AWSDescribeBatcher.Idle {
			t.Errorf("the batch went after %v, want the last lookup (200ms) + Idle", took)
		}
		start = time.Now()
		if _, err := v2.InstanceMetadata(ctx, nodes[0]); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != AWSDescribeBatcher.Idle {
			t.Errorf("a lone lookup took %v, want Idle %v", took, AWSDescribeBatcher.Idle)
		}
		if n := s.Counters().Calls[MethodGetInstance]; n != 0 {
			t.Errorf("%d GetInstance calls with an IDBatcher, want 0", n)
		}
	})
}
