// bed.hpp — the masters of one chaos scenario and the faults done to them.
//
// ChaosBed owns five (or N) members started by the test fixture (free
// loopback ports, temp dirs, stopped by pid) — lone redis-servers, or
// Sentinel-managed pairs (a primary, its replica and a sentinel, reached as
// redis+sentinel://…), or Redis Clusters (three shards, a replica each,
// reached as redis+cluster://…) — plus a separate counter redis
// that no fault touches: the workers' shared counters, one per resource
// (key "counter:" + resource). Every fault it applies is recorded as an interval
// (a `fault` event of history.hpp) for the checker and the timeline.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "faultproxy/process.hpp"
#include "history.hpp"
#include "redis_cluster.hpp"
#include "redis_sentinel.hpp"
#include "redis_server.hpp"
#include "test_certs.hpp"
#include "support/process.hpp"

namespace redlock::chaos {

struct BedOptions {
  std::size_t nodes = 5;
  bool appendfsync_always = false;  // persistence of the masters
  // Path of libskewclock.so: when set, every master runs under the shim
  // with its own settings file, so skew() can move its wall clock.
  std::string skew_lib;
  // Path of the faultproxy binary: when set, every master gets a proxy with
  // two listeners, 127.0.0.1 (client group 0) and 127.0.0.2 (group 1), so
  // the two groups can see different faults (partitions). The proxies run
  // with --keep-in-flight: bytes a client sent before it dropped its
  // connection still reach the master, after their delay (a real network
  // delivers what the client's kernel sent).
  std::string proxy_bin;
  // The clients reach every master over TLS: each master gets a TLS port
  // beside its plain one (which the bed keeps for itself), with
  // certificates made for the bed; urls() are rediss:// (through the
  // proxies, which carry the TLS bytes untouched); ca_file() is their CA.
  bool tls = false;
  // The first `sentinel_members` members are Sentinel-managed: a primary,
  // its replica and one sentinel (test::SentinelBed: quorum 1,
  // down-after 1 s, quick periods), which the clients reach as
  // redis+sentinel://127.0.0.1:S/NAME and follow from primary to primary;
  // the rest are lone masters. Not with skew_lib, proxy_bin or tls.
  std::size_t sentinel_members = 0;
  // The first `cluster_members` members are Redis Clusters (test::ClusterBed:
  // three shards of a primary and its replica, cluster-node-timeout 1 s),
  // which the clients reach as redis+cluster://… over the primaries of the
  // start; the rest are lone masters. Not with sentinel_members, skew_lib,
  // proxy_bin or tls.
  std::size_t cluster_members = 0;
};

class ChaosBed {
 public:
  explicit ChaosBed(const BedOptions& options);
  ~ChaosBed();  // heals nothing; the fixture stops every server by pid
  ChaosBed(const ChaosBed&) = delete;
  ChaosBed& operator=(const ChaosBed&) = delete;

  std::size_t size() const { return masters_.size(); }
  // urls: the masters as client group `group` reaches them (through its
  // proxy listener when the bed has proxies).
  std::string urls(int group = 0) const;
  int counter_port() const { return counter_->port(); }
  // ca_file: the CA of the masters' certificates; empty without tls.
  std::string ca_file() const { return certs_ != nullptr ? certs_->path("ca.crt") : std::string(); }
  // master: member i's server — for a Sentinel member its primary now; a
  // Cluster member has none (logic_error).
  test::RedisServer& master(std::size_t i);
  bool sentinel_member(std::size_t i) const { return sentinels_.at(i) != nullptr; }
  bool cluster_member(std::size_t i) const { return clusters_.at(i) != nullptr; }
  test::RedisServer& counter() { return *counter_; }

  // Faults on master i (0-based). Each starts an interval named `what`;
  // heal ends it.
  void kill(std::size_t i);
  void pause(std::size_t i);
  void restart(std::size_t i, bool wipe);  // kill (if running) and start again
  // flushall empties master i while it keeps running (FLUSHALL): data lost
  // without a restart, the data-loss marker with it. An instant, recorded
  // as a fault interval of zero length.
  void flushall(std::size_t i);
  void resume(std::size_t i);              // ends a pause
  // skew sets master i's wall clock: offset (a jump) and rate, applied
  // before it returns; unskew puts it back to real time.
  void skew(std::size_t i, long offset_ms, double rate);
  void unskew(std::size_t i);
  // proxy sets faults on master i's proxy for `listener` ("0", "1" or "*"),
  // e.g. "delay_up=5 jitter_up=10"; unproxy clears them.
  void proxy(std::size_t i, const std::string& listener, const std::string& settings);
  void unproxy(std::size_t i, const std::string& listener);
  // Client-process faults: stop a worker (SIGSTOP, returns once it is
  // stopped) and let it run again (SIGCONT).
  void pause_process(support::Process& worker, const std::string& what);
  void resume_process(support::Process& worker);
  // kill_process kills a worker (SIGKILL) and reaps it: a fault of no
  // length named `what`, stamped once the worker is gone, so that every
  // event it logged comes before it.
  void kill_process(support::Process& worker, const std::string& what);

