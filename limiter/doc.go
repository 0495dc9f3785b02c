// Package limiter keeps cloudgate's calls to a cloud provider's API under
// quota. It has three independent parts, none of which knows anything about
// Kubernetes or Prometheus:
//
//   - [Bucket]: a token bucket on golang.org/x/time/rate whose waiters are
//     served in [Priority] order (critical writes before ordinary reads
//     before background resyncs) and FIFO within a priority. Its rate adapts
//     to the cloud's throttling responses (AIMD: multiplicative decrease on
//     [Bucket.OnThrottled], stepwise recovery afterwards) and it honours
//     Retry-After, up to a cap, by pausing all admissions.
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
// The token arithmetic is x/time/rate's: a [Bucket] keeps a rate.Limiter and
// adds only what it lacks, one concern per file: the priority wait queue
// (waitqueue.go, priority.go), the AIMD policy and Retry-After pauses
// (aimd.go, a state machine that takes the time as a parameter, as rate
// does), and the glue (bucket.go). Time is injected into [Bucket] through a
// k8s.io/utils/clock.Clock so tests drive it with a fake clock and never
// sleep. [Breaker] uses the real clock because gobreaker does.
package limiter
