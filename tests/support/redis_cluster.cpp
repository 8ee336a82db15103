// redis_cluster.cpp — see redis_cluster.hpp. Every wait polls the nodes'
// own answers every 50 ms under a bound; no blind sleeps.
#include "redis_cluster.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <utility>

namespace redlock::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kSlots = 16384;
constexpr int kBusPortAttempts = 3;     // a new --cluster-port per attempt (lost port races)
constexpr auto kPollInterval = 50ms;
constexpr auto kCreateBound = 30s;      // redis-cli --cluster create (it sleeps 1 s, then polls each 1 s)
constexpr auto kSteadyBound = 20s;      // ok + agreeing slot maps + replicas up
constexpr auto kFailoverBound = 20s;
constexpr int kMigrateBatch = 100;      // keys per GETKEYSINSLOT / MIGRATE
constexpr int kMigrateTimeoutMs = 5000;

// await: poll_until (redis_server.hpp) every kPollInterval, its errors saying "ClusterBed".
void await(const std::string& what, Clock::time_point deadline, const std::function<std::string()>& unmet) {
  poll_until("ClusterBed", what, deadline, unmet, kPollInterval);
}

std::uint16_t crc16_xmodem(std::string_view data) {
  std::uint16_t crc = 0;
  for (unsigned char ch : data) {
    crc = static_cast<std::uint16_t>(crc ^ (ch << 8));
    for (int bit = 0; bit < 8; ++bit)
      crc = static_cast<std::uint16_t>((crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

// Slot map text of one node's CLUSTER SLOTS: "start-end port id [replica
// ports, sorted]; …" — the replicas' order differs between nodes.
std::string slot_map_text(const Reply& slots) {
  if (slots.type != REDIS_REPLY_ARRAY) throw std::runtime_error("CLUSTER SLOTS: " + reply_text(slots));
  std::vector<std::string> ranges;
  for (const auto& range : slots.elements) {
    if (range.type != REDIS_REPLY_ARRAY || range.elements.size() < 3)
      throw std::runtime_error("CLUSTER SLOTS entry: " + reply_text(range));
    std::string text = std::to_string(range.elements[0].integer) + "-" + std::to_string(range.elements[1].integer) +
                       " " + std::to_string(range.elements[2].elements.at(1).integer) + " " +
                       range.elements[2].elements.at(2).str;
    std::vector<long long> replicas;
    for (std::size_t j = 3; j < range.elements.size(); ++j) replicas.push_back(range.elements[j].elements.at(1).integer);
    std::sort(replicas.begin(), replicas.end());
    text += " [";
    for (auto p : replicas) text += " " + std::to_string(p);
    ranges.push_back(text + " ]");
  }
  std::string out;
  for (const auto& r : ranges) out += r + "; ";
  return out;
}

// slot_owner_port: the primary's port of the range holding slot (0: none).
int slot_owner_port(const Reply& slots, int slot) {
  for (const auto& range : slots.elements) {
    if (range.elements.size() >= 3 && range.elements[0].integer <= slot && slot <= range.elements[1].integer)
      return static_cast<int>(range.elements[2].elements.at(1).integer);
  }
  return 0;
}

}  // namespace

// ---- start ---------------------------------------------------------------------

ClusterBed::ClusterBed(ClusterOptions opts) : opts_(std::move(opts)) {
  if (opts_.shards < 3) throw std::invalid_argument("ClusterBed: shards must be 3 or more (redis-cli --cluster create)");
  if (opts_.replicas > 1) throw std::invalid_argument("ClusterBed: replicas must be 0 or 1");
  const std::size_t n = opts_.shards * (1 + opts_.replicas);
  for (std::size_t i = 0; i < n; ++i) {
    std::string last_error;
    for (int attempt = 0; attempt < kBusPortAttempts && nodes_.size() == i; ++attempt) {
      ServerOptions data = opts_.data;
      // The server runs in its own dir (RedisServer passes --dir before the
      // extra args, and "dir" chdirs at once): a relative nodes.conf lands there.
      data.extra_args.insert(data.extra_args.end(),
                             {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                              "--cluster-node-timeout", std::to_string(opts_.node_timeout.count()),
                              "--cluster-port", std::to_string(free_port()), "--repl-diskless-sync-delay", "0"});
      if (!data.password.empty()) data.extra_args.insert(data.extra_args.end(), {"--masterauth", data.password});
      try {
        nodes_.push_back(std::make_unique<RedisServer>(std::move(data)));
      } catch (const std::runtime_error& e) {
        last_error = e.what();
        // A taken bus port: another --cluster-port; anything else is final.
        if (last_error.find("Address already in use") == std::string::npos) break;
      }
    }
    if (nodes_.size() == i) throw std::runtime_error("ClusterBed: node " + std::to_string(i) + ": " + last_error);
  }
  create_cluster();
  await_steady("start", Clock::now() + kSteadyBound);
}

ClusterBed::~ClusterBed() { nodes_.clear(); }  // each RedisServer: SIGKILL by pid, reaped, dir removed

void ClusterBed::create_cluster() {
  const char* path = std::getenv("PATH");
  const std::string cli = support::find_program(
      "redis-cli", path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin");
  if (cli.empty()) throw std::runtime_error("ClusterBed: redis-cli not found in PATH");
  support::ProcessOptions po;
  po.argv = {cli, "--cluster", "create"};
  for (const auto& s : nodes_) po.argv.push_back(s->address());
  if (opts_.replicas > 0) po.argv.insert(po.argv.end(), {"--cluster-replicas", std::to_string(opts_.replicas)});
  po.argv.push_back("--cluster-yes");
  // REDISCLI_AUTH rather than -a: no password on the command line (and no warning).
  if (!opts_.data.password.empty()) po.env_set.emplace_back("REDISCLI_AUTH", opts_.data.password);
  const support::ProcessResult res = support::run(std::move(po), kCreateBound);
  if (res.timed_out || res.exit_code != 0 || res.out.find("All 16384 slots covered") == std::string::npos)
    throw std::runtime_error("ClusterBed: redis-cli --cluster create " +
                             (res.timed_out ? std::string("timed out") : exit_text(res.exit_code)) + "; output:\n" +
                             tail_lines(res.out + res.err));

  for (std::size_t i = 0; i < nodes_.size(); ++i) ids_.push_back(checked(i, {"CLUSTER", "MYID"}).str);
  for (std::size_t s = 0; s < opts_.shards; ++s) {
    const std::string role = info_field(checked(s, {"INFO", "replication"}), "role");
    if (role != "master")
      throw std::runtime_error("ClusterBed: " + node(s).address() + " (given as primary " + std::to_string(s) +
                               ") is role:" + role);
  }
  if (opts_.replicas == 0) return;
  // Reorder the replicas: node(shards + s) replicates node(s).
  std::vector<std::unique_ptr<RedisServer>> replicas(opts_.shards);
  std::vector<std::string> replica_ids(opts_.shards);
  for (std::size_t r = opts_.shards; r < nodes_.size(); ++r) {
    const Reply info = checked(r, {"INFO", "replication"});
    const int master_port = std::atoi(info_field(info, "master_port").c_str());
    std::size_t p = nodes_.size();
    for (std::size_t s = 0; s < opts_.shards; ++s) {
      if (nodes_[s]->port() == master_port) p = s;
    }
    if (info_field(info, "role") != "slave" || p == nodes_.size() || replicas[p])
      throw std::runtime_error("ClusterBed: " + node(r).address() + " is role:" + info_field(info, "role") +
                               " master_port:" + std::to_string(master_port) + " (not one replica per primary)");
    replicas[p] = std::move(nodes_[r]);
    replica_ids[p] = ids_[r];
  }
  for (std::size_t s = 0; s < opts_.shards; ++s) {
    nodes_[opts_.shards + s] = std::move(replicas[s]);
    ids_[opts_.shards + s] = replica_ids[s];
  }
  // CLUSTER SLOTS lists a replica only once its replication offset is not 0
  // (7.0 isReplicaAvailable; the offset reaches the other nodes by gossip).
  // A new primary's offset is 0 until it propagates something (its
  // replica PING comes every repl-ping-replica-period, 10 s): one write and
  // its undoing on each primary, in a slot of its own.
  // A primary takes writes once it says cluster_state:ok (-CLUSTERDOWN before).
  for (std::size_t s = 0; s < opts_.shards; ++s) {
    const std::string key = key_in_slot(static_cast<int>(owned_slot(s)), "redlock-test:cluster-bed:");
    await("start: a write on " + node(s).address(), Clock::now() + kSteadyBound, [&]() -> std::string {
      const Reply r = node(s).command({"SET", key, "offset"});
      if (r.type == REDIS_REPLY_ERROR) return "SET: " + r.str;
      checked(s, {"DEL", key});
      return {};
    });
  }
}

// owned_slot: the first slot node s owns in its own CLUSTER SLOTS.
int ClusterBed::owned_slot(std::size_t s) const {
  const Reply slots = checked(s, {"CLUSTER", "SLOTS"});
  for (const auto& range : slots.elements) {
    if (range.elements.at(2).elements.at(1).integer == node(s).port())
      return static_cast<int>(range.elements.at(0).integer);
  }
  throw std::runtime_error("ClusterBed: " + node(s).address() + " owns no slot");
}

// ---- accessors --------------------------------------------------------------------

std::size_t ClusterBed::size() const { return nodes_.size(); }
std::size_t ClusterBed::shards() const { return opts_.shards; }
RedisServer& ClusterBed::node(std::size_t i) { return *nodes_.at(i); }
const RedisServer& ClusterBed::node(std::size_t i) const { return *nodes_.at(i); }
std::size_t ClusterBed::shard_of(std::size_t i) const { return i % opts_.shards; }
std::string ClusterBed::node_id(std::size_t i) const { return ids_.at(i); }

std::size_t ClusterBed::partner(std::size_t i) const {
  if (opts_.replicas == 0) throw std::runtime_error("ClusterBed: no replicas (ClusterOptions::replicas = 0)");
  return i < opts_.shards ? i + opts_.shards : i - opts_.shards;
}

Reply ClusterBed::checked(std::size_t i, const std::vector<std::string>& argv) const {
  const Reply r = node(i).command(argv);
  if (r.type == REDIS_REPLY_ERROR) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    throw std::runtime_error("ClusterBed: " + node(i).address() + ": " + cmd + ": " + r.str);
  }
  return r;
}

std::size_t ClusterBed::first_running() const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->running()) return i;
  }
  throw std::runtime_error("ClusterBed: every node was killed");
}

