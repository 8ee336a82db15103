// scripts.hpp — the Lua scripts, as constant text. Keys and values are
// always passed as KEYS/ARGV: no script text is ever built from user strings.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace redlock::detail {

// CommandId — what a round sends. acquire, extend and release are the
// scripts below (EVALSHA). set_nx is the plain `SET key token NX PX ttl` of
// an acquire's first attempt with a token we just drew: no key can hold that
// token yet, so the script's refresh branch has nothing to do, and SET costs
// a master about a third of the script's time (1.1 against 3.6 µs per call,
// INFO commandstats on redis 7.0). Its "held" answer is nil, without the
// holder's TTL; retries and caller-given tokens use the script.
// fenced_acquire and fence_raise are the two phases of a fenced acquire
// (docs/design.md, "Fencing tokens").
// multi_acquire, multi_extend and multi_release take several keys at once
// (multi-resource locks). fair_acquire, fair_release and fair_leave are a
// fair acquire's (docs/design.md, "Fair order"). extend_batch extends the keys of many leases at
// once, each with its own value (src/extend_batch.hpp).
enum class CommandId : std::uint8_t {
  acquire,
  extend,
  release,
  fenced_acquire,
  fence_raise,
  multi_acquire,
  multi_extend,
  multi_release,
  inspect,
  marker,
  extend_batch,
  fair_acquire,
  fair_release,
  fair_leave,
  sem_acquire,
  sem_cleanup,
  read_acquire,
  read_extend,
  read_release,
  write_acquire,
  write_leave,
  leader_proclaim,
  leader_read,
  leader_resign,
  set_nx,
  ping
};
inline constexpr std::size_t script_count = 24;  // every id before set_nx

// max_permits — the most permits a semaphore may have: every acquire names
// each permit's key (KEYS), and a round keeps one tally per permit.
inline constexpr std::size_t max_permits = 100;

// max_fence — the largest fencing token: 2^53, the last integer a Lua
// number (a double) holds exactly, so every fence the scripts compare and
// return is exact. fenced_acquire refuses a counter at or above it.
inline constexpr std::uint64_t max_fence = std::uint64_t{1} << 53;

// Every name a script touches comes in KEYS (lock keys, fence counters) or,
// for release channels, in ARGV; no script builds a name (src/keys.hpp).

// acquire: KEYS[1] lock key; ARGV[1] value, ARGV[2] ttl ms. Used with a
// caller-given token (docs/design.md: "a caller's token is a refresh").
// Set if free → +OK. That value already there → refresh the TTL → +OK.
// Held by another → :PTTL of the holder.
inline constexpr std::string_view acquire_script = R"lua(
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.status_reply('OK')
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return redis.status_reply('OK')
end
return redis.call('PTTL', KEYS[1])
)lua";

// extend: KEYS[1] lock key; ARGV[1] value, ARGV[2] ttl ms.
// Only while our value is there → :1; never recreates a missing key → :0.
// Never shortens the key's life (PEXPIRE only when PTTL < ttl; PEXPIRE's
// GT flag would say the same but needs Redis 7): the holder keeps its old
// validity until the extend's answer comes, so an extend with a shorter
// TTL that cut the key at once would end the lock under a holder that
// still believes in it (found by the simulator, seed 900157). The new
// validity, T1 + ttl − drift, is within the key's life either way.
inline constexpr std::string_view extend_script = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  return 1
end
return 0
)lua";

// release: KEYS[1] lock key; ARGV[1] value; ARGV[2] the release channel,
// absent for a rollback. Only our own value is deleted (→ :1); anything
// else → :0. A release publishes the value on the channel (waiters wake); a
// rollback of a failed attempt publishes nothing — it freed nothing that
// anyone held, and announcing it made every waiter retry on every failed
// attempt of every other waiter (a wake-up storm).
// The PUBLISH runs under redis.pcall: a script is not rolled back, so once
// the DEL ran the lock is gone, and an error from the PUBLISH after it (an
// ACL without PUBLISH) would report "not released" for a key that no
// longer exists. A refused PUBLISH wakes nobody: waiters fall back to the
// holder's TTL and their safety net (docs/design.md, "Waiting").
inline constexpr std::string_view release_script = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] then redis.pcall('PUBLISH', ARGV[2], ARGV[1]) end
  return 1
end
return 0
)lua";

// fenced_acquire: KEYS the n lock keys (one, or a multi-resource lock's,
// sorted), then their n fence counters (never expiring), in the same
// order; ARGV[1] value, ARGV[2] ttl ms. Phase 1 of a fenced acquire: the
// acquire (all or none, as multi_acquire; for one key the acquire script's
// SET NX or refresh), and in the same atomic step it reads the counters.
// Set or refreshed → [1, highest counter]; a key held by another →
// [0, highest counter, that key's PTTL], nothing set. Lua numbers are
// doubles, exact integers only below 2^53 (max_fence): a larger counter
// would come back rounded (2^53 + 1 read as 2^53, and a fence equal to an
// earlier one) or, beyond 2^63, as garbage. So a counter at or above 2^53,
// or not an integer, is refused with an error reply and never rounded.
// Rounding to a double is monotonic, so `counter < 2^53` decides exactly
// for any decimal string.
inline constexpr std::string_view fenced_acquire_script = R"lua(
local n = #KEYS / 2
local counter = 0
for i = n + 1, 2 * n do
  local raw = redis.call('GET', KEYS[i])
  if raw then
    local c = tonumber(raw)
    if not c then return redis.error_reply('fence counter ' .. KEYS[i] .. ' is not a number') end
    if not (c < 9007199254740992) or c ~= math.floor(c) then
      return redis.error_reply('fence counter ' .. KEYS[i] .. ' is at or above 2^53 (9007199254740992) ' ..
        'or not an integer: fences are exact only below 2^53; refused, never rounded')
    end
    if c > counter then counter = c end
  end
end
for i = 1, n do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then return {0, counter, redis.call('PTTL', KEYS[i])} end
end
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return {1, counter}
)lua";