  // Failovers of Sentinel members, all of `members` at once (a thread
  // each); each returns once every member's new primary is in place, and
  // records one interval per member from the start to that moment.
  // fail_over: SENTINEL FAILOVER (test::SentinelBed::fail_over): the
  // replica is promoted at once, while the old primary keeps taking writes
  // until its clients hear +switch-master — writes the promoted replica
  // never gets; returns once the old primary is its replica, in sync.
  void fail_over(const std::vector<std::size_t>& members);
  // kill_primary: kill -9 each member's primary; the sentinel sees it down
  // (down-after) and promotes the replica; the killed servers then rejoin
  // as the new primaries' replicas, their data wiped, one after another
  // (an interval each).
  void kill_primary(const std::vector<std::size_t>& members);

  // Faults of Cluster members, each on all of `members` at once (a thread
  // each: every member is a cluster of its own), on the shards that own
  // `slots` there; one interval per member, from the start to the moment
  // its cluster is steady again (test::ClusterBed's waits).
  // cluster_reassign: each slot given to the primary of the next shard
  // without its keys (ClusterBed::reassign_without_keys: SETSLOT NODE and
  // BUMPEPOCH there; the old owner deletes its keys of the slot once gossip
  // tells it) — the partial data loss of a cluster: the slot's lock keys
  // and its data-loss marker gone, the member's other slots untouched.
  void cluster_reassign(const std::vector<std::size_t>& members, const std::vector<int>& slots);
  // cluster_failover: kill -9 the primary of the shard that owns `slot`
  // (ClusterBed::kill_primary: the cluster promotes its replica after
  // cluster-node-timeout); the killed servers then rejoin, one after
  // another, restarted empty with their cluster config, as the new
  // primaries' replicas (an interval each).
  void cluster_failover(const std::vector<std::size_t>& members, int slot);
  // cluster_migrate: each slot moved, keys and data-loss marker with it, to
  // the primary of the next shard (ClusterBed::migrate: IMPORTING /
  // MIGRATING, MIGRATE in batches, SETSLOT NODE everywhere).
  void cluster_migrate(const std::vector<std::size_t>& members, const std::vector<int>& slots);

  // heal_all resumes paused masters and restarts killed ones (data kept;
  // a Sentinel member's killed server rejoins as a replica, wiped; a
  // Cluster member's as its shard's replica, empty), ending
  // every open interval.
  void heal_all();

  // touched says whether master i lost its data or process during the run
  // (killed or restarted): keys found there afterwards may not be leaks.
  bool touched(std::size_t i) const { return last_touched_.at(i) != 0; }

  // direct_urls: the masters themselves, bypassing any proxy.
  std::string direct_urls() const;

  // leaked_keys counts lock keys (redlock:*) on the masters that were not
  // killed or restarted in the last `grace` (default: never in the run). A
  // master restarted with its data may still hold the key of a lock
  // released while it was down, until that key's TTL runs out: a grace of
  // max_ttl plus drift or more lets those expire, and the masters of a long
  // run, every one of them restarted at some time, still count. The
  // data-loss marker (redlock-marker) is not a lock key, nor are the keys
  // kept for good by design: a fence counter (…}:fence), a semaphore's
  // permits (…}:permits) and an election's record (…}:leader, which a
  // killed leader leaves behind). A flushed master
  // still counts: the flush took every key of its past, so a lock key found
  // there afterwards was written since and should have been released or
  // rolled back like any other.
  std::size_t leaked_keys(std::chrono::milliseconds grace = std::chrono::milliseconds::max());
  // counter_value: the shared counter of `resource` (0 if never written);
  // counter_total: all of them added up, the run's progress.
  std::int64_t counter_value(const std::string& resource);
  std::int64_t counter_total();

  const std::vector<Event>& faults() const { return faults_; }

 private:
  void open(const std::string& key, const std::string& what);
  void close(const std::string& key, std::int64_t at = 0);  // at: the end's monotonic ns; 0: now
  // rejoin_cluster_node: restart node j of member i's cluster (killed: its
  // data gone, its cluster config kept) and wait until it replicates its
  // shard's primary with the link up. On the constructing thread only.
  void rejoin_cluster_node(std::size_t i, std::size_t j);
  // next_primary: the primary of the shard after the one owning `slot` on
  // member i's cluster.
  std::size_t next_primary(std::size_t i, int slot) const;
  // on_members runs step(i) for every i of `members`, each in a thread of
  // its own, all at once, and returns when all are done: when each ended
  // (monotonic ns, in the order of `members`); the first error is rethrown.
  // A step starts no process: one dies with the thread that started it.
  std::vector<std::int64_t> on_members(const std::vector<std::size_t>& members,
                                       const std::function<void(std::size_t)>& step);

  std::string skew_dir_;  // settings files of the clock-skew shim
  std::unique_ptr<test::TestCerts> certs_;  // tls only
  std::vector<int> tls_ports_;              // tls only: each master's TLS port
  std::vector<std::unique_ptr<test::RedisServer>> masters_;     // null for a Sentinel member
  std::vector<std::unique_ptr<test::SentinelBed>> sentinels_;  // null for a lone master
  std::vector<std::size_t> primary_;                           // a Sentinel member's primary: server 0 or 1
  std::vector<std::unique_ptr<test::ClusterBed>> clusters_;    // null unless a Cluster member
  std::vector<std::unique_ptr<faultproxy::FaultProxyProcess>> proxies_;
  std::unique_ptr<test::RedisServer> counter_;
  std::vector<std::int64_t> last_touched_;  // monotonic ns of master i's last kill or restart; 0: never
  std::vector<Event> faults_;
  std::vector<std::pair<std::string, std::size_t>> open_;  // key → index in faults_
};

}  // namespace redlock::chaos
