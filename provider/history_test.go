package provider

// The history checker: many concurrent callers go through cloudgate to a
// scripted upstream (history_upstream_test.go) whose state and faults change
// over simulated time; every upstream answer and every cloudgate answer is
// recorded, and afterwards every cloudgate answer is checked against the
// upstream's history (see the invariants below).
//
// Simulated time only moves when the system is quiescent: every goroutine
// running cloudgate or test code is blocked on a channel (a fake-clock timer,
// a hang, a flight, a batch). So an upstream answer and the cache entry it
// fills carry the same simulated instant, and the bounds are checked exactly.
// Ordering (read-your-writes, breaker state during a call) uses a global
// sequence number taken at every event.
//
// Seeds: CLOUDGATE_HISTORY_SEED=n runs seed n only; CLOUDGATE_HISTORY_SEEDS=n
// runs seeds 1..n (make fuzz); CLOUDGATE_HISTORY_OPS sets the operations per
// seed. A seed fixes the script (the upstream's changes and faults, the
// callers' operations); goroutine interleavings are not replayed, so a
// failure prints the relevant history, not only the seed.

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/metrics"
)

// The invariants, in the order the summary prints them.
const (
	invPositive  = "positive-bound"    // a value equals an upstream answer within TTL (TTL+staleIfError while the breaker is open)
	invNegative  = "negative-fresh"    // "does not exist" within negativeTTL of the upstream saying so; never stale
	invOwn       = "own-failure"       // cloudgate's own failures are errors, never not-found or false
	invRYW       = "read-your-writes"  // a read started after a write returned sees the write
	invBatch     = "batch-size"        // no batch above MaxBatchSize
	invWriteOnce = "write-once"        // a write reached the upstream once, or returned an error (never twice)
	invSentinel  = "sentinel-exact"    // sentinels come back ==
	invErrExact  = "errors-exact"      // every other upstream error comes back as the same value
	invOwnCopy   = "own-copy"          // a caller appending to its answer changes no other caller's
	invOneAnswer = "not-on-one-answer" // InstanceExists* false, InstanceID InstanceNotFound only on two upstream answers confirmAfter apart (or terminated), every path
	invRemoved   = "removed-in-bound"  // a removed instance is not held again confirmAfter after its first hold (past gracePeriod), however far apart the checks; InstanceShutdown/InstanceMetadata of a deleted one answer no value past their TTL
)

var invariants = []string{invPositive, invNegative, invOwn, invRYW, invBatch, invWriteOnce, invSentinel, invErrExact, invOwnCopy, invOneAnswer, invRemoved}

// invRemoved is checked on every revisit of a removed instance that is due
// (revisitPlan: a removed instance's Node checked again at gaps from 0 to
// 10 minutes, young and old Nodes): on the guarded paths, at least
// confirmAfter after an earlier hold and past gracePeriod, the answer must
// be "does not exist", never another hold; InstanceShutdown and
// InstanceMetadata later than their bound after a deletion must not answer
// a value. TestHistory prints its count per path (removedPaths) and fails
// if one is 0 over the default seeds. TestSlowRevisitsConfirm
// checks the guarded promise at fixed revisit intervals.

var sentinels = []error{cloudprovider.InstanceNotFound, cloudprovider.NotImplemented, cloudprovider.ImplementedElsewhere}

// Defaults of make test: several seeds covering the four upstream variants.
var defaultHistorySeeds = []int64{1, 2, 3, 4, 5, 6, 7, 8}

const defaultHistoryOps = 3000

func historySeeds(t *testing.T) ([]int64, int) {
	ops := defaultHistoryOps
	if v := os.Getenv("CLOUDGATE_HISTORY_OPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CLOUDGATE_HISTORY_OPS=%q: want a positive number of operations per seed", v)
		}
		ops = n
	}
	if v := os.Getenv("CLOUDGATE_HISTORY_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("CLOUDGATE_HISTORY_SEED=%q: want an integer seed", v)
		}
		return []int64{n}, ops
	}
	if v := os.Getenv("CLOUDGATE_HISTORY_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CLOUDGATE_HISTORY_SEEDS=%q: want a positive number of seeds (1..n are run)", v)
		}
		seeds := make([]int64, n)
		for i := range seeds {
			seeds[i] = int64(i + 1)
		}
		return seeds, ops
	}
	return defaultHistorySeeds, ops
}

func TestHistory(t *testing.T) {
	seeds, ops := historySeeds(t)
	total, totalOps := map[string]int{}, 0
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			counts, n := runHistory(t, seed, ops)
			for k, v := range counts {
				total[k] += v
			}
			totalOps += n
		})
	}
	var sb strings.Builder
	for _, inv := range invariants {
		fmt.Fprintf(&sb, " %s=%d", inv, total[inv])
		if total[inv] == 0 && !t.Failed() {
			t.Errorf("invariant %s was checked 0 times over %d seeds", inv, len(seeds))
		}
	}
	sb.WriteString(" (not-on-one-answer by path:")
	for _, p := range oneAnswerPaths {
		fmt.Fprintf(&sb, " %s=%d", p, total["info:one-answer:"+p])
	}
	sb.WriteString(") (removed-in-bound by path:")
	for _, p := range removedPaths {
		fmt.Fprintf(&sb, " %s=%d", p, total["info:removed:"+p])
		// The default seeds cover every path (batch and list ones
		// included); one seed alone need not.
		if len(seeds) >= len(defaultHistorySeeds) && total["info:removed:"+p] == 0 && !t.Failed() {
			t.Errorf("removed-in-bound was checked 0 times on path %s over %d seeds", p, len(seeds))
		}
	}
	fmt.Fprintf(&sb, "; due with no answer, the re-read failing: %d; revisits of young Nodes inside gracePeriod: held %d, reported missing (terminated only) %d)",
		total["info:removed-due-no-answer"], total["info:held-in-grace"], total["info:one-answer-in-grace"])
	if len(seeds) >= len(defaultHistorySeeds) && total["info:held-in-grace"] == 0 && !t.Failed() {
		t.Errorf("no revisit of a young Node was held inside gracePeriod over %d seeds", len(seeds))
	}
	fmt.Fprintf(&sb, " (list-served reads checked against their page's own time, listInterval × 1.1: %d)", total[infoListServed])
	if len(seeds) >= len(defaultHistorySeeds) && total[infoListServed] == 0 && !t.Failed() {
		t.Errorf("no read answered from a list page was checked over %d seeds", len(seeds))
	}
	t.Logf("history: %d seeds, %d operations, checks:%s", len(seeds), totalOps, sb.String())
	if total[infoLongWaitSeeds] > 0 && total[infoLongBatchedWaits] == 0 {
		t.Errorf("no batched read waited longer than batchCallTimeout (%s) in the %d long-wait seeds: the long-wait variant does not exercise class 4", batchCallTimeout, total[infoLongWaitSeeds])
	}
}

