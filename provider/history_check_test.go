package provider

// The checks of the history checker: every recorded cloudgate answer against
// the upstream's recorded answers (facts), writes and breaker transitions.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/limiter"
)

type violation struct {
	inv string
	op  *opRec
	msg string
}

func (s *simCloud) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.callCount {
		n += c
	}
	return n
}

func (s *simCloud) factCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, fs := range s.facts {
		n += len(fs)
	}
	return n
}

// breakerNotClosed reports whether family's breaker was open or half-open at
// some point between the sequence numbers a and b.
func (h *history) breakerNotClosed(family string, a, b int64) bool {
	state := limiter.StateClosed
	for _, tr := range h.transitions {
		if tr.family != family || tr.sample {
			continue
		}
		if tr.seq < a {
			state = tr.to
			continue
		}
		if tr.seq > b {
			break
		}
		if tr.to != limiter.StateClosed {
			return true
		}
	}
	return state != limiter.StateClosed
}

// rywFloor is the least version of op's key a read must see: the highest
// version any write of that key applied, among writes that returned before
// the read started.
func (h *history) rywFloor(op *opRec) (floor int, by *opRec) {
	ws := h.writesByKey[op.key]
	n := sort.Search(len(ws), func(i int) bool { return ws[i].op.eseq >= op.sseq })
	if n == 0 {
		return 0, nil
	}
	return ws[n-1].floor, ws[n-1].by
}

// writeFloor is one returned write of a key, in order of return, with the
// highest version applied by it or any write of the key that returned
// before it.
type writeFloor struct {
	op    *opRec
	floor int
	by    *opRec
}

func (h *history) indexWrites() {
	h.writesByKey = map[string][]writeFloor{}
	var ws []*opRec
	for _, w := range h.ops {
		if w.write && w.eseq != 0 {
			ws = append(ws, w)
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].eseq < ws[j].eseq })
	for _, w := range ws {
		list := h.writesByKey[w.key]
		cur := writeFloor{op: w}
		if len(list) > 0 {
			cur.floor, cur.by = list[len(list)-1].floor, list[len(list)-1].by
		}
		for _, r := range h.up.receipts[w.reqID] {
			if r.applied && r.version > cur.floor {
				cur.floor, cur.by = r.version, w
			}
		}
		h.writesByKey[w.key] = append(list, cur)
	}
}

// nameIdentity reports an answer about the instance a node name stands
// for (README: identity answers keyed by a node name): InstanceID,
// InstanceType, GetZoneByNodeName, and the InstancesV2 reads of a node
// without a provider ID.
func nameIdentity(op *opRec) bool {
	if !strings.HasPrefix(op.key, "name:") {
		return false
	}
	switch op.method {
	case "InstanceID", "InstanceType", "GetZoneByNodeName", "InstanceMetadata", "InstanceExists", "InstanceShutdown":
		return true
	}
	return false
}

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// ownError reports whether err is one cloudgate made (breaker, limiter,
// context, its own messages) rather than the upstream's.
func ownError(err error) bool {
	var retry *api.RetryError // a bounded limiter wait asks the controller to requeue
	return limiter.IsOpen(err) || isCtxErr(err) || errors.As(err, &retry) || strings.Contains(err.Error(), "cloudgate")
}