// fence_raise: KEYS the n lock keys, then their n fence counters; ARGV[1]
// value, ARGV[2] the fence F. Phase 2: only while our value is still on
// every lock key, raise every counter to F → :1. Our value gone from any,
// or any counter already at F or above (which the majority argument rules
// out; refusing keeps F strictly above it) → :0, nothing raised.
inline constexpr std::string_view fence_raise_script = R"lua(
local n = #KEYS / 2
for i = 1, n do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
local f = tonumber(ARGV[2])
for i = n + 1, 2 * n do
  local current = tonumber(redis.call('GET', KEYS[i]) or '0')
  if current == nil or current >= f then return 0 end
end
for i = n + 1, 2 * n do
  redis.call('SET', KEYS[i], ARGV[2])
end
return 1
)lua";

// multi_acquire: KEYS the lock keys (sorted); ARGV[1] value, ARGV[2] ttl.
// All or none, atomically on this master: if any key holds another value
// → :PTTL of that key and nothing is set; else every key is set (or
// refreshed) to our value → +OK.
inline constexpr std::string_view multi_acquire_script = R"lua(
for i = 1, #KEYS do
  local v = redis.call('GET', KEYS[i])
  if v and v ~= ARGV[1] then return redis.call('PTTL', KEYS[i]) end
end
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return redis.status_reply('OK')
)lua";

// multi_extend: KEYS the lock keys; ARGV[1] value, ARGV[2] ttl. Only if
// every key still holds our value → all extended → :1; else nothing → :0.
// Never shortens a key's life, as for extend.
inline constexpr std::string_view multi_extend_script = R"lua(
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, #KEYS do
  if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
return 1
)lua";

// extend_batch: KEYS the lock keys of several leases; ARGV[2i − 1] the
// value of KEYS[i], ARGV[2i] its ttl ms. Each key is extend's check on its
// own: only while its own value is there, never recreated, never shortened.
// → one character per key, in order: '1' extended, '0' not ours (absent,
// another value, or not a string — GET under pcall, so that one key of the
// wrong type cannot fail the others of the batch).
inline constexpr std::string_view extend_batch_script = R"lua(
local out = {}
for i = 1, #KEYS do
  local ttl = tonumber(ARGV[2 * i])
  if redis.pcall('GET', KEYS[i]) == ARGV[2 * i - 1] then
    if redis.call('PTTL', KEYS[i]) < ttl then
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
    out[i] = '1'
  else
    out[i] = '0'
  end
end
return table.concat(out)
)lua";

// multi_release: KEYS the lock keys; ARGV[1] value; ARGV[1 + i] the release
// channel of KEYS[i] (none for a rollback). Deletes every key that holds
// our value, publishing each release → :1 if any was ours, else :0. A
// refused PUBLISH does not undo the report of a DEL that ran (as release).
inline constexpr std::string_view multi_release_script = R"lua(
local released = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    if ARGV[1 + i] then redis.pcall('PUBLISH', ARGV[1 + i], ARGV[1]) end
    released = 1
  end
end
return released
)lua";

// inspect: KEYS[1] lock key, KEYS[2] its fence counter, KEYS[3] and
// KEYS[4] (optional) its fair queue and that queue's expiry set. Reads,
// changes nothing: the holder's value, its PTTL and the fence counter, as
// one string (so the reply needs no array of mixed types): "PTTL FENCE
// VALUE" when held (PTTL -1: no expiry), "-2 FENCE" when free. The value
// comes last: it may hold spaces when some other client wrote the key.
// When the queue holds live waiters (a stamp in the expiry set after the
// master's now; with no KEYS[4], or one that cannot be read — an ACL
// without ZRANGE — every member counts), "queue COUNT HEAD "
// comes first (their count, and the first of them in queue order — "?" if
// it holds blanks, which no waiter id does); when it holds lapsed ones
// (stamp passed, or none: nobody serves them, the next fair script takes
// them out), "lapsed COUNT " comes before that. Neither is ever a PTTL, so
// a reply without them reads as before; so does one where the queue could
// not be read (a user whose ACL lacks ZCARD: no queue shown, the holding
// still is; without ZRANGE the head is "?"). A key that holds no string
// (someone else's list at our name), or a queue or expiry set that is no
// sorted set, is named, not failed on: "wrongtype TYPE KEY" — so that
// `status` tells such a master from one that did not answer (TYPE under
// pcall: for a user without it TYPE is "unknown", and the key is still
// named).
// KEYS[5] and KEYS[6] (optional): the read-write lock's readers and
// writers sets. Their live entries (an end or lapse after the master's
// now) come first when there are any: "readers COUNT " (readers holding
// there) and "writers COUNT " (writers waiting on them, their intents),
// in that order, before "lapsed"; a set that cannot be read (an ACL
// without ZRANGE) counts none; one that is no sorted set is wrongtype.
// The lock key then holds the readers' mark (readers_mark, src/keys.hpp)
// as its value. KEYS[7] (optional): a semaphore's permits key; where it
// holds a count (up to six digits), "permits P " comes first of all
// (anything else there, or a key that cannot be read, says nothing);
// KEYS[8] and KEYS[9] (optional) the semaphore's fair queue and expiry
// set: where KEYS[7] holds a count, the queue reported is theirs.
inline constexpr std::string_view inspect_script = R"lua(
local function wrongtype(key)
  local kind = redis.pcall('TYPE', key)['ok'] or 'unknown'
  return 'wrongtype ' .. kind .. ' ' .. key
end
local got = {}
for i = 1, 2 do
  got[i] = redis.pcall('GET', KEYS[i])
  if type(got[i]) == 'table' then return wrongtype(KEYS[i]) end
end
local rw = ''
local qk, ek = KEYS[3], KEYS[4]
if KEYS[7] then
  local p = redis.pcall('GET', KEYS[7])
  if type(p) == 'string' and #p <= 6 and string.find(p, '^[1-9][0-9]*$') then
    rw = 'permits ' .. p .. ' '
    if KEYS[9] then qk, ek = KEYS[8], KEYS[9] end
  end
end
for i = 5, 6 do
  local live = 0
  local all = KEYS[i] and redis.pcall('ZRANGE', KEYS[i], 0, -1, 'WITHSCORES') or {}
  if all['err'] then
    if string.sub(all['err'], 1, 9) == 'WRONGTYPE' then return wrongtype(KEYS[i]) end
  elseif #all > 0 then
    local clock = redis.call('TIME')
    local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
    for j = 2, #all, 2 do
      if tonumber(all[j]) > now then live = live + 1 end
    end
  end
  if live > 0 then rw = rw .. (i == 5 and 'readers ' or 'writers ') .. live .. ' ' end
