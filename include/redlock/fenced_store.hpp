// redlock/fenced_store.hpp — the resource side of fencing, on Redis.
//
// A lock's fence (Lock::fence, REDLOCK_FENCE) stops a holder that was paused
// past its lease only if the resource checks it: the store remembers the
// highest fence it has seen for each key and refuses a write that carries a
// lower one, in the same atomic step as the write (docs/fencing.md states
// the rule for any store). FencedStore is that store on ONE ordinary Redis
// server — not a lock master — over a blocking connection:
//
//   auto store = redlock::FencedStore::connect(*redlock::parse_node_url("redis://127.0.0.1:6380"));
//   auto w = (*store)->write("report", lease->fence(), bytes);
//   if (w && !w->accepted) …  // a later holder (fence w->highest) has written: stop, do not retry
//
// Each key is a hash {fence, value, rejected} changed only by
// fenced_store_script, which other Redis clients may load themselves.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "redlock/config.hpp"
#include "redlock/error.hpp"
#include "redlock/export.hpp"

namespace redlock {

// fenced_store_script — the Lua script of every FencedStore write, for
// clients other than this library (EVAL / SCRIPT LOAD it as it stands):
//   EVALSHA sha 1 KEY FENCE VALUE
// KEY is the resource's hash; FENCE the writer's fence in decimal, 1 to
// 2^53 (9007199254740992), no sign or leading zero; VALUE any bytes.
// FENCE at or above the hash's `fence` field → the hash becomes {fence =
// FENCE, value = VALUE}, reply [1, FENCE]. A lower FENCE → nothing is
// written but `rejected` counts one more, reply [0, the hash's fence].
// Equal is accepted: a holder may write many times with its one fence, and
// no two holders ever get the same fence. A FENCE or a stored fence that
// is not such an integer is an error reply, and nothing is written: Lua
// numbers are doubles, exact only up to 2^53, so a larger one is refused,
// never rounded: its text is judged before any number is made, in two
// parts that are each exact (not by string order, which follows the
// server's locale).
inline constexpr std::string_view fenced_store_script = R"lua(
local function exact(text)
  if text == '0' then return 0 end
  if not string.find(text, '^[1-9][0-9]*$') or #text > 16 then return nil end
  if #text == 16 then
    local head, last = tonumber(string.sub(text, 1, 15)), tonumber(string.sub(text, 16))
    if head > 900719925474099 or (head == 900719925474099 and last > 2) then return nil end
  end
  return tonumber(text)
end
local fence = exact(ARGV[1])
if not fence or fence == 0 then
  return redis.error_reply('ERR fence is not an integer from 1 to 2^53 (9007199254740992): refused, never rounded')
end
local stored = redis.call('HGET', KEYS[1], 'fence')
local highest = 0
if stored then
  highest = exact(stored)
  if not highest then
    return redis.error_reply('ERR the stored fence is not an integer from 0 to 2^53 (9007199254740992): ' ..
      'refused, never rounded')
  end
end
if fence < highest then
  redis.call('HINCRBY', KEYS[1], 'rejected', 1)
  return {0, stored}
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return {1, ARGV[1]}
)lua";

// FencedWrite — the outcome of FencedStore::write. accepted: the value is
// stored and `highest` is our fence. Rejected: nothing was written; a
// holder with fence `highest` (above ours) has written since, so ours is
// stale — stop working on the resource rather than retry with the same
// fence.
struct REDLOCK_API FencedWrite {
  bool accepted = false;
  std::uint64_t highest = 0;
};

// FencedValue — what FencedStore::read finds under a key: the highest
// fence accepted (0 when never written), the value written with it (empty
// when never written), and how many stale writes were refused.
struct REDLOCK_API FencedValue {
  std::uint64_t highest = 0;
  std::string value;
  std::uint64_t rejected = 0;
};

// FencedStoreOptions — bounds on the store's connection.
struct REDLOCK_API FencedStoreOptions {
  // The most each of these blocks the caller: connecting (then AUTH and
  // SELECT each), sending a command, waiting for its reply. Above 0.
  std::chrono::milliseconds timeout{2000};
};

// FencedStore — one blocking connection to the store's Redis. Not for
// concurrent use: give each thread its own (a connection is cheap). Every
// call returns an Error rather than throwing: Errc::invalid_argument for a
// fence out of range (nothing sent), Errc::store when the store cannot be
// reached, times out, or answers with an error or a reply of the wrong
// shape (a key that holds another type; a hash changed by hand). Messages
// name the store by NodeAddress::display(), never a password. A write
// whose reply never came may have been applied: read() tells. A call after
// a connection error connects again.
class REDLOCK_API FencedStore {
 public:
  // connect opens the connection: redis:// or unix:// (user, password and
  // db as in NodeAddress); rediss:// (this connection has no TLS) and a
  // timeout not above 0 are refused with Errc::config. Errc::store when the
  // server is down or refuses the AUTH or SELECT. The caller owns the store;
  // destroying it closes the connection.
  static Result<std::unique_ptr<FencedStore>> connect(const NodeAddress& store, FencedStoreOptions options = {});
  ~FencedStore();
  FencedStore(const FencedStore&) = delete;
  FencedStore& operator=(const FencedStore&) = delete;

  // write stores `value` under `key` (both any bytes) if `fence` (1 to
  // 2^53, as Lock::fence) is at least the highest fence the key has seen;
  // atomic on the server (fenced_store_script, by EVALSHA, by EVAL when the
  // server does not have it).
  Result<FencedWrite> write(std::string_view key, std::uint64_t fence, std::string_view value);

  // read returns the key's highest fence, value and refusal count in one
  // command (HMGET): a consistent view.
  Result<FencedValue> read(std::string_view key);

 private:
  struct Impl;
  REDLOCK_LOCAL explicit FencedStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace redlock
