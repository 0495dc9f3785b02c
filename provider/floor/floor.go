// Package floor computes the fewest instance lookups per hour a CCM's
// workload needs from the cloud without loosening any of cloudgate's
// promises: the figure cloudgate's node lookups are measured against (the
// real-binary harness and the provider's floor test compute it the same
// way, here).
//
// Per hour, the floor is:
//   - the list: ceil(Nodes / PageSize) pages per refresh, one refresh per
//     ListInterval (the answers the status loop reads every 5 minutes);
//   - the churn: one call per step for the Nodes joining (every joiner's
//     lookup in one batch) and one for the Nodes leaving (every leaver's
//     lifecycle check in one batch);
//   - the lifecycle checks: one batch of all NotReady Nodes (ceil(NotReady
//     / MaxBatch) calls) per LifecycleTTL, the shortest of InstanceExists'
//     and InstanceShutdown's TTLs: an answer older than that may not be
//     served to the lifecycle controller, which asks about every NotReady
//     Node every few seconds.
//
// A cloud provider's own listings (the AWS provider's for load balancer
// updates) are not in the floor: they are the provider's, not the node
// lookups'.
package floor

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Workload is what the floor is computed from: the run's knobs and the
// workload observed.
type Workload struct {
	Nodes    int // Nodes in the cluster (the instances the list pages through)
	NotReady int // Nodes NotReady and held so (checked by the lifecycle controller)
	PageSize int // instances per list page (EC2: 1,000)
	MaxBatch int // Nodes per batch call (aws-batch: 200)
	// ListInterval is the list's refresh period (0: no list; every Node's
	// status lookup is then not in the floor either).
	ListInterval time.Duration
	// ChurnEvery is the churn's step (0: no churn); JoinPerStep and
	// LeavePerStep the Nodes joining and leaving at each.
	ChurnEvery                time.Duration
	JoinPerStep, LeavePerStep int
	// LifecycleTTL is the shortest lifecycle TTL the promises allow
	// (min(InstanceExists, InstanceShutdown)).
	LifecycleTTL time.Duration
}

// Floor is a workload's floor, per hour, by purpose.
type Floor struct {
	List, Join, Leave, Lifecycle float64
}

// Total is the floor per hour.
func (f Floor) Total() float64 { return f.List + f.Join + f.Leave + f.Lifecycle }

// Validate names the field a workload gets wrong.
func (w Workload) Validate() error {
	var errs []error
	for _, c := range []struct {
		name string
		bad  bool
	}{
		{"Nodes must be >= 0", w.Nodes < 0},
		{"NotReady must be in [0, Nodes]", w.NotReady < 0 || w.NotReady > w.Nodes},
		{"PageSize must be > 0", w.PageSize <= 0},
		{"MaxBatch must be > 0", w.MaxBatch <= 0},
		{"ListInterval must be >= 0", w.ListInterval < 0},
		{"ChurnEvery must be >= 0", w.ChurnEvery < 0},
		{"JoinPerStep and LeavePerStep must be >= 0", w.JoinPerStep < 0 || w.LeavePerStep < 0},
		{"LifecycleTTL must be > 0", w.LifecycleTTL <= 0},
	} {
		if c.bad {
			errs = append(errs, fmt.Errorf("floor: %s", c.name))
		}
	}
	return errors.Join(errs...)
}

// PerHour is w's floor per hour.
func PerHour(w Workload) (Floor, error) {
	if err := w.Validate(); err != nil {
		return Floor{}, err
	}
	var f Floor
	if w.ListInterval > 0 {
		pages := math.Ceil(float64(w.Nodes) / float64(w.PageSize))
		f.List = pages * float64(time.Hour) / float64(w.ListInterval)
	}
	if w.ChurnEvery > 0 {
		steps := float64(time.Hour) / float64(w.ChurnEvery)
		if w.JoinPerStep > 0 {
			f.Join = steps * math.Ceil(float64(w.JoinPerStep)/float64(w.MaxBatch))
		}
		if w.LeavePerStep > 0 {
			f.Leave = steps * math.Ceil(float64(w.LeavePerStep)/float64(w.MaxBatch))
		}
	}
	if w.NotReady > 0 {
		f.Lifecycle = math.Ceil(float64(w.NotReady)/float64(w.MaxBatch)) * float64(time.Hour) / float64(w.LifecycleTTL)
	}
	return f, nil
}
