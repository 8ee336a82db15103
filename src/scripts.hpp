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
enum class CommandId : std::uint8_t { acquire, extend, release, fenced_acquire, fence_raise, set_nx };
inline constexpr std::size_t script_count = 5;  // every id before set_nx

// acquire: KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl ms.
// Set if free → +OK. Our own token already there → refresh the TTL → +OK
// (a retry never blocks itself). Held by another → :PTTL of the holder.
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

// extend: KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl ms.
// Only while our token is there → :1; never recreates a missing key → :0.
inline constexpr std::string_view extend_script = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
)lua";

// release: KEYS[1] lock key; ARGV[1] token.
// Only our own token is deleted (→ :1, and a wake-up is published on
// KEYS[1]..':released', i.e. {prefix}{resource}:released); anything else → :0.
inline constexpr std::string_view release_script = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1] .. ':released', ARGV[1])
  return 1
end
return 0
)lua";

// fenced_acquire: KEYS[1] lock key; ARGV[1] token, ARGV[2] ttl ms. Phase 1
// of a fenced acquire: the acquire script, and in the same atomic step it
// reads this node's fence counter (KEYS[1]..':fence', never expiring).
// Set or refreshed → [1, counter]; held by another → [0, counter, PTTL].
inline constexpr std::string_view fenced_acquire_script = R"lua(
local raw = redis.call('GET', KEYS[1] .. ':fence')
local counter = 0
if raw then
  counter = tonumber(raw)
  if not counter then return redis.error_reply('fence counter ' .. KEYS[1] .. ':fence is not a number') end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, counter}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, counter}
end
return {0, counter, redis.call('PTTL', KEYS[1])}
)lua";

// fence_raise: KEYS[1] lock key; ARGV[1] token, ARGV[2] the fence F. Phase
// 2: only while our token is still there, raise the counter to F → :1.
// Our token gone, or a counter already at F or above (which the majority
// argument rules out; refusing keeps F strictly above it) → :0.
inline constexpr std::string_view fence_raise_script = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local key = KEYS[1] .. ':fence'
local current = tonumber(redis.call('GET', key) or '0')
if current == nil or current >= tonumber(ARGV[2]) then return 0 end
redis.call('SET', key, ARGV[2])
return 1
)lua";

inline constexpr std::array<std::string_view, script_count> script_bodies{
    acquire_script, extend_script, release_script, fenced_acquire_script, fence_raise_script};

inline constexpr bool is_script(CommandId id) { return id != CommandId::set_nx; }
// is_acquire: an acquire attempt, by script (fenced or not) or by plain SET.

inline constexpr bool is_acquire(CommandId id) {
  return id == CommandId::acquire || id == CommandId::set_nx || id == CommandId::fenced_acquire;
}

}  // namespace redlock::detail
