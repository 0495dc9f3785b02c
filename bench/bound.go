package bench

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
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

// InitBound is the init bound for another simulated cloud driven by this
// package's cluster: o's ReadQPS, ReadBurst, CloudMaxBatch and Latency
// describe its read quota, largest batch and round trip, KubeQPS and
// KubeBurst the CCM's client, NodeWorkers its --concurrent-node-syncs (0:
// 1). The kube side counts the three requests per Node the simulator
// counts on the node controller's client (ClusterRequestsPerNode), as the
// load benchmark's scale-up bound does (update, status patch, event).
func InitBound(o *Options, k int) *Bound {
	return initBoundMeasured(o, k, max(1, o.NodeWorkers), ClusterRequestsPerNode())
}

// ClusterRequestsPerNode are the node controller's kube requests per new
// Node that the load benchmark's scale-ups count (perNodeRequests, printed
// in each scale-up's bound): the Node update that removes the taint, the
// status patch with its addresses, and the "Synced" Event, which shares the
// client's limiter.
func ClusterRequestsPerNode() map[string]int {
	return map[string]int{"update nodes": 1, "patch nodes/status": 1, "create events": 1}
}

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

// perNodeRequests is the node controller's kube requests per new node by
// "verb resource[/subresource]", measured: for every column and seed the
// count during the scale-up divided by K (rounded down: a request made for
// only some nodes is not one every node needs), the least over all of them.
func perNodeRequests(runs map[string][]Side, k int) map[string]int {
	var out map[string]int
	for _, col := range slices.Sorted(maps.Keys(runs)) {
		for _, x := range runs[col] {
			if x.NodeKubeRequests == nil {
				return nil
			}
			cur := map[string]int{}
			for key, n := range x.NodeKubeRequests {
				if v := int(n / int64(k)); v > 0 {
					cur[key] = v
				}
			}
			if out == nil {
				out = cur
				continue
			}
			for key, v := range out {
				out[key] = min(v, cur[key])
				if out[key] == 0 {
					delete(out, key)
				}
			}
		}
	}
	return out
}

// initBoundMeasured is initBound with the kube side counted from the node
// controller's requests per node (perNodeRequests): r requests per node
// through one client limited to QPS with a bucket of burst, of which e (the
// Events) follow a node's initialisation. With one node worker the worker's
// next node waits for a cloud round trip after each node, so each node's
// Event takes its token before the next node's requests and the last node
// is initialised once all but its own Events are through:
// kube = max(0, rK - e - burst)/QPS. With several workers the recorder's
// Events may lag behind every worker's requests, so only the requests before
// each node's initialisation count: kube = max(0, (r - e)K - burst)/QPS.
func initBoundMeasured(o *Options, k, workers int, perNode map[string]int) *Bound {
	b := initBound(o, k)
	if len(perNode) == 0 {
		return b
	}
	var r, e int
	var parts []string
	for _, key := range slices.Sorted(maps.Keys(perNode)) {
		r += perNode[key]
		if strings.HasSuffix(key, " events") {
			e += perNode[key]
		}
		parts = append(parts, fmt.Sprintf("%s %d", key, perNode[key]))
	}
	if workers > 1 {
		r, e = r-e, 0
		parts = append(parts, fmt.Sprintf("Events not counted: %d node workers", workers))
	}
	kube := math.Max(0, float64(r*k-e-o.KubeBurst)) / o.KubeQPS
	b.Kube, b.Seconds = kube, math.Max(b.Cloud, kube)
	b.Formula = fmt.Sprintf("max(cloud = max(0, ceil(K/B)-S)/Q + RTT = max(0, ceil(%d/%d)-%d)/%g + %v = %.2fs, "+
		"kube = max(0, rK-e-burst)/QPS with r = %d node-controller requests per node measured (%s), e = %d after the initialisation (Events) "+
		"= max(0, %d-%d-%d)/%g = %.2fs) = %.2fs",
		k, o.CloudMaxBatch, o.ReadBurst, o.ReadQPS, o.Latency, b.Cloud, r, strings.Join(parts, ", "), e, r*k, e, o.KubeBurst, o.KubeQPS, kube, b.Seconds)
	return b
}