func (h *history) check() (map[string]int, []violation) {
	counts := map[string]int{}
	var vs []violation
	bad := func(inv string, op *opRec, format string, args ...any) {
		vs = append(vs, violation{inv: inv, op: op, msg: fmt.Sprintf(format, args...)})
	}
	s := h.up
	s.mu.Lock()
	defer s.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	sort.Slice(h.transitions, func(i, j int) bool { return h.transitions[i].seq < h.transitions[j].seq })
	h.indexWrites()
	negTTL := h.cfg.Cache.NegativeTTL.Duration
	stale := h.cfg.Cache.StaleIfError.Duration

	if s.batch && s.maxBatch <= 0 {
		// MaxBatchSize 0: every InstancesV2 read must have gone alone (any
		// batch below is a violation).
		for _, op := range h.ops {
			switch op.method {
			case "InstanceMetadata", "InstanceExists", "InstanceShutdown":
				counts[invBatch]++
			}
		}
	}
	for _, b := range s.batches {
		counts[invBatch]++
		if b.size > s.maxBatch {
			bad(invBatch, &opRec{method: "BatchInstanceStatus", s: b.at, e: b.at, sseq: b.seq, eseq: b.seq},
				"a batch of %d nodes was sent; the upstream's MaxBatchSize is %d", b.size, s.maxBatch)
		}
	}

	h.opsByKey = map[string][]*opRec{}
	for _, op := range h.ops {
		if guarded(op.method) && op.answered.Load() {
			h.opsByKey[op.key] = append(h.opsByKey[op.key], op)
		}
	}
	for _, ops := range h.opsByKey {
		sort.Slice(ops, func(i, j int) bool { return ops[i].sseq < ops[j].sseq })
	}
	for _, op := range h.ops {
		// Own copy: the hostname this caller appended is still there.
		if a := op.appended; a != nil {
			counts[invOwnCopy]++
			if a[len(a)-1] != opHostname(op) {
				bad(invOwnCopy, op, "the address this caller appended to its answer became %v: another caller's append wrote into the same array", a[len(a)-1])
			}
		}
		// Errors: sentinels, exact upstream errors, cloudgate's own.
		if err := op.err; err != nil {
			for _, sen := range sentinels {
				if errors.Is(err, sen) {
					counts[invSentinel]++
					if err != sen {
						bad(invSentinel, op, "error %q wraps sentinel %q but is not == to it", err, sen)
					}
				}
			}
			isSentinel, wrapsSentinel := false, false
			for _, sen := range sentinels {
				isSentinel = isSentinel || err == sen
				wrapsSentinel = wrapsSentinel || errors.Is(err, sen)
			}
			switch {
			case isSentinel:
			case comparableErr(err) && s.errs[err]:
				counts[invErrExact]++
				if errors.Is(err, context.Canceled) && !op.ctxEnded.Load() {
					counts[invOwn]++
					bad(invOwn, op, "another caller's cancellation reached a caller whose context is live: %v", err)
				}
			case ownError(err):
				counts[invOwn]++
				if errors.Is(err, cloudprovider.InstanceNotFound) {
					bad(invOwn, op, "cloudgate's own failure looks like InstanceNotFound: %v", err)
				}
				// A token wait that ran out is an *api.RetryError, also for
				// a batched read (its batch's own call timeout included).
				if isCtxErr(err) && !op.ctxEnded.Load() && strings.Contains(err.Error(), "waiting for") {
					bad(invOwn, op, "a token wait ended with a context error, not a RetryError, for a caller whose context is live: %v", err)
				}
				if isCtxErr(err) && !limiter.IsOpen(err) && !op.ctxEnded.Load() && !strings.Contains(err.Error(), "cloudgate") {
					bad(invOwn, op, "a context error reached a caller whose context is live: %v", err)
				}
			case wrapsSentinel: // reported as sentinel-exact
			default:
				counts[invErrExact]++
				bad(invErrExact, op, "error %q is neither an error value the upstream returned nor cloudgate's own", err)
			}
		}

		if op.write {
			counts[invWriteOnce]++
			rs := s.receipts[op.reqID]
			switch {
			case len(rs) > 1:
				bad(invWriteOnce, op, "write %s reached the upstream %d times", op.reqID, len(rs))
			case op.err == nil && len(rs) == 0:
				bad(invWriteOnce, op, "write %s returned success but never reached the upstream", op.reqID)
			}
			continue
		}

		all := s.facts[[2]string{op.method, op.key}]
		// Facts are in sequence (and time) order: only those up to op's
		// end, and not older than the longest bound, can justify it.
		all = all[:sort.Search(len(all), func(i int) bool { return all[i].seq > op.eseq })]
		window := func(maxAge time.Duration) []fact {
			from := op.s.Add(-maxAge - time.Nanosecond)
			return all[sort.Search(len(all), func(i int) bool { return !all[i].at.Before(from) }):]
		}
		newestWith := func(match func(*fact) bool) *fact {
			for i := len(all) - 1; i >= 0; i-- {
				if match(&all[i]) {
					return &all[i]
				}
			}
			return nil
		}
		if op.neg && guarded(op.method) && (op.err == nil || op.method == "InstanceID") {
			counts[invOneAnswer]++
			msg, path := h.oneAnswer(op)
			counts["info:one-answer:"+path]++
			if msg != "" {
				bad(invOneAnswer, op, "%s", msg)
			}
			// A revisit's young Node: "does not exist" only for an
			// instance described as terminated, never inside gracePeriod
			// on "not found" answers alone. The guard decides when the
			// upstream's answer is in, so the Node's age counts when the
			// caller got the answer (op.e): an op begun inside gracePeriod
			// whose batch answered after it is past it.
			if !h.pastGraceAtAnswer(op) {
				counts["info:one-answer-in-grace"]++
				if !h.terminatedSince(op) {
					bad(invOneAnswer, op, "\"does not exist\" for a Node %s old when answered; gracePeriod is %s", op.e.Sub(op.created), h.cfg.NotFoundGuard.GracePeriod.Duration)
				}
			}
		}
		if guarded(op.method) && heldByGuard(op.err) && !h.pastGrace(op) {
			counts["info:held-in-grace"]++
		}
		if guarded(op.method) && heldByGuard(op.err) {
			counts["info:held"]++
		}
		// Removed in bound, guarded paths: every check that is due (an
		// earlier hold confirmAfter before it, the upstream saying "does
		// not exist" throughout, the Node past gracePeriod) is decided —
		// reported missing, or held (a violation) — unless its re-read
		// got no answer (an error) or a cached "exists" within its TTL.
		if guarded(op.method) && op.answered.Load() && h.pastGrace(op) {
			if first := h.firstHold(op); first != nil {
				path := h.guardPath(op)
				switch {
				case heldByGuard(op.err):
					counts[invRemoved]++
					counts["info:removed:"+path]++
					bad(invRemoved, op, "%s", h.removedHeld(op, first))
				case op.neg:
					counts[invRemoved]++
					counts["info:removed:"+path]++
				default:
					counts["info:removed-due-no-answer"]++
				}
			}
		}
		// Removed in bound, the reads that are not guarded: a deleted
		// instance's InstanceShutdown or InstanceMetadata answered later
		// than its bound after the deletion is "not found" or an error.
		if !op.write && (op.method == "InstanceShutdown" || op.method == "InstanceMetadata") {
			if at, bound, ok := h.removedRead(op); ok {
				path := "v2-shutdown"
				if op.method == "InstanceMetadata" {
					path = "v2-metadata"
				}
				counts[invRemoved]++
				counts["info:removed:"+path]++
				if op.err == nil {
					bad(invRemoved, op, "answered %q %s after the instance was deleted (%s); its bound is %s (TTL, + staleIfError while the breaker is open) + %s of answer delivery",
						op.val, op.s.Sub(at), h.rel(at), bound, removedReadSlack)
				}
			}
		}
		switch {
		case op.neg:
			counts[invNegative]++
			if h.breakerNotClosed(op.family, op.sseq, op.eseq) {
				counts["info:negative-while-breaker-open"]++
			}
			ok := false
			for _, f := range window(negTTL) {
				// An answer given while the call was in progress, or at the
				// simulated instant it started, is fresh whatever the TTL
				// (0 included: not cached, but a flight may still be joined).
				age := op.s.Sub(f.at)
				ok = ok || (f.kind == factNeg && (f.seq > op.sseq || age <= 0 || age < negTTL))
			}
			if !ok {
				newest := newestWith(func(f *fact) bool { return f.kind == factNeg })
				switch {
				case newest == nil:
					bad(invNegative, op, "\"does not exist\" but the upstream never said so for %s", op.key)
				default:
					bad(invNegative, op, "\"does not exist\" %s after the upstream last said so (%s, via %s); negativeTTL is %s%s",
						op.s.Sub(newest.at), h.rel(newest.at), newest.via, negTTL, h.breakerNote(op))
				}
			}
		case op.err == nil:
			counts[invPositive]++
			ttl, maxStale := h.g.methods[op.method].ttl, stale
			if nameIdentity(op) {
				// A node name may come to name another instance: its
				// identity answers live no longer than a negative answer,
				// and are never served stale.
				ttl, maxStale = min(ttl, negTTL), 0
			}
			if op.method == "GetLoadBalancer" && op.val == "absent" {
				// "Does not exist" in any form: GetLoadBalancer's exists=false
				// is cached as a negative answer, at most negativeTTL old
				// whatever the method's TTL, and never served stale.
				ttl, maxStale = negTTL, 0
			}
			openDuring := h.breakerNotClosed(op.family, op.sseq, op.eseq)
			okFresh := false
			within := func(f *fact) bool {
				age := op.s.Sub(f.at)
				if f.seq > op.sseq || age < 0 {
					age = 0 // answered while the call was in progress
				}
				ttl := ttl
				if f.via == "ListInstances" {
					// A listed answer is fresh at most listInterval × 1.1
					// from its own page's delivery (after the page's token
					// wait and latency), however long the list took.
					ttl = min(ttl, listMaxFresh(h.cfg.Batch.ListInterval.Duration))
				}
				okFresh = okFresh || age < ttl || age == 0
				// staleIfError runs past the TTL (RFC 5861's stale-if-error):
				// age since the upstream answered <= TTL+staleIfError.
				return age < ttl || age == 0 || (openDuring && maxStale > 0 && age <= ttl+maxStale)
			}
			floor, by := 0, (*opRec)(nil)
			if op.key[:3] == "lb:" || strings.HasPrefix(op.key, "routes:") {
				floor, by = h.rywFloor(op)
			}
			okBound, okRYW := false, false
			byList, byOther := false, false // which upstream calls could have given the value
			facts := window(ttl + maxStale)
			for i := range facts {
				f := &facts[i]
				if f.kind != factPos || f.val != op.val {
					continue
				}
				if within(f) {
					if f.via == "ListInstances" {
						byList = true
					} else {
						byOther = true
					}
					okBound = true
					if f.version >= floor {
						okRYW = true
					}
				}
			}
			if floor > 0 {
				counts[invRYW]++
			}
			if byList && !byOther {
				counts[infoListServed]++ // served from a list page, checked against its page's own time
			}
			if okBound && !okFresh {
				counts["info:served-stale"]++
			}
			var newest *fact
			if !okBound {
				newest = newestWith(func(f *fact) bool { return f.kind == factPos && f.val == op.val })
			}
			switch {
			case !okBound && newest == nil:
				bad(invPositive, op, "value %q was never an upstream answer for %s; the upstream's last answer before the call: %s", op.val, op.key, lastAnswer(all, op))
			case !okBound:
				bad(invPositive, op, "value %q is %s old (upstream said it at %s via %s); TTL %s, staleIfError %s, breaker open during the call: %v; the upstream's last answer before the call: %s",
					op.val, op.s.Sub(newest.at), h.rel(newest.at), newest.via, ttl, maxStale, openDuring, lastAnswer(all, op))
			case floor > 0 && !okRYW:
				bad(invRYW, op, "read started after write #%d (%s) returned, which made version %d, but answered an older state %q",
					by.id, by.reqID, floor, op.val)
			}
		}
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].op.eseq < vs[j].op.eseq })
	return counts, vs
}

