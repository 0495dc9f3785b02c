package provider

import (
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/limiter"
)

// Breaker transitions and AIMD rate cuts and recoveries are logged at
// default verbosity, at most logBurst lines per logWindow per breaker or
// bucket; the next line logged says how many were suppressed.
const (
	logBurst  = 5
	logWindow = 10 * time.Second
)

// logLimiter allows logBurst lines per logWindow (wall clock: it paces log
// output, not cloudgate's behaviour).
type logLimiter struct {
	mu         sync.Mutex
	start      time.Time
	n          int
	suppressed int
	now        func() time.Time
}

// allow reports whether a line may be logged now and how many were
// suppressed since the last one.
func (l *logLimiter) allow() (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if now.Sub(l.start) >= logWindow {
		l.start, l.n = now, 0
	}
	if l.n >= logBurst {
		l.suppressed++
		return false, 0
	}
	l.n++
	s := l.suppressed
	l.suppressed = 0
	return true, s
}

func newLogLimiter() *logLimiter { return &logLimiter{now: time.Now} }

// breakerLog logs a breaker's transitions and forwards them to next.
type breakerLog struct {
	next   limiter.BreakerObserver
	family string
	lim    *logLimiter
}

func newBreakerLog(family string, next limiter.BreakerObserver) *breakerLog {
	return &breakerLog{next: next, family: family, lim: newLogLimiter()}
}

func (b *breakerLog) StateChanged(from, to limiter.State) {
	if b.next != nil {
		b.next.StateChanged(from, to)
	}
	if ok, suppressed := b.lim.allow(); ok {
		klog.InfoS("cloudgate: breaker state changed", "family", b.family, "from", from.String(), "to", to.String(), "suppressedLines", suppressed)
	}
}

// bucketLog logs a bucket's AIMD rate changes (cuts and recoveries) and
// forwards every event to next.
type bucketLog struct {
	next limiter.BucketObserver
	name string
	lim  *logLimiter

	mu   sync.Mutex
	last float64 // last rate seen; 0 before the first change
}

func newBucketLog(name string, next limiter.BucketObserver) *bucketLog {
	return &bucketLog{next: next, name: name, lim: newLogLimiter()}
}

func (b *bucketLog) WaitDone(p limiter.Priority, waited time.Duration, err error) {
	if b.next != nil {
		b.next.WaitDone(p, waited, err)
	}
}

func (b *bucketLog) Throttled(retryAfter time.Duration) {
	if b.next != nil {
		b.next.Throttled(retryAfter)
	}
}

func (b *bucketLog) RateChanged(qps float64) {
	if b.next != nil {
		b.next.RateChanged(qps)
	}
	b.mu.Lock()
	prev := b.last
	b.last = qps
	b.mu.Unlock()
	what := "cloudgate: rate recovering (AIMD)"
	if prev == 0 || qps < prev {
		what = "cloudgate: rate cut after throttling (AIMD)"
	}
	if ok, suppressed := b.lim.allow(); ok {
		klog.InfoS(what, "bucket", b.name, "qps", qps, "previousQPS", prev, "suppressedLines", suppressed)
	}
}
