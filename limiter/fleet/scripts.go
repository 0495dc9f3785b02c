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
// KEYS: 1 tat of the whole budget, 2 tat of the non-critical part, 3 AIMD
// hash, 4 admission counter.
// ARGV: 1 quota (calls/s), 2 burst, 3 critical share, 4 class (0 critical,
// 1 other), 5 n.
// Returns {granted, retryAfter seconds, rate fraction, counter}.
//
// GCRA as in github.com/go-redis/redis_rate: a call is allowed when
// tat + cost*interval - burst*interval <= now, and then tat += cost*interval.
var admitScript = redis.NewScript(aimdLua + `
local quota, burst, reserve = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local class, n = tonumber(ARGV[4]), tonumber(ARGV[5])
local t = now()
local f, paused = aimd(KEYS[3], t)
local rate = quota * f
if t < paused then
  return {0, string.format('%.6f', paused - t), string.format('%.6f', f), redis.call('GET', KEYS[4]) or '0'}
end
local function gcra(key, r, b)
  local interval = 1 / r
  local tat = tonumber(redis.call('GET', key)) or t
  if tat < t then tat = t end
  local m = math.floor((t - tat) / interval + b + 1e-9)
  if m < 0 then m = 0 end
  return m, tat + interval - b * interval - t, tat, interval
end
local m, retry, tat, iv = gcra(KEYS[1], rate, burst)
local m2, retry2, tat2, iv2 = 0, 0, 0, 0
if class ~= 0 then
  local b2 = math.max(1, math.floor(burst * (1 - reserve)))
  m2, retry2, tat2, iv2 = gcra(KEYS[2], rate * (1 - reserve), b2)
  if m2 < m then m = m2 end
  if m == 0 and retry2 > retry then retry = retry2 end
end
if m > n then m = n end
if m == 0 then
  return {0, string.format('%.6f', math.max(retry, 0.0001)), string.format('%.6f', f), redis.call('GET', KEYS[4]) or '0'}
end
local function commit(key, tat0, interval)
  local tat1 = tat0 + m * interval
  redis.call('SET', key, string.format('%.6f', tat1), 'PX', math.ceil((tat1 - t) * 1000) + 1000)
end
commit(KEYS[1], tat, iv)
if class ~= 0 then commit(KEYS[2], tat2, iv2) end
local c = redis.call('INCRBY', KEYS[4], m)
redis.call('EXPIRE', KEYS[4], 86400)
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

// heartbeatScript registers this member and returns the live membership and
// each family's state.
//
// KEYS: 1 weights hash (member → weight), 2 heartbeats sorted set (member →
// ms), then for each family its admission counter and AIMD hash.
// ARGV: 1 member, 2 weight, 3 TTL ms, 4 "leave" to deregister instead.
// Returns {{member, weight, ...}, {counter, rate fraction, ...}}.
var heartbeatScript = redis.NewScript(aimdLua + `
local t = now()
local ms = math.floor(t * 1000)
local ttl = tonumber(ARGV[3])
if ARGV[4] == 'leave' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {{}, {}}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ms, ARGV[1])
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ms - ttl)) do
  redis.call('HDEL', KEYS[1], m)
  redis.call('ZREM', KEYS[2], m)
end
-- A fleet whose members all stopped leaves nothing behind.
redis.call('PEXPIRE', KEYS[1], ttl * 10)
redis.call('PEXPIRE', KEYS[2], ttl * 10)
local fams = {}
for i = 3, #KEYS, 2 do
  local f = aimd(KEYS[i + 1], t)
  table.insert(fams, redis.call('GET', KEYS[i]) or '0')
  table.insert(fams, string.format('%.6f', f))
end
return {redis.call('HGETALL', KEYS[1]), fams}
`)
