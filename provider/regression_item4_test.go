package provider

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Item 4: a read that starts after a write returned never sees pre-write
// state, even when a read that started before the write is in flight.
func TestRegression_ReadAfterWriteStartsFreshFlight(t *testing.T) {
	up := newCountingCloud()
	var mu sync.Mutex
	written := false
	firstIn, releaseFirst := make(chan struct{}), make(chan struct{})
	var first sync.Once
	up.getLBHook = func(ctx context.Context) (*v1.LoadBalancerStatus, bool, error) {
		mu.Lock()
		exists := written
		mu.Unlock()
		isFirst := false
		first.Do(func() { isFirst = true })
		if isFirst {
			close(firstIn)
			<-releaseFirst
		}
		return &v1.LoadBalancerStatus{}, exists, nil
	}
	up.ensureLBHook = func() error {
		mu.Lock()
		written = true
		mu.Unlock()
		return nil
	}
	c := mustNew(t, up, testConfig(newFakeClock()))
	lb, _ := c.LoadBalancer()
	svc := testService("ns", "s", "u")
	ctx := context.Background()
	before := make(chan bool, 1)
	go func() {
		_, exists, _ := lb.GetLoadBalancer(ctx, "c", svc)
		before <- exists
	}()
	<-firstIn
	if _, err := lb.EnsureLoadBalancer(ctx, "c", svc, nil); err != nil {
		t.Fatal(err)
	}
	after := make(chan bool, 1)
	go func() {
		_, exists, _ := lb.GetLoadBalancer(ctx, "c", svc)
		after <- exists
	}()
	var got bool
	select {
	case got = <-after:
	case <-time.After(100 * time.Millisecond):
		// Joined the pre-write flight: release it to see what it gets.
		close(releaseFirst)
		got = <-after
		<-before
		if !got {
			t.Fatal("a read started after the write returned got the pre-write answer")
		}
		return
	}
	close(releaseFirst)
	<-before
	if !got {
		t.Fatal("a read started after the write returned got the pre-write answer")
	}
	// The pre-write read finished after the write: it must not be cached.
	if _, exists, _ := lb.GetLoadBalancer(ctx, "c", svc); !exists {
		t.Fatal("the cache kept an answer read before the write")
	}
}
