package provider

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/limiter"
)

// Breaker transitions and AIMD rate cuts and recoveries are logged at
// default verbosity: per breaker or bucket, the first logBurst lines, then
// at most one per logWindow; a line logged says how many were suppressed
// since the previous one.
const (
	logBurst  = 5
	logWindow = 10 * time.Second
)

// logLimiter paces one breaker's or bucket's log lines with rate.Sometimes
// (on the real clock: it paces log output, not cloudgate's behaviour) and
// counts the lines it suppressed.
type logLimiter struct {
	s          rate.Sometimes
	mu         sync.Mutex
	suppressed int
}

func newLogLimiter() *logLimiter {
	return &logLimiter{s: rate.Sometimes{First: logBurst, Interval: logWindow}}
}

// do runs log, with the number of lines suppressed since the last one, if
// a line may be logged now.
func (l *logLimiter) do(log func(suppressed int)) {
	logged := false
	l.s.Do(func() {
		logged = true
		l.mu.Lock()
		n := l.suppressed
		l.suppressed = 0
		l.mu.Unlock()
		log(n)
	})
	if !logged {
		l.mu.Lock()
		l.suppressed++
		l.mu.Unlock()
	}
}

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
	b.lim.do(func(suppressed int) {
		klog.InfoS("cloudgate: breaker state changed", "family", b.family, "from", from.String(), "to", to.String(), "suppressedLines", suppressed)
	})
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
	b.lim.do(func(suppressed int) {
		klog.InfoS(what, "bucket", b.name, "qps", qps, "previousQPS", prev, "suppressedLines", suppressed)
	})
}