// guarded: the methods the lifecycle controller deletes a Node on.
func guarded(method string) bool {
	return method == "InstanceExists" || method == "InstanceExistsByProviderID" || method == "InstanceID"
}

// heldByGuard: err is the not-found guard's hold.
func heldByGuard(err error) bool {
	var re *api.RetryError
	return errors.As(err, &re) && strings.Contains(err.Error(), "(notFoundGuard)")
}

// oneAnswerPaths are the paths the not-on-one-answer checks are counted by:
// the method's version and key, and how the deciding answer came (a call of
// its own, a batch, a list).
var oneAnswerPaths = []string{"v2-by-provider-id", "v2-by-name", "v1-by-provider-id", "v1-by-name", "batch", "list"}

// oneAnswer checks the not-found guard's promise for an InstanceExists*
// false or an InstanceID InstanceNotFound: since the upstream last said the
// instance exists (any of the three methods, a batch or a list), it said
// "does not exist" at least twice, confirmAfter apart, or described it as
// terminated. path is the op's path (oneAnswerPaths). s.mu is held.
func (h *history) oneAnswer(op *opRec) (msg, path string) {
	path = h.guardPath(op)
	if h.cfg.NotFoundGuard.Enabled != nil && !*h.cfg.NotFoundGuard.Enabled {
		return "", path
	}
	// The answer that decided op came at some point while op ran: judge
	// the upstream's answers up to each such point (op's start, each
	// "does not exist" during op, op's end), and pass op if one of them
	// justifies it. Judged only at op's end, an "exists" answered to a
	// concurrent call after op's deciding answer (InstanceID names a
	// terminated instance that InstanceExists calls gone) looked like a
	// pass on no answer at all.
	cuts := []int64{op.sseq}
	for _, m := range []string{"InstanceExists", "InstanceExistsByProviderID", "InstanceID"} {
		for _, f := range h.up.facts[[2]string{m, op.key}] {
			if f.kind == factNeg && f.seq > op.sseq && f.seq < op.eseq {
				cuts = append(cuts, f.seq)
			}
		}
	}
	for _, c := range cuts {
		if h.oneAnswerAt(op.key, c) == "" {
			return "", path
		}
	}
	return h.oneAnswerAt(op.key, op.eseq), path
}

