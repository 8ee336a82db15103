// master.hpp — one simulated Redis master for the deterministic simulator
// (issue 13): the library's real Lua scripts (src/scripts.hpp) run in an
// embedded Lua 5.1, as in Redis, over a keyspace whose expiry reads this
// master's own wall clock, which the simulator steps and drifts.
//
// What it models of a Redis 7.0 master, and where it differs:
//   - each execute() is one atomic command; a script's time is frozen at
//     its start (Redis 7 does the same), one clock read per execute();
//   - keys expire lazily against the absolute expire-at on this master's
//     clock, so a forward step expires keys early. A key whose expire-at is
//     ≤ now is gone (Redis keeps it through that millisecond: `now > when`;
//     the sim is the 1 ms more adversarial side);
//   - uptime_in_seconds is Redis' difference of whole wall-clock seconds,
//     floor(now/1000) − floor(start/1000): it may read up to 1 s above the
//     true uptime, which is the side the client must guard against;
//   - one keyspace: SELECT checks the index and answers OK, but every db
//     is the same (execute() has no connection to keep a db on);
//   - no pub/sub server: PUBLISH goes to the on_publish hook;
//   - two types: strings and sorted sets (the fair scripts' queues:
//     ZADD NX|XX|GT|LT|CH, ZRANGE by rank with REV / WITHSCORES, ZREM,
//     ZCARD, ZRANK, ZSCORE). A command on a key of the other type answers
//     WRONGTYPE; SET replaces a key of either type; DEL, EXISTS, PTTL,
//     PEXPIRE, expiry, FLUSHALL and data loss treat both alike.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redlock::sim {

// Reply — one RESP2 reply, owned by value. `str` holds the status, bulk
// string or error text (an error's text starts with its code, e.g.
// "NOSCRIPT No matching script. Please use EVAL."); `elements` an array's.
struct Reply {
  enum class Type : std::uint8_t { status, string, integer, nil, error, array };
  Type type = Type::nil;
  long long integer = 0;
  std::string str;
  std::vector<Reply> elements;

  bool operator==(const Reply&) const = default;
  bool is_error() const { return type == Type::error; }
};

// to_string renders a reply for messages and test failures: +OK, :5,
// "bulk", (nil), -ERR text, [a, b].
std::string to_string(const Reply& reply);

// Master — one simulated Redis master: a single-threaded server whose
// every execute() is one atomic command. Not thread-safe; the simulator
// calls it from one thread. `wall_ms` is this master's wall clock in ms
// (called once per execute() and by the inspection calls); key expiry,
// PTTL, TIME and uptime_in_seconds all read it. Every Master of a thread
// runs its scripts in one shared Lua state (a script keeps nothing between
// calls), each with its own script cache; no copy, no move.
class Master {
 public:
  Master(std::string run_id_seed_name, std::function<long long()> wall_ms);
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;
  Master(Master&&) = delete;
  Master& operator=(Master&&) = delete;

  // execute runs one command (name case-insensitive) and returns its reply;
  // every failure is an error reply, nothing throws but std::bad_alloc.
  // Commands: PING AUTH SELECT SCRIPT(LOAD|FLUSH|EXISTS) EVAL EVALSHA GET
  // SET(NX|XX|GET|KEEPTTL|EX|PX|EXAT|PXAT) DEL EXISTS PEXPIRE(NX|XX|GT|LT)
  // PTTL INCR TIME FLUSHALL PUBLISH INFO ZADD ZRANGE ZREM ZCARD ZRANK ZSCORE.
  Reply execute(const std::vector<std::string>& argv);
  // execute_view is execute without owning the arguments (no allocation
  // for them); they need only live for the call.
  Reply execute_view(std::span<const std::string_view> argv);
  // execute_into is execute_view with the reply in `out`, whose buffers
  // (its text, its elements and theirs) are reused: whatever it held is
  // replaced.
  void execute_into(std::span<const std::string_view> argv, Reply& out);

  // on_publish — called by PUBLISH, directly or from a script; returns the
  // number of receivers (PUBLISH's reply). Unset: 0 receivers. It must not
  // call back into this Master (a script may be running) and must not throw.
  std::function<long long(const std::string& channel, const std::string& message)> on_publish;

  // restart: the process restarts. New run_id, uptime from 0 (now), script
  // cache empty. keep_data: keys kept as if persisted (expiry
  // still by their absolute expire-at); else every key is gone.
  void restart(bool keep_data);
  // fail_over: a replica that lagged takes over at this address: a new
  // run_id, an uptime of `uptime_ms` (not a fresh start), script cache
  // empty, and the keys as they were replicated up to `synced_ms`
  // on this master's clock (every key written later is missing; the
  // data-loss marker and its server key stay if written before).
  void fail_over(long long synced_ms, long long uptime_ms);
  // resync: this process was demoted, took its promoted replica's keys as
  // replicated up to `synced_ms` (later writes missing) and was promoted
  // again: the same run_id and uptime, a new master_replid.
  void resync(long long synced_ms);
  void flushall();       // every key gone (the data-loss marker too); scripts kept
  void flush_scripts();  // SCRIPT FLUSH: the script cache empty

  // Eviction knobs, reported by INFO memory (defaults 0 and "noeviction").
  // Nothing is evicted by itself: evict() removes one key as an eviction
  // would, returning whether a live key was there.
  void set_maxmemory(long long bytes);
  void set_maxmemory_policy(std::string policy);
  bool evict(std::string_view key);

  const std::string& run_id() const;
  std::size_t key_count();  // live (unexpired) keys
  // keys: every live key and its value, sorted by key (for leak checks);
  // a sorted set's value reads zset{member:score,…} in its order.
  std::vector<std::pair<std::string, std::string>> keys();
  // pttl: a live key's remaining ms on this master's clock, -1 without
  // expiry, -2 when missing (PTTL without a command).
  long long pttl(std::string_view key);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace redlock::sim