end
local queue = ''
local n = 0
for i, key in ipairs({qk or false, ek or false}) do
  local c = key and redis.pcall('ZCARD', key) or 0
  if type(c) == 'table' then
    if string.sub(c['err'] or '', 1, 9) == 'WRONGTYPE' then return wrongtype(key) end
    c = 0
  end
  if i == 1 then n = c end
end
if n > 0 then
  local live, head = n, nil
  local members = redis.pcall('ZRANGE', qk, 0, -1)
  local stamps = ek and redis.pcall('ZRANGE', ek, 0, -1, 'WITHSCORES')
  if type(members) == 'table' and not members['err'] and type(stamps) == 'table' and not stamps['err'] then
    local clock = redis.call('TIME')
    local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
    local until_ms = {}
    for i = 1, #stamps, 2 do until_ms[stamps[i]] = tonumber(stamps[i + 1]) end
    live = 0
    for _, w in ipairs(members) do
      if (until_ms[w] or 0) > now then
        live = live + 1
        head = head or w
      end
    end
  elseif type(members) == 'table' and not members['err'] then
    head = members[1]
  end
  if live > 0 then
    if type(head) ~= 'string' or not string.find(head, '^%S+$') then head = '?' end
    queue = 'queue ' .. live .. ' ' .. head .. ' '
  end
  if live < n then queue = 'lapsed ' .. (n - live) .. ' ' .. queue end
end
local fence = got[2] or '0'
if not got[1] then return rw .. queue .. '-2 ' .. fence end
return rw .. queue .. redis.call('PTTL', KEYS[1]) .. ' ' .. fence .. ' ' .. got[1]
)lua";

// marker: KEYS[1] the master's data-loss marker, KEYS[2] the run id of the
// server that wrote it, KEYS[3] the replication id it had then
// (src/keys.hpp); ARGV[1] a fresh epoch, ARGV[2] this client's quarantine
// in ms (the largest it knows of), ARGV[3] the run id and ARGV[4] the
// master_replid the client just read from INFO on this connection ('' if
// none).
// The marker, "EPOCH QUARANTINE_MS BORN_MS", is written once and never
// expires: a master that loses its data (restart without persistence,
// FLUSHALL, eviction, an emptying resync) loses it too, and whoever comes
// next writes a new epoch. It keeps the largest quarantine any client
// declared, so that clients with different max_ttl do not shorten each
// other's quarantine. It also keeps when it was written (the master's
// clock, ms): a client that first meets a master shortly after someone
// else re-wrote its marker learns that data was lost that long ago.
// The server key names the run id that wrote the marker: a replica has its
// primary's marker and server key, so once promoted (a failover behind the
// same address) it answers with another run id, and the marker is written
// anew, as after a loss. The replication id key does the same for a
// server that kept its run id but not its data: demoted, resynced from
// another primary (its own promoted replica, which has this marker and
// server key) and promoted again, it answers with another master_replid.
// A marker without a server key or replication id key (written where none
// was known, or by an older client) adopts this one. Both are read and
// written with pcall: under an ACL that does not grant them
// (docs/security.md) the marker works as before, without these checks.
// A BORN_MS of 0 is a clean start, written only by scripts/testbed.sh on a
// master it has just started empty where no master ran before, together
// with the server key (docs/design.md §5, "A clean start"): it reads
// "clean" while the server key is this very server's run id. Without that
// proof (no server key: adopted; no run id known) it is void: adopting it
// stamps BORN_MS now, as a re-written marker.
// → ["created", epoch, ms, "0"] when there was none, ["replaced", epoch, ms,
//   "0"] when another server wrote it, ["clean", epoch, ms, age_ms] for a
//   clean start of this server, else ["found", epoch, ms, age_ms].
inline constexpr std::string_view marker_script = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('GET', KEYS[1])
local server, known = false, ARGV[3] ~= ''
if known then
  server = redis.pcall('GET', KEYS[2])
  if type(server) == 'table' then server, known = false, false end
end
local replid, lineage = false, KEYS[3] ~= nil and (ARGV[4] or '') ~= ''
if lineage then
  replid = redis.pcall('GET', KEYS[3])
  if type(replid) == 'table' then replid, lineage = false, false end
end
local state, epoch, ms, born = 'created', ARGV[1], ARGV[2], string.format('%d', now)
if v then
  local e, m, b = string.match(v, '^(%x+) (%d+) (%d+)$')
  if not e then return redis.error_reply('key ' .. KEYS[1] .. ' is not a redlock marker') end
  if (server and server ~= ARGV[3]) or (replid and replid ~= ARGV[4]) then
    state = 'replaced'
  else
    state, epoch = 'found', e
    if b ~= '0' or not known then born = b elseif server then state, born = 'clean', b end
  end
  if tonumber(m) > tonumber(ms) then ms = m end
end
local value = epoch .. ' ' .. ms .. ' ' .. born
if v ~= value then redis.call('SET', KEYS[1], value) end
if known and server ~= ARGV[3] then redis.pcall('SET', KEYS[2], ARGV[3]) end
if lineage and replid ~= ARGV[4] then redis.pcall('SET', KEYS[3], ARGV[4]) end
if state ~= 'found' and state ~= 'clean' then return {state, epoch, ms, '0'} end
return {state, epoch, ms, string.format('%d', math.max(now - tonumber(born), 0))}
)lua";

// ---- Fair order (docs/design.md, "Fair order") ----------------------------
// A fair acquire waits in a queue on every master: a sorted set of waiter
// ids (KEYS[2], {…}:queue) scored by a ticket, so every master sorts the
// same waiters the same way (equal tickets by id). Only the head of a
// master's queue may set the lock key there; mutual exclusion still comes
// from the majority alone (the queue only withholds votes). The turn key
// (KEYS[3], {…}:turn, "WAITER DEADLINE_MS", expiring) bounds how long a
// head that does not come (dead, paused) keeps the others waiting once the
// lock is free: `grace` ms from when anyone first saw the lock free with
// it at the head; then the next attempt takes it out of the queue. It may
// come back (at its ticket) on its next attempt.
// The expiry set ({…}:expiry, a sorted set of the same waiter ids scored
// by the master's time, ms, when each one's place lapses) bounds how long
// a waiter that sends no more rounds (killed) stays queued at all: each
// round of a waiter that stays queued stamps it `life` ms ahead, and
// every fair script first takes out the waiters whose stamp passed — and
// a head without one (written by a version without stamps, or a set that
// lost one key of the two). Both keys live `life` ms past the last stamp,
// never longer. The scripts call no command beyond those they called
// before the stamps (docs/security.md's rule for fair order still holds).