// oneAnswerAt is oneAnswer's judgement on the upstream's answers for key up
// to seq: "" when they justify passing a "does not exist" on.
func (h *history) oneAnswerAt(key string, seq int64) string {
	negs := h.negsSinceExists(key, seq)
	if len(negs) == 0 {
		return "\"does not exist\" but the upstream never said so since it last said the instance exists"
	}
	for _, f := range negs {
		if f.val == factTerminated {
			return ""
		}
	}
	span := negs[len(negs)-1].at.Sub(negs[0].at)
	if ca := h.cfg.NotFoundGuard.ConfirmAfter.Duration; span < ca {
		return fmt.Sprintf("\"does not exist\" passed on after %d upstream answers spanning %s; confirmAfter is %s", len(negs), span, ca)
	}
	return ""
}

// terminatedSince reports whether the upstream described op's instance
// as terminated since it last said it exists, up to op's end. s.mu is
// held.
func (h *history) terminatedSince(op *opRec) bool {
	for _, f := range h.negsSinceExists(op.key, op.eseq) {
		if f.val == factTerminated {
			return true
		}
	}
	return false
}

// guardPath is a guarded op's path (oneAnswerPaths): how the upstream's
// last "does not exist" for its key came (a batch, a list), else its
// method's version and key. s.mu is held.
func (h *history) guardPath(op *opRec) string {
	negs := h.negsSinceExists(op.key, op.eseq)
	switch {
	case len(negs) > 0 && negs[len(negs)-1].via == "BatchInstanceStatus":
		return "batch"
	case len(negs) > 0 && negs[len(negs)-1].via == "ListInstances":
		return "list"
	case op.method == "InstanceID":
		return "v1-by-name"
	case op.method == "InstanceExistsByProviderID":
		return "v1-by-provider-id"
	case strings.HasPrefix(op.key, "pid:"):
		return "v2-by-provider-id"
	}
	return "v2-by-name"
}

