package fleet

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
)

// maxBatch is the most calls one admission round trip asks for.
const maxBatch = 64

// creditTTL is how long a token granted to a waiter that gave up meanwhile
// is kept for the next caller.
const creditTTL = time.Second

// usageWindow is the window of the usage ratio (as metrics.QuotaWindow).
const usageWindow = time.Minute

// Indexes of Limiter.keys.
const (
	keyTAT      = iota // GCRA of the whole budget
	keyTATOther        // GCRA of the non-critical part
	keyAIMD            // the fleet's rate
	keyCount           // admissions, for the usage ratio
	numKeys
)

// Classes of the shared budget: critical calls may use all of it, the others
// only 1 - criticalShare.
const (
	classCritical = 0
	classOther    = 1
)

func classOf(p limiter.Priority) int {
	if p <= limiter.PriorityCritical {
		return classCritical
	}
	return classOther
}

// prioIndex clamps p to a queue index.
func prioIndex(p limiter.Priority) int {
	return int(min(max(p, limiter.PriorityCritical), limiter.PriorityBackground))
}

// Limiter admits the calls of one API family against the fleet's shared
// budget, or against a local bucket at this member's static share while Redis
// is unavailable. It implements limiter.Admitter. All methods are safe for
// concurrent use.
type Limiter struct {
	f        *Fleet
	family   string
	quota    float64
	burst    int
	reserve  float64 // critical share
	local    limiter.BucketConfig
	adaptive bool
	decrease float64 // AIMD, as fractions of the quota
	minFrac  float64
	recFrac  float64
	bobs     limiter.Observer
	keys     [numKeys]string

	mu       sync.Mutex
	closed   bool
	queues   [3]list.List // of *waiter, by priority
	fb       *limiter.Bucket
	retired  []*limiter.Bucket // earlier fallback buckets still serving callers
	fraction float64           // static share, as a fraction of the quota
	members  int
	credits  [2]int // tokens granted to waiters that gave up, by class
	creditAt time.Time
	rate     float64 // fleet rate fraction, last seen
	reported float64 // last rate sent to RateChanged
	samples  []usageSample

	wake chan struct{} // capacity 1: the dispatcher should look again
	stop chan struct{}
	done chan struct{}
}

type usageSample struct {
	at    time.Time
	count float64
}

// waiter is one caller queued in Wait; state and fb are guarded by the
// limiter's mutex.
type waiter struct {
	class int
	elem  *list.Element
	prio  int
	done  chan struct{}
	state int // waiting, granted, toFallback, released
	fb    *limiter.Bucket
}

const (
	waiting = iota
	granted
	toFallback
	released // closed
)

