package provider

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	clocktesting "k8s.io/utils/clock/testing"
)

// backendsLB is an upstream load balancer that keeps each Service's
// backends as the last write it applied, and can hold a call open: the
// shape of the service controller's race between its service worker and
// its node sync.
type backendsLB struct {
	*countingCloud
	mu       sync.Mutex
	backends map[types.UID][]string
	inFlight int
	maxIn    int
	hold     chan struct{} // closed: calls go on; a call that sees it open waits
	entered  chan string   // each call's method, as it starts
}

func newBackendsLB() *backendsLB {
	return &backendsLB{countingCloud: newCountingCloud(), backends: map[types.UID][]string{},
		hold: make(chan struct{}), entered: make(chan string, 16)}
}

func (b *backendsLB) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return b, true }

func (b *backendsLB) apply(ctx context.Context, method string, svc *v1.Service, nodes []*v1.Node) error {
	b.mu.Lock()
	b.inFlight++
	b.maxIn = max(b.maxIn, b.inFlight)
	b.mu.Unlock()
	b.entered <- method
	select {
	case <-b.hold:
	case <-ctx.Done():
		return ctx.Err()
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	b.mu.Lock()
	b.backends[svc.UID] = names
	b.inFlight--
	b.mu.Unlock()
	return nil
}

func (b *backendsLB) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	return &v1.LoadBalancerStatus{}, b.apply(ctx, "EnsureLoadBalancer", svc, nodes)
}

func (b *backendsLB) UpdateLoadBalancer(ctx context.Context, _ string, svc *v1.Service, nodes []*v1.Node) error {
	return b.apply(ctx, "UpdateLoadBalancer", svc, nodes)
}

func lbService(name string) *v1.Service {
	s := &v1.Service{}
	s.Namespace, s.Name, s.UID = "default", name, types.UID("uid-"+name)
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	return s
}

func nodesNamed(names ...string) []*v1.Node {
	var out []*v1.Node
	for _, n := range names {
		out = append(out, testNode(n, ""))
	}
	return out
}

// lbWriteRig is cloudgate in front of a backendsLB, on clk (nil: the real
// clock), and a context that ends the test's waits.
func lbWriteRig(t *testing.T, clk *clocktesting.FakeClock) (*backendsLB, cloudprovider.Interface, cloudprovider.LoadBalancer, context.Context) {
	up := newBackendsLB()
	c := mustNew(t, up, testConfig(clk))
	lb, _ := c.LoadBalancer()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return up, c, lb, ctx
}

// TestLBWritesInOrder: the service worker's EnsureLoadBalancer with the
// Nodes before a change is still in flight when the node sync's
// UpdateLoadBalancer with the Nodes after it comes. The update must reach
// the upstream only after the ensure has ended, so the load balancer ends
// with the newer Nodes: sent together, the older call could end last and
// leave it behind for good (the controller has recorded the newer set as
// synced). Another Service's write is not held back.
func TestLBWritesInOrder(t *testing.T) {
	up, c, lb, ctx := lbWriteRig(t, nil)
	svc := lbService("web")

	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := lb.EnsureLoadBalancer(ctx, "k", svc, nodesNamed("a", "b")); err != nil {
			t.Error(err)
		}
	})
	if m := <-up.entered; m != "EnsureLoadBalancer" {
		t.Fatalf("first upstream call %s", m)
	}
	wg.Go(func() {
		if err := lb.UpdateLoadBalancer(ctx, "k", svc, nodesNamed("b", "c")); err != nil {
			t.Error(err)
		}
	})
	// Another Service's write goes at once.
	other := lbService("api")
	wg.Go(func() {
		if err := lb.UpdateLoadBalancer(ctx, "k", other, nodesNamed("a")); err != nil {
			t.Error(err)
		}
	})
	if m := <-up.entered; m != "UpdateLoadBalancer" {
		t.Fatalf("second upstream call %s", m)
	}
	// The same Service's update must not have started: give it the time
	// to (a 100 ms window; the check can only miss a broken order, never
	// fail a right one).
	select {
	case m := <-up.entered:
		t.Fatalf("%s for the same Service reached the upstream while the ensure was in flight", m)
	case <-time.After(100 * time.Millisecond):
	}
	close(up.hold)
	wg.Wait()
	up.mu.Lock()
	defer up.mu.Unlock()
	if got := up.backends[svc.UID]; !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("backends %v, want the newer write's [b c]", got)
	}
	if up.maxIn != 2 {
		t.Fatalf("at most %d upstream calls in flight, want 2 (one per Service)", up.maxIn)
	}
	ws := &c.(*cloud).g.lb.writes
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.slots) != 0 {
		t.Fatalf("%d write slots left after every write ended", len(ws.slots))
	}
}

// TestLBWriteWaitIsBounded: a write in flight for longer than lbWriteWait
// does not hold the next one back: it is sent as it would be without
// cloudgate.
func TestLBWriteWaitIsBounded(t *testing.T) {
	clk := newFakeClock()
	up, _, lb, ctx := lbWriteRig(t, clk)
	svc := lbService("web")
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(up.hold)
	wg.Go(func() { _, _ = lb.EnsureLoadBalancer(ctx, "k", svc, nodesNamed("a")) })
	<-up.entered
	wg.Go(func() { _ = lb.UpdateLoadBalancer(ctx, "k", svc, nodesNamed("b")) })
	// Step the clock past the bound once the update waits on its timer.
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the second write never waited")
		}
		time.Sleep(time.Millisecond)
	}
	clk.Step(lbWriteWait)
	select {
	case m := <-up.entered:
		if m != "UpdateLoadBalancer" {
			t.Fatalf("upstream call %s", m)
		}
	case <-ctx.Done():
		t.Fatal("the update stayed held past lbWriteWait")
	}
}