// removedPaths are the paths removed-in-bound is counted by: the guarded
// ones, and the InstancesV2 reads that are not guarded.
var removedPaths = append(oneAnswerPaths[:len(oneAnswerPaths):len(oneAnswerPaths)], "v2-shutdown", "v2-metadata")

// pastGrace: op's Node (a revisit's; other ops carry none) is older than
// the guard's gracePeriod when op starts.
func (h *history) pastGrace(op *opRec) bool {
	return op.created.IsZero() || op.s.Sub(op.created) >= h.cfg.NotFoundGuard.GracePeriod.Duration
}

// pastGraceAtAnswer: op's Node was past gracePeriod when op answered.
func (h *history) pastGraceAtAnswer(op *opRec) bool {
	return op.created.IsZero() || op.e.Sub(op.created) >= h.cfg.NotFoundGuard.GracePeriod.Duration
}

// removedReadSlack covers answer delivery: the upstream reads its state
// when called and may deliver the answer up to 1.5 s later (deliver).
const removedReadSlack = 2 * time.Second

// removedRead reports whether op (InstanceShutdown, InstanceMetadata)
// asked about an instance deleted (not re-created) before op started, by
// more than its bound: the method's TTL, plus staleIfError while the
// breaker was open during op (an identity answer by node name: negativeTTL,
// never stale), plus removedReadSlack. s.mu is held.
func (h *history) removedRead(op *opRec) (at time.Time, bound time.Duration, ok bool) {
	removed := false
	for _, ev := range h.up.events {
		if ev.seq > op.eseq {
			break
		}
		if !slices.Contains(ev.keys, op.key) {
			continue
		}
		switch {
		case strings.HasPrefix(ev.what, "delete "):
			removed, at = true, ev.at
		case strings.HasPrefix(ev.what, "create "), strings.HasPrefix(ev.what, "re-create "):
			removed = false
		}
	}
	if !removed {
		return time.Time{}, 0, false
	}
	ttl, maxStale := h.g.methods[op.method].ttl, h.cfg.Cache.StaleIfError.Duration
	if nameIdentity(op) {
		ttl, maxStale = min(ttl, h.cfg.Cache.NegativeTTL.Duration), 0
	}
	bound = ttl
	if h.breakerNotClosed(op.family, op.sseq, op.eseq) {
		bound += maxStale
	}
	return at, bound, op.s.Sub(at) >= bound+removedReadSlack
}

