// redis_sentinel.hpp — a Sentinel test bed: two real redis-servers (a
// primary and its replica) watched by one to three sentinels, every process
// a child on a free loopback port in its own temp dir, stopped by pid (see
// redis_server.hpp). A sentinel is `redis-server <dir>/sentinel.conf
// --sentinel`: Debian ships no redis-sentinel binary, and a sentinel
// rewrites its conf, so the conf lives in the sentinel's own dir.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "redis_server.hpp"

namespace redlock::test {

// SentinelOptions — the shape of a SentinelBed.
struct SentinelOptions {
  std::size_t sentinels = 1;  // 1..3
  std::string name = "m1";    // the monitored master's name
  int quorum = 1;
  std::chrono::milliseconds down_after{1000};  // sentinel down-after-milliseconds
  std::chrono::milliseconds failover_timeout{3000};
  // For both data servers (password etc.). The bed adds
  // --repl-diskless-sync-delay 0, and --masterauth when password is set.
  ServerOptions data;
  std::string sentinel_password;  // requirepass on the sentinels (empty: none)
  // quick_periods: each sentinel gets SENTINEL DEBUG publish-period 100
  // info-period 500 ask-period 250 once it answers (7.0+, runtime only;
  // the defaults are 2000, 10000 and 1000 ms and no conf line sets them).
  // Sentinels then find each other, see replicas, agree a primary is down
  // and demote an old primary (+convert-to-slave waits 4 hello periods,
  // then the next INFO) in well under a second instead of 2-10 s.
  // false: the real periods.
  bool quick_periods = true;
  // demote_old_primary: fail_over() sends the old primary REPLICAOF the new
  // one itself as soon as every sentinel names the new one, instead of
  // waiting for the sentinels' own demotion (~0.5 s after the switch with
  // quick_periods, ~10 s without). Until demoted the old primary is a second
  // master that takes writes (lost at its resync).
  bool demote_old_primary = false;
};

// SentinelBed — two data servers (server(0) starts as primary, server(1) as
// its replica, in sync before the constructor returns: master_link_status:up
// and the replica's slave_repl_offset caught up), and `sentinels` sentinels
// monitoring server(0) as `name`. Before the constructor returns every
// sentinel names server(0), lists server(1) as a replica it has heard from
// (flags "slave", master-link-status ok) and, with 2 or more, lists the other
// sentinels (so failovers can reach agreement). Waits poll every 50 ms with a
// bound; failures throw std::runtime_error saying what was not reached.
// Not thread-safe.
class SentinelBed {
 public:
  explicit SentinelBed(SentinelOptions opts = {});
  ~SentinelBed();  // every sentinel and server SIGKILLed by pid, dirs removed
  SentinelBed(const SentinelBed&) = delete;
  SentinelBed& operator=(const SentinelBed&) = delete;

  RedisServer& server(std::size_t i);  // 0 or 1
  std::size_t sentinels() const;
  int sentinel_port(std::size_t i) const;
  pid_t sentinel_pid(std::size_t i) const;  // -1 once killed
  void kill_sentinel(std::size_t i);        // SIGKILL by pid, reaped

  // url: "redis+sentinel://127.0.0.1:S1[,127.0.0.1:S2…]/NAME" over every
  // sentinel (killed ones too), with ":PW@" when data.password is set and
  // "?sentinel_password=PW" when sentinel_password is; name and passwords
  // percent-encoded.
  std::string url() const;

  // primary: index (0/1) of the server the first live sentinel (sentinel 0
  // unless killed) names now.
  std::size_t primary() const;

  // sentinel_command runs one command on sentinel i (hiredis, 2 s timeout,
  // AUTH with sentinel_password first if set). Error replies are returned;
  // a connection error throws std::runtime_error.
  Reply sentinel_command(std::size_t i, const std::vector<std::string>& argv) const;

  // fail_over: SENTINEL FAILOVER on the first live sentinel (no agreement
  // needed), then waits (≤ 20 s) until every live sentinel names the other
  // server and it says role:master, the old primary is its replica in sync
  // (role:slave, master_link_status:up, offset caught up; see
  // demote_old_primary), and every live sentinel lists the old primary as a
  // replica. Returns the new primary's index. Both servers drop their
  // clients on the way (sentinel's SLAVEOF comes with CLIENT KILL TYPE
  // normal and pubsub), and every sentinel publishes on +switch-master
  // "NAME OLD_IP OLD_PORT NEW_IP NEW_PORT".
  std::size_t fail_over();

  // kill_primary: SIGKILL the current primary by pid, wait (≤ 20 s) until
  // every live sentinel names the other server and it says role:master.
  // Returns the new primary's index. The killed server stays down (rejoin).
  std::size_t kill_primary();

  // rejoin: restart the killed server i (its data wiped) as a replica of
  // the current primary, and wait until it is in sync and every live
  // sentinel lists it as a replica.
  void rejoin(std::size_t i);

 private:
  class Sentinel;
  using Deadline = std::chrono::steady_clock::time_point;
  std::size_t first_live_sentinel() const;
  std::size_t index_of_port(int port) const;
  void await_replica_in_sync(std::size_t replica, std::size_t primary, Deadline deadline);
  void await_sentinels(std::size_t primary, std::size_t replica, bool heard_from_replica, Deadline deadline);
  std::string unmet_named_everywhere(std::size_t chosen);  // "" once met

  SentinelOptions opts_;
  std::vector<std::unique_ptr<RedisServer>> servers_;
  std::vector<std::unique_ptr<Sentinel>> sentinels_;
};

}  // namespace redlock::test