// Limiter returns the limiter of one API family (e.g. "read", "write"),
// whose whole fleet may send quota calls per second. local is what this
// member would use alone (cloudgate.yaml limits.<family>): its Burst is the
// fleet's burst, its Adaptive settings (DecreaseFactor, MinQPS and
// RecoveryQPSPerSecond, scaled from local.QPS to quota) drive the fleet-wide
// AIMD, and in fallback it becomes a local bucket at this member's static
// share of quota (QPS and Burst scaled by the share). obs receives the
// bucket events (WaitDone, Throttled, RateChanged) under the name family, as
// a limiter.Bucket's would; nil discards them.
func (f *Fleet) Limiter(family string, quota float64, local limiter.BucketConfig, obs limiter.Observer) (*Limiter, error) {
	if family == "" {
		return nil, errors.New("cloudgate: fleet limiter: family name is empty")
	}
	if math.IsNaN(quota) || math.IsInf(quota, 0) || quota <= 0 {
		return nil, fmt.Errorf("cloudgate: fleet limiter %q: quota must be a finite number > 0 (got %v)", family, quota)
	}
	if err := local.Validate(); err != nil {
		return nil, fmt.Errorf("cloudgate: fleet limiter %q: local bucket: %w", family, err)
	}
	if obs == nil {
		obs = nopBucketObserver{}
	}
	k := quota / local.QPS
	l := &Limiter{
		f:        f,
		family:   family,
		quota:    quota,
		burst:    local.Burst,
		reserve:  *f.cfg.CriticalShare,
		local:    local,
		adaptive: local.Adaptive,
		decrease: 0.5,
		minFrac:  0.01,
		recFrac:  1.0 / 30,
		bobs:     obs,
		rate:     1,
		reported: 1,
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if local.DecreaseFactor > 0 {
		l.decrease = local.DecreaseFactor
	}
	if local.MinQPS > 0 {
		l.minFrac = min(1, local.MinQPS*k/quota)
	}
	if local.RecoveryQPSPerSecond > 0 {
		l.recFrac = local.RecoveryQPSPerSecond * k / quota
	}
	for i, s := range []string{"tat", "tat-noncritical", "aimd", "admitted"} {
		l.keys[i] = f.key(family, s)
	}
	if err := f.register(l); err != nil {
		return nil, err
	}
	go l.run()
	return l, nil
}

// Name returns the family name.
func (l *Limiter) Name() string { return l.family }

// ConfiguredQPS returns the fleet's quota for the family.
func (l *Limiter) ConfiguredQPS() float64 { return l.quota }

// EffectiveQPS returns the fleet-wide rate after AIMD as last seen in Redis,
// or in fallback the local bucket's rate.
func (l *Limiter) EffectiveQPS() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fb != nil {
		return l.fb.EffectiveQPS()
	}
	return l.rate * l.quota
}

// ShareQPS returns this member's static share: the rate it falls back to.
func (l *Limiter) ShareQPS() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fraction * l.quota
}

// Tokens returns the local bucket's tokens in fallback; on the shared budget
// the tokens live in Redis and it returns the tokens held for callers here
// (normally 0).
func (l *Limiter) Tokens() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fb != nil {
		return l.fb.Tokens()
	}
	return float64(l.credits[0] + l.credits[1])
}

// Waiting returns the callers queued here.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.queues[0].Len() + l.queues[1].Len() + l.queues[2].Len()
	if l.fb != nil {
		n += l.fb.Waiting()
	}
	for _, b := range l.retired {
		n += b.Waiting()
	}
	return n
}

// Wait blocks until the call may be sent (nil), ctx is done or the limiter
// is closed. On the shared budget callers are queued here, critical first and
// FIFO within a priority, and admitted by Redis; in fallback, by the local
// bucket. A waiter that gives up never consumes a token: one granted to it
// meanwhile goes to the next caller. Errors are those of limiter.Bucket.Wait
// (errors.Is context.Canceled, context.DeadlineExceeded or
// limiter.ErrClosed) and name the family.
func (l *Limiter) Wait(ctx context.Context, p limiter.Priority) error {
	start := time.Now()
	if ctx.Err() != nil {
		return l.done1(p, start, l.ctxError(ctx))
	}
	cls := classOf(p)
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return l.done1(p, start, l.closedError())
	case l.fb != nil:
		fb := l.fb
		l.mu.Unlock()
		return l.waitFallback(ctx, fb, p)
	case l.takeCreditLocked(cls, start):
		l.mu.Unlock()
		l.f.obs.Admitted(l.family, false)
		return l.done1(p, start, nil)
	}
	w := &waiter{class: cls, prio: prioIndex(p), done: make(chan struct{})}
	w.elem = l.queues[w.prio].PushBack(w)
	l.mu.Unlock()
	l.signal()

	select {
	case <-w.done:
	case <-ctx.Done():
		l.mu.Lock()
		switch w.state {
		case waiting:
			l.queues[w.prio].Remove(w.elem)
		case granted:
			// Granted while ctx ended: keep the token for the next caller.
			l.credits[w.class]++
			l.creditAt = time.Now()
		}
		l.mu.Unlock()
		return l.done1(p, start, l.ctxError(ctx))
	}
	switch w.state {
	case granted:
		l.f.obs.Admitted(l.family, false)
		return l.done1(p, start, nil)
	case toFallback:
		return l.waitFallback(ctx, w.fb, p)
	default:
		return l.done1(p, start, l.closedError())
	}
}