// join_text: the concatenation of string views, as a constant (each fair
// script is one text; they share their first part, fair_lapse below).
template <const std::string_view&... parts>
struct join_text {
  static constexpr std::array<char, (parts.size() + ... + 0)> chars = [] {
    std::array<char, (parts.size() + ... + 0)> out{};
    std::size_t at = 0;
    for (std::string_view part : {parts...}) {
      for (char c : part) out[at++] = c;
    }
    return out;
  }();
  static constexpr std::string_view value{chars.data(), chars.size()};
};

// fair_lapse: the first part of every script that reads a queue:
// clock(), the master's time in ms (TIME, read once and only when asked),
// and lapse(queue, expiry), which takes out of both sets the waiters whose
// place lapsed (stamp at or before now), and then heads of the queue that
// have no stamp (one further back holds no one up; it goes when it comes
// to the front). It returns the first two of the queue left (ZRANGE 0 1).
// It costs two ZRANGE when both sets are empty; TIME, two ZRANGE and a
// ZRANK when nothing lapsed from a queue.
inline constexpr std::string_view fair_lapse = R"lua(
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return now
end
local function lapse(queue, expiry)
  while true do
    local first = redis.call('ZRANGE', expiry, 0, 0, 'WITHSCORES')
    if not first[2] or tonumber(first[2]) > clock() then break end
    redis.call('ZREM', expiry, first[1])
    redis.call('ZREM', queue, first[1])
  end
  while true do
    local front = redis.call('ZRANGE', queue, 0, 1)
    if not front[1] or redis.call('ZRANK', expiry, front[1]) then return front end
    redis.call('ZREM', queue, front[1])
  end
end
)lua";

// sem_declare: declare(key, p) — a semaphore's permits key holds the P of
// every client of the name (never expiring). One that says another P →
// an error reply naming both (the caller returns it, nothing set); none →
// P is written; the same P → nil.
inline constexpr std::string_view sem_declare = R"lua(
local function declare(key, p)
  local declared = redis.call('GET', key)
  if declared == p then return nil end
  if declared then
    return redis.error_reply('semaphore ' .. key .. ' has ' .. declared .. ' permits; this client asked for ' ..
      p .. ' (every client of a semaphore must give the same number)')
  end
  redis.call('SET', key, p)
end
)lua";

// fair_permits: what "the lock" is to fair_acquire — grab() sets it (true
// if taken), free_in() is its PTTL (-2: free) and answer(reply, dequeued)
// shapes a reply. For a lock, KEYS[1]. For a semaphore (ARGV[8] = P), any
// of the permit keys KEYS[5 .. P + 4] (from ARGV[9] on, wrapping round):
// free while any is free, else the soonest PTTL (-1 when none expires);
// the reply gains the permit taken (-1: none); and a queued waiter that
// took a permit where another is still free names the next two of the
// queue on the channel (ARGV[10]), as a release would: they need not wait
// for one.
inline constexpr std::string_view fair_permits = R"lua(
local grab, free_in, answer
if ARGV[8] then
  local p = #KEYS - 4
  local refused = declare(KEYS[1], ARGV[8])
  if refused then return refused end
  local slot = -1
  grab = function()
    local first = tonumber(ARGV[9])
    for k = 0, p - 1 do
      local i = (first + k) % p
      if redis.call('SET', KEYS[5 + i], ARGV[1], 'NX', 'PX', ARGV[2]) then
        slot = i
        return true
      end
    end
    return false
  end
  free_in = function()
    local soonest = -1
    for i = 5, 4 + p do
      local t = redis.call('PTTL', KEYS[i])
      if t == -2 then return -2 end
      if t >= 0 and (soonest < 0 or t < soonest) then soonest = t end
    end
    return soonest
  end
  answer = function(r, dequeued)
    r[5] = slot
    if dequeued and free_in() == -2 then
      local next = redis.call('ZRANGE', KEYS[2], 0, 1)
      if next[1] then redis.pcall('PUBLISH', ARGV[10], 'turn ' .. next[1] .. ' ' .. (next[2] or '-')) end
    end
    return r
  end
else
  grab = function() return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) end
  free_in = function() return redis.call('PTTL', KEYS[1]) end
  answer = function(r) return r end
end
)lua";

