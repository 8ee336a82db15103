// network.hpp — the simulated masters and the connections to them (issue
// 13). A MasterHost is a Master (tools/sim/master.hpp: the real scripts in
// Lua 5.1) in a process of its own, with its own wall clock; the Network
// carries every client's connections to the masters as detail::Wire
// objects (src/wire.hpp), the same interface production's hiredis wire
// implements.
//
// What a connection does:
//   - per connection FIFO both ways; every message takes the link's delay
//     (base + random jitter + the link's extra), never overtaking the one
//     before it on the same connection and direction;
//   - a batch is what a client process wrote during one loop turn: at the
//     turn's end the wire calls on_flush (commands written inside it join
//     the batch) and sends the batch in order;
//   - commands execute on the master when they arrive (one atomic
//     execute_view each), and the reply travels back the same way;
//   - blackholes hold a direction's messages until the link heals (TCP
//     retransmits them), partitions are blackholes on many links, a
//     connect over a blackholed link hangs until it heals;
//   - late bytes: when the client drops a connection, what it already
//     sent may still reach the master — with `late_chance`, up to
//     `late_max` later than it would have, so after anything sent on the
//     replacement connection. Replies to a dropped connection are lost;
//   - a crashed master resets its connections (the client sees on_lost);
//     what was in flight to it is gone; a restarted master is a new
//     incarnation that old connections never reach;
//   - pub/sub as Redis 7 does it over RESP2: SUBSCRIBE/UNSUBSCRIBE are the
//     connection's (one ["subscribe", channel, count] reply per channel, in
//     order); a subscribed connection may only (UN)SUBSCRIBE or PING; a
//     PUBLISH (also from a script) sends ["message", channel, payload] to
//     every connection of that master incarnation subscribed to the
//     channel, over the same links (delays, blackholes), and returns how
//     many there were. Subscriptions die with their connection: a master
//     restart or a reset ends them, and a late SUBSCRIBE of a dropped
//     connection subscribes nobody who can read.
//   - a failover (fail_over) resets the old master's connections like a
//     crash; the replica that answers at the address is a new incarnation;
//   - a flood (flood): a master sends one client unsolicited replies on its
//     connections that wait for nothing; one kept open after reading them
//     keeps the client's process busy (paused) while the flood lasts.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "master.hpp"
#include "wire.hpp"
#include "world.hpp"

namespace redlock::sim {

// NetConfig — the healthy network.
struct NetConfig {
  Nanos base_delay = 30'000;  // one way
  Nanos jitter = 120'000;     // + uniform [0, jitter], one way
  double late_chance = 0.5;   // a dropped connection's bytes arrive late,
  Nanos late_min = ms(1);     // by late_min + uniform [0, late_max − late_min]
  Nanos late_max = ms(600);
};

// MasterHost — one simulated master process.
class MasterHost {
 public:
  MasterHost(World& world, std::string name, Nanos wall_origin);
  MasterHost(const MasterHost&) = delete;
  MasterHost& operator=(const MasterHost&) = delete;

  const std::string& name() const { return process_.name(); }
  Master& master() { return master_; }
  Process& process() { return process_; }
  bool up() const { return up_; }
  bool refusing() const { return refusing_; }
  void set_refusing(bool on) { refusing_ = on; }
  std::uint64_t incarnation() const { return incarnation_; }
  std::uint64_t executed() const { return executed_; }
  std::uint64_t publishes() const { return publishes_; }
  std::uint64_t flooded() const { return flooded_; }  // unsolicited replies sent
  long long wall_ms() const { return process_.wall_now() / ns_per_ms; }