func (l *Limiter) done1(p limiter.Priority, start time.Time, err error) error {
	l.bobs.WaitDone(l.family, p, time.Since(start), err)
	return err
}

// waitFallback waits on the local bucket (which reports WaitDone itself).
func (l *Limiter) waitFallback(ctx context.Context, fb *limiter.Bucket, p limiter.Priority) error {
	err := fb.Wait(ctx, p)
	if err == nil {
		l.f.obs.Admitted(l.family, true)
	}
	return err
}

// takeCreditLocked takes a kept token usable by class, if any.
func (l *Limiter) takeCreditLocked(cls int, now time.Time) bool {
	if l.credits[0]+l.credits[1] == 0 {
		return false
	}
	if now.Sub(l.creditAt) > creditTTL {
		l.credits = [2]int{}
		return false
	}
	// Only when nobody of this class or above is queued (FIFO).
	for i := 0; i <= int(limiter.PriorityBackground); i++ {
		if l.queues[i].Len() > 0 && classOf(limiter.Priority(i)) <= cls {
			return false
		}
	}
	// A critical call may use a token of either class; the others only
	// their own, so the reserved slice does not leak to them.
	if l.credits[cls] > 0 {
		l.credits[cls]--
		return true
	}
	if cls == classCritical && l.credits[classOther] > 0 {
		l.credits[classOther]--
		return true
	}
	return false
}

func (l *Limiter) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// OnThrottled reports a throttling answer of the cloud to the whole fleet:
// the shared rate is cut (if the local bucket config is Adaptive; at most
// once per cooldown, as limiter.Bucket does) and every member pauses for
// retryAfter. The Redis call is bounded by RedisTimeout; in fallback, or if
// Redis fails, the local bucket takes the signal.
func (l *Limiter) OnThrottled(retryAfter time.Duration) {
	retryAfter = max(retryAfter, 0)
	l.mu.Lock()
	fb, closed := l.fb, l.closed
	l.mu.Unlock()
	if closed {
		l.bobs.Throttled(l.family, retryAfter)
		return
	}
	if fb != nil {
		fb.OnThrottled(retryAfter) // reports Throttled
		return
	}
	l.bobs.Throttled(l.family, retryAfter)
	factor := l.decrease
	if !l.adaptive {
		factor = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.f.timeout)
	v, err := throttleScript.Run(ctx, l.f.client, []string{l.keys[keyAIMD]},
		l.quota, factor, l.minFrac, l.recFrac, retryAfter.Seconds(), 1.0).Slice()
	cancel()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("throttle: unexpected reply %v", v)
	}
	if err != nil {
		l.f.redisFailed(err)
		l.mu.Lock()
		fb = l.fb
		l.mu.Unlock()
		if fb != nil {
			fb.OnThrottled(retryAfter)
		}
		return
	}
	if rate, err := strconv.ParseFloat(fmt.Sprint(v[1]), 64); err == nil {
		l.mu.Lock()
		l.rate = rate
		l.mu.Unlock()
		l.reportRate(true)
	}
}

// reportRate sends the fleet's rate to RateChanged when it changed by 1% of
// the quota, or reached it, or always when force.
func (l *Limiter) reportRate(force bool) {
	l.mu.Lock()
	r := l.rate
	send := r != l.reported && (force || r == 1 || math.Abs(r-l.reported) >= 0.01)
	if send {
		l.reported = r
	}
	l.mu.Unlock()
	if send {
		l.bobs.RateChanged(l.family, r*l.quota)
	}
}

// Close releases queued waiters with an error wrapping limiter.ErrClosed,
// stops the dispatcher and closes the fallback bucket. Idempotent.
func (l *Limiter) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.releaseLocked(released, nil)
	fbs := l.retired
	if l.fb != nil {
		fbs = append(fbs, l.fb)
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	for _, b := range fbs {
		b.Close()
	}
}

