package limiter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cloudgate/cloudgate/limiter"
)

// throttleErr stands for a cloud SDK error that carries Retry-After.
type throttleErr struct{}

func (throttleErr) Error() string                     { return "TooManyRequests" }
func (throttleErr) RetryAfter() (time.Duration, bool) { return 2 * time.Second, true }

// Example shows the pipeline a decorated cloud call goes through: wait for a
// token, ask the breaker, call, classify the error, and report the outcome.
func Example() {
	bucket, _ := limiter.NewBucket("read", limiter.BucketConfig{QPS: 10, Burst: 5, Adaptive: true}, nil)
	defer bucket.Close()
	breaker, _ := limiter.NewBreaker("read", limiter.BreakerConfig{
		FailureRatio: 0.5, MinRequests: 10, Interval: time.Minute, OpenTimeout: 30 * time.Second, HalfOpenRequests: 1,
	}, nil, nil)
	classifier, _ := limiter.NewThrottleClassifier(nil)

	upstream := func(context.Context) error { return fmt.Errorf("describe instances: %w", throttleErr{}) }

	ctx := context.Background()
	if err := bucket.Wait(ctx, limiter.PriorityNormal); err != nil {
		fmt.Println(err)
		return
	}
	done, err := breaker.Allow()
	if err != nil {
		fmt.Println(err)
		return
	}
	err = upstream(ctx)
	if throttled, retryAfter := classifier.Classify(err); throttled {
		bucket.OnThrottled(retryAfter)
		// The provider's isExcluded would also exclude throttling from
		// the breaker's counts.
	}
	done(err)

	fmt.Println(errors.Is(err, throttleErr{}), bucket.EffectiveQPS(), breaker.State())
	// Output: true 5 closed
}