std::size_t ClusterBed::index_of_port(int port) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->port() == port) return i;
  }
  throw std::runtime_error("ClusterBed: port " + std::to_string(port) + " is none of the bed's nodes");
}

std::size_t ClusterBed::primary(std::size_t shard) const {
  if (shard >= opts_.shards) throw std::out_of_range("ClusterBed: no shard " + std::to_string(shard));
  for (std::size_t i = shard; i < nodes_.size(); i += opts_.shards) {
    if (nodes_[i]->running() && info_field(checked(i, {"INFO", "replication"}), "role") == "master") return i;
  }
  throw std::runtime_error("ClusterBed: shard " + std::to_string(shard) + " has no running primary");
}

std::size_t ClusterBed::owner(int slot) const {
  const Reply slots = checked(first_running(), {"CLUSTER", "SLOTS"});
  const int port = slot_owner_port(slots, slot);
  if (port == 0) throw std::runtime_error("ClusterBed: slot " + std::to_string(slot) + " has no owner");
  return index_of_port(port);
}

std::string ClusterBed::url() const {
  std::string out = "redis+cluster://";
  if (!opts_.data.password.empty()) out += ":" + percent_encode(opts_.data.password) + "@";
  bool first = true;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i]->running() || info_field(checked(i, {"INFO", "replication"}), "role") != "master") continue;
    out += (first ? "" : ",") + nodes_[i]->address();
    first = false;
  }
  return out;
}