// fair_acquire: KEYS[1] lock key, KEYS[2] queue, KEYS[3] turn key, KEYS[4]
// expiry set; ARGV[1] value, ARGV[2] ttl ms, ARGV[3] waiter id, ARGV[4]
// ticket ("0": none yet), ARGV[5] grace ms, ARGV[6] life ms (how long the
// waiter's place outlives this round: longer than its longest sleep plus
// two node timeouts), ARGV[7] "1" for a try (no wait): it never joins.
// A semaphore's fair acquire (fair_permits, above) gives ARGV[8] P,
// ARGV[9] the permit to try first and ARGV[10] its channel; KEYS[1] is its
// permits key and KEYS[5 .. P + 4] its permit keys: "the lock" below is
// then any free permit, and every reply has a fifth item, the permit
// taken (-1: none).
// → [taken, ticket, PTTL of the lock key (-2: free), rank]:
//   lapsed waiters go first (fair_lapse): a try, or anyone, never waits
//     behind a waiter that sends no more rounds for longer than its life;
//   ticket 0, the first round: a waiter still queued here (its first
//     round's replies were lost) keeps the ticket it has; otherwise, with
//     nobody queued the lock is taken at once if free → [1, 0, -2, 0]; else
//     a try is told [0, 0, PTTL, -1] and leaves nothing behind; any other
//     waiter joins at one above the last queued (1 for an empty queue) and
//     that ticket is in the reply;
//   a ticket: unless it is the head, the waiter is put at exactly that
//     ticket (it rejoins where it was lost or lapsed; where the first round
//     put it lower, it moves to its place: masters must sort alike); then,
//     as the head with the lock free, it takes the lock and leaves the
//     queue → [1, ticket, -2, 0]; else [0, ticket, PTTL, rank];
//   a waiter that stays queued stamps its place `life` ms ahead and pushes
//     both keys' life to at least that (by PTTL then PEXPIRE, not one
//     PEXPIRE GT: GT counts a key without a TTL as living for ever, and a
//     set that ZADD just created has none). The two are always pushed
//     together; a queue left by a version without stamps (a longer TTL)
//     is cut to the life, which outlasts every live place in it.
// A waiter that is not the head and finds the lock free starts the head's
// turn, or ends it once its deadline passed (the head leaves the queue).
// The turn key lives 4 × grace: waiters that see the lock free behind a
// head check every 2 × grace, so the next check finds the turn over
// rather than starting a new one for the same dead head.
// Lua numbers are doubles: tickets stay far below 2^53 (one per arrival).
// fair_lock_args: how many ARGV a lock's fair acquire has after the value
// and the ttl (ARGV[3..7]); a semaphore's has three more.
inline constexpr std::size_t fair_lock_args = 5;
inline constexpr std::string_view fair_acquire_body = R"lua(
local queue, turn, expiry, me = KEYS[2], KEYS[3], KEYS[4], ARGV[3]
local ticket = tonumber(ARGV[4])
local head
local front = lapse(queue, expiry)[1]
-- not_taken: the waiter stays queued; its stamp, and both keys' life
-- (pushed together, so the expiry set's PTTL speaks for both).
local function not_taken(pttl, rank)
  local life = tonumber(ARGV[6])
  redis.call('ZADD', expiry, clock() + life, me)
  if redis.call('PTTL', expiry) < life then
    redis.call('PEXPIRE', queue, life)
    redis.call('PEXPIRE', expiry, life)
  end
  return answer({0, ticket, pttl, rank or redis.call('ZRANK', queue, me)})
end
local function taken()
  redis.call('ZREM', queue, me)
  redis.call('ZREM', expiry, me)
  return answer({1, ticket, -2, 0}, true)
end
if ticket == 0 and ARGV[7] ~= '1' then
  local rank = redis.call('ZRANK', queue, me)
  if rank then ticket = tonumber(redis.call('ZRANGE', queue, rank, rank, 'WITHSCORES')[2]) end
end
if ticket == 0 then
  -- An empty front (lapse's) is an empty queue: no last to read.
  local last = front and redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES') or {}
  if not last[2] and grab() then return answer({1, 0, -2, 0}) end
  if ARGV[7] == '1' then return answer({0, 0, free_in(), -1}) end
  if last[2] then
    ticket = tonumber(last[2]) + 1
  else
    ticket = 1
    head = me
  end
  redis.call('ZADD', queue, ticket, me)
else
  head = front
  if head ~= me then
    redis.call('ZADD', queue, ticket, me)
    head = nil
  end
end
if head == me then
  if grab() then return taken() end
  return not_taken(free_in(), 0)
end
local pttl = free_in()
if pttl == -2 then
  head = head or redis.call('ZRANGE', queue, 0, 0)[1]
  if head and head ~= me then
    local grace = tonumber(ARGV[5])
    local who, deadline
    local at = redis.call('GET', turn)
    if at then who, deadline = string.match(at, '^(%S+) (%d+)$') end
    if who == head and clock() > tonumber(deadline) then
      redis.call('ZREM', queue, head)
      redis.call('ZREM', expiry, head)
      head = redis.call('ZRANGE', queue, 0, 0)[1]
    end
    if head and head ~= me and who ~= head then
      redis.call('SET', turn, head .. ' ' .. string.format('%d', clock() + grace), 'PX', 4 * grace)
    end
  end
  if head == me and grab() then return taken() end
end
return not_taken(pttl)
)lua";
inline constexpr std::string_view fair_acquire_script = join_text<fair_lapse, sem_declare, fair_permits, fair_acquire_body>::value;

// fair_release: KEYS[1] lock key, KEYS[2] queue, KEYS[3] expiry set;
// ARGV[1] value, ARGV[2] the release channel, ARGV[3] the waiter id of the
// value's acquire. Our value deleted → :1, and the release names the next
// two live waiters in the queue on the channel, "turn HEAD SECOND" ("-"
// for none; a message with spaces is never a value), or publishes the
// value when nobody queues (as release, for waiters that are not fair).
// Not ours → :0. Where our value is not, the waiter may still be queued
// (its acquire won without this master): it leaves the queue here. Where
// it is, the acquire already took it out.
inline constexpr std::string_view fair_release_body = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  redis.call('ZREM', KEYS[2], ARGV[3])
  redis.call('ZREM', KEYS[3], ARGV[3])
  return 0
end
redis.call('DEL', KEYS[1])
local next = lapse(KEYS[2], KEYS[3])
if next[1] then
  redis.pcall('PUBLISH', ARGV[2], 'turn ' .. next[1] .. ' ' .. (next[2] or '-'))
else
  redis.pcall('PUBLISH', ARGV[2], ARGV[1])
end
return 1
)lua";
inline constexpr std::string_view fair_release_script = join_text<fair_lapse, fair_release_body>::value;

// fair_leave: KEYS[1] lock key, KEYS[2] queue, KEYS[3] expiry set (a
// semaphore's: KEYS[1] its first permit key, KEYS[4 ..] the others);
// ARGV[1] waiter id, ARGV[2] the release channel. A fair waiter that gives
// up (its wait ran out, cancelled, the client closing) leaves the queue;
// if the lock (a permit) is free, it may have been the head whose turn it
// was: the new live head is named as a release names it. → :1 (left), :0
// (was not queued here).
inline constexpr std::string_view fair_leave_body = R"lua(
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return 0 end
local free = redis.call('EXISTS', KEYS[1]) == 0
for i = 4, #KEYS do
  free = free or redis.call('EXISTS', KEYS[i]) == 0
end
if free then
  local next = lapse(KEYS[2], KEYS[3])
  if next[1] then redis.pcall('PUBLISH', ARGV[2], 'turn ' .. next[1] .. ' ' .. (next[2] or '-')) end