// Counters of TestHistory's long-wait variant: the seeds
// that ran it, and the batched reads whose token wait outlasted
// batchCallTimeout in them.
const (
	// infoListServed counts the positive answers only a list page could
	// have given, each checked to be at most listInterval × 1.1 old from
	// its page's delivery.
	infoListServed       = "info:list-served"
	infoLongWaitSeeds    = "info:long-wait-seeds"
	infoLongBatchedWaits = "info:batched-wait-over-call-timeout"
)

// opRec is one call through cloudgate and its answer.
type opRec struct {
	id         int
	method     string
	family     string
	key        string
	args       string
	write      bool
	reqID      string
	sseq, eseq int64
	s, e       time.Time
	val        string // canonical value of a positive answer
	neg        bool   // "does not exist"
	err        error
	deadline   time.Time // simulated; zero: a context without deadline
	cancel     context.CancelFunc
	ctxEnded   atomic.Bool
	answered   atomic.Bool // do returned
	// created: the creation time of the Node a revisit passes (zero: none,
	// or a v1 call, which carries no Node).
	created time.Time
	// appended: the addresses this caller got with a hostname of its own
	// appended (as the cloud-node controller does); another caller's append
	// must not change it (invOwnCopy).
	appended []v1.NodeAddress
}

type breakerTransition struct {
	seq    int64
	at     time.Time
	family string
	from   limiter.State
	to     limiter.State
	// sample: not a transition but State() disagreeing with the observer's
	// last transition (from) at a quiescent moment.
	sample bool
}

// scriptNode is one node name and the provider IDs its instances had.
type scriptNode struct {
	name string
	pids []string
	gen  int
	// parked: a revisit plan (revisit) follows this node's removed
	// instance; the script leaves it removed until the plan ends.
	parked bool
}

type history struct {
	t     *testing.T
	seed  int64
	rng   *rand.Rand
	clk   *clocktesting.FakeClock
	start time.Time
	seq   atomic.Int64
	up    *simCloud
	g     *gate
	// opsByKey: the guarded ops (guarded) of each key, by start (check).
	opsByKey map[string][]*opRec
	cfg      *Config
	v2       cloudprovider.InstancesV2
	v1       cloudprovider.Instances
	lbs      cloudprovider.LoadBalancer
	zones    cloudprovider.Zones
	rts      cloudprovider.Routes
	stop     chan struct{}
	stop2    chan struct{} // the stop channel of a second Initialize, if any
	nodes    []*scriptNode
	svcs     []*v1.Service
	ops      []*opRec
	active   sync.WaitGroup
	outst    atomic.Int64
	mode     faultMode
	left     int

	mu          sync.Mutex
	transitions []breakerTransition

	writesByKey map[string][]writeFloor
	deadlines   []*opRec // operations whose context the driver ends at their deadline
	buf         []byte
	forcedSteps int
	quiesces    int
	variant     string
	longWaits   bool // some Retry-Afters outlast batchCallTimeout (see runHistory)

	rv    *rand.Rand // the revisit plans' draws
	plans []*revisitPlan
}

// breakerTee passes breaker events to the metrics and records transitions.
type breakerTee struct {
	limiter.BreakerObserver
	h      *history
	family string
}

func (b breakerTee) StateChanged(from, to limiter.State) {
	b.BreakerObserver.StateChanged(from, to)
	b.h.mu.Lock()
	b.h.transitions = append(b.h.transitions, breakerTransition{seq: b.h.seq.Add(1), at: b.h.clk.Now(), family: b.family, from: from, to: to})
	b.h.mu.Unlock()
}

// sampleBreakers compares each breaker's State with the last transition its
// observer reported, at a quiescent moment; a mismatch is kept for the
// minimal history (it explains a stale answer while "closed").
func (h *history) sampleBreakers() {
	for _, fam := range []string{familyRead, familyWrite} {
		st := h.g.breakers[fam].State()
		h.mu.Lock()
		last := limiter.StateClosed
		for i := len(h.transitions) - 1; i >= 0; i-- {
			if tr := h.transitions[i]; tr.family == fam && !tr.sample {
				last = tr.to
				break
			}
		}
		// Open and half-open are alike here: both may reject calls.
		if (st == limiter.StateClosed) != (last == limiter.StateClosed) {
			h.transitions = append(h.transitions, breakerTransition{seq: h.seq.Add(1), at: h.clk.Now(), family: fam, from: last, to: st, sample: true})
		}
		h.mu.Unlock()
	}
}

// teeBreakers replaces the gate's breakers by identical ones whose events
// the history also records.
func (h *history) teeBreakers() {
	bc := h.cfg.Breaker
	for fam, old := range h.g.breakers {
		nb, err := limiter.NewBreaker(fam, limiter.BreakerConfig{
			FailureRatio: bc.FailureRatio, MinRequests: bc.MinRequests, Interval: bc.Interval.Duration,
			OpenTimeout: bc.OpenTimeout.Duration, MinOpenTimeout: bc.MinOpenTimeout.Duration,
			HalfOpenRequests: bc.HalfOpenRequests, Clock: h.g.clock,
		}, h.g.notACloudFailure, breakerTee{h.g.rec.BreakerObserver(fam), h, fam})
		if err != nil {
			h.t.Fatal(err)
		}
		h.g.breakers[fam] = nb
		for _, m := range h.g.methods {
			if m.breaker == old {
				m.breaker = nb
			}
		}
	}
}