int ClusterBed::key_slot(const std::string& key) const {
  return static_cast<int>(checked(first_running(), {"CLUSTER", "KEYSLOT", key}).integer);
}

int ClusterBed::hash_slot(std::string_view key) {
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16_xmodem(key) % kSlots;
}

std::string ClusterBed::key_in_slot(int slot, std::string_view prefix) {
  if (slot < 0 || slot >= kSlots) throw std::out_of_range("ClusterBed: no slot " + std::to_string(slot));
  // ~16384 tries on average; the bound is far above any slot's first hit.
  for (long n = 0; n < 10'000'000; ++n) {
    std::string key = std::string(prefix) + std::to_string(n);
    if (hash_slot(key) == slot) return key;
  }
  throw std::runtime_error("ClusterBed: no key found for slot " + std::to_string(slot));
}

// ---- waits --------------------------------------------------------------------------

// unmet_steady: every running node says cluster_state:ok, the running
// nodes' slot maps agree, and every running replica replicates its shard
// partner with master_link_status:up.
std::string ClusterBed::unmet_steady() const {
  std::string map0;
  std::size_t map0_node = 0;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i]->running()) continue;
    const RedisServer& s = *nodes_[i];
    const std::string state = info_field(checked(i, {"CLUSTER", "INFO"}), "cluster_state");
    if (state != "ok") return s.address() + " cluster_state:" + state;
    const Reply slots = checked(i, {"CLUSTER", "SLOTS"});
    const std::string map = slot_map_text(slots);
    if (opts_.replicas > 0) {
      // Each range lists the running replica of its primary.
      for (const auto& range : slots.elements) {
        const std::size_t p = index_of_port(static_cast<int>(range.elements.at(2).elements.at(1).integer));
        const std::size_t want = nodes_[partner(p)]->running() ? 1 : 0;
        if (range.elements.size() - 3 != want)
          return s.address() + " slots " + map + "(want " + std::to_string(want) + " replica(s) of " +
                 nodes_[p]->address() + ")";
      }
    }
    if (map0.empty()) {
      map0 = map;
      map0_node = i;
    } else if (map != map0) {
      return s.address() + " slots " + map + "vs " + nodes_[map0_node]->address() + " slots " + map0;
    }
    const Reply info = checked(i, {"INFO", "replication"});
    if (info_field(info, "role") != "slave") continue;
    const std::string want = std::to_string(nodes_[partner(i)]->port());
    if (info_field(info, "master_port") != want || info_field(info, "master_link_status") != "up")
      return s.address() + " master_port:" + info_field(info, "master_port") + " (want " + want +
             ") master_link_status:" + info_field(info, "master_link_status");
  }
  return {};
}