end
return 1
)lua";
inline constexpr std::string_view fair_leave_script = join_text<fair_lapse, fair_leave_body>::value;

// ---- Semaphores (docs/design.md, "Semaphores") -----------------------------
// A semaphore of P permits is P slot locks, permit i an ordinary lock key
// ({…}:permit<i>:lock): its holder is whoever holds that key on a majority,
// so at most one per slot, at most P in all, for any number of failed
// masters the mutex tolerates. Each master picks the slot for an attempt;
// the client counts votes per slot (src/quorum.hpp).

// sem_acquire: KEYS[1..P] the permit keys (slot 0 first), KEYS[P + 1] the
// permits key ({…}:permits, never expiring: the P of every client of the
// name), and for a fenced acquire (ARGV[5] 'fence') KEYS[P + 2 .. 2P + 1]
// the permits' fence counters (slot 0 first); ARGV[1] value, ARGV[2] ttl
// ms, ARGV[3] P, ARGV[4] the slot to try first (0-based; the others
// follow in order, wrapping round).
// A permits key that says another P → an error naming both, nothing set;
// none → it is written. The first free slot is set (SET NX PX) → [1, slot],
// fenced: [1, slot, that slot's fence counter] (phase 1 of a fenced
// permit: read in the same atomic step; a counter at or above 2^53, or no
// integer, is refused as fenced_acquire refuses it, nothing set); every
// slot held → [0, the soonest PTTL among them] (-1 when none of them
// expires), nothing set.
inline constexpr std::string_view sem_acquire_body = R"lua(
local fenced = ARGV[5] == 'fence'
local p = fenced and (#KEYS - 1) / 2 or #KEYS - 1
local refused = declare(KEYS[p + 1], ARGV[3])
if refused then return refused end
local first = tonumber(ARGV[4])
for k = 0, p - 1 do
  local i = (first + k) % p + 1
  if fenced then
    local counter = 0
    local raw = redis.call('GET', KEYS[p + 1 + i])
    if raw then
      counter = tonumber(raw)
      if not counter then return redis.error_reply('fence counter ' .. KEYS[p + 1 + i] .. ' is not a number') end
      if not (counter < 9007199254740992) or counter ~= math.floor(counter) then
        return redis.error_reply('fence counter ' .. KEYS[p + 1 + i] .. ' is at or above 2^53 (9007199254740992) ' ..
          'or not an integer: fences are exact only below 2^53; refused, never rounded')
      end
    end
    if redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then return {1, i - 1, counter} end
  elseif redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return {1, i - 1}
  end
end
local soonest = -1
for i = 1, p do
  local t = redis.call('PTTL', KEYS[i])
  if t >= 0 and (soonest < 0 or t < soonest) then soonest = t end
end
return {0, soonest}
)lua";
inline constexpr std::string_view sem_acquire_script = join_text<sem_declare, sem_acquire_body>::value;

// sem_cleanup: KEYS the permit keys (slot 0 first); ARGV[1] value, ARGV[2]
// the slot to keep (-1: none). Deletes our value from every other slot:
// the rollback of a failed attempt (keep none), or of the slots a won
// attempt took on masters that voted for another one → :1 if any was
// ours, else :0. Publishes nothing: what it frees no one held.
inline constexpr std::string_view sem_cleanup_script = R"lua(
local keep = tonumber(ARGV[2])
local found = 0
for i = 1, #KEYS do
  if i - 1 ~= keep and redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    found = 1
  end
end
return found
)lua";

// ---- Read-write locks (docs/design.md, "Read-write locks") ----------------
// A writer is a plain lock: its value on the lock key. Readers share the
// lock key: while any holds, it holds the mark '~readers' (keys.hpp
// readers_mark: no value is ever that), and the readers set
// ({…}:readers) holds each reader's value by the master's time when its
// hold ends. On every master, at every moment, the mark lives at least
// as long as the latest live reader there — a reader's acquire and
// extend grow the mark's life to cover its entry (cover, below), its
// release shrinks the life to the latest reader left — so no SET NX
// of a writer lands while a reader's entry is live, and no reader joins
// while a writer's value is there: on each master a writer's key and a
// live reader entry never coexist, which is all the mutex's argument
// needs (docs/design.md). A writer that waits on readers stamps its
// intent in {…}:writers (by when it lapses); no reader joins while one is
// live there.

// rw_common: the first part of every read-write script: now, the
// master's time in ms (TIME), and
//   prune(set): takes out the entries whose time is at or before now
//     (one ZREMRANGEBYSCORE);
//   cover(lock, readers, ttl, marked): after a reader's entry moved to
//     now + ttl, the mark (`marked`: it stands already) and the set live
//     at least that long: set anew if shorter, else untouched.
inline constexpr std::string_view rw_common = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function prune(set)
  redis.call('ZREMRANGEBYSCORE', set, '-inf', now)
end
local function cover(lock, readers, ttl, marked)
  if not marked or redis.call('PTTL', lock) < ttl then
    redis.call('SET', lock, '~readers', 'PX', ttl)
    redis.call('PEXPIRE', readers, ttl)
  end
end
)lua";

// read_acquire: KEYS[1] lock key, KEYS[2] readers, KEYS[3] writers;
// ARGV[1] value, ARGV[2] ttl ms. A writer's value on the lock key →
// :its PTTL. A live writer's intent (the last one's lapse is after now:
// if it lapsed, all did) → :the longer of the readers' PTTL and that
// lapse (when the writer, or its intent, is gone), nothing set. Else the
// value joins the readers until now + ttl, the mark covers it → +OK.
// Dead readers' entries go here (prune) while the mark stands; without
// the mark every entry is dead and the set goes with its own expiry.
inline constexpr std::string_view read_acquire_body = R"lua(
local v = redis.call('GET', KEYS[1])
if v and v ~= '~readers' then return redis.call('PTTL', KEYS[1]) end
local w = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if w[2] and tonumber(w[2]) > now then
  local held = v and redis.call('PTTL', KEYS[1]) or 0
  return math.max(held, tonumber(w[2]) - now)
