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
	keyTAT           = iota // GCRA of the whole budget
	keyTATOther             // GCRA of the non-critical part
	keyTATBackground        // GCRA of the background part
	keyAIMD                 // the fleet's rate
	keyCount                // admissions, for the usage ratio
	keyHeld                 // fallen members' shares, held from the budget
	numKeys
)

// Classes of the shared budget, one per priority: critical calls may use all
// of it, normal ones 1 - criticalShare, background ones also at most
// backgroundShare.
const (
	classCritical   = 0
	classNormal     = 1
	classBackground = 2
	numClasses      = 3
)

// classOf clamps p to a class (and queue index).
func classOf(p limiter.Priority) int {
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
	bgShare  float64 // background cap, 0 for none
	local    limiter.BucketConfig
	adaptive bool
	decrease float64 // AIMD, as fractions of the quota
	minFrac  float64
	recFrac  float64
	cooldown float64       // seconds between two cuts, at least
	maxPause time.Duration // cap of a Retry-After pause (local.MaxRetryAfter, or its default)
	bobs     limiter.BucketObserver
	fobs     FamilyObserver
	keys     [numKeys]string

	mu       sync.Mutex
	closed   bool
	queues   [numClasses]list.List // of *waiter, by class
	fallback bool
	lb       *limiter.Bucket   // the local bucket at lbShare (fallback, or a failed admission), made on demand
	lbShare  float64           // the static share lb was made for
	retired  []*limiter.Bucket // earlier local buckets still serving callers
	// handed counts the callers given a local bucket that have not yet
	// returned from its Wait: a bucket is closed only when nobody waits on it
	// and nobody is about to (Waiting counts only callers inside Wait).
	handed map[*limiter.Bucket]int
	// away: the member has been cut from Redis for the fleet's awayLimit
	// (its claim may be freed). It implies fallback. In failureMode open
	// the local bucket serves the floor (fraction); in closed there is no
	// local bucket (fraction 0) and callers park on unpark until the member
	// rejoins (or the limiter closes).
	away     bool
	unpark   chan struct{}
	parked   int
	fraction float64 // static share, as a fraction of the quota
	members  int
	credits  [numClasses]int // tokens granted to waiters that gave up, by class
	debt     [numClasses]int // calls served locally while on the shared budget, not yet charged to it
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

// waiter is one caller queued in Wait; state, fb and bridged are guarded by
// the limiter's mutex.
type waiter struct {
	class   int
	elem    *list.Element
	done    chan struct{}
	state   int // waiting, granted, toLocal, released
	fb      *limiter.Bucket
	bridged bool // sent to the local bucket by a failed admission, not by fallback
}

const (
	waiting = iota
	granted
	toLocal
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
func (f *Fleet) Limiter(family string, quota float64, local limiter.BucketConfig, obs limiter.BucketObserver) (*Limiter, error) {
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
		bgShare:  0,
		local:    local,
		adaptive: local.Adaptive,
		decrease: 0.5,
		minFrac:  0.01,
		recFrac:  1.0 / 30,
		bobs:     obs,
		fobs:     f.obs.Family(family),
		rate:     1,
		reported: 1,
		wake:     make(chan struct{}, 1),
		handed:   make(map[*limiter.Bucket]int),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if bs := f.cfg.BackgroundShare; bs != nil {
		l.bgShare = *bs
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
	if d := f.cfg.Recovery.Duration; d > 0 {
		l.recFrac = 1 / d.Seconds()
	}
	l.cooldown = 1 / (30 * l.recFrac) // 1s at the default recovery
	l.maxPause = local.MaxRetryAfter
	if l.maxPause == 0 {
		l.maxPause = 5 * time.Minute // limiter's default for MaxRetryAfter 0
	}
	for i, s := range []string{"tat", "tat-noncritical", "tat-background", "aimd", "admitted"} {
		l.keys[i] = f.key(family, s)
	}
	l.keys[keyHeld] = f.key("held") // one for every family: it is a fraction of each quota
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

// EffectiveQPS returns the rate the live members share, as last seen in
// Redis (after AIMD, without the fallen members' held shares), or in
// fallback the local bucket's rate.
func (l *Limiter) EffectiveQPS() float64 {
	held, _ := l.f.heldShare() // before l.mu: register holds the fleet's lock, then l.mu
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.away && l.fraction <= 0 {
		return 0
	}
	if l.fallback && l.lb != nil {
		return l.lb.EffectiveQPS()
	}
	return l.rate * l.quota * (1 - held)
}

// shareQPS returns this member's static share: the rate it falls back to.
func (l *Limiter) shareQPS() float64 {
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
	if l.fallback && l.lb != nil {
		return l.lb.Tokens()
	}
	return float64(l.credits[0] + l.credits[1] + l.credits[2])
}

// Waiting returns the callers queued here.
func (l *Limiter) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.queues[0].Len() + l.queues[1].Len() + l.queues[2].Len() + l.parked
	if l.lb != nil {
		n += l.lb.Waiting()
	}
	for _, b := range l.retired {
		n += b.Waiting()
	}
	return n
}

// Wait blocks until the call may be sent (nil), ctx is done or the limiter
// is closed. On the shared budget callers are queued here, critical first and
// FIFO within a priority, and admitted by Redis; in fallback, or when the
// admission round trip for them fails, by the local bucket at this member's
// static share. A waiter that gives up never consumes a token: one granted
// to it meanwhile goes to the next caller. Errors are those of
// limiter.Bucket.Wait (errors.Is context.Canceled, context.DeadlineExceeded
// or limiter.ErrClosed) and name the family.
func (l *Limiter) Wait(ctx context.Context, p limiter.Priority) error {
	start := l.f.clock.Now()
	for {
		if again, err := l.wait1(ctx, p, start); !again {
			return err
		}
	}
}

// wait1 is one attempt of Wait; again means the mode changed under the
// caller (its local bucket was retired by goAway, or it was parked and the
// member rejoined) and it must start over, its wait still counted from start.
func (l *Limiter) wait1(ctx context.Context, p limiter.Priority, start time.Time) (again bool, err error) {
	if ctx.Err() != nil {
		return false, l.done1(p, start, l.ctxError(ctx))
	}
	cls := classOf(p)
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return false, l.done1(p, start, l.closedError())
	case l.away && l.unpark != nil:
		ch := l.unpark
		l.parked++
		l.mu.Unlock()
		select {
		case <-ch:
			again = true
		case <-ctx.Done():
			err = l.done1(p, start, l.ctxError(ctx))
		}
		l.mu.Lock()
		l.parked--
		l.mu.Unlock()
		return again, err
	case l.fallback:
		lb, closing := l.localLocked()
		l.handed[lb]++
		l.mu.Unlock()
		closeAll(closing)
		return l.waitLocal(ctx, lb, p, false, start)
	case l.takeCreditLocked(cls, start):
		l.mu.Unlock()
		l.fobs.Admitted(false)
		return false, l.done1(p, start, nil)
	}
	w := &waiter{class: cls, done: make(chan struct{})}
	w.elem = l.queues[cls].PushBack(w)
	l.mu.Unlock()
	l.signal()

	select {
	case <-w.done:
	case <-ctx.Done():
		l.mu.Lock()
		switch w.state {
		case waiting:
			l.queues[cls].Remove(w.elem)
		case granted:
			// Granted while ctx ended: keep the token for the next caller.
			l.credits[cls]++
			l.creditAt = l.f.clock.Now()
		case toLocal:
			if w.fb != nil {
				l.unhandLocked(w.fb)
			}
		}
		l.mu.Unlock()
		return false, l.done1(p, start, l.ctxError(ctx))
	}
	switch w.state {
	case granted:
		l.fobs.Admitted(false)
		return false, l.done1(p, start, nil)
	case toLocal:
		if w.fb == nil {
			return true, nil // released by goAway: park
		}
		return l.waitLocal(ctx, w.fb, p, w.bridged, start)
	default:
		return false, l.done1(p, start, l.closedError())
	}
}

func (l *Limiter) done1(p limiter.Priority, start time.Time, err error) error {
	l.bobs.WaitDone(p, l.f.clock.Since(start), err)
	return err
}

// takeCreditLocked takes a kept token usable by class, if any.
func (l *Limiter) takeCreditLocked(cls int, now time.Time) bool {
	if l.credits[0]+l.credits[1]+l.credits[2] == 0 {
		return false
	}
	if now.Sub(l.creditAt) > creditTTL {
		l.credits = [numClasses]int{}
		return false
	}
	// Only when nobody of this class or above is queued (FIFO).
	for i := 0; i <= cls; i++ {
		if l.queues[i].Len() > 0 {
			return false
		}
	}
	// A call may use a token of its class or of a lower one, never of a
	// higher one, so the reserved slices do not leak downwards.
	for c := cls; c < numClasses; c++ {
		if l.credits[c] > 0 {
			l.credits[c]--
			return true
		}
	}
	return false
}

// OnThrottled reports a throttling answer of the cloud to the whole fleet:
// the shared rate is cut (if the local bucket config is Adaptive; at most
// once per cooldown, as limiter.Bucket does) and every member pauses for
// retryAfter. The Redis call is bounded by RedisTimeout; in fallback, or if
// Redis fails, the local bucket takes the signal.
func (l *Limiter) OnThrottled(retryAfter time.Duration) {
	retryAfter = max(retryAfter, 0)
	// The fleet-wide pause is capped as the local bucket's is
	// (throttle.maxRetryAfter): one Retry-After of an hour must not stop
	// every member of the account for an hour.
	retryAfter = min(retryAfter, l.maxPause)
	l.mu.Lock()
	fallback, closed := l.fallback, l.closed
	l.mu.Unlock()
	if closed {
		l.bobs.Throttled(retryAfter)
		return
	}
	if fallback {
		l.localThrottled(retryAfter) // reports Throttled
		return
	}
	factor := l.decrease
	if !l.adaptive {
		factor = 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.f.timeout)
	v, err := throttleScript.Run(ctx, l.f.client, []string{l.keys[keyAIMD]},
		l.quota, factor, l.minFrac, l.recFrac, retryAfter.Seconds(), l.cooldown).Slice()
	cancel()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("throttle: unexpected reply %v", v)
	}
	l.f.redisResult(err)
	if err != nil {
		l.localThrottled(retryAfter)
		return
	}
	l.bobs.Throttled(retryAfter)
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
		l.bobs.RateChanged(r * l.quota)
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
	l.releaseLocked(released, nil, false)
	if l.unpark != nil {
		close(l.unpark) // parked callers start over and find the limiter closed
		l.unpark = nil
	}
	fbs := l.retired
	if l.lb != nil {
		fbs = append(fbs, l.lb)
	}
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	closeAll(fbs)
}

// releaseLocked ends the wait of every queued waiter with state.
func (l *Limiter) releaseLocked(state int, fb *limiter.Bucket, bridged bool) {
	for i := range l.queues {
		for e := l.queues[i].Front(); e != nil; e = l.queues[i].Front() {
			w := l.queues[i].Remove(e).(*waiter)
			w.state, w.fb, w.bridged = state, fb, bridged
			if state == toLocal && fb != nil {
				l.handed[fb]++
			}
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

// setShare records the static share and reports it when it changed.
func (l *Limiter) setShare(fraction float64, members int) {
	l.mu.Lock()
	changed := fraction != l.fraction || members != l.members
	l.fraction, l.members = fraction, members
	l.mu.Unlock()
	if changed {
		l.fobs.ShareChanged(fraction*l.quota, members)
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
	l.fobs.FleetState(l.quota, rate*l.quota, usage)
}

// nopBucketObserver discards bucket events.
type nopBucketObserver struct{}

func (nopBucketObserver) WaitDone(limiter.Priority, time.Duration, error) {}
func (nopBucketObserver) Throttled(time.Duration)                         {}
func (nopBucketObserver) RateChanged(float64)                             {}

var _ limiter.Admitter = (*Limiter)(nil)
