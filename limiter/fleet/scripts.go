package fleet

import "github.com/redis/go-redis/v9"

// Times in the scripts are seconds on Redis' clock (TIME), so every member
// agrees on them; numbers that must keep their fractions are returned as
// strings (Redis truncates Lua numbers to integers).

// aimdLua computes the fleet's current rate, as a fraction of the quota, from
// the AIMD hash: base at since, growing by recovery per second after since,
// up to 1. No hash means full rate.
const aimdLua = `
local function aimd(key, now)
  local a = redis.call('HMGET', key, 'base', 'since', 'recovery', 'paused')
  if not a[1] then return 1, 0 end
  local base, since, rec = tonumber(a[1]), tonumber(a[2]), tonumber(a[3])
  local f = base
  if now > since then f = math.min(1, base + rec * (now - since)) end
  return f, tonumber(a[4]) or 0
end
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
`

// admitScript admits up to n calls of one class, atomically.
//
// KEYS: 1 tat of the whole budget, 2 tat of the non-critical part, 3 tat of
// the background part, 4 AIMD hash, 5 admission counter, 6 held fraction
// (the static shares of fallen members, written by the heartbeats).
// ARGV: 1 quota (calls/s), 2 burst, 3 critical share, 4 background share (0:
// no cap), 5 class (0 critical, 1 normal, 2 background), 6 n, 7 debt (calls
// of this class the member served locally while Redis was slow).
// Returns {granted, retryAfter seconds, rate fraction, counter}.
//
// GCRA as in github.com/go-redis/redis_rate: a call is allowed when
// tat + cost*interval - burst*interval <= now, and then tat += cost*interval.
// A class checks every budget it belongs to (critical: the whole; normal:
// also the non-critical part; background: also its own cap) and commits all
// or none. The budget the live members share is the quota minus the held
// fraction, so a fallen member's local share is not spent twice.
var admitScript = redis.NewScript(aimdLua + `
local quota, burst, reserve, bgs = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local class, n, debt = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local t = now()
local f, paused = aimd(KEYS[4], t)
local held = tonumber(redis.call('GET', KEYS[6]) or '0') or 0
local rate = quota * f * (1 - held)
local b = math.max(1, math.floor(burst * (1 - held)))
local budgets = {{KEYS[1], rate, b}}
if class >= 1 then
  table.insert(budgets, {KEYS[2], rate * (1 - reserve), math.max(1, math.floor(b * (1 - reserve)))})
end
if class >= 2 and bgs > 0 then
  table.insert(budgets, {KEYS[3], rate * bgs, math.max(1, math.floor(b * bgs))})
end
local function tatOf(key)
  local tat = tonumber(redis.call('GET', key)) or t
  if tat < t then tat = t end
  return tat
end
local function store(key, tat)
  redis.call('SET', key, string.format('%.6f', tat), 'PX', math.ceil((tat - t) * 1000) + 1000)
end
-- Calls already sent on the local bucket are charged first, without a check.
if debt > 0 then
  for _, g in ipairs(budgets) do store(g[1], tatOf(g[1]) + debt / g[2]) end
end
local count = redis.call('GET', KEYS[5]) or '0'
if t < paused then
  return {0, string.format('%.6f', paused - t), string.format('%.6f', f), count}
end
local m, retry = n, 0
for _, g in ipairs(budgets) do
  local interval = 1 / g[2]
  local tat = tatOf(g[1])
  local k = math.floor((t - tat) / interval + g[3] + 1e-9)
  if k < 0 then k = 0 end
  if k == 0 then retry = math.max(retry, tat + interval - g[3] * interval - t) end
  if k < m then m = k end
  g[4], g[5] = tat, interval
end
if m == 0 then
  return {0, string.format('%.6f', math.max(retry, 0.0001)), string.format('%.6f', f), count}
end
for _, g in ipairs(budgets) do store(g[1], g[4] + m * g[5]) end
local c = redis.call('INCRBY', KEYS[5], m)
redis.call('EXPIRE', KEYS[5], 86400)
return {m, '0', string.format('%.6f', f), tostring(c)}
`)

// throttleScript applies one throttling answer to the fleet's rate.
//
// KEYS: 1 AIMD hash.
// ARGV: 1 quota, 2 decrease factor, 3 minimum fraction, 4 recovery fraction
// per second, 5 Retry-After seconds, 6 cooldown seconds.
// Returns {decreased (0/1), rate fraction}.
//
// As limiter.Bucket.OnThrottled: a decrease at most once per
// max(cooldown, 1/newRate) and not during a pause; the pause is the latest
// Retry-After; recovery starts when the pause ends.
var throttleScript = redis.NewScript(aimdLua + `
local quota, factor, minf = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local rec, retry, cooldown = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local t = now()
local f, paused = aimd(KEYS[1], t)
local nxt = tonumber(redis.call('HGET', KEYS[1], 'next')) or 0
local decreased = 0
if t >= nxt and t >= paused then
  f = math.max(minf, f * factor)
  nxt = t + math.max(cooldown, 1 / (f * quota))
  decreased = 1
end
if retry > 0 and t + retry > paused then paused = t + retry end
local since = math.max(t, paused)
redis.call('HSET', KEYS[1], 'base', string.format('%.6f', f), 'since', string.format('%.6f', since),
  'recovery', string.format('%.9f', rec), 'paused', string.format('%.6f', paused), 'next', string.format('%.6f', nxt))
-- The hash disappears a while after full recovery: no hash means full rate.
redis.call('PEXPIRE', KEYS[1], math.ceil((since - t + (1 - f) / rec + math.max(0, nxt - t) + 10) * 1000))
return {decreased, string.format('%.6f', f)}
`)