// runHistory runs one seed and returns its check counts and operations.
func runHistory(t *testing.T, seed int64, nops int) (map[string]int, int) {
	// The list prefetch logs every failed list; the outages make many.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	defer klog.LogToStderr(true)
	realStart := time.Now()
	rng := rand.New(rand.NewSource(seed))
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := &history{t: t, seed: seed, rng: rng, clk: clk, start: clk.Now(), stop: make(chan struct{}), buf: make([]byte, 1<<20),
		rv: rand.New(rand.NewSource(seed ^ 0x7e715175))}
	batch, list := false, false
	switch seed % 4 {
	case 1:
		batch = true
	case 2:
		batch, list = true, true
	case 3:
		list = true
	}
	maxBatch := 2 + rng.Intn(4)
	h.up = newSimCloud(clk, &h.seq, seed, batch, list, maxBatch)
	// MaxBatchSize as the provider reads it at Initialize: unchanged, a drop
	// from a larger one, or 0 (no batching).
	maxBatchVariant := ""
	switch rng.Intn(4) {
	case 1:
		h.up.maxBatch, h.up.initMaxBatch = 1000, &maxBatch
		maxBatchVariant = "(1000 before Initialize)"
	case 2:
		zero := 0
		h.up.initMaxBatch, maxBatch = &zero, 0
		maxBatchVariant = "(0 from Initialize)"
	}

	cfg := DefaultConfig()
	cfg.Metrics = metrics.New()
	cfg.Clock = clk
	// Token waits: unbounded (the caller's context only) or bounded, so
	// that the bounded wait's own error is exercised too.
	wait := []time.Duration{0, 500 * time.Millisecond, 2 * time.Second, 2 * time.Minute}[rng.Intn(4)]
	readQPS := []float64{20, 100}[rng.Intn(2)]
	cfg.Limits.Read = BucketConfig{QPS: readQPS, Burst: 30, WaitTimeout: dur(wait)}
	cfg.Limits.Write = BucketConfig{QPS: 20, Burst: 5, WaitTimeout: dur(wait)}
	cfg.Throttle.MaxRetryAfter = dur([]time.Duration{time.Second, 5 * time.Minute}[rng.Intn(2)])
	// Long waits (seeds 1, 2, 9, 10, …: batching, with or without list):
	// throttling answers sometimes carry a Retry-After above cloudgate's own
	// batch call timeout (batchCallTimeout, 1 m), honoured (maxRetryAfter
	// 5 m) within a 2 m waitTimeout, so that a batch's token wait outlives
	// its call timeout: a batch whose wait ran inside that timeout answered
	// its callers with a context error instead of a RetryError. Set after the draws above, which stay as they were.
	if batch && seed%8 != 5 && seed%8 != 6 {
		h.longWaits = true
		wait = 2 * time.Minute
		cfg.Throttle.MaxRetryAfter = dur(5 * time.Minute)
		cfg.Limits.Read.WaitTimeout, cfg.Limits.Write.WaitTimeout = dur(wait), dur(wait)
		if maxBatch == 0 {
			h.up.initMaxBatch, maxBatch = nil, 2+rng.Intn(4)
			h.up.maxBatch, maxBatchVariant = maxBatch, ""
		}
	}
	// The breaker's open intervals and closed counting window run on the
	// simulated clock; the window and the failure ratio vary by seed to make
	// it open during outages.
	openTimeout := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}[rng.Intn(3)]
	interval := []time.Duration{50 * time.Millisecond, time.Second, time.Minute}[rng.Intn(3)]
	ratio := 0.15 + 0.05*float64(rng.Intn(6))
	cfg.Breaker = BreakerConfig{FailureRatio: ratio, MinRequests: 6, Interval: dur(interval), OpenTimeout: dur(openTimeout), HalfOpenRequests: 2, WaitForProbe: boolp(false)}
	// Cache policy: small LRUs (evictions), negative caching off or short,
	// stale-if-error off or shorter, and a method or two with its own TTL
	// (0: not cached).
	cfg.Cache.Size = []int{16, 100000}[rng.Intn(2)]
	cfg.Cache.NegativeTTL = dur([]time.Duration{0, 5 * time.Second, 30 * time.Second, 30 * time.Second}[rng.Intn(4)])
	cfg.Cache.StaleIfError = dur([]time.Duration{0, 2 * time.Minute, 10 * time.Minute, 10 * time.Minute}[rng.Intn(4)])
	cfg.Methods = map[string]MethodConfig{}
	for range rng.Intn(3) {
		m := []string{"InstanceExists", "InstanceMetadata", "GetLoadBalancer", "ListRoutes", "InstanceID", "NodeAddressesByProviderID"}[rng.Intn(6)]
		cfg.Methods[m] = MethodConfig{TTL: durp([]time.Duration{0, 5 * time.Second, 3 * time.Minute}[rng.Intn(3)])}
	}
	cfg.Batch.Enabled = boolp(batch)
	cfg.Batch.MaxWait = dur(100 * time.Millisecond)
	// Send at once (the default) or wait for maxSize/maxWait (the opt-out).
	sendAtOnce := rng.Intn(4) != 0
	cfg.Batch.SendAtOnce = boolp(sendAtOnce)
	cfg.Batch.ListPrefetch = list
	cfg.Batch.ListInterval = dur(20 * time.Second)
	h.cfg = cfg
	ttls := ""
	for _, m := range methodNames() {
		if o, ok := cfg.Methods[m]; ok {
			ttls += fmt.Sprintf(" ttl(%s)=%s", m, o.TTL)
		}
	}
	if h.longWaits {
		maxBatchVariant += " longWaits"
	}
	h.variant = fmt.Sprintf("batch=%v sendAtOnce=%v list=%v maxBatch=%d%s breaker=%.2f/%s/%s readQPS=%v wait=%s maxRetryAfter=%s size=%d negativeTTL=%s staleIfError=%s%s",
		batch, sendAtOnce, list, maxBatch, maxBatchVariant, ratio, interval, openTimeout, readQPS, wait, cfg.Throttle.MaxRetryAfter,
		cfg.Cache.Size, cfg.Cache.NegativeTTL, cfg.Cache.StaleIfError, ttls)
	c, err := New(h.up, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.g = c.(*cloud).g
	h.teeBreakers()
	h.v2, _ = c.InstancesV2()
	h.v1, _ = c.Instances()
	h.lbs, _ = c.LoadBalancer()
	h.zones, _ = c.Zones()
	h.rts, _ = c.Routes()
	h.initState()
	c.Initialize(nil, h.stop)

	rounds, reinit := 0, h.rng.Intn(3) == 0
	for len(h.ops) < nops {
		rounds++
		h.sampleBreakers()
		if reinit && rounds == 50 {
			// Leader migration: Initialize again; the new loop replaces
			// the old one.
			h.stop2 = make(chan struct{})
			c.Initialize(nil, h.stop2)
		}
		h.script()
		n, wave := 1+h.rng.Intn(24), false
		if h.rng.Intn(10) == 0 {
			// A resync wave: many concurrent per-node reads (what makes
			// batches fill up and overflow).
			n, wave = 40+h.rng.Intn(40), true
		}
		// The round's callers start together; some run after another
		// caller's call returned (a write, then a read of what it wrote).
		gate := make(chan struct{})
		var prev <-chan struct{}
		for _, rv := range h.dueRevisits() {
			op, do := h.newOpFor(false, rv)
			h.launch(gate, op, do)
		}
		for range n {
			op, do := h.newOp(wave)
			after := (<-chan struct{})(gate)
			if prev != nil && h.rng.Intn(10) < 3 {
				after = prev
			}
			prev = h.launch(after, op, do)
		}
		close(gate)
		h.settle()
		gap := time.Duration(h.rng.Intn(2000)) * time.Millisecond
		if h.rng.Intn(10) == 0 {
			gap = time.Duration(5+h.rng.Intn(40)) * time.Second
		}
		h.quiesce()
		h.step(gap)
	}
	close(h.stop)
	if h.stop2 != nil {
		close(h.stop2)
	}
	if closer, ok := c.(io.Closer); ok {
		// Close waits for batch calls in flight; drain moves simulated
		// time until they (and Close) have returned.
		go func() {
			if err := closer.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
	}
	h.drain()

	runTook := time.Since(realStart)
	counts, violations := h.check()
	for _, op := range h.ops {
		if batch && slices.Contains(v2Methods, op.method) && op.e.Sub(op.s) > batchCallTimeout {
			counts[infoLongBatchedWaits]++
		}
	}
	if os.Getenv("CLOUDGATE_HISTORY_DEBUG") != "" {
		for _, op := range h.ops[:min(40, len(h.ops))] {
			t.Logf("op #%d %s %s -> %s", op.id, op.method, op.args, h.answerString(op))
		}
	}
	var sb strings.Builder
	for _, inv := range invariants {
		fmt.Fprintf(&sb, " %s=%d", inv, counts[inv])
	}
	opened, mismatches := 0, 0
	for _, tr := range h.transitions {
		switch {
		case tr.sample:
			mismatches++
		case tr.to == limiter.StateOpen:
			opened++
		}
	}
	fmt.Fprintf(&sb, " (held by the guard=%d, %s due with no answer=%d; by path:", counts["info:held"], invRemoved, counts["info:removed-due-no-answer"])
	for _, p := range removedPaths {
		fmt.Fprintf(&sb, " %s=%d", p, counts["info:removed:"+p])
	}
	sb.WriteString(")")
	fmt.Fprintf(&sb, " (not-on-one-answer by path:")
	for _, p := range oneAnswerPaths {
		fmt.Fprintf(&sb, " %s=%d", p, counts["info:one-answer:"+p])
	}
	fmt.Fprintf(&sb, ")")
	fmt.Fprintf(&sb, " (of which served stale=%d, negative while the breaker was open=%d, batched reads over %s=%d; breaker opened %d times, State() disagreed with its observer %d times)",
		counts["info:served-stale"], counts["info:negative-while-breaker-open"], batchCallTimeout, counts[infoLongBatchedWaits], opened, mismatches)
	perInv := map[string]int{}
	for _, v := range violations {
		perInv[v.inv]++
	}
	sb.WriteString(" violations:")
	if len(violations) == 0 {
		sb.WriteString(" none")
	}
	for _, inv := range invariants {
		if perInv[inv] > 0 {
			fmt.Fprintf(&sb, " %s=%d", inv, perInv[inv])
		}
	}
	t.Logf("history seed=%d %s rounds=%d ops=%d upstream-calls=%d upstream-facts=%d sim=%s real=%s (check %s) forced-steps=%d checks:%s",
		seed, h.variant, rounds, len(h.ops), h.up.calls(), h.up.factCount(), h.clk.Since(h.start).Round(time.Second),
		time.Since(realStart).Round(time.Millisecond), (time.Since(realStart) - runTook).Round(time.Millisecond), h.forcedSteps, sb.String())
	for _, inv := range invariants {
		if inv == invBatch && !batch {
			continue // the upstream of this seed has no BatchInstances
		}
		if counts[inv] == 0 {
			t.Errorf("seed %d: invariant %s was checked 0 times: the run does not exercise it", seed, inv)
		}
	}
	if h.longWaits {
		// Checked over all seeds in TestHistory: whether one seed's batches
		// meet a long Retry-After depends on its schedule (and on
		// batch.sendAtOnce, which varies by seed).
		counts[infoLongWaitSeeds]++
		t.Logf("seed %d: %d batched reads waited longer than batchCallTimeout (%s)", seed, counts[infoLongBatchedWaits], batchCallTimeout)
	}
	shown := map[string]int{}
	for _, v := range violations {
		if shown[v.inv]++; shown[v.inv] > 3 {
			continue
		}
		t.Errorf("VIOLATION of %s (seed %d, %s; rerun: CLOUDGATE_HISTORY_SEED=%d go test -race -run 'TestHistory' ./provider/):\n  %s\n  op #%d %s(%s) [%s..%s] -> %s\nminimal history of %s (last events, seq order):\n%s",
			v.inv, seed, h.variant, seed, v.msg, v.op.id, v.op.method, v.op.args, h.rel(v.op.s), h.rel(v.op.e), h.answerString(v.op), v.op.key, h.minimalHistory(v.op))
	}
	for inv, n := range shown {
		if n > 3 {
			t.Errorf("... %d more violations of %s (seed %d)", n-3, inv, seed)
		}
	}
	return counts, len(h.ops)
}

func (h *history) rel(t time.Time) string { return "t+" + t.Sub(h.start).String() }

// --- the script ---

const (
	histNodes    = 16
	histServices = 3
	histCluster  = "sim-cluster"
)

func (h *history) initState() {
	s := h.up
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range histNodes {
		sn := &scriptNode{name: fmt.Sprintf("node-%d", i)}
		h.nodes = append(h.nodes, sn)
		h.createInstance(sn)
	}
	for i := range histServices + 1 {
		svc := &v1.Service{}
		svc.Namespace, svc.Name, svc.UID = "default", fmt.Sprintf("svc-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
		if i == histServices {
			svc.Name = extService
		}
		h.svcs = append(h.svcs, svc)
	}
}

// createInstance gives sn a new instance under a new provider ID (s.mu held).
func (h *history) createInstance(sn *scriptNode) {
	sn.gen++
	pid := fmt.Sprintf("sim://%s-%d", sn.name, sn.gen)
	sn.pids = append(sn.pids, pid)
	in := &simInstance{pid: pid, name: sn.name, addr: fmt.Sprintf("10.%d.%d.1", len(sn.pids), sn.gen), itype: "m.small", zone: "sim-1a"}
	h.up.byPID[pid] = in
	h.up.byName[sn.name] = in
}

func (h *history) event(what string, keys ...string) {
	seq, at := h.up.stamp()
	h.up.events = append(h.up.events, scriptEvent{seq: seq, at: at, keys: keys, what: what})
}

// script applies this round's upstream changes and fault mode.
func (h *history) script() {
	s := h.up
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.left == 0 {
		w := h.rng.Intn(100)
		switch {
		case w < 62:
			h.mode = faultNone
		case w < 72:
			h.mode = faultOutage
		case w < 78:
			h.mode = faultHang
		case w < 86:
			h.mode = faultThrottle
			// Long waits: the throttling episodes ask for a Retry-After
			// above batchCallTimeout.
			s.longRetryAfter = 0
			if h.longWaits {
				s.longRetryAfter = batchCallTimeout + time.Duration(1+h.rng.Intn(40))*time.Second
			}
		case w < 92:
			h.mode = faultBatchFail
		default:
			h.mode = faultFlaky
		}
		h.left = 1 + h.rng.Intn(6)
		if s.mode != h.mode {
			h.event("fault mode -> " + h.mode.String())
		}
		s.mode = h.mode
	}
	h.left--
	for range h.rng.Intn(3) {
		sn := h.nodes[h.rng.Intn(len(h.nodes))]
		cur := s.byName[sn.name]
		keys := []string{nameKey(sn.name)}
		if cur != nil {
			keys = append(keys, pidKey(cur.pid))
		}
		a := h.rng.Intn(12)
		if sn.parked {
			continue // removed until its revisit plan ends
		}
		switch {
		case cur == nil || (cur.terminated && a < 6):
			h.createInstance(sn)
			pid := sn.pids[len(sn.pids)-1]
			h.event("create "+sn.name+" as "+pid, append(keys, pidKey(pid))...)
		case a < 2:
			delete(s.byPID, cur.pid)
			delete(s.byName, sn.name)
			h.event("delete "+cur.pid, keys...)
			h.planRevisits(sn, cur.pid)
		case a < 4:
			cur.terminated = true
			h.event("terminate "+cur.pid+" (still described)", keys...)
			h.planRevisits(sn, cur.pid)
		case a < 6:
			// Re-created under the same provider ID (e.g. a reimaged scale-set VM).
			sn.gen++
			in := &simInstance{pid: cur.pid, name: sn.name, addr: fmt.Sprintf("10.%d.%d.2", len(sn.pids), sn.gen), itype: "m.large", zone: "sim-1b"}
			s.byPID[cur.pid], s.byName[sn.name] = in, in
			h.event("re-create "+cur.pid+" under the same provider ID", keys...)
		case a < 9:
			sn.gen++
			cur.addr = fmt.Sprintf("10.%d.%d.3", len(sn.pids), sn.gen)
			h.event("address of "+cur.pid+" -> "+cur.addr, keys...)
		default:
			cur.shutdown = !cur.shutdown
			h.event(fmt.Sprintf("shutdown of %s -> %v", cur.pid, cur.shutdown), keys...)
		}
	}
	if h.rng.Intn(8) == 0 {
		svc := h.svcs[h.rng.Intn(len(h.svcs))]
		key := lbKeyOf(svc)
		l := s.lb(key)
		l.version++
		h.event(fmt.Sprintf("out-of-band change of %s -> v%d", key, l.version), key)
	}
}

// --- revisits of removed instances ---

// A removed (deleted or terminated) instance is followed by a revisit plan:
// its Node is checked again and again, on the paths the lifecycle
// controller deletes a Node on (and InstanceShutdown, InstanceMetadata), at
// gaps drawn from revisitGaps — at once, inside confirmAfter, just past it,
// and long after (a lifecycle pass over hundreds of NotReady Nodes) — while
// the script leaves the instance removed. The checker's removed-in-bound
// invariant judges every such check that is due (removedDue).

// revisitGaps are the gaps between two revisits (0: the next round).
var revisitGaps = []time.Duration{0, time.Second, 3 * time.Second, 5 * time.Second, 10 * time.Second,
	19 * time.Second, 21 * time.Second, 30 * time.Second, 45 * time.Second, 2 * time.Minute, 10 * time.Minute}

// maxRevisitPlans bounds the nodes parked at once (of histNodes), so the
// script's other changes go on.
const maxRevisitPlans = 12

type revisitPlan struct {
	sn      *scriptNode
	pid     string
	created time.Time       // the Node's creation (inside gracePeriod of the removal, or long before)
	gaps    []time.Duration // the gaps still to come
	next    time.Time
}

// revisitOp is one check of a revisit plan.
type revisitOp struct {
	plan   *revisitPlan
	method string
	byName bool // a Node without a provider ID
}

// planRevisits starts a revisit plan for sn's removed instance pid, if
// fewer than maxRevisitPlans run (s.mu held). Its draws come from h.rv.
func (h *history) planRevisits(sn *scriptNode, pid string) {
	if len(h.plans) >= maxRevisitPlans {
		return
	}
	now := h.clk.Now()
	p := &revisitPlan{sn: sn, pid: pid, next: now, created: now.Add(-time.Hour)}
	if h.rv.Intn(3) == 0 {
		// A young Node: the guard holds it until gracePeriod is over.
		p.created = now.Add(-time.Duration(h.rv.Intn(90)) * time.Second)
	}
	for range 6 + h.rv.Intn(7) {
		p.gaps = append(p.gaps, revisitGaps[h.rv.Intn(len(revisitGaps))])
	}
	sn.parked = true
	h.plans = append(h.plans, p)
	h.event(fmt.Sprintf("revisit plan for %s (Node created %s): gaps %v", pid, h.rel(p.created), p.gaps), pidKey(pid), nameKey(sn.name))
}

// dueRevisits returns this round's revisit checks and ends the plans that
// are done (their nodes go back to the script).
func (h *history) dueRevisits() []*revisitOp {
	now := h.clk.Now()
	var ops []*revisitOp
	keep := h.plans[:0]
	for _, p := range h.plans {
		if now.Before(p.next) {
			keep = append(keep, p)
			continue
		}
		// One guarded check by provider ID and one by name (each key's
		// hold is its own), and now and then a read that is not guarded.
		ops = append(ops,
			&revisitOp{plan: p, method: []string{"InstanceExists", "InstanceExistsByProviderID"}[h.rv.Intn(2)]},
			&revisitOp{plan: p, method: []string{"InstanceExists", "InstanceID"}[h.rv.Intn(2)], byName: true})
		if h.rv.Intn(2) == 0 {
			ops = append(ops, &revisitOp{plan: p, method: []string{"InstanceShutdown", "InstanceMetadata"}[h.rv.Intn(2)], byName: h.rv.Intn(3) == 0})
		}
		if len(p.gaps) == 0 {
			p.sn.parked = false
			continue
		}
		p.next, p.gaps = now.Add(p.gaps[0]), p.gaps[1:]
		keep = append(keep, p)
	}
	clear(h.plans[len(keep):])
	h.plans = keep
	return ops
}

// --- operations ---

type opKind struct {
	name   string
	weight int
}

var opKinds = []opKind{
	{"InstanceExists", 14}, {"InstanceShutdown", 7}, {"InstanceMetadata", 14},
	{"NodeAddresses", 3}, {"NodeAddressesByProviderID", 4}, {"InstanceID", 3},
	{"InstanceExistsByProviderID", 6}, {"InstanceShutdownByProviderID", 3}, {"InstanceTypeByProviderID", 2},
	{"InstanceType", 2}, {"CurrentNodeName", 1}, {"GetZone", 1}, {"GetZoneByProviderID", 2}, {"GetZoneByNodeName", 2},
	{"GetLoadBalancer", 10}, {"EnsureLoadBalancer", 3}, {"UpdateLoadBalancer", 2}, {"EnsureLoadBalancerDeleted", 2},
	{"ListRoutes", 8}, {"CreateRoute", 3}, {"DeleteRoute", 2},
}

var opWeightSum = func() int {
	n := 0
	for _, k := range opKinds {
		n += k.weight
	}
	return n
}()

// pickPID picks the provider ID a caller's Node object carries: usually the
// latest, sometimes an older one (a node object of a deleted instance).
func (h *history) pickPID(sn *scriptNode) string {
	if len(sn.pids) > 1 && h.rng.Intn(5) == 0 {
		return sn.pids[h.rng.Intn(len(sn.pids)-1)]
	}
	return sn.pids[len(sn.pids)-1]
}

// newOp draws the next operation (in the driver, so the seed fixes it) and
// returns it with the function that performs it.
func (h *history) newOp(wave bool) (*opRec, func(context.Context)) {
	return h.newOpFor(wave, nil)
}

// newOpFor draws the next operation; rv, if set, is a revisit of a removed
// instance (revisitOp): its method, node and key are rv's, drawn from the
// revisit plans' own random source, and it runs without a deadline.
func (h *history) newOpFor(wave bool, rv *revisitOp) (*opRec, func(context.Context)) {
	w := h.rng.Intn(opWeightSum)
	kind := opKinds[0].name
	for _, k := range opKinds {
		if w < k.weight {
			kind = k.name
			break
		}
		w -= k.weight
	}
	if wave {
		kind = v2Methods[h.rng.Intn(len(v2Methods))]
	}
	if rv != nil {
		kind = rv.method
	}
	op := &opRec{id: len(h.ops) + 1, method: kind, family: methodSpecs[kind].family}
	h.ops = append(h.ops, op)
	if h.rng.Intn(100) < 45 && rv == nil {
		op.deadline = h.clk.Now().Add(time.Duration(200+h.rng.Intn(8000)) * time.Millisecond)
	}
	sn := h.nodes[h.rng.Intn(len(h.nodes))]
	if rv != nil {
		sn = rv.plan.sn
	}
	node := &v1.Node{}
	node.Name = sn.name
	if h.rng.Intn(7) != 0 {
		node.Spec.ProviderID = h.pickPID(sn)
	}
	if node.Spec.ProviderID == "" && h.rng.Intn(2) == 0 {
		// Not initialised yet: its reads run at critical priority.
		node.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Effect: v1.TaintEffectNoSchedule}}
	}
	if wave && h.rng.Intn(2) == 0 {
		// A Node whose instance never existed: a sure cache miss.
		node.Spec.ProviderID = fmt.Sprintf("sim://ghost-%d", op.id)
		if h.rng.Intn(6) == 0 {
			// An ID the cloud rejects: it fails every batch it is in.
			node.Spec.ProviderID = fmt.Sprintf("sim://bad-%d", op.id)
		}
	}
	pid := h.pickPID(sn)
	if rv != nil {
		// The Node of the removed instance, by provider ID or (not yet
		// initialised) by name, old or inside the guard's grace period.
		node.Spec.ProviderID, node.Spec.Taints, pid = "", nil, rv.plan.pid
		if !rv.byName {
			node.Spec.ProviderID = pid
		}
		node.CreationTimestamp = metav1.NewTime(rv.plan.created)
		if slices.Contains(v2Methods, kind) {
			// v1 calls carry no Node; the history hands cloudgate no node
			// informer, so they get no grace period.
			op.created = rv.plan.created
		}
	}
	svc := h.svcs[h.rng.Intn(len(h.svcs))].DeepCopy()
	reqID := fmt.Sprintf("req-%d-%d", h.seed, op.id)
	boolAns := func(b bool, err error, negIfFalse bool) {
		op.err = err
		switch {
		case err == cloudprovider.InstanceNotFound:
			op.neg = true
		case err != nil:
		case !b && negIfFalse:
			op.neg, op.val = true, "false"
		default:
			op.val = fmt.Sprint(b)
		}
	}
	errAns := func(val string, err error) {
		op.err = err
		if err == cloudprovider.InstanceNotFound {
			op.neg = true
		} else if err == nil {
			op.val = val
		}
	}
	var do func(context.Context)
	switch kind {
	case "InstanceExists", "InstanceShutdown", "InstanceMetadata":
		op.key, op.args = nodeKeyString(node), fmt.Sprintf("node %s providerID %q", node.Name, node.Spec.ProviderID)
		do = func(ctx context.Context) {
			switch kind {
			case "InstanceExists":
				b, err := h.v2.InstanceExists(ctx, node)
				boolAns(b, err, true)
			case "InstanceShutdown":
				b, err := h.v2.InstanceShutdown(ctx, node)
				boolAns(b, err, false)
			default:
				md, err := h.v2.InstanceMetadata(ctx, node)
				errAns(mdString(md), err)
				if md != nil {
					op.appended = append(md.NodeAddresses, opHostname(op))
				}
			}
		}
	case "NodeAddresses", "InstanceID", "InstanceType", "GetZoneByNodeName":
		op.key, op.args = nameKey(sn.name), sn.name
		do = func(ctx context.Context) {
			name := types.NodeName(sn.name)
			switch kind {
			case "NodeAddresses":
				a, err := h.v1.NodeAddresses(ctx, name)
				errAns(addrString(a), err)
				if a != nil {
					op.appended = append(a, opHostname(op))
				}
			case "InstanceID":
				errAns(h.v1.InstanceID(ctx, name))
			case "InstanceType":
				errAns(h.v1.InstanceType(ctx, name))
			default:
				z, err := h.zones.GetZoneByNodeName(ctx, name)
				errAns(zoneString(z), err)
			}
		}
	case "CurrentNodeName":
		op.key, op.args = "host:"+sn.name, sn.name
		do = func(ctx context.Context) {
			n, err := h.v1.CurrentNodeName(ctx, sn.name)
			errAns(string(n), err)
		}
	case "GetZone":
		op.key = "zone:local"
		do = func(ctx context.Context) {
			z, err := h.zones.GetZone(ctx)
			errAns(zoneString(z), err)
		}
	case "GetZoneByProviderID":
		op.key, op.args = pidKey(pid), pid
		do = func(ctx context.Context) {
			z, err := h.zones.GetZoneByProviderID(ctx, pid)
			errAns(zoneString(z), err)
		}
	case "NodeAddressesByProviderID", "InstanceExistsByProviderID", "InstanceShutdownByProviderID", "InstanceTypeByProviderID":
		op.key, op.args = pidKey(pid), pid
		do = func(ctx context.Context) {
			switch kind {
			case "NodeAddressesByProviderID":
				a, err := h.v1.NodeAddressesByProviderID(ctx, pid)
				errAns(addrString(a), err)
			case "InstanceExistsByProviderID":
				b, err := h.v1.InstanceExistsByProviderID(ctx, pid)
				boolAns(b, err, true)
			case "InstanceShutdownByProviderID":
				b, err := h.v1.InstanceShutdownByProviderID(ctx, pid)
				boolAns(b, err, false)
			default:
				errAns(h.v1.InstanceTypeByProviderID(ctx, pid))
			}
		}
	case "GetLoadBalancer", "EnsureLoadBalancer", "UpdateLoadBalancer", "EnsureLoadBalancerDeleted":
		op.key, op.args = lbKeyOf(svc), svc.Name
		if kind != "GetLoadBalancer" {
			op.write, op.reqID = true, reqID
			svc.Annotations = map[string]string{reqAnnotation: reqID}
			op.args += " " + reqID
		}
		do = func(ctx context.Context) {
			switch kind {
			case "GetLoadBalancer":
				st, exists, err := h.lbs.GetLoadBalancer(ctx, histCluster, svc)
				errAns(lbString(st, exists), err)
			case "EnsureLoadBalancer":
				_, op.err = h.lbs.EnsureLoadBalancer(ctx, histCluster, svc, nil)
			case "UpdateLoadBalancer":
				op.err = h.lbs.UpdateLoadBalancer(ctx, histCluster, svc, nil)
			default:
				op.err = h.lbs.EnsureLoadBalancerDeleted(ctx, histCluster, svc)
			}
		}
	default: // routes
		op.key, op.args = routeKey(histCluster), sn.name
		if kind != "ListRoutes" {
			op.write, op.reqID = true, reqID
			op.args += " " + reqID
		}
		do = func(ctx context.Context) {
			switch kind {
			case "ListRoutes":
				rs, err := h.rts.ListRoutes(ctx, histCluster)
				errAns(routesString(rs), err)
			case "CreateRoute":
				op.err = h.rts.CreateRoute(ctx, histCluster, reqID, &cloudprovider.Route{TargetNode: types.NodeName(sn.name), DestinationCIDR: reqID})
			default:
				op.err = h.rts.DeleteRoute(ctx, histCluster, &cloudprovider.Route{Name: "r-" + sn.name, TargetNode: types.NodeName(sn.name), DestinationCIDR: reqID})
			}
		}
	}
	return op, do
}