end
local ttl = tonumber(ARGV[2])
if v then prune(KEYS[2]) end
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
cover(KEYS[1], KEYS[2], ttl, v)
return redis.status_reply('OK')
)lua";
inline constexpr std::string_view read_acquire_script = join_text<rw_common, read_acquire_body>::value;

// read_extend: KEYS[1] lock key, KEYS[2] readers; ARGV[1] value, ARGV[2]
// ttl ms. Only while our entry is live and the mark is there → its end
// moves to now + ttl (never earlier), the mark covers it → :1; else :0
// (never recreates an entry). A waiting writer does not stop it: a
// reader that holds may go on holding, as a writer may.
inline constexpr std::string_view read_extend_body = R"lua(
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not s or tonumber(s) <= now or redis.call('GET', KEYS[1]) ~= '~readers' then return 0 end
local ttl = tonumber(ARGV[2])
if now + ttl > tonumber(s) then redis.call('ZADD', KEYS[2], now + ttl, ARGV[1]) end
cover(KEYS[1], KEYS[2], ttl, true)
return 1
)lua";
inline constexpr std::string_view read_extend_script = join_text<rw_common, read_extend_body>::value;

// read_release: KEYS[1] lock key, KEYS[2] readers; ARGV[1] value, ARGV[2]
// the release channel, absent for a rollback. Our entry leaves the set.
// While the mark stands: no live reader left (the last entry's end is
// not after now: if it ended, all did) → both keys go, and a release
// announces that on the channel (writers wait for it); else, if ours was
// the latest end, the mark shrinks to the latest left. → :1 if our entry
// was live, else :0.
inline constexpr std::string_view read_release_body = R"lua(
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not s then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('GET', KEYS[1]) == '~readers' then
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if not last[2] or tonumber(last[2]) <= now then
    redis.call('DEL', KEYS[1], KEYS[2])
    if ARGV[2] then redis.pcall('PUBLISH', ARGV[2], ARGV[1]) end
  elseif tonumber(last[2]) < tonumber(s) then
    redis.call('SET', KEYS[1], '~readers', 'PX', tonumber(last[2]) - now)
    redis.call('PEXPIRE', KEYS[2], tonumber(last[2]) - now)
  end
end
if tonumber(s) > now then return 1 end
return 0
)lua";
inline constexpr std::string_view read_release_script = join_text<rw_common, read_release_body>::value;

// write_acquire: KEYS[1] lock key, KEYS[2] writers; ARGV[1] value, ARGV[2]
// ttl ms, ARGV[3] the writer's id, ARGV[4] life ms. The retry of a plain
// acquire that waits, once it met readers; with an empty value, the stamp
// alone that goes ahead of a fenced or fair writer's retry (nothing set:
// no value is empty). Set if free (SET NX PX), its intent gone → +OK.
// Held → :PTTL. Held by readers, or with writers' intents already here
// (readers are about), the writer stamps its intent to lapse `life` ms
// from now unless its next round comes first (a writer that died stops
// readers no longer than that), the set lives as its last intent, and the
// answer says so → [PTTL, 1]. Where no reader was ever met, it runs only
// what a plain waiter's retry needs (SET, GET, PTTL, TIME: the minimal
// ACL of docs/security.md); the sorted-set commands only with readers.
inline constexpr std::string_view write_acquire_body = R"lua(
if ARGV[1] ~= '' and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('PTTL', KEYS[2]) ~= -2 then redis.call('ZREM', KEYS[2], ARGV[3]) end
  return redis.status_reply('OK')
end
if redis.call('GET', KEYS[1]) == '~readers' or redis.call('PTTL', KEYS[2]) ~= -2 then
  prune(KEYS[2])
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), ARGV[3])
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', KEYS[2], tonumber(last[2]) - now)
  return {redis.call('PTTL', KEYS[1]), 1}
end
return redis.call('PTTL', KEYS[1])
)lua";
inline constexpr std::string_view write_acquire_script = join_text<rw_common, write_acquire_body>::value;

// write_leave: KEYS[1] lock key, KEYS[2] writers; ARGV[1] the writer's id,
// ARGV[2] the release channel. A writer that ends (with the lock, or
// without: its wait ran out, cancelled) takes its intent back; if that was
// the last and no writer holds the lock, readers held back may join now:
// announced on the channel. → :1 (its intent was here), :0.
inline constexpr std::string_view write_leave_body = R"lua(
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return 0 end
prune(KEYS[2])
if redis.call('PTTL', KEYS[2]) == -2 then
  local v = redis.call('GET', KEYS[1])
  if not v or v == '~readers' then redis.pcall('PUBLISH', ARGV[2], ARGV[1]) end
end
return 1
)lua";
inline constexpr std::string_view write_leave_script = join_text<rw_common, write_leave_body>::value;

// ---- Elections (docs/design.md, "Elections") ------------------------------
// A leader of R is the fenced holder of R's lock whose record
// ({prefix}{{R}}:leader) names it: one string, "TERM REV SINCE TOKLEN
// IDLEN " then the token, the identity and the value (binary: lengths, not
// separators, delimit them). TERM is the lease's fence, REV the leader's
// count of its proclaims, SINCE the master's time (ms) of the term's first
// proclaim there. The record has no TTL, as the fence counter has none: it
// is read only together with the lock, and counts only where the lock holds
// its token, so a leader that died leaves a record that says "last
// leader", never "leader". Every script below calls only GET, SET, DEL,
// PTTL, TIME and PUBLISH (docs/security.md: the base rule).
//
// leader_record: record(text) → term, rev, since, token, identity, value
// (nil when the text has not that shape: someone else's key).
inline constexpr std::string_view leader_record = R"lua(
local function record(text)
  if type(text) ~= 'string' then return nil end
  local term, rev, since, tl, il, at = string.match(text, '^(%d+) (%d+) (%d+) (%d+) (%d+) ()')
  if not at then return nil end
  tl, il = tonumber(tl), tonumber(il)
  if at + tl + il - 1 > #text then return nil end
  return tonumber(term), tonumber(rev), tonumber(since), string.sub(text, at, at + tl - 1),
    string.sub(text, at + tl, at + tl + il - 1), string.sub(text, at + tl + il)
end
local function ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
)lua";