// heartbeatScript registers this member and returns the membership and
// each family's state.
//
// KEYS: 1 weights hash (member → weight), 2 heartbeats sorted set (member →
// ms), 3 held fraction, 4 claims hash (member → the fraction of the quota it
// may serve from its local share if it loses Redis), 5 forget hash (member →
// its own forget ms), then for each family its admission counter and AIMD
// hash.
// ARGV: 1 member, 2 weight, 3 TTL ms, 4 "leave" to deregister instead,
// 5 forget ms, 6 the claim this member holds now (what it would serve in
// fallback before this heartbeat's answer reaches it), 7 the fleet's most
// members (0: unset), 8 minShare.
// Returns {{member, weight, ...}, {counter, rate fraction, ...}, held,
// fallen members, claim}.
//
// A member whose heartbeat is older than the TTL has fallen (back to its
// local share, or it died): it stays registered, and the claim it recorded
// with its last heartbeat is held, i.e. removed from the budget the live
// members share (KEYS[3], read by admitScript). Claims are fixed fractions,
// not recomputed from the current weights, so a member that joins, or a
// weight that changes, while another has fallen does not shrink what is held
// for it. A live member's claim is its weight's part of what is not held:
// (1 - held) × weight / Σ live weights, so the claims of the live members and
// the held ones sum to at most 1. The stored claim is the larger of the new
// one and the one the member holds now (ARGV 6), so that a lost answer
// never leaves the member serving more than Redis holds for it.
// With a most members count, minShare is also held for each member of it
// not registered: one that never reached Redis serves minShare unseen.
// After its own forget ms (recorded with its heartbeats; ARGV 5 for a
// member that recorded none) without a heartbeat a member is deregistered
// and its claim freed: the member itself stops serving its claim before
// then (Fleet.awayLimit), so each member's own value must decide.
var heartbeatScript = redis.NewScript(aimdLua + `
local t = now()
local ms = math.floor(t * 1000)
local ttl, forget = tonumber(ARGV[3]), tonumber(ARGV[5])
if ARGV[4] == 'leave' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
  return {{}, {}, '0', 0, '0'}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ms, ARGV[1])
redis.call('HSET', KEYS[5], ARGV[1], ARGV[5])
local keep = forget
local silent = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. (ms - ttl), 'WITHSCORES')
for i = 1, #silent, 2 do
  local m, last = silent[i], tonumber(silent[i + 1])
  local f = tonumber(redis.call('HGET', KEYS[5], m) or '') or forget
  keep = math.max(keep, f)
  if ms - last >= f then
    redis.call('HDEL', KEYS[1], m)
    redis.call('ZREM', KEYS[2], m)
    redis.call('HDEL', KEYS[4], m)
    redis.call('HDEL', KEYS[5], m)
  end
end
local fallen = {}
local nfallen = 0
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. (ms - ttl))) do
  fallen[m] = true
  nfallen = nfallen + 1
end
local all = redis.call('HGETALL', KEYS[1])
local live, gone = 0, 0
for i = 1, #all, 2 do
  local w = tonumber(all[i + 1]) or 0
  if fallen[all[i]] then gone = gone + w else live = live + w end
end
local held = 0
for i = 1, #all, 2 do
  if fallen[all[i]] then
    local c = tonumber(redis.call('HGET', KEYS[4], all[i]) or '')
    if not c then c = (tonumber(all[i + 1]) or 0) / (live + gone) end
    held = held + c
  end
end
local maxm, minshare = tonumber(ARGV[7]) or 0, tonumber(ARGV[8]) or 0
if maxm > #all / 2 then held = held + (maxm - #all / 2) * minshare end
held = math.min(1, held)
local claim = 0
if live > 0 then claim = (1 - held) * (tonumber(ARGV[2]) or 0) / live end
redis.call('HSET', KEYS[4], ARGV[1], string.format('%.17g', math.max(claim, tonumber(ARGV[6]) or 0)))
if held > 0 then
  redis.call('SET', KEYS[3], string.format('%.17g', held), 'PX', 2 * ttl)
else
  redis.call('DEL', KEYS[3])
end
-- A fleet whose members all stopped leaves nothing behind.
for i = 1, 5 do
  if i ~= 3 then redis.call('PEXPIRE', KEYS[i], keep + ttl) end
end
local fams = {}
for i = 6, #KEYS, 2 do
  local f = aimd(KEYS[i + 1], t)
  table.insert(fams, redis.call('GET', KEYS[i]) or '0')
  table.insert(fams, string.format('%.6f', f))
end
return {all, fams, string.format('%.6f', held), nfallen, string.format('%.17g', claim)}
`)
