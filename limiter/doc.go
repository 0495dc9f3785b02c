// Package limiter keeps cloudgate's calls to a cloud provider's API under
// quota. It has three independent parts, none of which knows anything about
// Kubernetes or Prometheus:
//
//   - [Bucket]: a token bucket whose waiters are served in [Priority] order
//     (critical writes before ordinary reads before background resyncs) and
//     FIFO within a priority. Its rate adapts to the cloud's throttling
//     responses (AIMD: multiplicative decrease on [Bucket.OnThrottled],
//     linear recovery afterwards) and it honours Retry-After by pausing all
//     admissions.
//   - [ThrottleClassifier]: recognises a cloud error as "throttled" (HTTP 429,
//     RequestLimitExceeded, rateLimitExceeded, ...) and extracts the
//     server's Retry-After when the error carries one ([RetryAfterer]).
//   - [Breaker]: a circuit breaker per API family, built on
//     github.com/sony/gobreaker/v2, whose rejections ([OpenError]) carry the
//     last upstream failure and the time until the next probe.
//
// Events (waits, throttles, rate changes, breaker transitions) are reported
// to an [Observer]; the metrics package implements it.
//
// Time is injected into [Bucket] through a k8s.io/utils/clock.Clock so tests
// drive it with a fake clock and never sleep. [Breaker] uses the real clock
// because gobreaker does.
package limiter