// launch starts op once after is closed, and returns a channel closed when
// op has returned.
func (h *history) launch(after <-chan struct{}, op *opRec, do func(context.Context)) <-chan struct{} {
	ctx, cancel := context.WithCancel(context.Background())
	op.cancel = cancel
	if !op.deadline.IsZero() {
		h.deadlines = append(h.deadlines, op)
	}
	done := make(chan struct{})
	h.active.Add(1)
	h.outst.Add(1)
	go func() {
		defer h.active.Done()
		defer h.outst.Add(-1)
		defer cancel()
		<-after
		op.sseq, op.s = h.seq.Add(1), h.clk.Now()
		do(ctx)
		op.e, op.eseq = h.clk.Now(), h.seq.Add(1)
		op.answered.Store(true)
		close(done)
	}()
	return done
}

// --- simulated time ---

// settle lets the round's operations finish, moving simulated time in small
// steps whenever everything waits for it.
func (h *history) settle() {
	for steps := 0; h.outst.Load() > 0; steps++ {
		h.quiesce()
		if h.outst.Load() == 0 {
			break
		}
		if steps > 5000 {
			h.t.Fatalf("seed %d: %d operations still running after %d steps:\n%s",
				h.seed, h.outst.Load(), steps, h.goroutines())
		}
		// 100 ms steps, 1 s after the first 10 s: a Retry-After of a
		// minute or two (long waits) would otherwise cost a thousand
		// quiescence checks.
		if steps < 100 {
			h.step(100 * time.Millisecond)
		} else {
			h.step(time.Second)
		}
	}
	h.active.Wait()
}