// releaseLocked ends the wait of every queued waiter with state.
func (l *Limiter) releaseLocked(state int, fb *limiter.Bucket) {
	for i := range l.queues {
		for e := l.queues[i].Front(); e != nil; e = l.queues[i].Front() {
			w := l.queues[i].Remove(e).(*waiter)
			w.state, w.fb = state, fb
			close(w.done)
		}
	}
}

func (l *Limiter) ctxError(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("cloudgate: waiting for a %q token: %w (cause: %w)", l.family, err, cause)
	}
	return fmt.Errorf("cloudgate: waiting for a %q token: %w", l.family, err)
}

func (l *Limiter) closedError() error {
	return fmt.Errorf("cloudgate: waiting for a %q token: %w", l.family, limiter.ErrClosed)
}

// enterFallback switches to a local bucket at the static share and hands it
// the queued waiters.
func (l *Limiter) enterFallback(fraction float64, members int) {
	cfg := l.local
	cfg.QPS = fraction * l.quota
	cfg.Burst = max(1, int(math.Round(float64(l.local.Burst)*fraction)))
	cfg.MinQPS = min(l.local.MinQPS*fraction, cfg.QPS)
	cfg.RecoveryQPSPerSecond = l.local.RecoveryQPSPerSecond * fraction
	fb, err := limiter.NewBucket(l.family, cfg, nil, l.bobs)
	if err != nil {
		// Not expected (l.local is valid and fraction is in (0, 1]); a
		// plain bucket at the share is always valid.
		fb, _ = limiter.NewBucket(l.family, limiter.BucketConfig{QPS: cfg.QPS, Burst: cfg.Burst}, nil, l.bobs)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		fb.Close()
		return
	}
	l.fb = fb
	l.credits = [2]int{}
	l.releaseLocked(toFallback, fb)
	l.mu.Unlock()
	l.setShare(fraction, members)
	l.signal()
}

// leaveFallback returns to the shared budget. Callers already waiting on the
// local bucket finish there.
func (l *Limiter) leaveFallback() {
	l.mu.Lock()
	if l.fb != nil {
		// Kept (for Close) while callers still wait on it.
		kept := l.retired[:0]
		for _, b := range append(l.retired, l.fb) {
			if b.Waiting() > 0 {
				kept = append(kept, b)
			}
		}
		l.retired = kept
		l.fb = nil
	}
	l.mu.Unlock()
	l.signal()
}

// setShare records the static share and reports it when it changed.
func (l *Limiter) setShare(fraction float64, members int) {
	l.mu.Lock()
	changed := fraction != l.fraction || members != l.members
	l.fraction, l.members = fraction, members
	l.mu.Unlock()
	if changed {
		l.f.obs.ShareChanged(l.family, fraction*l.quota, members)
	}
}

// heartbeat takes the fleet's state read by a heartbeat.
func (l *Limiter) heartbeat(now time.Time, fraction float64, members int, count, rate float64) {
	l.setShare(fraction, members)
	l.mu.Lock()
	l.rate = rate
	if n := len(l.samples); n > 0 && count < l.samples[n-1].count {
		l.samples = l.samples[:0] // the counter was reset (Redis restarted)
	}
	l.samples = append(l.samples, usageSample{now, count})
	for len(l.samples) > 1 && now.Sub(l.samples[0].at) > usageWindow {
		l.samples = l.samples[1:]
	}
	usage := 0.0
	if first := l.samples[0]; now.After(first.at) {
		usage = (count - first.count) / (now.Sub(first.at).Seconds() * l.quota)
	}
	l.mu.Unlock()
	l.reportRate(false)
	l.f.obs.FleetState(l.family, l.quota, rate*l.quota, usage)
}