void ClusterBed::await_steady(const std::string& what, Deadline deadline) const {
  await(what + ": cluster_state:ok, slot maps agreeing, replicas up", deadline, [&] { return unmet_steady(); });
}

// ---- slot moves -----------------------------------------------------------------------

void ClusterBed::start_migration(int slot, std::size_t to) {
  const std::size_t from = owner(slot);
  if (from == to) throw std::invalid_argument("ClusterBed: slot " + std::to_string(slot) + " is node " + std::to_string(to) + "'s already");
  const std::string s = std::to_string(slot);
  checked(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(from)});
  checked(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(to)});
}

void ClusterBed::migrate_keys(std::size_t from, std::size_t to, const std::vector<std::string>& keys) {
  std::vector<std::string> argv{"MIGRATE", "127.0.0.1", std::to_string(node(to).port()), "", "0",
                                std::to_string(kMigrateTimeoutMs)};
  if (!opts_.data.password.empty()) argv.insert(argv.end(), {"AUTH", opts_.data.password});
  argv.emplace_back("KEYS");
  argv.insert(argv.end(), keys.begin(), keys.end());
  const Reply r = checked(from, argv);
  if (r.str != "OK" && r.str != "NOKEY")
    throw std::runtime_error("ClusterBed: " + node(from).address() + ": MIGRATE: " + reply_text(r));
}

void ClusterBed::move_keys(int slot, std::size_t from, std::size_t to) {
  const std::string s = std::to_string(slot);
  for (;;) {
    const Reply keys = checked(from, {"CLUSTER", "GETKEYSINSLOT", s, std::to_string(kMigrateBatch)});
    if (keys.elements.empty()) return;
    std::vector<std::string> names;
    for (const auto& k : keys.elements) names.push_back(k.str);
    migrate_keys(from, to, names);
  }
}

void ClusterBed::move_key(const std::string& key, std::size_t to) {
  migrate_keys(owner(hash_slot(key)), to, {key});
}

void ClusterBed::setslot_node_everywhere(int slot, std::size_t from, std::size_t to) {
  const std::string s = std::to_string(slot);
  // The target first (it bumps its config epoch: it was importing), then the
  // source (which refuses while it holds keys of the slot), then the others.
  checked(to, {"CLUSTER", "SETSLOT", s, "NODE", node_id(to)});
  checked(from, {"CLUSTER", "SETSLOT", s, "NODE", node_id(to)});
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (i == to || i == from || !nodes_[i]->running()) continue;
    if (info_field(checked(i, {"INFO", "replication"}), "role") != "master") continue;
    checked(i, {"CLUSTER", "SETSLOT", s, "NODE", node_id(to)});
  }
  const Deadline deadline = Clock::now() + kSteadyBound;
  const int want = node(to).port();
  await("slot " + s + " owned by " + node(to).address() + " everywhere", deadline, [&]() -> std::string {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i]->running()) continue;
      const int port = slot_owner_port(checked(i, {"CLUSTER", "SLOTS"}), slot);
      if (port != want) return nodes_[i]->address() + " names port " + std::to_string(port);
    }
    return {};
  });
  await_steady("slot " + s + " moved", deadline);
}