// step moves the fake clock, then ends the contexts whose deadline passed.
// A Step that does not return (a timer callback waiting for a lock held by
// a goroutine that waits for the clock) fails the test.
func (h *history) step(d time.Duration) {
	done := make(chan struct{})
	go func() {
		h.clk.Step(d)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		h.t.Fatalf("seed %d: FakeClock.Step(%s) deadlocked (a timer callback waits for a lock held while stopping the timer):\n%s", h.seed, d, h.goroutines())
	}
	now := h.clk.Now()
	keep := h.deadlines[:0]
	for _, op := range h.deadlines {
		if now.Before(op.deadline) {
			keep = append(keep, op)
			continue
		}
		op.ctxEnded.Store(true)
		op.cancel()
	}
	clear(h.deadlines[len(keep):])
	h.deadlines = keep
}

// quiesce waits until every goroutine running cloudgate or history code is
// blocked on a channel; after 2 s it gives up (and counts a forced step).
func (h *history) quiesce() {
	h.quiesces++
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; ; i++ {
		if h.quiescent() {
			return
		}
		if time.Now().After(deadline) {
			h.forcedSteps++
			return
		}
		if i < 4 {
			runtime.Gosched()
		} else {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

func (h *history) goroutines() string {
	for {
		n := runtime.Stack(h.buf, true)
		if n < len(h.buf) {
			return string(h.buf[:n])
		}
		h.buf = make([]byte, 2*len(h.buf))
	}
}

// busy returns the goroutines of cloudgate or history code (not the test
// goroutines themselves) that are not blocked on a channel, and how many
// such goroutines there are at all.
func (h *history) busy() (busy, all int) {
	dump := h.goroutines()
	for i, g := range strings.Split(dump, "\n\n") {
		if i == 0 || !strings.Contains(g, "cloudgate/cloudgate/") || strings.Contains(g, "testing.tRunner(") {
			continue
		}
		all++
		state := g
		if j := strings.Index(state, "["); j >= 0 {
			state = state[j+1:]
		}
		if j := strings.IndexAny(state, ",]"); j >= 0 {
			state = state[:j]
		}
		switch {
		case strings.HasPrefix(state, "select"), strings.HasPrefix(state, "chan receive"),
			strings.HasPrefix(state, "chan send"), state == "sync.Cond.Wait", state == "sync.WaitGroup.Wait":
		default:
			busy++
		}
	}
	return busy, all
}

func (h *history) quiescent() bool {
	b, _ := h.busy()
	return b == 0
}

// drain ends the run: contexts cancelled, simulated time moved on until
// every goroutine cloudgate started has returned.
func (h *history) drain() {
	for _, op := range h.ops {
		if op.cancel != nil {
			// Only an operation still running has its context ended here:
			// marking the answered ones too made every "context is live"
			// check of own-failure vacuous, and a wrong answer went unseen.
			if !op.answered.Load() {
				op.ctxEnded.Store(true)
			}
			op.cancel()
		}
	}
	for i := 0; ; i++ {
		h.quiesce()
		if _, all := h.busy(); all == 0 {
			return
		}
		if i > 600 {
			h.t.Fatalf("seed %d: goroutines left after the run:\n%s", h.seed, h.goroutines())
		}
		h.step(time.Second)
	}
}

// opHostname is the address op appends to the addresses it got.
func opHostname(op *opRec) v1.NodeAddress {
	return v1.NodeAddress{Type: v1.NodeHostName, Address: fmt.Sprint("op-", op.id)}
}
