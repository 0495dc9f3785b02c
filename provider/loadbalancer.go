package provider

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/clock"
)

type lbCaches struct {
	get    *readPath[lbKey, lbAnswer]
	writes lbWrites
}

// lbWriteWait bounds how long a load balancer write waits for the one in
// flight for the same Service before it is sent anyway.
const lbWriteWait = 2 * time.Minute

// lbWrites orders the writes of each Service's load balancer: a write waits
// for the one in flight to end before it is sent. The service controller
// writes one load balancer from two goroutines with no lock between them:
// its service worker (EnsureLoadBalancer, with the Nodes it listed) and its
// node sync (UpdateLoadBalancer). Each records its node set as synced before
// its call, so an older set whose call ends last leaves the load balancer
// behind with nothing left to correct it until the Nodes change again. A
// slow call (a throttling storm, token waits) widens that window; sending
// the calls in the order they came closes it. The wait is bounded by the
// caller's context and lbWriteWait, after which the write goes as it would
// without cloudgate: a hung call never holds the others back for long.
type lbWrites struct {
	mu    sync.Mutex
	slots map[lbKey]*lbSlot
}

type lbSlot struct {
	sem   chan struct{} // holds a token while a write is in flight
	users int           // writes holding or waiting for sem
}

// acquire waits for k's slot (or ctx's end, or wait on clk) and returns
// the function that gives it back; a write that stopped waiting gets a
// release that only forgets it.
func (w *lbWrites) acquire(ctx context.Context, clk clock.Clock, k lbKey, wait time.Duration) (release func()) {
	w.mu.Lock()
	if w.slots == nil {
		w.slots = map[lbKey]*lbSlot{}
	}
	s := w.slots[k]
	if s == nil {
		s = &lbSlot{sem: make(chan struct{}, 1)}
		w.slots[k] = s
	}
	s.users++
	w.mu.Unlock()
	leave := func() {
		w.mu.Lock()
		if s.users--; s.users == 0 {
			delete(w.slots, k)
		}
		w.mu.Unlock()
	}
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem; leave() }
	default:
	}
	t := clk.NewTimer(wait)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem; leave() }
	case <-t.C():
	case <-ctx.Done():
	}
	return leave
}

// build: exists=false is "does not exist": negativeTTL, never stale (the
// service controller skips EnsureLoadBalancerDeleted on it).
func (c *lbCaches) build(b pathBuilder) {
	c.get = newPath(b, "GetLoadBalancer", cacheOpts[lbKey, lbAnswer]{clone: cloneLBAnswer, keyString: lbKey.String,
		negativeValue: func(a lbAnswer) bool { return !a.exists }})
}

// loadBalancer wraps the upstream's LoadBalancer. Writes invalidate the
// cached GetLoadBalancer answer of their Service. Upstream errors, including
// ImplementedElsewhere and a wrapped *api.RetryError, come back unchanged.
type loadBalancer struct {
	g  *gate
	r  runner
	up cloudprovider.LoadBalancer
}

var _ cloudprovider.LoadBalancer = (*loadBalancer)(nil)

func (l *loadBalancer) GetLoadBalancer(ctx context.Context, clusterName string, service *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	a, err := l.g.lb.get.read(ctx, keyOfService(clusterName, service), func(ctx context.Context) (lbAnswer, error) {
		status, exists, err := l.up.GetLoadBalancer(ctx, clusterName, service)
		return lbAnswer{status: status, exists: exists}, err
	})
	return a.status, a.exists, err
}

// GetLoadBalancerName is computed locally by every provider: passed through,
// neither limited nor cached.
func (l *loadBalancer) GetLoadBalancerName(ctx context.Context, clusterName string, service *v1.Service) string {
	return l.up.GetLoadBalancerName(ctx, clusterName, service)
}

func (l *loadBalancer) EnsureLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	defer l.inOrder(ctx, clusterName, service)()
	var status *v1.LoadBalancerStatus
	err := l.r.write(ctx, l.g.m.ensureLoadBalancer, func(ctx context.Context) error {
		var err error
		status, err = l.up.EnsureLoadBalancer(ctx, clusterName, service, nodes)
		return err
	}, l.invalidate(clusterName, service))
	return status, err
}

func (l *loadBalancer) UpdateLoadBalancer(ctx context.Context, clusterName string, service *v1.Service, nodes []*v1.Node) error {
	defer l.inOrder(ctx, clusterName, service)()
	return l.r.write(ctx, l.g.m.updateLoadBalancer, func(ctx context.Context) error {
		return l.up.UpdateLoadBalancer(ctx, clusterName, service, nodes)
	}, l.invalidate(clusterName, service))
}

func (l *loadBalancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, service *v1.Service) error {
	defer l.inOrder(ctx, clusterName, service)()
	return l.r.write(ctx, l.g.m.ensureLoadBalancerDeleted, func(ctx context.Context) error {
		return l.up.EnsureLoadBalancerDeleted(ctx, clusterName, service)
	}, l.invalidate(clusterName, service))
}

// inOrder waits for the Service's write in flight (lbWrites) and returns
// the function that lets the next one go.
func (l *loadBalancer) inOrder(ctx context.Context, clusterName string, service *v1.Service) func() {
	return l.g.lb.writes.acquire(ctx, l.g.clock, keyOfService(clusterName, service), lbWriteWait)
}

// invalidate drops the Service's cached GetLoadBalancer answer (nil: uncached).
func (l *loadBalancer) invalidate(clusterName string, service *v1.Service) func() {
	p := l.g.lb.get
	if p.c == nil {
		return nil
	}
	key := keyOfService(clusterName, service)
	return func() { p.c.Invalidate(key) }
}
