// Package fleet shares one cloud quota between many cloudgates: every member
// whose configuration names the same account draws its tokens, per API
// family, from one budget kept in Redis.
//
// Cloud quotas are per account (AWS account and region, Azure subscription,
// GCP project, Hetzner project), never per cluster. A [Limiter] admits a call
// when the fleet-wide budget of its family allows it: a generic cell rate
// algorithm (GCRA) evaluated atomically in Redis by one Lua script per
// admission round trip, so an idle member's share serves a busy one. The
// script is ours rather than github.com/go-redis/redis_rate's because an
// admission must, in one atomic step, (1) check the family's whole budget and,
// for non-critical calls, the (1 - criticalShare) part of it that they may use
// (and for background calls the backgroundShare part), committing all or
// none (several redis_rate calls would cost several round trips and leak
// tokens from one budget when another refuses), (2) apply the fleet-wide
// AIMD rate and Retry-After pause stored next to the budget, and (3) take
// the fallen members' held shares off the budget. The GCRA arithmetic is
// redis_rate's (tat, emission interval, burst offset).
//
// Priorities across the fleet: calls at [limiter.PriorityCritical] (writes,
// node initialisation) may use the whole budget; the others only
// 1 - criticalShare of it, so a slice of the quota (default 20 %) stays
// reserved for critical calls however busy the background reads are; with
// backgroundShare, background calls of all members together use at most that
// fraction. Within one member, waiters are served critical first, then
// normal, then background, FIFO within a priority.
//
// AIMD at fleet level: a throttling answer seen by any member
// ([Limiter.OnThrottled]) cuts the shared rate in Redis and pauses the whole
// fleet for the Retry-After; the linear recovery is computed from Redis' clock,
// so every member sees the same rate.
//
// Membership: each member keeps its weight and a heartbeat in Redis. Its
// static share of a family is weight/Σweights × quota over the registered
// members, or minShare × quota when it has never reached Redis. A member
// silent for three heartbeats has fallen: it stays registered for
// Options.ForgetAfter, and the live members' heartbeats store the fallen
// members' part of the weights, which the admission script takes off the
// budget, so a member in fallback does not add its share on top of the
// others' budget.
//
// Redis is not a single point of failure. Every Redis call has a bounded
// deadline (Config.RedisTimeout, default 50 ms), no retries. A failed or
// timed-out admission never holds its callers longer: they are served at once
// by a local [limiter.Bucket] at this member's static share, and those calls
// are charged to the shared budget (a debt) by the next admission that
// reaches Redis; tokens Redis may have committed for the timed-out call are
// lost, never reused. Only Config.FallbackAfter failures in a row switch the
// member to fallback: it serves from the local bucket, reports it (an
// [Observer] event and a log line without credentials), probes Redis every
// heartbeat and rejoins the shared budget when Redis answers again.
//
// Redis Cluster and Sentinel go through go-redis's UniversalClient; every key
// of one account carries the hash tag {account}, so the scripts' keys always
// live in one slot.
package fleet
