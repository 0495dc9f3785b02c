package awsbench

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
)

// counting counts the controllers' InstanceMetadata calls (the status
// loop's lookups) and when they happened.
type counting struct {
	cloudprovider.Interface
	lookups     atomic.Int64
	mu          sync.Mutex
	start, last time.Time
	// Cycles mode: a round is nodes lookups; roundEnds are when each
	// ended. The lookup numbered stopAt (the first of round cycles+1)
	// calls onStop before it goes to the provider, then closes done.
	nodes     int64
	roundEnds []time.Time
	stopAt    int64
	onStop    func()
	done      chan struct{}
}

func (c *counting) setStart(t time.Time) {
	c.mu.Lock()
	c.start = t
	c.mu.Unlock()
}

// rate is the lookups and their rate from the start to the last one.
func (c *counting) rate() (int64, float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.lookups.Load()
	d := c.last.Sub(c.start).Seconds()
	if n == 0 || d <= 0 {
		return n, 0
	}
	return n, float64(n) / d
}

// SetInformers forwards the CCM's informers (the AWS provider and
// cloudgate use them).
func (c *counting) SetInformers(f informers.SharedInformerFactory) {
	if iu, ok := c.Interface.(cloudprovider.InformerUser); ok {
		iu.SetInformers(f)
	}
}

func (c *counting) InstancesV2() (cloudprovider.InstancesV2, bool) {
	v2, ok := c.Interface.InstancesV2()
	if !ok || v2 == nil {
		return nil, ok
	}
	return &countingV2{InstancesV2: v2, c: c}, true
}

type countingV2 struct {
	cloudprovider.InstancesV2
	c *counting
}

func (v *countingV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	k := v.c.lookups.Add(1)
	if k == v.c.stopAt && v.c.stopAt > 0 {
		v.c.onStop()
		close(v.c.done)
	}
	md, err := v.InstancesV2.InstanceMetadata(ctx, node)
	v.c.mu.Lock()
	v.c.last = time.Now()
	if v.c.nodes > 0 && k%v.c.nodes == 0 {
		v.c.roundEnds = append(v.c.roundEnds, v.c.last)
	}
	v.c.mu.Unlock()
	return md, err
}