void ClusterBed::migrate(int slot, std::size_t to, bool finish) {
  const std::size_t from = owner(slot);
  start_migration(slot, to);
  move_keys(slot, from, to);
  if (finish) setslot_node_everywhere(slot, from, to);
}

void ClusterBed::finish_migration(int slot, std::size_t to) {
  const std::size_t from = owner(slot);  // still the source's until SETSLOT NODE
  if (from == to) throw std::invalid_argument("ClusterBed: finish_migration: slot " + std::to_string(slot) + " is node " + std::to_string(to) + "'s already");
  move_keys(slot, from, to);
  setslot_node_everywhere(slot, from, to);
}

void ClusterBed::reassign_without_keys(int slot, std::size_t to) {
  const std::string s = std::to_string(slot);
  // claim: the slot is `to`'s, at a config epoch of its own. BUMPEPOCH
  // takes its current epoch + 1, and that view may be behind the gossip:
  // the epoch can then equal another node's, whose collision handling may
  // bump the other (the old owner, say) higher, and its claim wins. So a
  // claim not taken within claim_retry is made again (by then `to` has
  // heard the greater epochs).
  const auto claim = [&] {
    checked(to, {"CLUSTER", "SETSLOT", s, "NODE", node_id(to)});
    checked(to, {"CLUSTER", "BUMPEPOCH"});  // BUMPED, or STILL when its epoch is the greatest already
  };
  constexpr std::chrono::milliseconds claim_retry{2000};
  claim();
  Deadline claimed = Clock::now();
  const std::string key = key_in_slot(slot);
  const std::string moved = "MOVED " + s + " " + node(to).address();
  const Deadline deadline = Clock::now() + kSteadyBound;
  await("every node sending slot " + s + " to " + node(to).address(), deadline, [&]() -> std::string {
    if (Clock::now() - claimed > claim_retry) {
      claim();
      claimed = Clock::now();
    }
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i]->running()) continue;
      const Reply r = node(i).command({"GET", key});
      if (i == to ? r.type == REDIS_REPLY_ERROR : (r.type != REDIS_REPLY_ERROR || r.str != moved))
        return nodes_[i]->address() + ": GET " + key + ": " + reply_text(r);
    }
    return {};
  });
  await_steady("slot " + s + " reassigned", deadline);
}

// ---- failover -----------------------------------------------------------------------

std::size_t ClusterBed::kill_primary(std::size_t shard) {
  const std::size_t old = primary(shard);
  const std::size_t next = partner(old);
  if (!node(next).running()) throw std::runtime_error("ClusterBed: kill_primary: shard " + std::to_string(shard) + " has no running replica");
  node(old).kill();
  const Deadline deadline = Clock::now() + kFailoverBound;
  await("kill_primary: " + node(next).address() + " role:master", deadline, [&]() -> std::string {
    const std::string role = info_field(checked(next, {"INFO", "replication"}), "role");
    return role == "master" ? std::string() : "role:" + role;
  });
  await_steady("kill_primary", deadline);
  return next;
}

void ClusterBed::failover(std::size_t replica) {
  const std::size_t old = partner(replica);
  checked(replica, {"CLUSTER", "FAILOVER"});
  const Deadline deadline = Clock::now() + kFailoverBound;
  const std::string port = std::to_string(node(replica).port());
  await("failover: " + node(replica).address() + " role:master", deadline, [&]() -> std::string {
    const std::string role = info_field(checked(replica, {"INFO", "replication"}), "role");
    if (role != "master") return node(replica).address() + " role:" + role;
    if (!node(old).running()) return {};
    const Reply info = checked(old, {"INFO", "replication"});
    if (info_field(info, "role") != "slave" || info_field(info, "master_port") != port)
      return node(old).address() + " role:" + info_field(info, "role") + " master_port:" + info_field(info, "master_port");
    return {};
  });
  await_steady("failover", deadline);
}

}  // namespace redlock::test