// leader_proclaim: KEYS[1] lock key, KEYS[2] record; ARGV[1] the leader's
// token, ARGV[2] its term, ARGV[3] rev, ARGV[4] identity, ARGV[5] value,
// ARGV[6] the news channel. Only where the lock holds the token (→ :0
// elsewhere: a master that lost the key, or never had it, gives no vote).
// A record of a higher term stays (:0: a newer leader's; only a master
// that lost the lock's key and not the record's can hold one). The same
// term and token with a higher rev stays too: this proclaim came late, the
// newer value is kept (:1, the round counts it: the leader is proclaimed
// there). Otherwise the record is written — SINCE kept for the same term
// and token — and the term published → :1.
inline constexpr std::string_view leader_proclaim_body = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local since = nil
local term, rev, at, token = record(redis.call('GET', KEYS[2]))
local mine = tonumber(ARGV[2])
if term and term > mine then return 0 end
if term == mine and token == ARGV[1] then
  if rev > tonumber(ARGV[3]) then return 1 end
  since = at
end
since = since or ms()
redis.call('SET', KEYS[2], ARGV[2] .. ' ' .. ARGV[3] .. ' ' .. string.format('%d', since) .. ' ' .. #ARGV[1] .. ' ' ..
  #ARGV[4] .. ' ' .. ARGV[1] .. ARGV[4] .. ARGV[5])
redis.pcall('PUBLISH', ARGV[6], ARGV[2])
return 1
)lua";
inline constexpr std::string_view leader_proclaim_script = join_text<leader_record, leader_proclaim_body>::value;

// leader_read: KEYS[1] lock key, KEYS[2] record. Reads, changes nothing:
// "PTTL LED VLEN RLEN " then the lock's value (VLEN bytes, none when
// free: PTTL -2) and the record (RLEN bytes, as stored). LED: how long the
// record's term has led by this master's clock (now − SINCE), -1 without a
// record of that shape. A key of another type: "wrongtype KEY".
inline constexpr std::string_view leader_read_body = R"lua(
local got = {}
for i = 1, 2 do
  got[i] = redis.pcall('GET', KEYS[i])
  if type(got[i]) == 'table' then return 'wrongtype ' .. KEYS[i] end
  got[i] = got[i] or ''
end
local led = -1
local _, _, since = record(got[2])
if since then led = math.max(ms() - since, 0) end
return redis.call('PTTL', KEYS[1]) .. ' ' .. string.format('%d', led) .. ' ' .. #got[1] .. ' ' .. #got[2] .. ' ' ..
  got[1] .. got[2]
)lua";
inline constexpr std::string_view leader_read_script = join_text<leader_record, leader_read_body>::value;

// leader_resign: KEYS[1] record; ARGV[1] the leader's token, ARGV[2] the
// news channel. Where the record names the token it is deleted and "0"
// published (no leader) → :1; elsewhere → :0 (a newer leader's record, or
// none, stays). The lock itself goes by the lease's release, after.
inline constexpr std::string_view leader_resign_body = R"lua(
local _, _, _, token = record(redis.call('GET', KEYS[1]))
if token ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.pcall('PUBLISH', ARGV[2], '0')
return 1
)lua";
inline constexpr std::string_view leader_resign_script = join_text<leader_record, leader_resign_body>::value;

inline constexpr std::array<std::string_view, script_count> script_bodies{
    acquire_script,        extend_script,       release_script,       fenced_acquire_script,
    fence_raise_script,    multi_acquire_script, multi_extend_script, multi_release_script,
    inspect_script,        marker_script,        extend_batch_script, fair_acquire_script,
    fair_release_script,   fair_leave_script,    sem_acquire_script,  sem_cleanup_script,
    read_acquire_script,   read_extend_script,   read_release_script, write_acquire_script,
    write_leave_script,    leader_proclaim_script, leader_read_script, leader_resign_script};

// script_names: each script's name, as docs/security.md lists them.
inline constexpr std::array<std::string_view, script_count> script_names{
    "acquire",      "extend",       "release",      "fenced_acquire", "fence_raise",  "multi_acquire", "multi_extend",
    "multi_release", "inspect",     "marker",       "extend_batch",   "fair_acquire", "fair_release",  "fair_leave",
    "sem_acquire",   "sem_cleanup",  "read_acquire", "read_extend",    "read_release", "write_acquire", "write_leave",
    "leader_proclaim", "leader_read", "leader_resign"};

static_assert(script_names[static_cast<std::size_t>(CommandId::write_leave)] == "write_leave" &&
              script_names[static_cast<std::size_t>(CommandId::sem_cleanup)] == "sem_cleanup" &&
              script_names[static_cast<std::size_t>(CommandId::fair_leave)] == "fair_leave" &&
              script_names[static_cast<std::size_t>(CommandId::extend_batch)] == "extend_batch" &&
              script_names[static_cast<std::size_t>(CommandId::leader_resign)] == "leader_resign");

inline constexpr bool is_script(CommandId id) { return id != CommandId::set_nx && id != CommandId::ping; }
// is_release: a release, of one key or several, or a fair waiter leaving
// its queue: cleanups, sent even where acquires are not (a duplicate or
// unresponsive master).
inline constexpr bool is_release(CommandId id) {
  return id == CommandId::release || id == CommandId::multi_release || id == CommandId::fair_release ||
         id == CommandId::fair_leave || id == CommandId::sem_cleanup || id == CommandId::read_release ||
         id == CommandId::write_leave;
}

// is_acquire: an acquire attempt, by script (fenced or not) or by plain SET.

inline constexpr bool is_acquire(CommandId id) {
  return id == CommandId::acquire || id == CommandId::set_nx || id == CommandId::fenced_acquire ||
         id == CommandId::multi_acquire || id == CommandId::fair_acquire || id == CommandId::sem_acquire ||
         id == CommandId::read_acquire || id == CommandId::write_acquire;
}

// is_safety_write: a write other than an acquire that a holder relies on
// lasting: an extension (a lost one makes a key expire early), a fence
// raised, a leader's record. A replicated member with wait_replicas holds
// their answers until WAIT says enough replicas have them.
inline constexpr bool is_safety_write(CommandId id) {
  return id == CommandId::extend || id == CommandId::multi_extend || id == CommandId::extend_batch ||
         id == CommandId::read_extend || id == CommandId::fence_raise || id == CommandId::leader_proclaim;
}

}  // namespace redlock::detail
