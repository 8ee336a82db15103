// redis_cluster.hpp — a Redis Cluster test bed: shards × (1 + replicas)
// real redis-servers (RedisServer, redis_server.hpp) started with
// --cluster-enabled on free loopback ports, each with an explicit
// --cluster-port (the default bus port, port + 10000, may be taken), joined
// by `redis-cli --cluster create` run as a waited child. Every process is a
// child stopped by pid, never by name.
//
// Layout: node(0) … node(shards-1) start as the primaries (redis-cli makes
// the first `shards` addresses it is given the primaries, in that order:
// slots 0-5460, 5461-10922, 10923-16383 for three), and with replicas = 1
// node(shards + s) is the replica of node(s) (the bed reorders the replicas
// redis-cli paired, so this holds). Shard s is {node(s), node(shards + s)}
// for good, whichever of the two is the primary now.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redis_server.hpp"

namespace redlock::test {

// ClusterOptions — the shape of a ClusterBed.
struct ClusterOptions {
  std::size_t shards = 3;    // primaries, 3 or more (redis-cli refuses fewer)
  std::size_t replicas = 0;  // per shard: 0 or 1
  std::chrono::milliseconds node_timeout{1000};  // cluster-node-timeout
  // For every node (password etc.). The bed adds --cluster-enabled yes,
  // --cluster-config-file nodes.conf (relative: the server runs in its own
  // dir, RedisServer passes --dir first), --cluster-node-timeout,
  // --cluster-port, --repl-diskless-sync-delay 0, and --masterauth when
  // password is set. (--appendonly no and --save "" are RedisServer's own.)
  ServerOptions data;
};

// ClusterBed — a cluster in a steady state before the constructor returns:
// every node answers CLUSTER INFO cluster_state:ok, every node's CLUSTER
// SLOTS names the same owners and replicas (replica order aside), each
// range listing the running replica of its primary, and every replica says
// master_link_status:up. (CLUSTER SLOTS leaves out a replica whose
// replication offset is 0 — 7.0's isReplicaAvailable — which on a new,
// idle primary lasts until its first replica PING, 10 s: the bed writes and
// deletes one key on each primary so its replica shows at once.) The
// failover and slot-move waits end in the same steady state. Waits poll
// every 50 ms with a bound (~20 s); failures throw std::runtime_error
// saying what was not reached. Not thread-safe.
class ClusterBed {
 public:
  explicit ClusterBed(ClusterOptions opts = {});
  ~ClusterBed();  // every server SIGKILLed by pid, dirs removed
  ClusterBed(const ClusterBed&) = delete;
  ClusterBed& operator=(const ClusterBed&) = delete;

  std::size_t size() const;  // shards × (1 + replicas)
  std::size_t shards() const;
  RedisServer& node(std::size_t i);
  const RedisServer& node(std::size_t i) const;
  std::size_t shard_of(std::size_t i) const;  // i % shards
  // node_id: CLUSTER MYID of node i, as read at start (a killed node keeps it).
  std::string node_id(std::size_t i) const;
  // primary: the index of shard s's primary now (its running node that
  // says role:master).
  std::size_t primary(std::size_t shard) const;

  // owner: the index of the node that owns the slot now, in the CLUSTER
  // SLOTS of node 0 (of the first running node once node 0 is killed). A
  // slot in migration is owned by its source until finished.
  std::size_t owner(int slot) const;

  // url: "redis+cluster://127.0.0.1:P1,127.0.0.1:P2,…" over the current
  // primaries, in node order; "redis+cluster://:PW@…" when data.password
  // is set (percent-encoded).
  std::string url() const;

  // key_slot: CLUSTER KEYSLOT key, asked of the first running node.
  int key_slot(const std::string& key) const;
  // key_in_slot: the first key "<prefix><n>" (n = 0, 1, …) that hashes to
  // slot, computed here (CRC16/XMODEM of the key, or of its {hash tag},
  // mod 16384: the cluster's own function). Different prefixes give
  // different keys of the same slot.
  static std::string key_in_slot(int slot, std::string_view prefix = "k");
  static int hash_slot(std::string_view key);  // the same function, local

  // migrate moves a slot from its owner to node `to` (a primary) the
  // standard way: CLUSTER SETSLOT slot IMPORTING <source-id> on `to`,
  // SETSLOT slot MIGRATING <to-id> on the source, then CLUSTER
  // GETKEYSINSLOT + MIGRATE … KEYS … (in batches) until the source has none
  // left, then (finish) SETSLOT slot NODE <to-id> on `to`, on the source and
  // on every other primary, and waits until every node's slot map names
  // `to`. finish = false stops after the keys that exist now were moved:
  // the slot stays MIGRATING on the source and IMPORTING on `to` (the ASK
  // state) until finish_migration.
  void migrate(int slot, std::size_t to, bool finish = true);
  // start_migration: only the two SETSLOTs (IMPORTING on `to`, MIGRATING on
  // the owner); no key moves. With move_key a test can split a slot's keys
  // between the source and the target.
  void start_migration(int slot, std::size_t to);
  // move_key: MIGRATE one key from the slot's owner (the migration's
  // source) to node `to`; throws unless MIGRATE answers OK (NOKEY too).
  void move_key(const std::string& key, std::size_t to);
  // finish_migration: moves the keys still on the source, then the
  // SETSLOT NODE round and the wait of migrate(…, true).
  void finish_migration(int slot, std::size_t to);

  // reassign_without_keys: on `to` only, CLUSTER SETSLOT slot NODE <to-id>
  // and CLUSTER BUMPEPOCH, then waits until every other running node
  // answers -MOVED slot <to's address> for a key of the slot and `to`
  // serves it. The old owner learns from gossip that a higher epoch claims
  // the slot and deletes its keys of that slot (7.0: "dirty slots" in
  // clusterUpdateSlotsConfigWith): the keys are lost, not moved.
  void reassign_without_keys(int slot, std::size_t to);

  // kill_primary: SIGKILL shard's primary by pid and wait (≤ 20 s) until
  // its replica says role:master, every running node says
  // cluster_state:ok and the running nodes' slot maps agree. Returns the
  // new primary's index. The killed node stays down. Needs replicas = 1.
  std::size_t kill_primary(std::size_t shard);
  // failover: CLUSTER FAILOVER on node `replica` (graceful: the primary
  // stops writes until the replica caught up), then waits until it says
  // role:master, the old primary is its replica with master_link_status:up,
  // cluster_state:ok everywhere and the slot maps agree.
  void failover(std::size_t replica);

 private:
  using Deadline = std::chrono::steady_clock::time_point;
  std::size_t first_running() const;
  std::size_t index_of_port(int port) const;
  std::size_t partner(std::size_t i) const;  // the other node of i's shard
  Reply checked(std::size_t i, const std::vector<std::string>& argv) const;  // an error reply throws
  void create_cluster();
  int owned_slot(std::size_t s) const;
  void move_keys(int slot, std::size_t from, std::size_t to);
  void migrate_keys(std::size_t from, std::size_t to, const std::vector<std::string>& keys);
  void setslot_node_everywhere(int slot, std::size_t from, std::size_t to);
  std::string unmet_steady() const;  // "" once ok + agreeing + replicas up
  void await_steady(const std::string& what, Deadline deadline) const;

  ClusterOptions opts_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<std::string> ids_;
};

}  // namespace redlock::test
