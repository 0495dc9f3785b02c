package bench

import (
	"context"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPurposeCount: each read request on the wire is counted under what it
// was for; a batch carrying only NotReady Nodes is the lifecycle
// controller's, one carrying any Ready Node a status lookup; writes are
// not counted and a batch's body reaches the cloud whole.
func TestPurposeCount(t *testing.T) {
	var p purposes
	p.markNotReady("node-3", "i-3", "i-4")
	req := func(method, url, body string) *http.Request {
		var r *http.Request
		if body == "" {
			r, _ = http.NewRequest(method, url, nil)
		} else {
			r, _ = http.NewRequest(method, url, strings.NewReader(body))
		}
		return r
	}
	batch := req("POST", "http://c/v1/instances:batchGet", `{"ids":["i-3","i-4"]}`)
	for _, r := range []*http.Request{
		batch,
		req("POST", "http://c/v1/instances:batchGet", `{"ids":["i-3"],"names":["node-1"]}`),
		req("GET", "http://c/v1/instances/i-3", ""),
		req("GET", "http://c/v1/instances/i-1", ""),
		req("GET", "http://c/v1/instances?name=node-3", ""),
		req("GET", "http://c/v1/instances?pageSize=1000", ""),
		req("GET", "http://c/v1/instances?pageToken=x", ""),
		req("GET", "http://c/v1/clusters/kubernetes/routes", ""),
		req("GET", "http://c/v1/loadbalancers/lb-1", ""),
		req("PUT", "http://c/v1/loadbalancers/lb-1", "{}"),
		req("POST", "http://c/v1/clusters/kubernetes/routes", "{}"),
	} {
		p.count(r)
	}
	got := p.snapshot()
	want := map[string]int64{PurposeLifecycle: 3, PurposeStatus: 2, PurposeList: 2, PurposeRoutes: 1, PurposeOther: 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d requests, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("purposes %v, want %v", got, want)
	}
	if b, _ := io.ReadAll(batch.Body); string(b) != `{"ids":["i-3","i-4"]}` {
		t.Errorf("batch body after counting: %q", b)
	}
}

// TestPlanPurposesAddUp: in a small simulated plan the reads by purpose add
// up to the cloud's own read counter, and the NotReady Nodes' checks show
// as lifecycle reads (cache column: every check that misses the cache is
// one lookup).
func TestPlanPurposesAddUp(t *testing.T) {
	o := DefaultOptions()
	o.Services, o.NotReadyPct, o.SteadyWindow = 0, 10, 10*time.Minute
	var plan *Plan
	_ = runVirtualFn(t, func(ctx context.Context) error {
		var err error
		plan, err = RunPlan(ctx, o, []int{40}, PlanConfig{Cloud: "simcloud", ScaleupNodes: 100}, testWriter{t})
		return err
	})
	pt := plan.Points[0]
	var sum float64
	for _, v := range pt.ReadsPerMinByPurpose {
		sum += v
	}
	if math.Abs(sum-pt.ReadsPerMin) > 1e-9 || pt.ReadsPerMinByPurpose[PurposeLifecycle] == 0 || pt.ReadsPerMinByPurpose[PurposeStatus] == 0 {
		t.Errorf("reads by purpose %v add up to %.3f/min, the cloud counted %.3f/min; want equal, with lifecycle and status reads", pt.ReadsPerMinByPurpose, sum, pt.ReadsPerMin)
	}
	if pt.Binding == "" || pt.Setting == "" || pt.NeedScaleup < pt.NeedSteady || pt.NeedSteady <= 0 {
		t.Errorf("point %+v: want a binding limit, a setting and scale-up need >= steady need > 0", pt)
	}
}