 private:
  friend class Network;
  Process process_;
  Master master_;
  bool up_ = true;
  bool refusing_ = false;
  std::uint64_t incarnation_ = 1;
  std::uint64_t executed_ = 0;
  std::uint64_t publishes_ = 0;
  std::uint64_t flooded_ = 0;
  std::vector<std::uint32_t> subscribed_;  // connections with a subscription (some may be dead)
};

// ExecutedCommand — one command a master ran, for traces.
struct ExecutedCommand {
  Nanos at;
  std::uint32_t master;
  std::uint32_t client;
  std::uint32_t conn;
  bool late;  // sent on a connection the client had already dropped
  std::span<const std::string_view> argv;
  const Reply& reply;
};

class SimWireFactory;

// Network — the masters and every client's links to them.
class Network {
 public:
  Network(World& world, std::size_t masters, NetConfig config = {});
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;
  ~Network();

  std::size_t size() const { return masters_.size(); }
  MasterHost& master(std::size_t i) { return *masters_[i]; }
  // address: master i as a client configures it (the factory maps it back).
  NodeAddress address(std::size_t i) const;
  NetConfig& config() { return config_; }

  // factory: a WireFactory for one client process (kept by the network;
  // valid while it lives). Clients are numbered in the order they ask.
  detail::WireFactory& factory(Process& client);
  std::size_t clients() const { return factories_.size(); }

  // Masters.
  void crash(std::size_t m);
  void restart(std::size_t m, bool keep_data);  // also after a crash
  // fail_over: master m's address now leads to a replica that lagged
  // (Master::fail_over): the old master's connections are reset, as a
  // crash does; the replica is a new incarnation.
  void fail_over(std::size_t m, long long synced_ms, long long uptime_ms);
  // resync: master m was demoted, resynced from its promoted replica and
  // promoted again (Master::resync); its connections are reset, as the
  // sentinels' CLIENT KILL does when they demote it.
  void resync(std::size_t m, long long synced_ms);
  // flood: master m turns hostile to client c (on) or stops: unsolicited
  // replies on its idle connections to c every flood_interval; a client
  // that keeps such a connection open is busy, its process running
  // nothing, until the flood ends (or the connection closes). heal_all
  // ends every flood; heal does not (the master's doing, not the link's).
  void flood(std::size_t c, std::size_t m, bool on);
  static constexpr Nanos flood_interval = ms(1);
  void pause(std::size_t m) { masters_[m]->process_.pause(); }
  void resume(std::size_t m) { masters_[m]->process_.resume(); }
  void flushall(std::size_t m) { masters_[m]->master_.flushall(); }
  void flush_scripts(std::size_t m) { masters_[m]->master_.flush_scripts(); }

  // Clusters (the cluster workload): the masters `shards` form one Redis
  // Cluster, its slots split evenly among them in that order. A master of
  // a cluster answers CLUSTER SLOTS and ASKING, says cluster_enabled:1 in
  // INFO, answers MOVED to a command whose first key's slot it does not
  // serve, and its PUBLISH reaches the subscribers of every master of the
  // cluster (the bus, delivered at once).
  std::size_t add_cluster(std::vector<std::size_t> shards);
  std::size_t clusters() const { return clusters_.size(); }
  // cluster_address: cluster k as a client configures it (its shards as
  // the seeds).
  NodeAddress cluster_address(std::size_t k) const;
  // members: what a client configures: every master on its own, or with
  // clusters, the lone masters and then each cluster as one member.
  std::vector<NodeAddress> members() const;
  const std::vector<std::size_t>& cluster_shards(std::size_t k) const { return clusters_[k].shards; }
  std::size_t slot_owner(std::size_t k, int slot) const { return clusters_[k].owner[static_cast<std::size_t>(slot)]; }
  // reassign: slot s of cluster k is served by master `to` (one of its
  // shards) from now on, without its keys: the old owner's keys of that
  // slot are gone (a forced CLUSTER SETSLOT … NODE, --cluster fix after a
  // shard died). Connections stay.
  void reassign(std::size_t k, int slot, std::size_t to);

  // Links (client c, master m).
  void set_extra_delay(std::size_t c, std::size_t m, Nanos extra);
  void blackhole(std::size_t c, std::size_t m, bool to_master, bool to_client);
  void heal(std::size_t c, std::size_t m);  // blackholes and extra delay gone
  // reset: the connection(s) of c to m are reset (the client sees on_lost;
  // what they had in flight to the master still arrives).
  void reset(std::size_t c, std::size_t m);
  // heal_all: every link healed, every master up, resumed, accepting.
  void heal_all();

