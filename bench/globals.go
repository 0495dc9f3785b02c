package bench

import (
	"context"
	"sync"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// resetErrorBackoff replaces k8s.io/apimachinery's error handlers with
// ones made now, inside the bubble. The default set holds a
// rudimentaryErrorBackoff whose last-error time was taken at init from the
// real clock: inside a synctest bubble, whose clock starts in 2000, the
// next HandleError then sleeps minPeriod minus a negative quarter century,
// and the calling controller (the service controller's node sync) never
// wakes. The replacement logs as the default does and sleeps at most its
// 1 ms minimum period, on the bubble's clock.
func resetErrorBackoff() {
	b := &errorBackoff{minPeriod: time.Millisecond, last: time.Now()}
	utilruntime.ErrorHandlers = []utilruntime.ErrorHandler{
		func(ctx context.Context, err error, msg string, kv ...any) {
			klog.FromContext(ctx).Error(err, msg, kv...)
		},
		func(context.Context, error, string, ...any) { b.onError() },
	}
}

// errorBackoff blocks a caller of HandleError that comes within minPeriod
// of the previous one (apimachinery's rudimentaryErrorBackoff, bounded).
type errorBackoff struct {
	minPeriod time.Duration
	mu        sync.Mutex
	last      time.Time
}

func (b *errorBackoff) onError() {
	now := time.Now()
	b.mu.Lock()
	d := now.Sub(b.last)
	b.last = now
	b.mu.Unlock()
	if d >= 0 && d < b.minPeriod {
		time.Sleep(b.minPeriod - d)
	}
}