// negsSinceExists are the upstream's "does not exist" answers for key (by
// any guarded method, a batch or a list) up to seq, since it last said the
// instance exists. s.mu is held.
func (h *history) negsSinceExists(key string, seq int64) []fact {
	return h.negsSince(key, seq, true)
}

// negsSinceDelivered is negsSinceExists with every "exists" taken at its
// delivery: an "exists" computed before a hold but received after it may
// end the hold (cloudgate cannot tell it from a fresh one), so the
// removed-in-bound check lets the guard hold again after it.
func (h *history) negsSinceDelivered(key string, seq int64) []fact {
	return h.negsSince(key, seq, false)
}

func (h *history) negsSince(key string, seq int64, bySaid bool) []fact {
	var facts []fact
	for _, m := range []string{"InstanceExists", "InstanceExistsByProviderID", "InstanceID"} {
		for _, f := range h.up.facts[[2]string{m, key}] {
			if f.seq <= seq {
				facts = append(facts, f)
			}
		}
	}
	sort.Slice(facts, func(i, j int) bool { return facts[i].seq < facts[j].seq })
	var negs []fact
	for _, f := range facts {
		switch f.kind {
		case factPos:
			// Only answers the upstream gave after the newest "exists"
			// count. An "exists" computed before a "does not exist" but
			// delivered after it (a list page read before a deletion) does
			// not undo it (bySaid): the guard may keep its hold then.
			kept := negs[:0]
			for _, n := range negs {
				if bySaid && n.said > f.said {
					kept = append(kept, n)
				}
			}
			negs = kept
		case factNeg:
			negs = append(negs, f)
		}
	}
	return negs
}

// firstHold is the earliest op on op's key held by the guard that ended at
// least confirmAfter before op started, with the upstream saying "does not
// exist" (and never "exists") from before that op to the end of op: a
// removed instance, held once long enough ago. nil: none.
func (h *history) firstHold(op *opRec) *opRec {
	ca := h.cfg.NotFoundGuard.ConfirmAfter.Duration
	negs := h.negsSinceDelivered(op.key, op.eseq)
	if len(negs) == 0 {
		return nil
	}
	ops := h.opsByKey[op.key]
	// A "does not exist" passed on (confirmed) ends the hold; the next one
	// starts anew: only holds after every such answer that may have come
	// before op's own count — also one whose caller had gone when it came
	// (its context ended: the confirmation was the guard's, the answer
	// recorded is the context's).
	// An "exists" answer to a caller (a cached one, within its TTL, of
	// another guarded method's cache) ends a hold too.
	after := int64(0)
	for _, o := range ops {
		if o != op && o.sseq < op.eseq && (o.neg || o.ctxEnded.Load() || o.err == nil) {
			after = max(after, o.eseq)
		}
	}
	for _, o := range ops {
		if o.sseq >= op.sseq || op.s.Sub(o.e) < ca {
			break
		}
		if o.sseq > after && heldByGuard(o.err) && negs[0].seq < o.sseq {
			return o
		}
	}
	return nil
}

// removedHeld checks op, held although an earlier op (first) was held at
// least confirmAfter before it and the upstream said "does not exist"
// throughout: the guard's re-read is due then, and only a failed re-read
// (an error, not a hold) or an "exists" answer may keep it from passing
// "does not exist" on — however long ago first was (a hold restarted
// when checks are far apart would never let a rarely revisited Node be
// deleted). s.mu is held.
func (h *history) removedHeld(op, first *opRec) string {
	return fmt.Sprintf("held again %s after a hold at %s (op #%d) while the upstream said \"does not exist\" throughout; confirmAfter is %s",
		op.s.Sub(first.e), h.rel(first.s), first.id, h.cfg.NotFoundGuard.ConfirmAfter.Duration)
}