  // Traces: trace_hash covers every executed command and its reply, in
  // order; on_command (when set) sees each one.
  std::uint64_t trace_hash() const { return hash_; }
  // hashing: off, trace_hash stays put (a run whose hash nobody reads
  // saves the hashing of every command and reply).
  bool hashing = true;
  std::function<void(const ExecutedCommand&)> on_command;
  std::uint64_t executed() const { return executed_; }
  std::uint64_t messages_delivered() const { return delivered_; }  // pub/sub messages that reached a client
  std::uint64_t unsolicited_delivered() const { return unsolicited_; }  // flood replies that reached a client
  std::size_t busy_connections() const { return busy_; }

  struct Conn;
  struct Msg;

 private:
  friend class SimWire;
  friend class SimWireFactory;
  struct Link {
    bool hole_c2s = false;
    bool hole_s2c = false;
    Nanos extra = 0;
    bool flooding = false;  // the master floods the client's connections (flood)
  };

  Link& link(std::size_t c, std::size_t m) { return links_[c * masters_.size() + m]; }
  Nanos delay(const Link& l);
  std::uint32_t new_msg();
  void free_msg(std::uint32_t i);
  Conn& open(std::size_t client, std::size_t m, Process& proc, detail::WireEvents& events);
  void start_connect(Conn& c);
  void flush(Conn& c);
  void send(Conn& c, std::uint32_t msg, bool to_master);
  void lose(Conn& c, std::uint32_t why, Nanos after);
  void drop(Conn& c);  // the client's Wire is gone
  void release_held(Conn& c);
  void execute(Conn& c, Msg& m, bool late);
  Reply pubsub(Conn& c, std::span<const std::string_view> argv, bool subscribe);
  long long publish(std::size_t m, const std::string& channel, const std::string& message);
  bool cluster_reply(Conn& c, std::span<const std::string_view> argv, Reply& out);
  void push(Conn& c, Reply reply);
  void flood_tick(std::size_t client, std::size_t m);
  void flood_reply(Conn& c, std::uint32_t msg);
  void end_busy(Conn& c);

  static void ev_arrive(void* net, std::uint64_t msg, std::uint64_t id);
  static void ev_reply(void* net, std::uint64_t msg, std::uint64_t id);
  static void ev_connected(void* net, std::uint64_t conn, std::uint64_t id);
  static void ev_lost(void* net, std::uint64_t conn_and_why, std::uint64_t id);

  World& world_;
  NetConfig config_;
  std::vector<std::unique_ptr<MasterHost>> masters_;
  struct Cluster {
    std::vector<std::size_t> shards;
    std::vector<std::size_t> owner;  // per slot: a master index
  };
  std::vector<Cluster> clusters_;
  std::vector<int> cluster_of_;  // per master: its cluster, -1 for a lone one
  std::vector<std::unique_ptr<SimWireFactory>> factories_;
  std::vector<Link> links_;  // clients × masters
  std::vector<std::unique_ptr<Conn>> conns_;
  // A deque: a message's reference (and the argv views into it) must stay
  // valid while executing it adds messages (a script's PUBLISH), which a
  // vector's growth would move (a use-after-free under MALLOC_PERTURB_).
  std::deque<Msg> msgs_;
  std::vector<std::uint32_t> free_msgs_;
  std::vector<std::string_view> argv_scratch_;
  std::vector<detail::WireReply> reply_scratch_;
  std::vector<std::uint32_t> pushes_;  // replies after the first of the command executing now
  std::uint64_t hash_ = 1469598103934665603ULL;
  std::uint64_t executed_ = 0;
  std::uint64_t delivered_ = 0;
  std::uint64_t unsolicited_ = 0;
  std::size_t busy_ = 0;
};

}  // namespace redlock::sim