// run is the dispatcher: it asks Redis for tokens for the queued waiters,
// one round trip at a time, highest priority first.
func (l *Limiter) run() {
	defer close(l.done)
	var pause time.Duration // before the next round trip: Redis said to wait
	pauseClass := classOther
	for {
		if pause > 0 && !l.sleep(pause, pauseClass) {
			return
		}
		pause = 0
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return
		}
		cls, n := l.headLocked()
		l.mu.Unlock()
		if n == 0 {
			select {
			case <-l.wake:
				continue
			case <-l.stop:
				return
			}
		}
		got, retry, err := l.admit(cls, n)
		if err != nil {
			l.f.redisFailed(err)
			continue
		}
		l.mu.Lock()
		l.grantLocked(cls, got)
		l.mu.Unlock()
		if got == 0 {
			pause, pauseClass = retry, cls
		}
	}
}

// sleep waits d, or less if a waiter of a higher class than cls arrives or
// the limiter falls back. It returns false when the limiter stops.
func (l *Limiter) sleep(d time.Duration, cls int) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return false
		case <-t.C:
			return true
		case <-l.wake:
			l.mu.Lock()
			head, n := l.headLocked()
			fb := l.fb != nil
			l.mu.Unlock()
			if fb || (n > 0 && head < cls) {
				return true
			}
		}
	}
}

// headLocked returns the class of the first waiter to serve and how many
// waiters of that class are queued (at most maxBatch); 0 in fallback.
func (l *Limiter) headLocked() (cls, n int) {
	if l.fb != nil || l.closed {
		return 0, 0
	}
	if n := l.queues[limiter.PriorityCritical].Len(); n > 0 {
		return classCritical, min(n, maxBatch)
	}
	n = l.queues[limiter.PriorityNormal].Len() + l.queues[limiter.PriorityBackground].Len()
	return classOther, min(n, maxBatch)
}

// grantLocked gives n tokens of class cls to the queued waiters of that class
// (normal before background); tokens nobody is left to take are kept as
// credits.
func (l *Limiter) grantLocked(cls, n int) {
	if n == 0 {
		return
	}
	if l.fb != nil || l.closed {
		return // the waiters moved on; the tokens are lost, never over quota
	}
	prios := []limiter.Priority{limiter.PriorityNormal, limiter.PriorityBackground}
	if cls == classCritical {
		prios = []limiter.Priority{limiter.PriorityCritical}
	}
	for _, p := range prios {
		q := &l.queues[p]
		for ; n > 0 && q.Len() > 0; n-- {
			w := q.Remove(q.Front()).(*waiter)
			w.state = granted
			close(w.done)
		}
	}
	if n > 0 {
		l.credits[cls] += n
		l.creditAt = time.Now()
	}
}

// admit asks Redis for up to n tokens of class cls.
func (l *Limiter) admit(cls, n int) (got int, retry time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.f.timeout)
	defer cancel()
	start := time.Now()
	v, err := admitScript.Run(ctx, l.f.client, l.keys[:],
		l.quota, l.burst, l.reserve, cls, n).Slice()
	took := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 4 {
		return 0, 0, fmt.Errorf("admit: unexpected reply %v", v)
	}
	l.f.obs.RedisAdmission(l.family, took)
	g, _ := v[0].(int64)
	ra, err1 := strconv.ParseFloat(fmt.Sprint(v[1]), 64)
	rate, err2 := strconv.ParseFloat(fmt.Sprint(v[2]), 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("admit: unexpected reply %v", v)
	}
	l.mu.Lock()
	l.rate = rate
	l.mu.Unlock()
	return int(g), time.Duration(ra * float64(time.Second)), nil
}

// nopBucketObserver discards bucket events.
type nopBucketObserver struct{}

func (nopBucketObserver) WaitDone(string, limiter.Priority, time.Duration, error)  {}
func (nopBucketObserver) Throttled(string, time.Duration)                          {}
func (nopBucketObserver) RateChanged(string, float64)                              {}
func (nopBucketObserver) BreakerStateChanged(string, limiter.State, limiter.State) {}

var _ limiter.Admitter = (*Limiter)(nil)
