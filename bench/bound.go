package bench

import (
	"fmt"
	"math"
	"time"
)

// Bound is a lower bound on a simulated time, with the formula and figures
// it was computed from. A run that beats it means the bound is wrong.
type Bound struct {
	Seconds float64 `json:"seconds"`
	// Cloud and Kube are the two sides; Seconds is the larger (and, for
	// quiescence, Writes the cloud write side).
	Cloud   float64  `json:"cloud_seconds"`
	Kube    float64  `json:"kube_seconds"`
	Writes  *float64 `json:"writes_seconds,omitempty"`
	Formula string   `json:"formula"`
}

// initBound is the least time K new nodes need to be initialised (taint
// removed and addresses set):
//
//	cloud: max(0, ceil(K/B) − S)/Q + one round trip (base latency)
//	kube:  max(0, 2K − burst)/QPS: each node costs at least a Node update
//	       (which removes the taint) and a status patch (its addresses),
//	       through the node controller's client.
func initBound(o *Options, k int) *Bound {
	calls := math.Ceil(float64(k) / float64(o.CloudMaxBatch))
	cloud := math.Max(0, calls-float64(o.ReadBurst))/o.ReadQPS + o.Latency.Seconds()
	kube := math.Max(0, float64(2*k-o.KubeBurst)) / o.KubeQPS
	b := &Bound{Cloud: cloud, Kube: kube, Seconds: math.Max(cloud, kube)}
	b.Formula = fmt.Sprintf("max(cloud = max(0, ceil(K/B)-S)/Q + RTT = max(0, ceil(%d/%d)-%d)/%g + %v = %.2fs, "+
		"kube = max(0, 2K-burst)/QPS = max(0, %d-%d)/%g = %.2fs) = %.2fs",
		k, o.CloudMaxBatch, o.ReadBurst, o.ReadQPS, o.Latency, cloud, 2*k, o.KubeBurst, o.KubeQPS, kube, b.Seconds)
	return b
}

// InitBound is initBound for another simulated cloud: o's ReadQPS,
// ReadBurst, CloudMaxBatch and Latency describe its read quota, largest
// batch and round trip, KubeQPS and KubeBurst the CCM's client.
func InitBound(o *Options, k int) *Bound { return initBound(o, k) }

// quiesceBound adds the writes quiescence needs to the init bound: a
// CreateRoute per new node and at least one load balancer update per
// service (the node set changed), through the cloud's write quota:
// max(0, K + M − S_w)/Q_w + RTT.
func quiesceBound(o *Options, k, m int, init *Bound) *Bound {
	writes := math.Max(0, float64(k+m-o.WriteBurst))/o.WriteQPS + o.Latency.Seconds()
	b := &Bound{Cloud: init.Cloud, Kube: init.Kube, Writes: &writes, Seconds: math.Max(init.Seconds, writes)}
	b.Formula = fmt.Sprintf("max(init bound %.2fs, writes = max(0, K+M-S_w)/Q_w + RTT = max(0, %d+%d-%d)/%g + %v = %.2fs) = %.2fs",
		init.Seconds, k, m, o.WriteBurst, o.WriteQPS, o.Latency, writes, b.Seconds)
	return b
}

// steadyFloor is the steady state's floor, for reference (not asserted: a
// policy may refresh less often than the status period): refreshing N
// nodes once per status period takes ceil(N/B) calls, 12 periods an hour.
func steadyFloor(o *Options, n int) *Bound {
	perHour := math.Ceil(float64(n)/float64(o.CloudMaxBatch)) * float64(time.Hour/nodeStatusUpdateFrequency)
	return &Bound{Seconds: 0, Cloud: perHour, Formula: fmt.Sprintf(
		"a refresh of every node per status period: ceil(N/B) x (1h / 5m) = ceil(%d/%d) x 12 = %.0f reads/h", n, o.CloudMaxBatch, perHour)}
}
