package provider

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/metrics"
)

// TestHistoryCheckerDetects feeds the checker hand-made histories, one per
// way of breaking a promise, and checks that it reports exactly that
// invariant: the history checker itself can fail.
func TestHistoryCheckerDetects(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const node = "pid:sim://node-0-1"
	const lbKey = "lb:default/svc-0/uid-0"
	upErr := errors.New("HTTP 503: outage")
	type setup struct {
		facts       []fact
		ops         []*opRec
		receipts    []writeReceipt
		batches     []upstreamBatch
		transitions []breakerTransition
	}
	read := func(method, key string, s, e int64, sAt time.Duration, val string) *opRec {
		return &opRec{method: method, family: familyRead, key: key, sseq: s, eseq: e, s: at(sAt), e: at(sAt), val: val}
	}
	neg := func(o *opRec) *opRec { o.neg, o.val = true, "false"; return o }
	withErr := func(o *opRec, err error) *opRec { o.err, o.val = err, ""; return o }
	pos := func(seq int64, d time.Duration, method, key, val string, version int) fact {
		return fact{seq: seq, at: at(d), method: method, key: key, kind: factPos, val: val, version: version, via: method}
	}
	negFact := func(seq int64, d time.Duration, method, key string) fact {
		return fact{seq: seq, at: at(d), method: method, key: key, kind: factNeg, val: "false", via: method}
	}
	for _, tc := range []struct {
		name string
		want string // the invariant violated; "" for none
		also string // a second invariant the same fault breaks
		s    setup
	}{
		{"fresh positive", "", "", setup{
			facts: []fact{pos(1, 0, "InstanceExists", node, "true", 0)},
			ops:   []*opRec{read("InstanceExists", node, 2, 3, 59*time.Second, "true")},
		}},
		{"positive past its TTL", invPositive, "", setup{
			facts: []fact{pos(1, 0, "InstanceExists", node, "true", 0)},
			ops:   []*opRec{read("InstanceExists", node, 2, 3, time.Minute, "true")},
		}},
		{"positive past its TTL while the breaker is open", "", "", setup{
			facts:       []fact{pos(1, 0, "InstanceExists", node, "true", 0)},
			transitions: []breakerTransition{{seq: 2, family: familyRead, from: limiter.StateClosed, to: limiter.StateOpen}},
			ops:         []*opRec{read("InstanceExists", node, 3, 4, 5*time.Minute, "true")},
		}},
		{"stale past staleIfError", invPositive, "", setup{
			facts:       []fact{pos(1, 0, "InstanceExists", node, "true", 0)},
			transitions: []breakerTransition{{seq: 2, family: familyRead, from: limiter.StateClosed, to: limiter.StateOpen}},
			ops:         []*opRec{read("InstanceExists", node, 3, 4, 11*time.Minute+time.Second, "true")},
		}},
		{"value the upstream never gave", invPositive, "", setup{
			facts: []fact{negFact(1, 0, "InstanceExists", node)},
			ops:   []*opRec{read("InstanceExists", node, 2, 3, time.Second, "true")},
		}},
		{"name-keyed identity past negativeTTL", invPositive, "", setup{
			facts: []fact{pos(1, 0, "InstanceID", "name:node-0", "node-0-1", 0)},
			ops:   []*opRec{read("InstanceID", "name:node-0", 2, 3, 30*time.Second, "node-0-1")},
		}},
		{"name-keyed identity within negativeTTL", "", "", setup{
			facts: []fact{pos(1, 0, "InstanceID", "name:node-0", "node-0-1", 0)},
			ops:   []*opRec{read("InstanceID", "name:node-0", 2, 3, 29*time.Second, "node-0-1")},
		}},
		{"fresh negative", "", "", setup{
			facts: []fact{negFact(1, 0, "InstanceMetadata", node)},
			ops:   []*opRec{neg(read("InstanceMetadata", node, 2, 3, 29*time.Second, ""))},
		}},
		{"negative past negativeTTL", invNegative, "", setup{
			facts: []fact{negFact(1, 0, "InstanceMetadata", node)},
			ops:   []*opRec{neg(read("InstanceMetadata", node, 2, 3, 30*time.Second, ""))},
		}},
		{"negative the upstream never said", invNegative, "", setup{
			ops: []*opRec{neg(read("InstanceMetadata", node, 2, 3, 0, ""))},
		}},
		{"not found passed on one answer", invOneAnswer, "", setup{
			facts: []fact{pos(1, 0, "InstanceExists", node, "true", 0), negFact(2, time.Second, "InstanceExists", node)},
			ops:   []*opRec{neg(read("InstanceExists", node, 3, 4, 2*time.Second, ""))},
		}},
		{"not found on answers closer than confirmAfter", invOneAnswer, "", setup{
			facts: []fact{negFact(1, 0, "InstanceExists", node), negFact(2, 19*time.Second, "InstanceExistsByProviderID", node)},
			ops:   []*opRec{neg(read("InstanceExists", node, 3, 4, 19*time.Second, ""))},
		}},
		{"not found confirmed confirmAfter later", "", "", setup{
			facts: []fact{negFact(1, 0, "InstanceExists", node), negFact(2, 20*time.Second, "InstanceExistsByProviderID", node)},
			ops:   []*opRec{neg(read("InstanceExists", node, 3, 4, 21*time.Second, ""))},
		}},
		{"terminated passes on one answer", "", "", setup{
			facts: []fact{{seq: 1, at: t0, method: "InstanceExists", key: node, kind: factNeg, val: factTerminated, via: "BatchInstanceStatus"}},
			ops:   []*opRec{neg(read("InstanceExists", node, 2, 3, time.Second, ""))},
		}},
		{"breaker error wrapping not-found", invOwn, invSentinel, setup{
			ops: []*opRec{withErr(read("InstanceMetadata", node, 2, 3, 0, ""), &limiter.OpenError{Breaker: familyRead, LastErr: fmt.Errorf("x: %w", cloudprovider.InstanceNotFound)})},
		}},
		{"context error to a live caller", invOwn, "", setup{
			ops: []*opRec{withErr(read("InstanceMetadata", node, 2, 3, 0, ""), context.Canceled)},
		}},
		{"wrapped sentinel", invSentinel, "", setup{
			ops: []*opRec{withErr(read("InstanceMetadata", node, 2, 3, 0, ""), fmt.Errorf("wrapped: %w", cloudprovider.NotImplemented))},
		}},
		{"upstream error changed", invErrExact, "", setup{
			ops: []*opRec{withErr(read("InstanceMetadata", node, 2, 3, 0, ""), errors.New("HTTP 503: outage"))},
		}},
		{"upstream error unchanged", "", "", setup{
			facts: []fact{{seq: 1, at: t0, method: "InstanceMetadata", key: node, kind: factErr, err: upErr}},
			ops:   []*opRec{withErr(read("InstanceMetadata", node, 2, 3, 0, ""), upErr)},
		}},
		{"batch above MaxBatchSize", invBatch, "", setup{
			batches: []upstreamBatch{{seq: 1, at: t0, size: 4}},
		}},
		{"write sent twice", invWriteOnce, "", setup{
			ops: []*opRec{{method: "EnsureLoadBalancer", family: familyWrite, key: lbKey, write: true, reqID: "r1", sseq: 1, eseq: 4}},
			receipts: []writeReceipt{{seq: 2, reqID: "r1", key: lbKey, applied: true, version: 1},
				{seq: 3, reqID: "r1", key: lbKey, applied: true, version: 2}},
		}},
		{"write answered ok but never sent", invWriteOnce, "", setup{
			ops: []*opRec{{method: "EnsureLoadBalancer", family: familyWrite, key: lbKey, write: true, reqID: "r1", sseq: 1, eseq: 4}},
		}},
		{"read after a write sees the old state", invRYW, "", setup{
			facts: []fact{pos(1, 0, "GetLoadBalancer", lbKey, "absent", 0)},
			ops: []*opRec{
				{method: "EnsureLoadBalancer", family: familyWrite, key: lbKey, write: true, reqID: "r1", sseq: 2, eseq: 4},
				read("GetLoadBalancer", lbKey, 5, 6, time.Second, "absent"),
			},
			receipts: []writeReceipt{{seq: 3, reqID: "r1", key: lbKey, applied: true, version: 1}},
		}},
		{"read after a write sees it", "", "", setup{
			facts: []fact{pos(1, 0, "GetLoadBalancer", lbKey, "absent", 0), pos(5, time.Second, "GetLoadBalancer", lbKey, "exists:x", 1)},
			ops: []*opRec{
				{method: "EnsureLoadBalancer", family: familyWrite, key: lbKey, write: true, reqID: "r1", sseq: 2, eseq: 4},
				read("GetLoadBalancer", lbKey, 5, 6, time.Second, "exists:x"),
			},
			receipts: []writeReceipt{{seq: 3, reqID: "r1", key: lbKey, applied: true, version: 1}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			h := &history{t: t, clk: clk, start: t0}
			h.up = newSimCloud(clk, &h.seq, 1, true, false, 3)
			cfg := DefaultConfig()
			cfg.Metrics, cfg.Clock = metrics.New(), clk
			c, err := New(h.up, cfg)
			if err != nil {
				t.Fatal(err)
			}
			h.cfg, h.g = cfg, enf(c)
			for _, f := range tc.s.facts {
				k := [2]string{f.method, f.key}
				h.up.facts[k] = append(h.up.facts[k], f)
				if f.err != nil {
					h.up.errs[f.err] = true
				}
			}
			for _, r := range tc.s.receipts {
				h.up.receipts[r.reqID] = append(h.up.receipts[r.reqID], r)
			}
			h.up.batches = tc.s.batches
			h.transitions = tc.s.transitions
			h.ops = tc.s.ops
			for i, op := range h.ops {
				op.id = i + 1
			}
			_, vs := h.check()
			got := map[string]bool{}
			for _, v := range vs {
				got[v.inv] = true
			}
			switch {
			case tc.want == "" && len(vs) > 0:
				t.Fatalf("violations reported for a correct history: %+v", vs[0].msg)
			case tc.want != "" && !got[tc.want]:
				t.Fatalf("the checker missed a violation of %s (reported: %v)", tc.want, got)
			case len(got) > 1 && !(len(got) == 2 && got[tc.also]):
				t.Fatalf("one fault reported as several invariants: %v", got)
			}
		})
	}
}