// lastAnswer describes the upstream's last answer for op's method and key
// before op started.
func lastAnswer(facts []fact, op *opRec) string {
	for i := len(facts) - 1; i >= 0; i-- {
		f := facts[i]
		if f.seq >= op.sseq {
			continue
		}
		switch f.kind {
		case factNeg:
			return "does not exist (via " + f.via + ")"
		case factErr:
			return "error " + f.err.Error()
		}
		return fmt.Sprintf("%q (via %s)", f.val, f.via)
	}
	return "none"
}

func (h *history) breakerNote(op *opRec) string {
	if h.breakerNotClosed(op.family, op.sseq, op.eseq) {
		return "; the " + op.family + " breaker was open during the call (served stale)"
	}
	return ""
}

func (h *history) answerString(op *opRec) string {
	switch {
	case op.write && op.err == nil:
		return "ok"
	case op.err != nil && op.neg:
		return fmt.Sprintf("does not exist (%v)", op.err)
	case op.err != nil:
		return "error: " + op.err.Error()
	case op.neg:
		return "does not exist (false)"
	}
	return fmt.Sprintf("%q", op.val)
}

// minimalHistory prints the last events touching op's key (and the key of
// the same node under its other name), up to op's end: upstream answers,
// script changes, writes, other calls through cloudgate, breaker changes.
func (h *history) minimalHistory(op *opRec) string {
	const keep = 60
	type line struct {
		seq int64
		s   string
	}
	keys := map[string]bool{op.key: true}
	for _, ev := range h.up.events {
		for _, k := range ev.keys {
			if k == op.key {
				for _, k2 := range ev.keys {
					keys[k2] = true
				}
			}
		}
	}
	var lines []line
	add := func(seq int64, at time.Time, format string, args ...any) {
		if seq <= op.eseq {
			lines = append(lines, line{seq, fmt.Sprintf("  #%-7d %-12s %s", seq, h.rel(at), fmt.Sprintf(format, args...))})
		}
	}
	for k, fs := range h.up.facts {
		// A guarded op's verdict rests on every guarded method's answers
		// for its key (a batch or a list says InstanceExists).
		if !keys[k[1]] || (k[0] != op.method && !(guarded(op.method) && guarded(k[0]))) {
			continue
		}
		for _, f := range fs {
			ans := f.val
			switch f.kind {
			case factNeg:
				ans = "does not exist"
			case factErr:
				ans = "error: " + f.err.Error()
			}
			if f.version > 0 {
				ans += fmt.Sprintf(" (v%d)", f.version)
			}
			if f.said != f.seq {
				ans += fmt.Sprintf(" (read at #%d)", f.said)
			}
			add(f.seq, f.at, "upstream %s says %s %s: %s", f.via, f.method, f.key, ans)
		}
	}
	for _, ev := range h.up.events {
		touches := len(ev.keys) == 0 // fault modes concern every key
		for _, k := range ev.keys {
			touches = touches || keys[k]
		}
		if touches {
			add(ev.seq, ev.at, "script: %s", ev.what)
		}
	}
	for _, rs := range h.up.receipts {
		for _, r := range rs {
			if keys[r.key] {
				add(r.seq, r.at, "upstream received %s %s applied=%v version=%d", r.method, r.reqID, r.applied, r.version)
			}
		}
	}
	for _, o := range h.ops {
		if keys[o.key] && o.eseq != 0 && (o.method == op.method || o.write || o == op || (guarded(op.method) && guarded(o.method))) {
			add(o.sseq, o.s, "op #%d %s(%s) starts", o.id, o.method, o.args)
			add(o.eseq, o.e, "op #%d %s answers %s", o.id, o.method, h.answerString(o))
		}
	}
	for _, tr := range h.transitions {
		switch {
		case tr.family != op.family:
		case tr.sample:
			add(tr.seq, tr.at, "breaker %s: State() says %s, its observer's last transition was to %s", tr.family, tr.to, tr.from)
		default:
			add(tr.seq, tr.at, "breaker %s: %s -> %s", tr.family, tr.from, tr.to)
		}
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].seq < lines[j].seq })
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	var sb strings.Builder
	for _, l := range lines {
		sb.WriteString(l.s)
		sb.WriteByte('\n')
	}
	return sb.String()
}
