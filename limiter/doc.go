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
//   - [Breaker]: a circuit breaker per API family, a small closed → open →
//     half-open state machine in the shape of sony/gobreaker's, whose open
//     interval grows with failed probes and ends early when the cloud is
//     seen answering, and whose rejections ([OpenError]) carry the last
//     upstream failure and the time until the next probe.
//
// Events are reported to one observer per bucket ([BucketObserver]: waits,
// throttles, rate changes) and per breaker ([BreakerObserver]:
// transitions); the metrics package implements them.
//
// The token arithmetic is x/time/rate's: a [Bucket] keeps a rate.Limiter
// behind one mutex and adds only what it lacks, one concern per file: the
// priority wait queue (waitqueue.go, priority.go), the AIMD policy and
// Retry-After pauses (aimd.go, a state machine that takes the time as a
// parameter, as rate does), and the glue (bucket.go). [Bucket] and
// [Breaker] read all their time from an injected k8s.io/utils/clock clock,
// so tests drive them with a fake clock and never sleep.
package limiter
