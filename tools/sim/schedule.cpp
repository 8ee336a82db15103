// schedule.cpp — one schedule: the world, the clients and their workload,
// the faults, the heal and the quiet tail, and the checker.
//
// Phases on true time:
//   [0, fault_phase)           workload + faults
//   fault_phase                heal: every link, master and client process back
//   + settle                   quarantines and late bytes run out; the workload
//                              keeps going, then stops (each client finishes
//                              its hold and releases)
//   tail                       liveness: every client takes every resource
//                              (wait bounded) and releases it
//   (fair) order               waiters that come one after another behind a
//                              long hold are granted in arrival order
//   + 100 ms                   leak check: no lock key left on any master
//   (fair) + the waits' end    no queue or turn key left on any master
// Then the history is judged: mutual exclusion on true time, fence order.
#include "schedule.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>

#include "campaign.hpp"
#include "client_close.hpp"
#include "election_check.hpp"
#include "engine.hpp"
#include "keys.hpp"
#include "leader_watch.hpp"
#include "lease_service.hpp"
#include "network.hpp"
#include "node_set.hpp"
#include "operation.hpp"
#include "scripts.hpp"
#include "sha1.hpp"
#include "token.hpp"
#include "survey.hpp"

namespace redlock::sim {

namespace {

using std::chrono::milliseconds;
using detail::Engine;
using detail::NodeSet;

constexpr milliseconds max_ttl{1000};
constexpr milliseconds short_max_ttl{300};  // mixed: the other clients' max_ttl
// A lease's on_lost comes by its deadline (the watchdog's timer is for 2 ms
// before it) unless its process was stopped; this much later is late.
constexpr Nanos lost_slack = ms(5);
constexpr double rate_budget = 0.003;  // each clock's rate within 1 ± this: inside drift_factor 0.01
constexpr Nanos tail_wait = ms(3000);  // liveness: a free lock is taken within this

Options sim_options(bool quarantine, bool wake_ups, std::size_t extend_batch_max, milliseconds client_max_ttl) {
  Options o;
  o.default_ttl = std::min(milliseconds{300}, client_max_ttl);
  o.max_ttl = client_max_ttl;
  o.drift_factor = 0.01;
  o.min_validity = milliseconds{1};
  o.node_timeout = milliseconds{25};
  o.connect_timeout = milliseconds{60};
  o.reconnect_min = milliseconds{5};
  o.reconnect_max = milliseconds{200};
  o.retry_delay = milliseconds{10};
  o.retry_jitter = milliseconds{15};
  o.stall_timeout = milliseconds{150};
  o.data_check_interval = milliseconds{250};  // the default
  o.wake_ups = wake_ups;  // off: waiters poll
  o.quarantine = quarantine;
  o.extend_batch_max = extend_batch_max;  // the window stays at its default, 10 ms
  return o;
}

// is_lock_key: a lock key of any resource (src/keys.hpp: "…}:lock").
// A semaphore's permits are lock keys too ("…}:permit<i>:lock").
bool is_lock_key(std::string_view key) { return key.ends_with(":lock"); }
// is_fair_key: a fair acquire's queue, turn key or expiry set (src/keys.hpp).
// A semaphore's are "…}:permits:queue" and so on.
bool is_fair_key(std::string_view key) {
  return key.ends_with(":queue") || key.ends_with(":turn") || key.ends_with(":expiry");
}

std::string fmt_time(Nanos t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%10.3f ms", static_cast<double>(t) / 1e6);
  return buf;
}

// Hold — one grant: a client held `resource` from `start` (true time) until
// its validity deadline `end_local` on its own monotonic clock, or until it
// started the release.
struct Hold {
  std::size_t client = 0;
  std::string resource;
  std::string token;
  Nanos start = 0;
  Nanos end_local = 0;
  Nanos released = never;
  std::uint64_t fence = 0;
  bool fenced = false;
  bool tail = false;
  bool lease = false;  // held by a lease: its on_lost must not come late (check_holds)
  std::optional<std::uint32_t> permit;  // semaphore: the permit held
  bool shared = false;                  // rwlock: a reader's hold
};

class Schedule;
struct SimClient;

// Actor — crowd workload: one of a client's waiters that run side by side,
// each its own loop of acquire (with a wait) → hold → release → think on a
// timer of its own, so that the client's waiters for one lock wait in line
// (docs/design.md, "A crowd in one client waits in line").
struct Actor {
  Actor(SimClient& c, SimRuntime& rt, std::size_t index) : c(c), index(index) {
    timer = rt.timer([this] {
      auto f = std::move(then);
      then = nullptr;
      if (f) f();
    });
  }
  // after: `f` on the client's loop after `local` ns of its clock.
  void after(Nanos local_ns, std::function<void()> f) {
    then = std::move(f);
    timer->start(milliseconds{local_ns / ns_per_ms});
  }

  SimClient& c;
  std::size_t index;
  std::unique_ptr<detail::Timer> timer;
  std::function<void()> then;
  std::optional<Lock> lock;
  std::size_t hold = 0;     // index into holds
  std::stop_source cancel;  // the running acquire's, when it may be cancelled
  // The running acquire's value when the actor gave it (else empty), and
  // its TTL: what an attempt with such a value set is never rolled back.
  std::string given;
  milliseconds ttl{0};
  // The running acquire's wait runs out at `deadline` (the client's
  // monotonic clock); `queued`: it came while the client's line for its
  // lock was not empty, and joined its end.
  Nanos deadline = 0;
  bool queued = false;
  bool idle = false;
  std::size_t tail_pos = 0;
  bool tail_gave_way = false;  // the quiet tail: gave up its short wait on tail_pos (gives_way)
  bool tail_finished = false;
  bool fair = false;  // fair workload: the running acquire is fair
  // fair workload, the order check: this actor's place in the arrival
  // order (0 first), or -1 for the holder the others queue behind; `dead`:
  // its client stops (as if it crashed) once it has queued.
  int order_pos = -1;
  bool order_dead = false;
};

// SimClient — one client process: its runtime, its masters, its engine,
// and its place in the workload.
struct SimClient {
  SimClient(World& world, Network& net, std::size_t index, Nanos steady0, Nanos wall0, bool quarantine,
            bool wake_ups, std::size_t extend_batch_max, milliseconds client_max_ttl)
      : proc(world, "c" + std::to_string(index), steady0, wall0), rt(proc), index(index) {
    config.options = sim_options(quarantine, wake_ups, extend_batch_max, client_max_ttl);
    config.nodes = net.members();
    nodes = std::make_unique<NodeSet>(rt, net.factory(proc), config);
    engine = std::make_unique<Engine>(rt, *nodes, config.options);
    lease_service = std::make_unique<detail::LeaseService>(*engine);
    reports = std::make_unique<detail::Reports>(rt, *nodes, config.options.prefix);
    closer = std::make_unique<detail::ClientClose>(rt, *engine, *nodes, *reports);
    closer->stop_leases = [this] { lease_service->close(); };
    closer->busy = [this] { return lease_service->live() != 0; };
    lease_service->on_idle = [this] { closer->maybe_finish(); };
    timer = rt.timer([this] {
      auto f = std::move(then);
      then = nullptr;
      if (f) f();
    });
  }
  // after: `f` on this client's loop after `local` ms of its clock.
  void after(Nanos local_ns, std::function<void()> f) {
    then = std::move(f);
    timer->start(milliseconds{local_ns / ns_per_ms});
  }

  Process proc;
  SimRuntime rt;
  std::size_t index;
  Config config;
  std::unique_ptr<NodeSet> nodes;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<detail::LeaseService> lease_service;  // the leases, as a client core keeps them
  std::unique_ptr<detail::Reports> reports;  // status and nodes, as a client core makes them
  std::unique_ptr<detail::ClientClose> closer;  // survey workload: the close, as a client core's
  std::unique_ptr<detail::Timer> timer;
  std::function<void()> then;

  milliseconds max_ttl() const { return config.options.max_ttl; }
  // Stops by faults (true time, from–to; `never` while it lasts): a lease
  // of a process stopped meanwhile may learn of its loss late.
  std::vector<std::pair<Nanos, Nanos>> stopped;

  bool idle = false;
  Nanos pause_next_round = 0;    // fault: pause right after the next acquire starts
  Nanos wall_step_next_round = 0;  // fault: step the wall clock inside the next acquire
  std::optional<Lock> lock;
  std::shared_ptr<detail::LeaseState> lease;  // lease workload: the watchdog's state
  // leases workload: the leases held at once (each its own lock, watchdog
  // and hold), the acquires or releases still out, the set's TTL.
  struct HeldLease {
    std::string resource;
    std::string token;
    std::shared_ptr<detail::LeaseState> state;
    std::size_t hold = 0;                // index into holds
    std::vector<std::string> more;       // a lease of several resources: the others
    std::vector<std::size_t> more_holds;  // and their holds
  };
  std::vector<HeldLease> leases;
  std::size_t leases_pending = 0;
  milliseconds leases_ttl{0};
  std::vector<std::string> more;      // multi: the other resources
  std::vector<std::size_t> held;      // indices into holds
  std::size_t tail_pos = 0;           // the quiet tail: the next resource to take
  bool tail_finished = false;
  std::vector<std::unique_ptr<Actor>> actors;  // crowd workload
  // survey workload: reports out, and what the masters ran for this client
  // meanwhile ((master, "PING") or (master, an inspect's reply)); the
  // operations called whose callbacks have not come; the close.
  std::size_t surveys = 0;
  std::vector<std::pair<std::size_t, std::string>> seen;
  std::size_t out = 0;
  bool closed = false, close_done = false;
  // election workload: the campaign on its way and how to cancel it; the
  // leadership held (its lease, name, index into the history's terms and
  // into holds, the revision of its last proclaim).
  std::shared_ptr<detail::Campaign> campaign;
  std::stop_source campaign_cancel;
  std::shared_ptr<detail::LeaseState> leader;
  std::string leader_name;
  std::size_t term = 0, term_hold = 0;
  std::uint64_t rev = 0;
};

class Schedule {
 public:
  Schedule(std::uint64_t seed, const ScheduleOptions& o);
  ScheduleResult run();

 private:
  // Workload.
  void next(SimClient& c);
  void acquired(SimClient& c, std::vector<std::string> resources, Result<Lock> r, bool tail);
  void hold(SimClient& c, Nanos left, bool may_extend);
  void release(SimClient& c, std::function<void()> then);
  void start_lease(SimClient& c);
  void start_leases(SimClient& c, const AcquireOptions& ao);
  void lease_acquired(SimClient& c, const std::vector<std::string>& resources, Result<Lock> r);
  // add_hold: a checked hold of `resource` by client `client` under `lock`
  // from now to its validity deadline; its index in holds_.
  std::size_t add_hold(std::size_t client, const std::string& resource, const Lock& lock, bool tail = false);
  void release_leases(SimClient& c);
  void think(SimClient& c);
  void tail_next(SimClient& c, bool give_up);
  void faults_in_round(SimClient& c);
  void crowd_next(Actor& a);
  void crowd_acquire(Actor& a, const std::string& resource, AcquireOptions ao, bool tail);
  void crowd_acquired(Actor& a, const std::string& resource, Result<Lock> r, bool tail);
  void crowd_release(Actor& a, std::function<void()> then);
  void crowd_think(Actor& a);
  void crowd_tail(Actor& a, bool give_up);
  static bool gives_way(const Actor& a);
  bool uses_actors() const { return workload_ == Workload::crowd || workload_ == Workload::fair; }
  void fair_next(Actor& a);
  void note_fair(const AcquireOptions& ao);
  bool start_order_check();
  void order_acquire(Actor& a, const AcquireOptions& ao, std::function<void(Result<Lock>)> done);
  void order_hold(Actor& a, Lock lock);
  void order_acquired(Actor& a, Result<Lock> r);
  bool start_lapse_check();
  void lapse_try(SimClient& hc, SimClient& wc, const std::string& resource);
  void lapse_back(SimClient& c, const std::string& resource, Result<Lock> r);
  bool start_writer_check();
  void relay_turn(SimClient& c);

  // Election workload.
  void election_next(SimClient& c);
  void campaign(SimClient& c, const std::string& name, CampaignOptions o, bool tail);
  void elected(SimClient& c, const std::string& name, Result<std::shared_ptr<detail::LeaseState>> r, bool tail,
               const std::shared_ptr<std::size_t>& slot);
  void end_term(SimClient& c, std::size_t term, bool deposed);
  void resign(SimClient& c, std::function<void()> then);
  void observe_all(SimClient& c);
  bool observers_settled() const;

  // Survey workload.
  template <class R>
  std::function<void(R)> counted(SimClient& c, std::function<void(R)> f);
  void survey_next(SimClient& c);
  void survey_status(SimClient& c, const std::string& resource, std::function<void(const ResourceStatus*)> then);
  void survey_nodes(SimClient& c);
  bool report_came(SimClient& c, const std::string& who, bool inside, const Error* e);
  void check_status(const SimClient& c, const std::string& resource, const ResourceStatus& st);
  void check_own_status(const SimClient& c, const Lock& lock, const ResourceStatus& st);
  void close_client(SimClient& c);
  void see(const ExecutedCommand& e);

  // Faults.
  void draw_swarm();
  void plan_faults();
  void fault(Nanos at, std::string what, std::function<void()> f);
  void data_lost(Nanos at) { first_data_loss_ = std::min(first_data_loss_, at); }
  void plan_evictions(std::size_t first_index);
  void plan_mixed(std::size_t first_index);
  void plan_resyncs(std::size_t first_index);
  void plan_cluster(std::size_t first_index);
  void stop_client(SimClient& c);
  void continue_client(SimClient& c);
  void evict_tick(const std::vector<std::size_t>& masters);

  // Checks.
  void given_expires(const Actor& a);
  void check_leaks();
  void check_fair_keys();
  void check_holds();
  void check_permits(const std::vector<Nanos>& ends);
  void violation(std::string kind, std::string what, Nanos at, std::vector<std::string> tokens = {});
  void count_batch(const ExecutedCommand& c, const std::string& sha);
  std::string trace_text() const;

  ScheduleOptions opt_;
  World world_;
  Rng plan_;
  Workload workload_;
  bool quarantine_ = true;
  std::unique_ptr<Network> net_;
  std::vector<std::unique_ptr<SimClient>> clients_;
  std::vector<std::string> resources_;
  std::vector<Hold> holds_;
  bool stopping_ = false;
  std::size_t tail_done_ = 0;
  Nanos first_data_loss_ = never;
  // crowd: values the actors gave, and the true time by which every key
  // that their acquire set is gone (given_expires).
  std::map<std::string, Nanos> given_until_;
  // fair: the true time by which every fair acquire's wait and TTL are over
  // (so its queue and turn keys are gone); the order check's progress.
  Nanos fair_until_ = 0;
  std::vector<int> order_granted_;  // order_pos of each live waiter's grant, in grant order
  std::size_t order_waiters_ = 0, order_done_ = 0;  // live waiters, and those back
  std::vector<SimClient*> order_crashed_;           // the dead waiters' clients, stopped
  // fair: the lapse check's killed waiter (stopped at lapse_killed_) and
  // the acquires of the check still out.
  Nanos lapse_killed_ = 0;
  std::size_t lapse_out_ = 0;
  // rwlock's writer check: its loops still running (readers, the writer),
  // and whether the writer has its answer (the readers then stop).
  std::size_t writer_out_ = 0;
  bool writer_done_ = false;
  std::map<std::string, std::uint64_t> store_;  // fenced: the highest fence each resource's (permit's) store accepted
  std::uint64_t stale_writes_ = 0;
  std::vector<std::pair<Nanos, std::string>> faults_;
  std::size_t planning_ = 0;  // the index of the fault plan_faults() draws now
  Nanos evict_until_ = 0;     // plan_evictions: the running eviction's end
  Rng evict_rng_{0};
  // The fault kinds plan_faults draws from (every one unless swarm), and
  // the switches of the planned streams of their own (evictions, and the
  // mixed workload's failovers, floods and losses while holders stop).
  std::vector<std::uint8_t> fault_kinds_;
  bool evictions_ = true, failovers_ = true, floods_ = true, stopped_losses_ = true, resyncs_ = true;
  bool suppress_ = false;  // fault() posts nothing (a stream swarm switched off)
  // swarm: the masters (0: as the plan draws) and the late bytes' chance
  // (< 0: as the plan draws).
  std::size_t swarm_masters_ = 0;
  double swarm_late_ = -1;
  // swarm, the workloads of one loop per client (not crowd, fair or
  // mixed): waits of up to 2 s, not 300 ms (an acquire retries across a
  // partition's end), and every client's max_ttl 300 ms (TTLs within it:
  // a master that lost its data sits out 0.3 s, not 1 s).
  bool long_waits_ = false, short_ttls_ = false;
  std::uint32_t permits_ = 0;  // semaphore: every semaphore's P
  std::vector<std::string> commands_;  // record: every executed command, formatted
  Rng survey_rng_{0};  // survey workload: when reports are asked for, and the close
  ElectionHistory election_;  // election workload: the terms and the observers' readings
  std::string inspect_sha_;
  ScheduleResult result_;
};

Schedule::Schedule(std::uint64_t seed, const ScheduleOptions& o) : opt_(o), world_(seed), plan_(world_.make_rng(1)) {
  std::sort(opt_.only_faults.begin(), opt_.only_faults.end());
  workload_ = o.workload;
  draw_swarm();
  std::size_t masters = plan_.chance(0.75) ? 5 : 3;
  if (swarm_masters_ != 0) masters = swarm_masters_;
  const std::size_t clients = o.clients > 0 ? static_cast<std::size_t>(o.clients) : 3 + plan_.below(4);
  // Beyond the assumptions: data loss with detection off, in half of them.
  quarantine_ = !(o.beyond && plan_.chance(0.5));
  // Waiters woken by pub/sub in most schedules; polling alone in the rest.
  const bool wake_ups = plan_.chance(0.8);
  // leases: batches of up to 512 keys (the default), or of 2 in a quarter
  // of the schedules, so that a set of three is split into a batch and a
  // lone plain extend. (Drawn only here: the other workloads' plans stay.)
  const std::size_t extend_batch_max = workload_ == Workload::leases && plan_.chance(0.25) ? 2 : 512;
  NetConfig net;
  net.late_chance = plan_.chance(0.5) ? 0.7 : 0.1;
  if (swarm_late_ >= 0) net.late_chance = swarm_late_;
  // cluster: two lone masters and three clusters of two shards each
  // (members 3–5), eight masters.
  if (workload_ == Workload::cluster) masters = 8;
  net_ = std::make_unique<Network>(world_, masters, net);
  if (workload_ == Workload::cluster) {
    for (std::size_t k = 0; k < 3; ++k) net_->add_cluster({2 + 2 * k, 3 + 2 * k});
  }
  net_->hashing = o.hash || o.record;
  for (std::size_t m = 0; m < masters; ++m) {
    net_->master(m).process().wall().set_rate(0, 1.0 + (plan_.unit() * 2 - 1) * rate_budget);
  }
  // mixed: clients with different max_ttl (drawn from a stream of its own:
  // the other workloads' plans stay); the first two differ.
  std::vector<milliseconds> max_ttls(clients, short_ttls_ ? short_max_ttl : max_ttl);
  if (workload_ == Workload::mixed) {
    Rng r = world_.make_rng(6);
    for (std::size_t i = 0; i < clients; ++i) {
      max_ttls[i] = (i < 2 ? i == 1 : r.chance(0.5)) ? short_max_ttl : max_ttl;
    }
  }
  for (std::size_t i = 0; i < clients; ++i) {
    const Nanos steady0 = ms(1e6) + plan_.between(0, ms(1e6));
    const Nanos wall0 = 1'700'000'000'000 * ns_per_ms + plan_.between(0, ms(2000));
    clients_.push_back(
        std::make_unique<SimClient>(world_, *net_, i, steady0, wall0, quarantine_, wake_ups, extend_batch_max,
                                    max_ttls[i]));
    clients_.back()->proc.steady().set_rate(0, 1.0 + (plan_.unit() * 2 - 1) * rate_budget);
  }
  const bool sets = workload_ == Workload::multi || workload_ == Workload::leases;
  // crowd, fair: few resources, so that a client's waiters meet on one.
  // (Drawn only here, like the actors below: the other workloads' plans stay.)
  const std::size_t n_resources = sets ? 3 + plan_.below(2) : uses_actors() ? 1 + plan_.below(2) : 1 + plan_.below(3);
  // (Drawn only here: the other workloads' plans stay.)
  if (workload_ == Workload::semaphore) permits_ = static_cast<std::uint32_t>(1 + plan_.below(3));
  for (std::size_t r = 0; r < n_resources; ++r) resources_.push_back("r" + std::to_string(r));
  if (uses_actors()) {
    for (auto& c : clients_) {
      const std::size_t n = 2 + plan_.below(3);
      for (std::size_t i = 0; i < n; ++i) c->actors.push_back(std::make_unique<Actor>(*c, c->rt, i));
    }
  }
  result_.seed = seed;
  result_.workload = workload_;
  result_.masters = masters;
  result_.clients = clients;
  result_.wake_ups = wake_ups;
  if (opt_.record) {
    net_->on_command = [this](const ExecutedCommand& c) {
      std::string line = fmt_time(c.at) + "  m" + std::to_string(c.master) + " <- c" + std::to_string(c.client) +
                         "#" + std::to_string(c.conn) + (c.late ? " LATE" : "") + " ";
      for (std::size_t i = 0; i < c.argv.size(); ++i) {
        const std::string_view a = c.argv[i];
        // A script's SHA or body says nothing the command name does not.
        if (i == 1 && c.argv[0].size() == 7 && (c.argv[0] == "EVALSHA" || c.argv[0] == "evalsha")) {
          line += std::string(a.substr(0, 8)) + "… ";
        } else if (a.size() > 60) {
          line += "<" + std::to_string(a.size()) + " bytes> ";
        } else {
          line += std::string(a) + " ";
        }
      }
      std::string reply = to_string(c.reply);
      if (reply.size() > 80) reply = reply.substr(0, 80) + "…";
      commands_.push_back(line + "-> " + reply);
    };
  }
  if (workload_ == Workload::survey) {  // an observer: the schedule plays the same
    survey_rng_ = world_.make_rng(8);
    inspect_sha_ = detail::sha1_hex(detail::inspect_script);
    net_->on_command = [this, record = std::move(net_->on_command)](const ExecutedCommand& c) {
      see(c);
      if (record) record(c);
    };
  }
  if (workload_ == Workload::leases) {  // an observer: the schedule plays the same
    net_->on_command = [this, sha = detail::sha1_hex(detail::extend_batch_script),
                        record = std::move(net_->on_command)](const ExecutedCommand& c) {
      count_batch(c, sha);
      if (record) record(c);
    };
  }
}

// count_batch: an extend_batch call a master ran (leases workload).
void Schedule::count_batch(const ExecutedCommand& c, const std::string& sha) {
  if (c.argv.size() < 3) return;
  const std::string_view cmd = c.argv[0];
  const bool by_sha = cmd == "EVALSHA" || cmd == "evalsha";
  if (!(by_sha ? c.argv[1] == sha : (cmd == "EVAL" || cmd == "eval") && c.argv[1] == detail::extend_batch_script)) {
    return;
  }
  ++result_.extend_batches;
  result_.extend_batch_keys += std::strtoull(std::string(c.argv[2]).c_str(), nullptr, 10);
  if (c.reply.type == Reply::Type::string && c.reply.str.find('0') != std::string::npos &&
      c.reply.str.find('1') != std::string::npos) {
    ++result_.extend_batches_mixed;
  }
}

void Schedule::violation(std::string kind, std::string what, Nanos at, std::vector<std::string> tokens) {
  result_.violations.push_back({std::move(kind), std::move(what), at, std::move(tokens)});
}

void Schedule::fault(Nanos at, std::string what, std::function<void()> f) {
  if (suppress_) return;
  if (opt_.restrict_faults && !std::binary_search(opt_.only_faults.begin(), opt_.only_faults.end(), planning_)) {
    return;
  }
  what = "#" + std::to_string(planning_) + " " + what;
  world_.post(at, nullptr, [this, what = std::move(what), f = std::move(f)] {
    faults_.emplace_back(world_.now(), what);
    f();
  });
}

// Fault kinds, by their case in plan_faults (the names print with a
// swarm schedule's violation); the last two are beyond the assumptions.
constexpr const char* fault_kind_names[] = {"crash",   "flushall",   "script_flush", "pause_master", "pause_client",
                                            "pause_in_round", "delay", "blackhole", "partition", "reset",
                                            "refuse", "drift", "master_step", "client_step"};
constexpr std::size_t fault_kinds = std::size(fault_kind_names);

// draw_swarm: what this schedule may do. Without swarm, every fault kind
// (so that a named workload's seeds play as they always did). With swarm
// (swarm testing, Groce et al. 2012), from a stream of its own: with
// workload `all` the workload, and each fault kind and each planned stream
// on or off with even odds (at least one kind on), so that a schedule
// hammers a few kinds of fault, and combinations that a mix of all of them
// rarely lines up come up often.
void Schedule::draw_swarm() {
  fault_kinds_.clear();
  const bool swarm = opt_.swarm || opt_.workload == Workload::all;
  if (!swarm) {
    for (std::size_t k = 0; k < fault_kinds + (opt_.beyond ? 2 : 0); ++k) fault_kinds_.push_back(static_cast<std::uint8_t>(k));
    return;
  }
  Rng s = world_.make_rng(7);
  if (workload_ == Workload::all) {
    // leases three times: batch_first_flag shows only in it, and seldom
    // (about one schedule in 80 with swarm, seeds 1–250).
    static constexpr Workload picks[] = {Workload::plain,  Workload::fenced, Workload::multi, Workload::lease,
                                         Workload::leases, Workload::leases, Workload::leases, Workload::crowd,
                                         Workload::fair,   Workload::mixed};
    workload_ = picks[s.below(std::size(picks))];
  }
  // The shape: three masters or five (a majority of three is lost with
  // one master less), and how often a dropped connection's bytes come late.
  swarm_masters_ = s.chance(0.5) ? 3 : 5;
  static constexpr double late[] = {0.1, 0.7, 1.0};
  swarm_late_ = late[s.below(std::size(late))];
  const bool loop_per_client = workload_ != Workload::crowd && workload_ != Workload::fair && workload_ != Workload::mixed;
  long_waits_ = s.chance(0.5) && loop_per_client;
  short_ttls_ = s.chance(0.5) && loop_per_client;
  std::string on = std::to_string(swarm_masters_) + " masters, late bytes " +
                   std::to_string(static_cast<int>(swarm_late_ * 100)) + " %" + (long_waits_ ? ", waits up to 2 s" : "") +
                   (short_ttls_ ? ", max_ttl 300 ms" : "") + "; faults ";
  const std::size_t head = on.size();
  for (std::size_t k = 0; k < fault_kinds; ++k) {
    if (s.chance(0.5)) fault_kinds_.push_back(static_cast<std::uint8_t>(k));
  }
  if (fault_kinds_.empty()) fault_kinds_.push_back(static_cast<std::uint8_t>(s.below(fault_kinds)));
  for (const std::uint8_t k : fault_kinds_) on += std::string(on.size() == head ? "" : ",") + fault_kind_names[k];
  evictions_ = s.chance(0.5);
  if (evictions_) on += ",eviction";
  if (workload_ == Workload::mixed) {
    failovers_ = s.chance(0.5);
    floods_ = s.chance(0.5);
    stopped_losses_ = s.chance(0.5);
    if (failovers_) on += ",failover";
    if (floods_) on += ",flood";
    if (stopped_losses_) on += ",loss_while_stopped";
    resyncs_ = s.chance(0.5);
    if (resyncs_) on += ",resync";
  }
  if (opt_.beyond) {
    fault_kinds_.push_back(static_cast<std::uint8_t>(fault_kinds));
    fault_kinds_.push_back(static_cast<std::uint8_t>(fault_kinds + 1));
    on += ",beyond";
  }
  result_.swarm = std::string(workload_name(workload_)) + ", " + on;
}

void Schedule::plan_faults() {
  Rng& r = plan_;
  const Nanos end = opt_.fault_phase;
  const std::size_t M = net_->size();
  const std::size_t C = clients_.size();
  const std::size_t count = static_cast<std::size_t>(end / ms(static_cast<double>(r.between(60, 250))));
  auto name = [](const char* what, std::size_t i) { return std::string(what) + std::to_string(i); };
  result_.faults_planned = count;
  for (std::size_t k = 0; k < count; ++k) {
    planning_ = k;
    const Nanos at = r.between(ms(20), end - ms(20));
    const Nanos d = ms(static_cast<double>(r.between(5, r.chance(0.3) ? 1200 : 400)));
    const std::size_t m = r.below(M);
    const std::size_t c = r.below(C);
    const std::string for_d = " for " + std::to_string(d / ns_per_ms) + " ms";
    switch (fault_kinds_[r.below(fault_kinds_.size())]) {
      case 0: {
        const bool keep = r.chance(0.5);
        fault(at, name("crash m", m) + for_d + (keep ? ", restart with data" : ", restart WITHOUT data"), [this, m] {
          net_->crash(m);
        });
        fault(at + d, name("restart m", m) + (keep ? " (data kept)" : " (data lost)"), [this, m, keep] {
          net_->restart(m, keep);
          if (!keep) data_lost(world_.now());
        });
        break;
      }
      case 1:
        fault(at, name("FLUSHALL m", m), [this, m] {
          net_->flushall(m);
          data_lost(world_.now());
        });
        break;
      case 2: fault(at, name("SCRIPT FLUSH m", m), [this, m] { net_->flush_scripts(m); }); break;
      case 3:
        fault(at, name("pause m", m) + for_d, [this, m] { net_->pause(m); });
        fault(at + d, name("resume m", m), [this, m] { net_->resume(m); });
        break;
      case 4:
        fault(at, name("pause c", c) + for_d, [this, c] { stop_client(*clients_[c]); });
        fault(at + d, name("resume c", c), [this, c] { continue_client(*clients_[c]); });
        break;
      case 5:
        fault(at, name("pause c", c) + " inside its next acquire round" + for_d,
              [this, c, d] { clients_[c]->pause_next_round = d; });
        break;
      case 6: {
        const Nanos extra = ms(static_cast<double>(r.between(1, 40)));
        fault(at, "delay c" + std::to_string(c) + "<->m" + std::to_string(m) + " +" +
                      std::to_string(extra / ns_per_ms) + " ms" + for_d,
              [this, c, m, extra] { net_->set_extra_delay(c, m, extra); });
        fault(at + d, "undelay c" + std::to_string(c) + "<->m" + std::to_string(m),
              [this, c, m] { net_->set_extra_delay(c, m, 0); });
        break;
      }
      case 7: {
        const auto dirs = r.below(3);  // to the master, to the client, both
        const bool to_m = dirs != 1, to_c = dirs != 0;
        fault(at, "blackhole c" + std::to_string(c) + (to_m ? "->" : "") + (to_c ? "<-" : "") + "m" +
                      std::to_string(m) + for_d,
              [this, c, m, to_m, to_c] { net_->blackhole(c, m, to_m, to_c); });
        fault(at + d, "heal c" + std::to_string(c) + "<->m" + std::to_string(m), [this, c, m] { net_->heal(c, m); });
        break;
      }
      case 8: {
        std::vector<std::size_t> cs, ms_;
        for (std::size_t i = 0; i < C; ++i) {
          if (r.chance(0.5)) cs.push_back(i);
        }
        for (std::size_t i = 0; i < M; ++i) {
          if (r.chance(0.5)) ms_.push_back(i);
        }
        std::string what = "partition {";
        for (const auto i : cs) what += " c" + std::to_string(i);
        what += " } from {";
        for (const auto i : ms_) what += " m" + std::to_string(i);
        what += " }" + for_d;
        fault(at, what, [this, cs, ms_] {
          for (const auto i : cs) {
            for (const auto j : ms_) net_->blackhole(i, j, true, true);
          }
        });
        fault(at + d, "end of partition", [this, cs, ms_] {
          for (const auto i : cs) {
            for (const auto j : ms_) net_->heal(i, j);
          }
        });
        break;
      }
      case 9:
        fault(at, "reset c" + std::to_string(c) + "<->m" + std::to_string(m), [this, c, m] { net_->reset(c, m); });
        break;
      case 10:
        fault(at, name("refuse connects on m", m) + for_d, [this, m] { net_->master(m).set_refusing(true); });
        fault(at + d, name("accept connects on m", m), [this, m] { net_->master(m).set_refusing(false); });
        break;
      case 11: {
        const double rate = 1.0 + (r.unit() * 2 - 1) * rate_budget;
        if (r.chance(0.5)) {
          fault(at, name("drift m", m) + " rate " + std::to_string(rate),
                [this, m, rate] { net_->master(m).process().wall().set_rate(world_.now(), rate); });
        } else {
          fault(at, name("drift c", c) + " rate " + std::to_string(rate),
                [this, c, rate] { clients_[c]->proc.steady().set_rate(world_.now(), rate); });
        }
        break;
      }
      case 12: {
        // Within the budget: a master's wall clock may step back (keys live
        // longer) or a little forward.
        const Nanos step = r.chance(0.5) ? -ms(static_cast<double>(r.between(1, 50))) : r.between(0, ms(0.5));
        fault(at, name("step m", m) + " wall clock " + std::to_string(step / 1000) + " us",
              [this, m, step] { net_->master(m).process().wall().step(world_.now(), step); });
        break;
      }
      case 13: {
        // A client's wall clock is not the algorithm's: any step is allowed.
        const Nanos step = ms(static_cast<double>(r.between(-800, 800)));
        if (r.chance(0.5)) {
          fault(at, name("step c", c) + " wall clock " + std::to_string(step / ns_per_ms) + " ms",
                [this, c, step] { clients_[c]->proc.wall().step(world_.now(), step); });
        } else {
          fault(at, name("step c", c) + " wall clock " + std::to_string(step / ns_per_ms) + " ms inside its next round",
                [this, c, step] { clients_[c]->wall_step_next_round = step; });
        }
        break;
      }
      case 14: {
        // Beyond the budget: a majority of masters' wall clocks jump forward.
        const Nanos step = ms(static_cast<double>(r.between(100, 1000)));
        fault(at, "step a majority of masters' wall clocks +" + std::to_string(step / ns_per_ms) + " ms (BEYOND)",
              [this, step] {
                for (std::size_t i = 0; i < net_->size() / 2 + 1; ++i) {
                  net_->master(i).process().wall().step(world_.now(), step);
                }
              });
        break;
      }
      case 15:
        fault(at, name("crash m", m) + for_d + ", restart WITHOUT data (BEYOND when quarantine is off)",
              [this, m] { net_->crash(m); });
        fault(at + d, name("restart m", m) + " (data lost)", [this, m] {
          net_->restart(m, false);
          data_lost(world_.now());
        });
        break;
      default: break;
    }
  }
  plan_evictions(count);
  if (workload_ == Workload::mixed) plan_mixed(count + 1);
  if (workload_ == Workload::cluster) plan_cluster(count + 1);
}

// plan_cluster: the cluster workload's faults, from a stream of their own:
//   - a resource's slot reassigned without its keys on a majority of the
//     cluster members at once (3–5 times): the shard that took it has
//     no lock key and no marker of that slot; the old one drops them;
//   - a shard primary fails over to a replica 50–800 ms behind (new run
//     id, the slot markers of before with the old server key), 1–2 times.
void Schedule::plan_cluster(std::size_t first_index) {
  Rng r = world_.make_rng(10);
  const Nanos last = opt_.fault_phase - ms(600);
  std::size_t index = first_index;
  const std::size_t reassigns = 3 + r.below(3);
  for (std::size_t f = 0; f < reassigns; ++f) {
    const Nanos at = r.between(ms(20), last);
    const std::string& resource = resources_[r.below(resources_.size())];
    const int slot = detail::hash_slot(resource);
    const std::size_t skip = r.below(4);  // 3: none skipped (all three clusters)
    for (std::size_t k = 0; k < net_->clusters(); ++k) {
      if (k == skip) continue;
      planning_ = index++;
      ++result_.faults_planned;
      fault(at, "slot " + std::to_string(slot) + " (" + resource + ") of cluster " + std::to_string(k) +
                    " reassigned without its keys",
            [this, k, slot] {
              const std::vector<std::size_t>& shards = net_->cluster_shards(k);
              const std::size_t now = net_->slot_owner(k, slot);
              net_->reassign(k, slot, now == shards[0] ? shards[1] : shards[0]);
              data_lost(world_.now());
            });
    }
  }
  const std::size_t failovers = 1 + r.below(2);
  for (std::size_t f = 0; f < failovers; ++f) {
    const Nanos at = r.between(ms(20), last - ms(500));
    const std::vector<std::size_t>& shards = net_->cluster_shards(r.below(net_->clusters()));
    const std::size_t m = shards[r.below(shards.size())];
    const Nanos d = ms(static_cast<double>(r.between(20, 400)));
    const long long lag = static_cast<long long>(r.between(50, 800));
    planning_ = index++;
    ++result_.faults_planned;
    auto synced = std::make_shared<long long>(0);
    fault(at, "shard m" + std::to_string(m) + " goes; a replica " + std::to_string(lag) + " ms behind takes over in " +
                  std::to_string(d / ns_per_ms) + " ms",
          [this, m, lag, synced] {
            *synced = net_->master(m).wall_ms() - lag;
            net_->crash(m);
          });
    fault(at + d, "shard m" + std::to_string(m) + " failed over (new run id)", [this, m, synced] {
      net_->fail_over(m, *synced, 3600 * 1000);
      data_lost(world_.now());
    });
  }
}

// stop_client / continue_client: a fault stops a client process / lets it
// go on (recorded for check_holds).
void Schedule::stop_client(SimClient& c) {
  if (c.stopped.empty() || c.stopped.back().second != never) c.stopped.emplace_back(world_.now(), never);
  c.proc.pause();
}

void Schedule::continue_client(SimClient& c) {
  if (!c.stopped.empty() && c.stopped.back().second == never) c.stopped.back().second = world_.now();
  c.proc.resume();
}

// plan_mixed: the mixed workload's faults, from a stream of their own:
//   - failover: a majority of masters fail over, one after another, each
//     to a replica that lagged (Network::fail_over: a new run id, a long
//     uptime, the old data-loss marker, the writes of its last 50–800 ms
//     missing), promoted 20–400 ms after the master went; 2–3 times;
//   - flood: a master turns hostile to one client for 100–1200 ms and
//     sends unsolicited replies on its idle connections to it
//     (Network::flood), 1–3 times;
//   - a majority loses its data (FLUSHALL, or a restart without it) while
//     every long-max_ttl client that holds a lock is stopped for 1.2 s: a
//     client with the smaller max_ttl must sit out the larger quarantine
//     the markers declare, not its own.
void Schedule::plan_mixed(std::size_t first_index) {
  Rng r = world_.make_rng(3);
  const std::size_t M = net_->size();
  const Nanos last = opt_.fault_phase - ms(600);
  std::size_t index = first_index;
  auto majority_from = [M](std::size_t first) {
    std::vector<std::size_t> out;
    for (std::size_t k = 0; k < M / 2 + 1; ++k) out.push_back((first + k) % M);
    return out;
  };
  const std::size_t failovers = 2 + r.below(2);
  suppress_ = !failovers_;  // swarm: drawn (the stream stays the same), not posted
  for (std::size_t f = 0; f < failovers; ++f) {
    Nanos at = r.between(ms(20), last - ms(700));  // promoted before the heal
    for (const std::size_t m : majority_from(r.below(M))) {
      planning_ = index++;
      ++result_.faults_planned;
      const Nanos d = ms(static_cast<double>(r.between(20, 400)));
      const long long lag = static_cast<long long>(r.between(50, 800));
      const long long uptime = static_cast<long long>(r.between(1, 100)) * 3600 * 1000;
      auto synced = std::make_shared<long long>(0);
      fault(at, "m" + std::to_string(m) + " goes; a replica " + std::to_string(lag) + " ms behind takes over in " +
                    std::to_string(d / ns_per_ms) + " ms",
            [this, m, lag, synced] {
              *synced = net_->master(m).wall_ms() - lag;
              net_->crash(m);
            });
      fault(at + d, "m" + std::to_string(m) + " failed over (new run id, up " + std::to_string(uptime / 3600000) +
                        " h, writes of its last " + std::to_string(lag) + " ms lost)",
            [this, m, uptime, synced] {
              net_->fail_over(m, *synced, uptime);
              data_lost(world_.now());
            });
      at += ms(static_cast<double>(r.between(0, 30)));
    }
  }
  const std::size_t floods = 1 + r.below(3);
  suppress_ = !floods_;
  for (std::size_t f = 0; f < floods; ++f) {
    planning_ = index++;
    ++result_.faults_planned;
    const std::size_t m = r.below(M);
    const std::size_t c = r.below(clients_.size());
    const Nanos at = r.between(ms(20), last);
    const Nanos d = ms(static_cast<double>(r.between(100, 1200)));
    const std::string link = "m" + std::to_string(m) + "->c" + std::to_string(c);
    fault(at, link + ": unsolicited replies on the idle connections for " + std::to_string(d / ns_per_ms) + " ms",
          [this, c, m] { net_->flood(c, m, true); });
    fault(at + d, link + ": flood over", [this, c, m] { net_->flood(c, m, false); });
  }
  const std::size_t losses = 1 + r.below(3);
  suppress_ = !stopped_losses_;
  for (std::size_t f = 0; f < losses; ++f) {
    planning_ = index++;
    ++result_.faults_planned;
    const Nanos at = r.between(ms(20), last);
    const std::vector<std::size_t> ms_ = majority_from(r.below(M));
    const bool flush = r.chance(0.5);
    std::string names;
    for (const std::size_t m : ms_) names += " m" + std::to_string(m);
    fault(at,
          "stop the long-max_ttl holders for 1200 ms, then " + std::string(flush ? "FLUSHALL" : "restart WITHOUT data") +
              names,
          [this, ms_, flush] {
            for (auto& cp : clients_) {
              SimClient& c = *cp;
              if (c.max_ttl() < max_ttl || !c.lock || c.proc.paused()) continue;
              stop_client(c);
              world_.post(world_.now() + ms(1200), nullptr, [this, &c] { continue_client(c); });
            }
            for (const std::size_t m : ms_) {
              if (flush) {
                net_->flushall(m);
              } else {
                net_->restart(m, false);
              }
            }
            data_lost(world_.now());
          });
  }
  suppress_ = false;
  plan_resyncs(index);
}

// plan_resyncs: the mixed workload's resyncs, from a stream of their own
// (the faults above stay as they were): a majority of masters, one after
// another, is demoted, resynced from its promoted replica — the writes of
// its last 50–800 ms missing — and promoted again (Network::resync): the
// same process (run id, uptime, the old data-loss marker and its server
// key), another replication history, its connections reset as the
// sentinels reset them. Only master_replid shows it (docs/design.md §5,
// Failover); 1–2 times.
void Schedule::plan_resyncs(std::size_t first_index) {
  Rng r = world_.make_rng(9);
  const std::size_t M = net_->size();
  const Nanos last = opt_.fault_phase - ms(600);
  std::size_t index = first_index;
  const std::size_t resyncs = 1 + r.below(2);
  suppress_ = !resyncs_;
  for (std::size_t f = 0; f < resyncs; ++f) {
    Nanos at = r.between(ms(20), last);
    const std::size_t first = r.below(M);
    for (std::size_t k = 0; k < M / 2 + 1; ++k) {
      const std::size_t m = (first + k) % M;
      planning_ = index++;
      ++result_.faults_planned;
      const long long lag = static_cast<long long>(r.between(50, 800));
      fault(at, "m" + std::to_string(m) + " demoted, resynced from a replica " + std::to_string(lag) +
                    " ms behind and promoted again (same run id, new master_replid)",
            [this, m, lag] {
              net_->resync(m, net_->master(m).wall_ms() - lag);
              data_lost(world_.now());
            });
      at += ms(static_cast<double>(r.between(0, 30)));
    }
  }
  suppress_ = false;
}

// plan_evictions: masters that evict lock keys, from a stream of its own
// (the main plan above stays the same for every seed) — a majority of them
// at once, so that an eviction the client failed to see would show as two
// holders. Within the assumptions they come back from a restart with an
// evicting policy (maxmemory set, allkeys-lru): the clients read it in
// their handshake and those masters do not vote (docs/design.md §4, "No
// eviction of lock keys") while they evict; then the policy is fixed and
// they restart again, and rejoin through the restart quarantine. Under
// --beyond the policy may also change at run time (CONFIG SET, no
// restart), which no client can see: locks are handed over.
void Schedule::plan_evictions(std::size_t first_index) {
  Rng r = world_.make_rng(2);
  if (!r.chance(0.35) || !evictions_) return;
  planning_ = first_index;
  ++result_.faults_planned;
  const std::size_t first = r.below(net_->size());
  std::vector<std::size_t> ms_;
  std::string names;
  for (std::size_t k = 0; k < net_->size() / 2 + 1; ++k) {
    ms_.push_back((first + k) % net_->size());
    names += " m" + std::to_string(ms_.back());
  }
  const Nanos at = r.between(ms(20), opt_.fault_phase - ms(600));
  const Nanos d = ms(static_cast<double>(r.between(100, 500)));
  const bool live = opt_.beyond && r.chance(0.5);
  const std::uint64_t stream = r.next();
  auto evicting = [this, ms_, live](bool on) {
    for (const std::size_t m : ms_) {
      Master& master = net_->master(m).master();
      master.set_maxmemory(on ? 1 << 20 : 0);
      master.set_maxmemory_policy(on ? "allkeys-lru" : "noeviction");
      if (!live) net_->restart(m, true);
    }
  };
  fault(at,
        (live ? "start evicting lock keys at run time, CONFIG SET (BEYOND), on" : "restart with maxmemory-policy "
                                                                                   "allkeys-lru and evict lock keys:") +
            names + " for " + std::to_string(d / ns_per_ms) + " ms",
        [this, ms_, d, stream, evicting] {
          evicting(true);
          evict_until_ = world_.now() + d;
          evict_rng_ = Rng(stream);
          evict_tick(ms_);
        });
  fault(at + d, "back to noeviction" + std::string(live ? ":" : ", restarted with their data:") + names,
        [evicting] { evicting(false); });
}

// evict_tick: every 5–30 ms while the eviction lasts, one live lock key
// of each evicting master (if it has any) is evicted.
void Schedule::evict_tick(const std::vector<std::size_t>& masters) {
  if (world_.now() >= evict_until_) return;
  for (const std::size_t m : masters) {
    Master& master = net_->master(m).master();
    if (!net_->master(m).up()) continue;
    std::vector<std::string> locks;
    for (const auto& [key, value] : master.keys()) {
      if (is_lock_key(key)) locks.push_back(key);
    }
    if (locks.empty()) continue;
    const std::string& key = locks[evict_rng_.below(locks.size())];
    if (master.evict(key)) faults_.emplace_back(world_.now(), "  m" + std::to_string(m) + " evicted " + key);
  }
  const Nanos next = ms(static_cast<double>(evict_rng_.between(5, 30)));
  world_.post(world_.now() + next, nullptr, [this, masters] { evict_tick(masters); });
}

// next: the client's next acquire (or nothing once the workload stops).
void Schedule::next(SimClient& c) {
  if (stopping_ || c.closed) {
    c.idle = true;
    return;
  }
  if (workload_ == Workload::election) return election_next(c);
  Rng& r = world_.rng();
  AcquireOptions ao;
  ao.ttl = milliseconds{r.between(100, workload_ == Workload::mixed || short_ttls_ ? c.max_ttl().count() : 600)};
  ao.wait = milliseconds{r.chance(0.3) ? 0 : r.between(1, long_waits_ ? 2000 : 300)};
  std::vector<std::string> set;
  if (workload_ == Workload::multi) {
    std::vector<std::string> pool = resources_;
    const std::size_t n = 2 + r.below(2);
    while (set.size() < n) {
      const std::size_t i = r.below(pool.size());
      set.push_back(pool[i]);
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
    }
    std::sort(set.begin(), set.end());
    c.engine->acquire_many(set, ao, [this, &c, set](Result<Lock> res) { acquired(c, set, std::move(res), false); });
  } else if (workload_ == Workload::leases) {
    start_leases(c, ao);
  } else {
    set.push_back(resources_[r.below(resources_.size())]);
    ao.fence = workload_ == Workload::fenced;
    ao.permits = permits_;
    // (Drawn only for rwlock and semaphore: the other workloads' plans
    // stay.) Half a semaphore's acquires are fenced: a fence per permit;
    // of the others, half wait in fair order (a try among them too).
    ao.shared = workload_ == Workload::rwlock && r.chance(0.6);
    if (workload_ == Workload::semaphore) {
      ao.fence = r.chance(0.5);
      ao.fair = !ao.fence && r.chance(0.5);
      if (ao.fair) note_fair(ao);
    }
    c.engine->acquire(set[0], ao, counted<Result<Lock>>(c, [this, &c, set](Result<Lock> res) {
                        acquired(c, set, std::move(res), false);
                      }));
  }
  faults_in_round(c);
}

// faults_in_round: the faults planned inside the client's next acquire
// round, which has just been asked for.
void Schedule::faults_in_round(SimClient& c) {
  // The attempt starts on the client's next turn (one loop_iteration) and
  // its commands reach the masters no sooner than base_delay: 20 µs from now
  // it is on its way, its replies not yet read.
  const Nanos in_round = world_.now() + 4 * loop_iteration;
  if (c.pause_next_round > 0) {
    const Nanos d = std::exchange(c.pause_next_round, 0);
    world_.post(in_round, nullptr, [this, &c] { stop_client(c); });
    world_.post(in_round + d, nullptr, [this, &c] { continue_client(c); });
  }
  if (c.wall_step_next_round != 0) {
    const Nanos step = std::exchange(c.wall_step_next_round, 0);
    world_.post(in_round, nullptr, [this, &c, step] { c.proc.wall().step(world_.now(), step); });
  }
}

void Schedule::acquired(SimClient& c, std::vector<std::string> resources, Result<Lock> r, bool tail) {
  result_.rounds += static_cast<std::uint64_t>(r ? r->attempts : r.error().attempts);
  if (!r) {
    if (tail) {
      violation("liveness",
                "c" + std::to_string(c.index) + " could not take free " + resources[0] + " within " +
                    std::to_string(tail_wait / ns_per_ms) + " ms after the heal: " + r.error().to_string(),
                world_.now());
      return tail_next(c, true);
    }
    return think(c);
  }
  ++result_.grants;
  if (workload_ == Workload::semaphore && detail::is_fair_token(r->token)) ++result_.fair_grants;
  c.lock = std::move(*r);
  c.more.assign(resources.begin() + 1, resources.end());
  c.held.clear();
  for (const std::string& res : resources) {
    Hold h;
    h.client = c.index;
    h.resource = res;
    h.token = c.lock->token;
    h.start = world_.now();
    h.end_local = SimRuntime::from_time_point(c.lock->validity_deadline);
    h.fence = c.lock->fence;
    h.fenced = c.lock->fence != 0;
    h.tail = tail;
    h.permit = c.lock->permit;
    h.shared = c.lock->shared;
    const bool fenced = h.fenced;
    c.held.push_back(holds_.size());
    holds_.push_back(std::move(h));
    if (fenced) {
      // The protected store: rejects a write whose fence is below the
      // highest it accepted (redlock/fenced_store.hpp).
      std::uint64_t& top = store_[c.lock->permit ? res + " permit " + std::to_string(*c.lock->permit) : res];
      if (c.lock->fence < top) {
        ++stale_writes_;
      } else {
        top = c.lock->fence;
      }
    }
  }
  if (tail && workload_ == Workload::survey) {
    // The holder's own status: its lock, with a TTL within bounds.
    return survey_status(c, resources[0], [this, &c, lock = *c.lock](const ResourceStatus* st) {
      if (st != nullptr) check_own_status(c, lock, *st);
      release(c, [this, &c] { tail_next(c, false); });
    });
  }
  if (tail) {
    return c.after(ms(5), [this, &c] { release(c, [this, &c] { tail_next(c, false); }); });
  }
  Rng& rng = world_.rng();
  // mixed: half the grants are leases, half plain holds (no watchdog to
  // notice a lost key: the hold runs to its validity deadline).
  // rwlock: 40 % leases (a reader's watchdog extends its own entry).
  if (workload_ == Workload::lease || (workload_ == Workload::mixed && rng.chance(0.5)) ||
      (workload_ == Workload::rwlock && rng.chance(0.4))) {
    return start_lease(c);
  }
  const Nanos validity = std::chrono::duration_cast<std::chrono::nanoseconds>(c.lock->validity).count();
  hold(c, static_cast<Nanos>(rng.unit() * 1.2 * static_cast<double>(validity)), rng.chance(0.3));
}

// hold: keep the lock `left` more (local) ns, maybe extending it halfway.
void Schedule::hold(SimClient& c, Nanos left, bool may_extend) {
  if (!may_extend) {
    return c.after(left, [this, &c] { release(c, [this, &c] { think(c); }); });
  }
  c.after(left / 2, [this, &c, left] {
    const milliseconds ttl{world_.rng().between(100, short_ttls_ ? c.max_ttl().count() : 600)};
    c.engine->extend(
        *c.lock, ttl,
        counted<Result<Lock>>(c, [this, &c, left](Result<Lock> r) {
          if (r) {
            const Nanos old_end = SimRuntime::from_time_point(c.lock->validity_deadline);
            // The holder counts on the new deadline only if the extension came
            // while the old one held (else the engine says too_late).
            if (c.proc.steady_now() < old_end) {
              const Nanos new_end = SimRuntime::from_time_point(r->validity_deadline);
              for (const std::size_t i : c.held) holds_[i].end_local = std::max(holds_[i].end_local, new_end);
              c.lock = std::move(*r);
            }
          }
          hold(c, left / 2, false);
        }),
        c.more);
  });
}

// start_lease: the watchdog keeps the lock extended (at 1/3 of each
// validity) while the client holds it, up to four TTLs; the hold ends at
// the release, at the lease's last deadline, or when the lease is lost.
void Schedule::start_lease(SimClient& c) {
  LeaseOptions opts;
  const std::vector<std::size_t> held = c.held;
  for (const std::size_t i : held) holds_[i].lease = true;
  opts.on_lost = [this, held](const Error&) {
    for (const std::size_t i : held) holds_[i].released = std::min(holds_[i].released, world_.now());
  };
  auto st = detail::make_lease(*c.lock, std::move(opts), {}, nullptr);
  c.lease = st;
  c.lease_service->keep(st);
  const Nanos ttl = std::chrono::duration_cast<std::chrono::nanoseconds>(c.lock->ttl).count();
  c.after(static_cast<Nanos>(world_.rng().unit() * 4 * static_cast<double>(ttl)),
          [this, &c] { release(c, [this, &c] { think(c); }); });
}

// start_leases: 2–3 distinct resources, each acquired at once (one TTL,
// one wait) as a lease of its own. The acquires run side by side, so the
// grants come close together and their watchdogs fall due within one
// extend_batch_window; a batch answered together stays together (each
// lease re-arms at a third of its validity from the same moment).
void Schedule::start_leases(SimClient& c, const AcquireOptions& ao) {
  Rng& r = world_.rng();
  std::vector<std::string> pool = resources_;
  const std::size_t n = 2 + r.below(2);
  std::vector<std::string> set;
  while (set.size() < n) {
    const std::size_t i = r.below(pool.size());
    set.push_back(pool[i]);
    pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(i));
  }
  c.leases_ttl = ao.ttl;
  if (r.chance(0.3)) {
    // The set as ONE lease of several resources (lock_many): its keys ride
    // the same batched extension rounds, all of them or none per master.
    std::sort(set.begin(), set.end());
    c.leases_pending = 1;
    c.engine->acquire_many(set, ao, [this, &c, set](Result<Lock> lock) { lease_acquired(c, set, std::move(lock)); });
    return;
  }
  c.leases_pending = set.size();
  for (const std::string& res : set) {
    c.engine->acquire(res, ao, [this, &c, res](Result<Lock> lock) { lease_acquired(c, {res}, std::move(lock)); });
  }
}

// lease_acquired: one acquire of the set came back; a grant is a hold and a
// watchdog of its own (a lost lease ends its hold alone). Once every acquire
// is back the client holds what it got for up to four TTLs, then releases.
void Schedule::lease_acquired(SimClient& c, const std::vector<std::string>& resources, Result<Lock> r) {
  result_.rounds += static_cast<std::uint64_t>(r ? r->attempts : r.error().attempts);
  if (r) {
    ++result_.grants;
    std::vector<std::size_t> indices;
    for (const std::string& resource : resources) indices.push_back(add_hold(c.index, resource, *r));
    for (const std::size_t i : indices) holds_[i].lease = true;
    LeaseOptions opts;
    opts.on_lost = [this, indices](const Error&) {
      for (const std::size_t i : indices) holds_[i].released = std::min(holds_[i].released, world_.now());
    };
    std::vector<std::string> more(resources.begin() + 1, resources.end());
    auto st = detail::make_lease(*r, std::move(opts), {}, nullptr, more);
    c.leases.push_back({resources[0], r->token, st, indices[0], std::move(more),
                        std::vector<std::size_t>(indices.begin() + 1, indices.end())});
    c.lease_service->keep(st);
  }
  if (--c.leases_pending > 0) return;
  if (c.leases.empty()) return think(c);
  const Nanos ttl = std::chrono::duration_cast<std::chrono::nanoseconds>(c.leases_ttl).count();
  c.after(static_cast<Nanos>(world_.rng().unit() * 4 * static_cast<double>(ttl)), [this, &c] { release_leases(c); });
}

// release_leases: every lease of the set is given back (watchdog stopped,
// hold ended), then the client thinks and goes on.
void Schedule::release_leases(SimClient& c) {
  std::vector<SimClient::HeldLease> leases;
  leases.swap(c.leases);
  c.leases_pending = leases.size();
  for (SimClient::HeldLease& l : leases) {
    c.lease_service->stop(*l.state);
    std::vector<std::size_t> holds = l.more_holds;
    holds.push_back(l.hold);
    {
      std::lock_guard lock(l.state->mu);
      l.state->released = true;
      for (const std::size_t i : holds) {
        holds_[i].end_local = std::max(holds_[i].end_local, SimRuntime::from_time_point(l.state->deadline()));
      }
    }
    for (const std::size_t i : holds) holds_[i].released = std::min(holds_[i].released, world_.now());
    c.engine->release(
        l.resource, l.token,
        [this, &c](Result<ReleaseResult>) {
          if (--c.leases_pending == 0) think(c);
        },
        l.more);
  }
}

void Schedule::release(SimClient& c, std::function<void()> then) {
  if (c.lease) {
    c.lease_service->stop(*c.lease);
    std::lock_guard lock(c.lease->mu);
    c.lease->released = true;
    const Nanos end = SimRuntime::from_time_point(c.lease->deadline());
    for (const std::size_t i : c.held) holds_[i].end_local = std::max(holds_[i].end_local, end);
  }
  c.lease.reset();
  for (const std::size_t i : c.held) holds_[i].released = std::min(holds_[i].released, world_.now());
  c.held.clear();
  const Lock lock = std::move(*c.lock);
  c.lock.reset();
  c.engine->release(lock.resource, lock.token,
                    counted<Result<ReleaseResult>>(c, [then = std::move(then)](Result<ReleaseResult>) { then(); }),
                    c.more, lock.permit, lock.shared);
}

void Schedule::think(SimClient& c) {
  c.after(ms(static_cast<double>(world_.rng().between(0, 20))), [this, &c] { next(c); });
}

// tail_next: the quiet tail — take each resource in turn (wait bounded),
// hold it 5 ms, release it; give_up after a liveness failure.
void Schedule::tail_next(SimClient& c, bool give_up) {
  if (give_up || c.tail_pos >= resources_.size()) {
    if (!c.tail_finished) {
      c.tail_finished = true;
      ++tail_done_;
    }
    return;
  }
  if (workload_ == Workload::election) {
    CampaignOptions o;
    o.ttl = c.max_ttl();
    o.wait = milliseconds{tail_wait / ns_per_ms};
    const std::string name = resources_[c.tail_pos++];
    return campaign(c, name, std::move(o), true);
  }
  AcquireOptions ao;
  ao.ttl = c.max_ttl();
  ao.wait = milliseconds{tail_wait / ns_per_ms};
  ao.permits = permits_;
  std::vector<std::string> set{resources_[c.tail_pos++]};
  c.engine->acquire(set[0], ao, counted<Result<Lock>>(c, [this, &c, set](Result<Lock> res) {
                      acquired(c, set, std::move(res), true);
                    }));
}

// ---- The election workload ---------------------------------------------------
//
// Each client campaigns for one of the names with the library's own machine
// (detail::Campaign over its lease service and reports), leads for up to
// four TTLs — proclaiming a new value now and then — and resigns, record
// first, then the lease (as Leadership::resign); deposed, it resigns at
// once. The history (election_) is judged by check_election; each term is
// also a checked hold (fenced, a lease), so mutual exclusion on validity
// and fence order are judged as for locks.

void Schedule::election_next(SimClient& c) {
  Rng& r = world_.rng();
  const std::string name = resources_[r.below(resources_.size())];
  CampaignOptions o;
  o.ttl = milliseconds{r.between(100, short_ttls_ ? c.max_ttl().count() : 600)};
  // Some wait for ever (cancelled when the workload stops), some try once.
  o.wait = r.chance(0.2) ? CampaignOptions::forever
                         : milliseconds{r.chance(0.2) ? 0 : r.between(1, long_waits_ ? 2000 : 600)};
  c.campaign_cancel = std::stop_source{};
  o.cancel = c.campaign_cancel.get_token();
  if (r.chance(0.15)) {  // cancelled by its caller in the middle
    world_.post(world_.now() + ms(static_cast<double>(r.between(1, 300))), &c.proc,
                [stop = c.campaign_cancel]() mutable { stop.request_stop(); });
  }
  campaign(c, name, std::move(o), false);
}

void Schedule::campaign(SimClient& c, const std::string& name, CampaignOptions o, bool tail) {
  o.identity = "c" + std::to_string(c.index);
  o.value = o.identity + "." + std::to_string(++c.rev);
  auto slot = std::make_shared<std::size_t>(SIZE_MAX);  // the term, once elected
  o.on_deposed = [this, &c, slot, tail](const Error&) {
    if (*slot == SIZE_MAX) return;  // lost before the campaign told it (elected() sees it)
    end_term(c, *slot, true);
    if (!c.leader || c.term != *slot) return;
    c.after(0, [this, &c, tail] {
      resign(c, [this, &c, tail] {
        if (tail) return tail_next(c, false);
        think(c);
      });
    });
  };
  c.campaign = std::make_shared<detail::Campaign>(
      c.rt, *c.lease_service, *c.reports, c.config.options, nullptr, name, std::move(o),
      [this, &c, name, tail, slot](Result<std::shared_ptr<detail::LeaseState>> r) {
        elected(c, name, std::move(r), tail, slot);
      },
      nullptr);  // (c.campaign keeps it while it backs off; the next one replaces it)
  c.campaign->start();
  faults_in_round(c);
}

void Schedule::elected(SimClient& c, const std::string& name, Result<std::shared_ptr<detail::LeaseState>> r,
                       bool tail, const std::shared_ptr<std::size_t>& slot) {
  ++result_.campaigns;
  ++result_.rounds;
  bool lost = false;
  if (r) {
    std::lock_guard lock((*r)->mu);
    lost = (*r)->lost;
  }
  if (lost) r = make_error(Errc::lost, "deposed before the campaign told it");
  if (!r) {
    if (tail) {
      violation("liveness",
                "c" + std::to_string(c.index) + " was not elected to free " + name + " within " +
                    std::to_string(tail_wait / ns_per_ms) + " ms after the heal: " + r.error().to_string(),
                world_.now());
      return tail_next(c, true);
    }
    return think(c);
  }
  ++result_.grants;
  ++result_.elections;
  std::shared_ptr<detail::LeaseState> st = std::move(*r);
  Term t;
  t.client = c.index;
  t.name = name;
  t.identity = "c" + std::to_string(c.index);
  t.token = std::string(st->token());
  t.term = st->fence();
  t.elected = world_.now();
  *slot = election_.terms.size();
  c.term = *slot;
  election_.terms.push_back(std::move(t));
  Hold h;
  h.client = c.index;
  h.resource = name;
  h.token = std::string(st->token());
  h.start = world_.now();
  h.end_local = SimRuntime::from_time_point(st->deadline());
  h.fence = st->fence();
  h.fenced = true;
  h.tail = tail;
  h.lease = true;
  c.term_hold = holds_.size();
  holds_.push_back(std::move(h));
  c.leader = std::move(st);
  c.leader_name = name;
  if (tail) {
    return c.after(ms(5), [this, &c] { resign(c, [this, &c] { tail_next(c, false); }); });
  }
  Rng& rng = world_.rng();
  const Nanos ttl = std::chrono::duration_cast<std::chrono::nanoseconds>(c.leader->ttl).count();
  const Nanos lead = static_cast<Nanos>(rng.unit() * 4 * static_cast<double>(ttl));
  if (rng.chance(0.5)) {  // a new value halfway
    c.after(lead / 2, [this, &c, lead] {
      if (!c.leader) return;
      const std::string value = "c" + std::to_string(c.index) + "." + std::to_string(++c.rev);
      c.reports->proclaim({.resource = c.leader_name,
                           .token = std::string(c.leader->token()),
                           .term = c.leader->fence(),
                           .rev = c.rev,
                           .identity = "c" + std::to_string(c.index),
                           .value = value},
                          [this](Result<void> w) {
                            if (w) ++result_.proclaims;
                          });
      c.after(lead / 2, [this, &c] { resign(c, [this, &c] { think(c); }); });
    });
    return;
  }
  c.after(lead, [this, &c] { resign(c, [this, &c] { think(c); }); });
}

// end_term: the term is over from now (its deposed notice, or the resign
// beginning); its hold too, reaching as far as the lease's deadline.
void Schedule::end_term(SimClient& c, std::size_t term, bool deposed) {
  Term& t = election_.terms[term];
  if (t.ended != never) return;
  t.ended = world_.now();
  t.deposed = deposed;
  if (c.term != term || !c.leader) return;
  Hold& h = holds_[c.term_hold];
  h.released = std::min(h.released, world_.now());
  h.end_local = std::max(h.end_local, SimRuntime::from_time_point(c.leader->deadline()));
}

// resign: as Leadership::resign — the record (where it names this lease),
// then the lease; `then` once both are back.
void Schedule::resign(SimClient& c, std::function<void()> then) {
  if (!c.leader) return then();
  end_term(c, c.term, false);
  std::shared_ptr<detail::LeaseState> st = std::move(c.leader);
  c.leader.reset();
  c.reports->resign(c.leader_name, std::string(st->token()),
                    [&c, st, then = std::move(then)](Result<void>) mutable {
                      c.lease_service->release(st, [then = std::move(then)](Result<ReleaseResult>) { then(); });
                    });
}

// observe_all: the client watches every name; each reading told goes into
// the history.
void Schedule::observe_all(SimClient& c) {
  const Options& o = c.config.options;
  for (const std::string& name : resources_) {
    c.reports->observe(name, o.retry_delay + o.retry_jitter, 10 * o.wake_safety_net,
                       std::make_shared<detail::WatchLink>(), [this, &c, name](const Result<LeaderStatus>& r) {
                         if (!r) return;
                         ++result_.readings;
                         Reading reading;
                         reading.observer = c.index;
                         reading.name = name;
                         reading.at = world_.now();
                         if (r->leader) {
                           reading.leader = true;
                           reading.term = r->leader->term;
                           reading.identity = r->leader->identity;
                         }
                         election_.readings.push_back(std::move(reading));
                       });
  }
}

// observers_settled: every observer's last reading of every name is "no
// leader" (the quiet tail's leaders all resigned).
bool Schedule::observers_settled() const {
  std::map<std::pair<std::size_t, std::string>, bool> last;
  for (const Reading& r : election_.readings) last[{r.observer, r.name}] = r.leader;
  for (const auto& c : clients_) {
    for (const std::string& name : resources_) {
      const auto it = last.find({c->index, name});
      if (it == last.end() || it->second) return false;
    }
  }
  return true;
}

// crowd_next: the actor's next acquire — a try (wait 0), a short wait that
// gives up in line, or a long one that sees the line move; now and then
// with a value of its own (kept out of lines: it may be a refresh), or
// cancelled while it waits.
void Schedule::crowd_next(Actor& a) {
  SimClient& c = a.c;
  if (stopping_) {
    a.idle = true;
    c.idle = std::all_of(c.actors.begin(), c.actors.end(), [](const auto& other) { return other->idle; });
    return;
  }
  if (workload_ == Workload::fair) return fair_next(a);
  Rng& r = world_.rng();
  AcquireOptions ao;
  ao.ttl = milliseconds{r.between(100, 600)};
  const double kind = r.unit();
  ao.wait = milliseconds{kind < 0.2 ? 0 : kind < 0.5 ? r.between(1, 100) : r.between(200, 2000)};
  if (ao.wait.count() > 0 && r.chance(0.1)) ao.token = *c.rt.random_token();
  if (ao.wait.count() > 0 && r.chance(0.1)) {
    a.cancel = std::stop_source();
    ao.cancel = a.cancel.get_token();
    // The timer's next use, once the acquire is back, supersedes this.
    a.after(ms(static_cast<double>(r.between(0, ao.wait.count()))), [&a] { a.cancel.request_stop(); });
  }
  crowd_acquire(a, resources_[r.below(resources_.size())], std::move(ao), false);
}

// fair_next: the actor's next acquire in the fair workload — mostly fair
// ones with a long wait (they queue on the masters), some with a short wait
// that gives up in the queue (it must leave it), a try (wait 0), a few
// cancelled while they wait, and one in ten not fair: it may take a free
// lock ahead of the queue, and its release names nobody (the fair head
// must still wake).
void Schedule::fair_next(Actor& a) {
  Rng& r = world_.rng();
  AcquireOptions ao;
  ao.ttl = milliseconds{r.between(100, 600)};
  const double kind = r.unit();
  ao.wait = milliseconds{kind < 0.1 ? 0 : kind < 0.35 ? r.between(1, 150) : r.between(300, 2500)};
  ao.fair = !r.chance(0.1);
  if (ao.wait.count() > 0 && r.chance(0.1)) {
    a.cancel = std::stop_source();
    ao.cancel = a.cancel.get_token();
    a.after(ms(static_cast<double>(r.between(0, ao.wait.count()))), [&a] { a.cancel.request_stop(); });
  }
  crowd_acquire(a, resources_[r.below(resources_.size())], std::move(ao), false);
}

// note_fair: a fair acquire starts. Its queue, turn and expiry keys live
// at most its wait plus a place's life (fair_life; the turn key 4 × grace,
// less) from its last attempt (on a master's clock, within the rate
// budget), and its last command reaches a master at the latest late_max
// after the heal.
void Schedule::note_fair(const AcquireOptions& ao) {
  ++result_.fair_acquires;
  const Nanos sent_by = std::max(world_.now(), opt_.fault_phase) + net_->config().late_max;
  const milliseconds place = detail::fair_life(clients_.front()->config.options);
  const double life = static_cast<double>(ao.wait.count() + place.count()) * (1 + 2 * rate_budget);
  fair_until_ = std::max(fair_until_, sent_by + ms(life));
}

// crowd_acquire: one acquire of the actor's. It queues when its client's
// line for the lock is not empty (what the acquire's first step reads;
// Engine::line_busy is false while wake-ups are off).
void Schedule::crowd_acquire(Actor& a, const std::string& resource, AcquireOptions ao, bool tail) {
  SimClient& c = a.c;
  // A fair acquire waits in the masters' queues, not in its client's line.
  a.queued = ao.wait.count() > 0 && ao.token.empty() && !ao.fair &&
             c.engine->line_busy(detail::lock_key(c.config.options.prefix, resource));
  a.deadline = c.proc.steady_now() + ms(static_cast<double>(ao.wait.count()));
  a.given = ao.token;
  a.ttl = ao.ttl;
  a.fair = ao.fair;
  if (a.queued) ++result_.queued;
  if (ao.fair) note_fair(ao);
  c.engine->acquire(resource, std::move(ao),
                    [this, &a, resource, tail](Result<Lock> r) { crowd_acquired(a, resource, std::move(r), tail); });
  // A queued acquire sends nothing yet: a fault aimed inside a round waits
  // for an acquire that starts one.
  if (!a.queued) faults_in_round(c);
}

void Schedule::crowd_acquired(Actor& a, const std::string& resource, Result<Lock> r, bool tail) {
  SimClient& c = a.c;
  result_.rounds += static_cast<std::uint64_t>(r ? r->attempts : r.error().attempts);
  const bool short_try = tail && gives_way(a);
  if (!r) {
    if (short_try) {
      a.tail_gave_way = true;
      return crowd_tail(a, false);
    }
    if (tail) {
      violation("liveness",
                "c" + std::to_string(c.index) + " (actor " + std::to_string(a.index) + ") could not take free " +
                    resource + " within " + std::to_string(tail_wait / ns_per_ms) +
                    " ms after the heal: " + r.error().to_string(),
                world_.now());
      return crowd_tail(a, true);
    }
    given_expires(a);
    return crowd_think(a);
  }
  // A queued acquire tries on its own only at its deadline: granted before
  // it, the line moved on to it.
  const bool in_time = c.proc.steady_now() < a.deadline;
  if (a.queued && in_time) ++result_.queued_won;
  if (tail && !in_time && !short_try) {
    // Its wait ran out, and it took the lock at the one try that a waiter
    // asleep in line still makes then: the line never moved on to it.
    violation("liveness",
              "c" + std::to_string(c.index) + " (actor " + std::to_string(a.index) + ") took free " + resource +
                  " only when its wait of " + std::to_string(tail_wait / ns_per_ms) + " ms ran out",
              world_.now(), {r->token});
  }
  ++result_.grants;
  if (a.fair) ++result_.fair_grants;
  a.hold = add_hold(c.index, resource, *r, tail);
  a.lock = std::move(*r);
  if (tail) {
    ++a.tail_pos;
    a.tail_gave_way = false;
    return a.after(ms(5), [this, &a] { crowd_release(a, [this, &a] { crowd_tail(a, false); }); });
  }
  const Nanos validity = std::chrono::duration_cast<std::chrono::nanoseconds>(a.lock->validity).count();
  a.after(static_cast<Nanos>(world_.rng().unit() * 1.2 * static_cast<double>(validity)),
          [this, &a] { crowd_release(a, [this, &a] { crowd_think(a); }); });
}

void Schedule::crowd_release(Actor& a, std::function<void()> then) {
  holds_[a.hold].released = std::min(holds_[a.hold].released, world_.now());
  given_expires(a);
  const Lock lock = std::move(*a.lock);
  a.lock.reset();
  a.c.engine->release(lock.resource, lock.token, [then = std::move(then)](Result<ReleaseResult>) { then(); });
}

void Schedule::crowd_think(Actor& a) {
  a.after(ms(static_cast<double>(world_.rng().between(0, 20))), [this, &a] { crowd_next(a); });
}

// crowd_tail: the quiet tail of one actor — every resource in turn, as
// tail_next; the actors of a client start together, so they line up.
void Schedule::crowd_tail(Actor& a, bool give_up) {
  if (give_up || a.tail_pos >= resources_.size()) {
    if (!a.tail_finished) {
      a.tail_finished = true;
      ++tail_done_;
    }
    return;
  }
  AcquireOptions ao;
  ao.ttl = max_ttl;
  ao.wait = gives_way(a) ? milliseconds{2} : milliseconds{tail_wait / ns_per_ms};
  if (workload_ == Workload::fair) {
    // Every waiter of the tail is fair. The one that gives way waits long
    // enough to join the queues (two rounds) before it gives up and leaves.
    ao.fair = true;
    if (gives_way(a)) ao.wait = milliseconds{40};
  }
  crowd_acquire(a, resources_[a.tail_pos], std::move(ao), true);
}

// The order check (fair workload), after the quiet tail: on the first
// resource a holder takes the lock for a long hold; meanwhile the waiters
// start one after another, each order_spacing after the one before
// (enough for its two enqueue rounds and its subscription), so they
// queue in that order; each is granted, holds 5 ms and releases. They must
// be granted in arrival order, each within its wait. In half of the checks
// one waiter whose client takes no other part is dead: its client stops
// order_crash_after its start (it has queued) until the check is over, as
// if it had crashed — a dead entry in every queue, which the next must
// take out after the grace; the live ones keep their order.
constexpr Nanos order_spacing = ms(120);
constexpr Nanos order_crash_after = ms(100);
constexpr std::size_t order_max_waiters = 5;
constexpr milliseconds order_wait{5000};

// start_order_check: false when there are too few actors (fewer than three).
bool Schedule::start_order_check() {
  std::vector<Actor*> pool;
  for (auto& c : clients_) {
    for (auto& a : c->actors) pool.push_back(a.get());
  }
  if (pool.size() < 3) return false;
  Rng& r = world_.rng();
  for (std::size_t i = pool.size() - 1; i > 0; --i) std::swap(pool[i], pool[r.below(i + 1)]);
  const std::size_t n = std::min(pool.size() - 1, order_max_waiters);
  Actor& holder = *pool[0];
  std::vector<Actor*> waiters(pool.begin() + 1, pool.begin() + 1 + static_cast<std::ptrdiff_t>(n));
  for (std::size_t i = 0; i < waiters.size(); ++i) waiters[i]->order_pos = static_cast<int>(i);
  order_waiters_ = n;
  if (n >= 2 && opt_.order_dead > 0 && r.chance(0.5)) {
    std::vector<Actor*> alone;  // waiters whose client has no other part in the check
    for (Actor* w : waiters) {
      const auto others = std::count_if(pool.begin(), pool.begin() + 1 + static_cast<std::ptrdiff_t>(n),
                                        [w](const Actor* x) { return &x->c == &w->c; });
      if (others == 1) alone.push_back(w);
    }
    if (!alone.empty()) {
      // ScheduleOptions::order_dead of them, one after another in the
      // queue if nobody else's waiter stands between them.
      const std::size_t k = std::min<std::size_t>(std::max(opt_.order_dead, 1), alone.size());
      const std::size_t first = r.below(alone.size() - k + 1);
      for (std::size_t i = first; i < first + k; ++i) {
        alone[i]->order_dead = true;
        --order_waiters_;
      }
    }
  }
  AcquireOptions ao;
  ao.ttl = max_ttl;
  ao.wait = milliseconds{tail_wait / ns_per_ms};
  ao.fair = true;
  world_.post(world_.now(), &holder.c.proc, [this, &holder, waiters, ao] {
    order_acquire(holder, ao, [this, &holder, waiters](Result<Lock> r) {
      if (!r) {
        violation("liveness", "order check: the holder c" + std::to_string(holder.c.index) + " could not take free " +
                                  resources_[0] + ": " + r.error().to_string(), world_.now());
        order_done_ = order_waiters_;
        return;
      }
      order_hold(holder, std::move(*r));
      for (std::size_t i = 0; i < waiters.size(); ++i) {
        Actor& w = *waiters[i];
        const Nanos start = world_.now() + order_spacing * static_cast<Nanos>(i + 1);
        world_.post(start, &w.c.proc, [this, &w] {
          AcquireOptions wo;
          wo.ttl = max_ttl;
          wo.wait = order_wait;
          wo.fair = true;
          order_acquire(w, wo, [this, &w](Result<Lock> res) { order_acquired(w, std::move(res)); });
        });
        if (w.order_dead) {
          world_.post(start + order_crash_after, nullptr, [this, &w] {
            order_crashed_.push_back(&w.c);
            w.c.proc.pause();
          });
        }
      }
      // The hold lasts until every waiter has queued, and a little more.
      holder.after(order_spacing * static_cast<Nanos>(waiters.size() + 1), [this, &holder] {
        crowd_release(holder, [] {});
      });
    });
  });
  return true;
}

// order_acquire: a fair acquire of the first resource for the order check.
void Schedule::order_acquire(Actor& a, const AcquireOptions& ao, std::function<void(Result<Lock>)> done) {
  a.deadline = a.c.proc.steady_now() + ms(static_cast<double>(ao.wait.count()));
  a.fair = true;
  note_fair(ao);
  a.c.engine->acquire(resources_[0], ao, [this, done = std::move(done)](Result<Lock> r) {
    result_.rounds += static_cast<std::uint64_t>(r ? r->attempts : r.error().attempts);
    done(std::move(r));
  });
}

// order_hold: a grant of the order check, a checked hold like any other.
void Schedule::order_hold(Actor& a, Lock lock) {
  ++result_.grants;
  ++result_.fair_grants;
  a.hold = add_hold(a.c.index, lock.resource, lock, true);
  a.lock = std::move(lock);
}

// The lapse check (fair workload), after the order check: a fair waiter
// that means to wait an hour behind a short hold is killed once it has
// queued — its client stops, as `redlock run --fair` under SIGKILL, and
// sends nothing more; the hold's TTL runs out, nobody releases, so nobody
// is named and no turn starts. A fair TRY on the free lock must then
// succeed once the dead waiter's place has lapsed: fair_life after its
// last round, on the masters' clocks (within the rate budget), plus a
// little for the network. (The no_queue_lapse variant keeps the place for
// the whole wait: the try is refused.) Then the dead client comes back
// and gives up; whatever it takes meanwhile is a checked hold.
constexpr milliseconds lapse_wait{3'600'000};
constexpr Nanos lapse_kill_after = ms(100);
const std::string lapse_resource = "lapse";

// start_lapse_check: false when there are not two clients with actors that
// the order check did not stop.
bool Schedule::start_lapse_check() {
  std::vector<SimClient*> pool;
  for (auto& c : clients_) {
    if (c->actors.empty() || std::find(order_crashed_.begin(), order_crashed_.end(), c.get()) != order_crashed_.end()) {
      continue;
    }
    pool.push_back(c.get());
  }
  if (pool.size() < 2) return false;
  SimClient& hc = *pool[0];
  SimClient& wc = *pool[1];
  lapse_out_ = 2;  // the holder's try, the killed waiter's acquire
  world_.post(world_.now(), &hc.proc, [this, &hc, &wc] {
    AcquireOptions ho;
    ho.ttl = milliseconds{300};
    ho.wait = milliseconds{tail_wait / ns_per_ms};
    ho.fair = true;
    note_fair(ho);
    hc.engine->acquire(lapse_resource, ho, [this, &hc, &wc](Result<Lock> r) {
      result_.rounds += static_cast<std::uint64_t>(r ? r->attempts : r.error().attempts);
      if (!r) {
        violation("liveness", "lapse check: the holder c" + std::to_string(hc.index) + " could not take free " +
                                  lapse_resource + ": " + r.error().to_string(), world_.now());
        lapse_out_ = 0;
        return;
      }
      ++result_.grants;
      ++result_.fair_grants;
      add_hold(hc.index, lapse_resource, *r, true);  // never released: its TTL runs out
      Actor& w = *wc.actors[0];
      world_.post(world_.now(), &wc.proc, [this, &wc, &w] {
        AcquireOptions wo;
        wo.ttl = max_ttl;
        wo.wait = lapse_wait;
        wo.fair = true;
        w.cancel = std::stop_source();
        wo.cancel = w.cancel.get_token();
        ++result_.fair_acquires;
        wc.engine->acquire(lapse_resource, wo, [this, &wc](Result<Lock> got) { lapse_back(wc, lapse_resource, std::move(got)); });
      });
      world_.post(world_.now() + lapse_kill_after, nullptr, [this, &hc, &wc] {
        wc.proc.pause();
        lapse_killed_ = world_.now();
        const auto life = static_cast<double>(detail::fair_life(wc.config.options).count());
        world_.post(world_.now() + ms(life * (1 + 2 * rate_budget)) + ms(20), &hc.proc,
                    [this, &hc, &wc] { lapse_try(hc, wc, lapse_resource); });
      });
    });
  });
  return true;
}

// lapse_try: the fair try on the free lock, once the killed waiter's place
// lapsed; then the killed client comes back and gives up its wait.
void Schedule::lapse_try(SimClient& hc, SimClient& wc, const std::string& resource) {
  AcquireOptions ao;
  ao.ttl = max_ttl;
  ao.fair = true;  // wait 0: a try
  ++result_.fair_acquires;
  hc.engine->acquire(resource, ao, [this, &hc, &wc, resource](Result<Lock> r) {
    result_.rounds += static_cast<std::uint64_t>(r ? r->attempts : r.error().attempts);
    if (!r) {
      violation("liveness", "lapse check: a fair try on free " + resource + " was refused " +
                                std::to_string((world_.now() - lapse_killed_) / ns_per_ms) +
                                " ms after its only waiter was killed (a place lapses " +
                                std::to_string(detail::fair_life(wc.config.options).count()) +
                                " ms after its waiter's last round): " + r.error().to_string(),
                world_.now());
    }
    // The killed client comes back, and gives up its hour's wait.
    Actor& w = *wc.actors[0];
    wc.proc.resume();
    world_.post(world_.now(), &wc.proc, [&w] { w.cancel.request_stop(); });
    lapse_back(hc, resource, std::move(r));
  });
}

// lapse_back: an acquire of the lapse check is back; a grant is a checked
// hold, released after 5 ms.
void Schedule::lapse_back(SimClient& c, const std::string& resource, Result<Lock> r) {
  if (!r) {
    --lapse_out_;
    return;
  }
  ++result_.grants;
  ++result_.fair_grants;
  const std::size_t hold = add_hold(c.index, resource, *r, true);
  c.after(ms(5), [this, &c, hold, lock = std::move(*r)] {
    holds_[hold].released = std::min(holds_[hold].released, world_.now());
    c.engine->release(lock.resource, lock.token, [this](Result<ReleaseResult>) { --lapse_out_; });
  });
}

std::size_t Schedule::add_hold(std::size_t client, const std::string& resource, const Lock& lock, bool tail) {
  Hold h;
  h.client = client;
  h.resource = resource;
  h.token = lock.token;
  h.start = world_.now();
  h.end_local = SimRuntime::from_time_point(lock.validity_deadline);
  h.tail = tail;
  h.permit = lock.permit;
  h.shared = lock.shared;
  holds_.push_back(std::move(h));
  return holds_.size() - 1;
}

// The writer check (rwlock): readers take turns on relay_resource without
// a gap — each holds relay_hold, takes it again at once, started
// relay_stagger apart — so that some reader always holds it; a writer
// comes, waits at most writer_wait and must get it: its intent stops new
// readers, so it waits only for the readers that held when it landed
// (docs/design.md, "Writer preference"). A writer that stamps no intent
// (the no_writer_intent variant) waits for a gap that never comes.
const std::string relay_resource = "relay";
constexpr milliseconds relay_ttl{300};
constexpr Nanos relay_hold = ms(120);
constexpr Nanos relay_stagger = ms(40);
constexpr milliseconds writer_wait{2000};

// start_writer_check: false when there are too few clients (fewer than
// three: two readers and a writer).
bool Schedule::start_writer_check() {
  std::vector<SimClient*> pool;
  for (auto& c : clients_) {
    if (!c->closed && c->actors.empty()) pool.push_back(c.get());
  }
  if (pool.size() < 3) return false;
  const std::size_t readers = std::min<std::size_t>(pool.size() - 1, 3);
  writer_out_ = readers + 1;
  writer_done_ = false;
  for (std::size_t i = 0; i < readers; ++i) {
    SimClient& rc = *pool[i + 1];
    world_.post(world_.now() + relay_stagger * static_cast<Nanos>(i), &rc.proc, [this, &rc] { relay_turn(rc); });
  }
  SimClient& wc = *pool[0];
  const Nanos writer_at = world_.now() + relay_stagger * static_cast<Nanos>(readers) + relay_hold;
  // A plain, a fenced or a fair writer: each must stop new readers.
  const std::uint64_t kind = plan_.below(3);
  world_.post(writer_at, &wc.proc, [this, &wc, kind] {
    AcquireOptions wo;
    wo.ttl = relay_ttl;
    wo.wait = writer_wait;
    wo.fence = kind == 1;
    wo.fair = kind == 2;
    const Nanos asked = world_.now();
    wc.engine->acquire(relay_resource, wo, counted<Result<Lock>>(wc, [this, &wc, asked](Result<Lock> r) {
                         result_.rounds += static_cast<std::uint64_t>(r ? r->attempts : r.error().attempts);
                         writer_done_ = true;
                         if (!r) {
                           violation("liveness",
                                     "writer check: c" + std::to_string(wc.index) + "'s writer waited " +
                                         std::to_string((world_.now() - asked) / ns_per_ms) + " ms for " +
                                         relay_resource + " while readers took turns on it, and never got it: " +
                                         r.error().to_string(),
                                     world_.now());
                           --writer_out_;
                           return;
                         }
                         ++result_.grants;
                         const std::size_t hold = add_hold(wc.index, relay_resource, *r, true);
                         wc.after(ms(5), [this, &wc, hold, lock = std::move(*r)] {
                           holds_[hold].released = std::min(holds_[hold].released, world_.now());
                           wc.engine->release(lock.resource, lock.token,
                                              counted<Result<ReleaseResult>>(wc, [this](Result<ReleaseResult>) {
                                                --writer_out_;
                                              }));
                         });
                       }));
  });
  return true;
}

// relay_turn: a reader's next turn on the relay, until the writer has its
// answer.
void Schedule::relay_turn(SimClient& c) {
  if (writer_done_) {
    --writer_out_;
    return;
  }
  AcquireOptions ro;
  ro.ttl = relay_ttl;
  ro.wait = writer_wait;
  ro.shared = true;
  c.engine->acquire(relay_resource, ro, counted<Result<Lock>>(c, [this, &c](Result<Lock> r) {
                      result_.rounds += static_cast<std::uint64_t>(r ? r->attempts : r.error().attempts);
                      if (!r) return relay_turn(c);
                      ++result_.grants;
                      const std::size_t hold = add_hold(c.index, relay_resource, *r, true);
                      c.after(relay_hold, [this, &c, hold, lock = std::move(*r)] {
                        holds_[hold].released = std::min(holds_[hold].released, world_.now());
                        c.engine->release(lock.resource, lock.token,
                                          counted<Result<ReleaseResult>>(c, [this, &c](Result<ReleaseResult>) {
                                            relay_turn(c);
                                          }),
                                          {}, std::nullopt, true);
                      });
                    }));
}

// order_acquired: a waiter of the order check is back; granted, it holds
// 5 ms and releases (the next is named).
void Schedule::order_acquired(Actor& a, Result<Lock> r) {
  if (a.order_dead) {  // back after the check (its client resumed): a hold like any other, not ranked
    if (!r) return;
    order_hold(a, std::move(*r));
    return a.after(ms(5), [this, &a] { crowd_release(a, [] {}); });
  }
  const std::string who = "c" + std::to_string(a.c.index) + " (actor " + std::to_string(a.index) + ", arrival " +
                          std::to_string(a.order_pos) + ")";
  if (!r) {
    violation("liveness", "order check: " + who + " was not granted " + resources_[0] + " within its wait of " +
                              std::to_string(order_wait.count()) + " ms: " + r.error().to_string(),
              world_.now());
    ++order_done_;
    return;
  }
  if (a.c.proc.steady_now() >= a.deadline) {
    violation("liveness", "order check: " + who + " took " + resources_[0] + " only when its wait ran out",
              world_.now(), {r->token});
  }
  order_granted_.push_back(a.order_pos);
  ++result_.order_checked;
  order_hold(a, std::move(*r));
  a.after(ms(5), [this, &a] { crowd_release(a, [this] { ++order_done_; }); });
}

// gives_way: the tail's next acquire of the actor is a short one that gives
// up. The first actor of a client (with others) tries each resource first
// with a wait of 2 ms: its first attempt meets another's hold (5 ms) and
// puts it first in its client's line, with the others behind it; its wait
// runs out while that hold lasts, and when it leaves the line the next
// must try at once (a line that stalls after a give-up shows as the
// others' waits running out). Then it takes the resource as the others do.
bool Schedule::gives_way(const Actor& a) { return a.index == 0 && a.c.actors.size() > 1 && !a.tail_gave_way; }

// given_expires: the actor is done with the value it gave (its acquire
// failed, or it released the lock). An attempt with a given value is never
// rolled back (docs/design.md, "Values"): what one set — also where it
// lands late, after the release, or when a blackhole lets it through at
// the heal — lives until its TTL runs out on the master's clock.
void Schedule::given_expires(const Actor& a) {
  if (a.given.empty()) return;
  const Nanos sent_by = std::max(world_.now(), opt_.fault_phase) + net_->config().late_max;
  given_until_[a.given] = sent_by + ms(static_cast<double>(a.ttl.count()) * (1 + 2 * rate_budget));
}

// counted: `f`, which must come exactly once, counted among the
// operations c has out (survey workload; other workloads get `f` as is).
template <class R>
std::function<void(R)> Schedule::counted(SimClient& c, std::function<void(R)> f) {
  if (workload_ != Workload::survey) return f;
  ++c.out;
  return [this, &c, f = std::move(f), came = false](R r) mutable {
    if (came) {
      return violation("close", "c" + std::to_string(c.index) + ": a callback came twice", world_.now());
    }
    came = true;
    --c.out;
    f(std::move(r));
  };
}

// see: what a master ran for a client with a report out (survey workload).
void Schedule::see(const ExecutedCommand& e) {
  SimClient& c = *clients_[e.client];
  if (c.surveys == 0 || e.late || e.argv.empty()) return;
  const std::string_view cmd = e.argv[0];
  if (cmd == "PING" || cmd == "ping") {
    if (e.reply.type == Reply::Type::status) c.seen.emplace_back(e.master, "PING");
  } else if (e.argv.size() > 1 && e.reply.type == Reply::Type::string &&
             ((cmd == "EVALSHA" || cmd == "evalsha") ? e.argv[1] == inspect_sha_
                                                     : (cmd == "EVAL" || cmd == "eval") &&
                                                           e.argv[1] == detail::inspect_script)) {
    c.seen.emplace_back(e.master, e.reply.str);
  }
}

// survey_next: the client's next report, 10–80 ms from now, until the
// workload stops or the client is closed.
void Schedule::survey_next(SimClient& c) {
  if (stopping_ || c.closed) return;
  world_.post(world_.now() + ms(static_cast<double>(survey_rng_.between(10, 80))), &c.proc, [this, &c] {
    if (stopping_ || c.closed) return;
    if (survey_rng_.chance(0.5)) return survey_nodes(c);
    survey_status(c, resources_[survey_rng_.below(resources_.size())],
                  [this, &c](const ResourceStatus*) { survey_next(c); });
  });
}

// report_came: a report's callback came (`e`: its error, if any). It must
// not come inside the call, must say Errc::closed once the client is
// closed, and nothing else may fail it. True when it carries a report.
bool Schedule::report_came(SimClient& c, const std::string& who, bool inside, const Error* e) {
  --c.surveys;
  if (inside) violation("survey", who + " came inside the call", world_.now());
  if (e == nullptr && c.closed) violation("close", who + " came after the close, not as Errc::closed", world_.now());
  if (e != nullptr && (!c.closed || e->code != Errc::closed)) {
    violation("survey", who + " failed: " + e->to_string(), world_.now());
  }
  return e == nullptr;
}

void Schedule::survey_status(SimClient& c, const std::string& resource,
                             std::function<void(const ResourceStatus*)> then) {
  if (c.surveys++ == 0) c.seen.clear();
  auto inside = std::make_shared<bool>(true);
  c.reports->status(resource, counted<Result<ResourceStatus>>(c, [this, &c, resource, inside, then = std::move(then)](
                                                                       Result<ResourceStatus> r) {
    if (!report_came(c, "c" + std::to_string(c.index) + "'s status of " + resource, *inside, r ? nullptr : &r.error())) {
      return then(nullptr);
    }
    ++result_.statuses;
    check_status(c, resource, *r);
    then(&*r);
  }));
  *inside = false;
}

void Schedule::survey_nodes(SimClient& c) {
  if (c.surveys++ == 0) c.seen.clear();
  auto inside = std::make_shared<bool>(true);
  c.reports->nodes(counted<Result<NodesReport>>(c, [this, &c, inside](Result<NodesReport> r) {
    const std::string who = "c" + std::to_string(c.index) + "'s nodes report";
    if (!report_came(c, who, *inside, r ? nullptr : &r.error())) return survey_next(c);
    ++result_.node_reports;
    if (r->nodes.size() != net_->size() || r->quorum != detail::majority_of(net_->size())) {
      violation("survey", who + ": " + std::to_string(r->nodes.size()) + " nodes, quorum " +
                              std::to_string(r->quorum) + ", of " + std::to_string(net_->size()) + " masters",
                world_.now());
    }
    // A master down, cut off or paused for the whole report ran no PING
    // of ours: it must not be reported reachable.
    for (std::size_t m = 0; m < r->nodes.size(); ++m) {
      if (!r->nodes[m].reachable) continue;
      const bool pinged = std::any_of(c.seen.begin(), c.seen.end(), [m](const auto& s) {
        return s.first == m && s.second == "PING";
      });
      if (!pinged) {
        violation("survey", who + " says m" + std::to_string(m) + " is reachable, but it ran no PING of ours meanwhile",
                  world_.now());
      }
    }
    survey_next(c);
  }));
  *inside = false;
}

// check_status: each answer is what its own master's inspect said (the
// report's slots are the masters'), and a lock held is held by a quorum
// with a TTL no longer than any client may ask for.
void Schedule::check_status(const SimClient& c, const std::string& resource, const ResourceStatus& st) {
  const std::string who = "c" + std::to_string(c.index) + "'s status of " + resource;
  if (st.resource != resource || st.nodes.size() != net_->size() || st.quorum != detail::majority_of(net_->size())) {
    return violation("survey", who + ": resource " + st.resource + ", " + std::to_string(st.nodes.size()) +
                                   " nodes, quorum " + std::to_string(st.quorum) + ", of " +
                                   std::to_string(net_->size()) + " masters",
                     world_.now());
  }
  for (std::size_t m = 0; m < st.nodes.size(); ++m) {
    const NodeHolding& n = st.nodes[m];
    if (!n.error.empty() || (n.state != NodeHolding::State::held && n.state != NodeHolding::State::free)) continue;
    const bool ran = std::any_of(c.seen.begin(), c.seen.end(), [&](const auto& s) {
      NodeHolding said;
      return s.first == m && detail::parse_inspect(s.second, said) && said.state == n.state &&
             said.token == n.token && said.ttl == n.ttl && said.fence == n.fence;
    });
    if (!ran) {
      violation("survey", who + ": m" + std::to_string(m) + " reported " + std::string(redlock::state_name(n.state)) + " " +
                              n.token + ", which no inspect of ours on m" + std::to_string(m) + " said",
                world_.now(), {n.token});
    }
  }
  if (st.held && (st.agreeing < st.quorum || st.ttl.count() < 0 || st.ttl > max_ttl)) {
    violation("survey", who + ": held by " + st.token + " on " + std::to_string(st.agreeing) + " masters, ttl " +
                            std::to_string(st.ttl.count()) + " ms",
              world_.now(), {st.token});
  }
}

// check_own_status: the quiet tail, no faults — a holder's status, before
// its validity ran out, shows its lock on every master that granted it
// and answered, each with a TTL between what its validity has left and
// the TTL it asked for; with every master answering, held by it.
void Schedule::check_own_status(const SimClient& c, const Lock& lock, const ResourceStatus& st) {
  const Nanos left = SimRuntime::from_time_point(lock.validity_deadline) - c.proc.steady_now();
  if (left <= 0) return;
  const std::string who = "c" + std::to_string(c.index) + "'s status of " + lock.resource + ", which it holds,";
  bool all_answered = true;
  for (std::size_t m = 0; m < st.nodes.size() && m < lock.nodes.size(); ++m) {
    const NodeHolding& n = st.nodes[m];
    if (!n.error.empty() || n.quarantined) {
      all_answered = false;
      continue;
    }
    if (lock.nodes[m].outcome != Outcome::ok) continue;
    if (n.state != NodeHolding::State::held || n.token != lock.token || n.ttl > lock.ttl ||
        n.ttl.count() < left / ns_per_ms - 1) {
      violation("survey", who + " says m" + std::to_string(m) + " (which granted it) holds " + n.token + " for " +
                              std::to_string(n.ttl.count()) + " ms, with " + std::to_string(left / ns_per_ms) +
                              " ms of its validity left of a TTL of " + std::to_string(lock.ttl.count()) + " ms",
                world_.now(), {lock.token});
    }
  }
  if (all_answered && (!st.held || st.token != lock.token)) {
    violation("survey", who + " says " + (st.held ? "held by " + st.token : std::string("not held")),
              world_.now(), {lock.token});
  }
}

// close_client: c is closed in the middle of its operations (a status and
// a nodes report sent this turn, and whatever the workload has out) by a
// ClientClose, as an AsyncClient is (src/client_close.hpp). Reports out
// and calls after it must say Errc::closed on a later turn; every callback
// comes exactly once (counted), all of them before the close completes.
void Schedule::close_client(SimClient& c) {
  survey_status(c, resources_[0], [](const ResourceStatus*) {});
  survey_nodes(c);
  c.closed = true;
  ++result_.closes;
  result_.closed_out += c.out;
  c.closer->close([this, &c] {
    c.close_done = true;
    if (c.out != 0) {
      violation("close", "c" + std::to_string(c.index) + "'s close completed with " + std::to_string(c.out) +
                             " callbacks still to come", world_.now());
    }
  });
  auto inside = std::make_shared<bool>(true);
  auto closed = [this, &c, inside](const char* what, const Error* e) {
    if (*inside || e == nullptr || e->code != Errc::closed) {
      violation("close", "c" + std::to_string(c.index) + ": " + what + " after the close " +
                             (*inside ? "came inside the call" : e == nullptr ? "succeeded" : "said " + e->to_string()),
                world_.now());
    }
  };
  c.engine->acquire(resources_[0], {}, counted<Result<Lock>>(c, [closed](Result<Lock> r) {
                      closed("an acquire", r ? nullptr : &r.error());
                    }));
  c.reports->status(resources_[0], counted<Result<ResourceStatus>>(c, [closed](Result<ResourceStatus> r) {
                      closed("a status", r ? nullptr : &r.error());
                    }));
  c.reports->nodes(counted<Result<NodesReport>>(c, [closed](Result<NodesReport> r) {
    closed("a nodes report", r ? nullptr : &r.error());
  }));
  *inside = false;
}

void Schedule::check_leaks() {
  for (std::size_t m = 0; m < net_->size(); ++m) {
    for (const auto& [key, value] : net_->master(m).master().keys()) {
      if (!is_lock_key(key)) continue;
      if (const auto it = given_until_.find(value); it != given_until_.end() && world_.now() < it->second) continue;
      violation("leak",
                "m" + std::to_string(m) + " still holds " + key + " = " + value + " (PTTL " +
                    std::to_string(net_->master(m).master().pttl(key)) + " ms) after every client released and quiesced",
                world_.now(), {value});
    }
  }
}

// check_fair_keys: once every fair wait has ended and its TTL run out, no
// master keeps a queue (waiters that died or gave up without being heard
// must not keep it alive) or a turn key.
void Schedule::check_fair_keys() {
  for (std::size_t m = 0; m < net_->size(); ++m) {
    for (const auto& [key, value] : net_->master(m).master().keys()) {
      if (!is_fair_key(key)) continue;
      violation("leak",
                "m" + std::to_string(m) + " still holds " + key + " = " + value + " (PTTL " +
                    std::to_string(net_->master(m).master().pttl(key)) + " ms) after every fair wait and its TTL ended",
                world_.now());
    }
  }
}

void Schedule::check_holds() {
  std::map<std::string, std::vector<std::pair<Nanos, std::size_t>>> by_resource;  // end, index
  std::vector<Nanos> ends(holds_.size());
  for (std::size_t i = 0; i < holds_.size(); ++i) {
    const Hold& h = holds_[i];
    const SimClient& c = *clients_[h.client];
    const Nanos deadline = c.proc.steady().true_at(h.end_local);
    ends[i] = std::min(h.released, deadline);
    // A lease of a process that ran all along hears of its loss by its
    // deadline (on_lost): until it hears, its holder believes it holds the
    // lock. (A process stopped by a fault meanwhile cannot hear in time.)
    if (h.lease && h.released != never && h.released > deadline + lost_slack &&
        std::none_of(c.stopped.begin(), c.stopped.end(),
                     [&h](const auto& s) { return s.first < h.released && s.second > h.start; })) {
      ends[i] = h.released;
    }
    // A semaphore's permit is a lock of its own (at most one holder each).
    if (ends[i] > h.start) {
      by_resource[h.permit ? h.resource + " permit " + std::to_string(*h.permit) : h.resource].emplace_back(h.start, i);
    }
  }
  if (permits_ > 0) check_permits(ends);
  for (auto& [res, list] : by_resource) {
    std::sort(list.begin(), list.end());
    const Hold* top = nullptr;  // the hold reaching furthest so far
    Nanos top_end = 0;
    const Hold* last_fenced = nullptr;
    for (const auto& [start, i] : list) {
      const Hold& h = holds_[i];
      // (Readers may overlap one another: the furthest-reaching earlier
      // hold is a reader only if every hold this one overlaps is, or a
      // violation was reported already.)
      if (top != nullptr && h.start < top_end && top->token != h.token && !(top->shared && h.shared)) {
        violation("mutual_exclusion",
                  res + ": c" + std::to_string(h.client) + " (token " + h.token + ") granted at" + fmt_time(h.start) +
                      " while c" + std::to_string(top->client) + " (token " + top->token + ", granted at" +
                      fmt_time(top->start) + ") held it until" + fmt_time(top_end) + " (true time)",
                  h.start, {top->token, h.token});
      }
      if (top == nullptr || ends[i] > top_end) {
        top = &h;
        top_end = ends[i];
      }
      if (h.fenced && h.start < first_data_loss_) {
        if (last_fenced != nullptr && h.fence <= last_fenced->fence && last_fenced->token != h.token) {
          violation("fence_order",
                    res + ": c" + std::to_string(h.client) + " got fence " + std::to_string(h.fence) + " at" +
                        fmt_time(h.start) + ", not above c" + std::to_string(last_fenced->client) + "'s fence " +
                        std::to_string(last_fenced->fence) + " granted at" + fmt_time(last_fenced->start),
                    h.start, {last_fenced->token, h.token});
        }
        last_fenced = &h;
      }
    }
  }
}

// check_permits: at no true time do more than P holds of one semaphore
// overlap (each from its grant to its end: release or validity deadline).
void Schedule::check_permits(const std::vector<Nanos>& ends) {
  std::map<std::string, std::vector<std::pair<Nanos, int>>> edges;  // time, +1 start / -1 end (ends first)
  for (std::size_t i = 0; i < holds_.size(); ++i) {
    if (ends[i] <= holds_[i].start) continue;
    edges[holds_[i].resource].emplace_back(holds_[i].start, +1);
    edges[holds_[i].resource].emplace_back(ends[i], -1);
  }
  for (auto& [res, list] : edges) {
    std::sort(list.begin(), list.end());
    int holding = 0;
    for (const auto& [at, step] : list) {
      holding += step;
      if (holding <= static_cast<int>(permits_)) continue;
      std::vector<std::string> tokens;
      std::string who;
      for (std::size_t i = 0; i < holds_.size(); ++i) {
        if (holds_[i].resource != res || holds_[i].start > at || ends[i] <= at) continue;
        tokens.push_back(holds_[i].token);
        who += " c" + std::to_string(holds_[i].client) + " (permit " +
               (holds_[i].permit ? std::to_string(*holds_[i].permit) : std::string("?")) + ")";
      }
      violation("mutual_exclusion", res + ": " + std::to_string(holding) + " holders of " + std::to_string(permits_) +
                                        " permits at" + fmt_time(at) + " (true time):" + who,
                at, tokens);
      break;
    }
  }
}

std::string Schedule::trace_text() const {
  std::string out;
  Nanos until = 0;
  std::set<std::string> tokens;
  for (const Violation& v : result_.violations) {
    until = std::max(until, v.at);
    tokens.insert(v.tokens.begin(), v.tokens.end());
  }
  out += "faults:\n";
  for (const auto& [at, what] : faults_) {
    if (at <= until) out += "  " + fmt_time(at) + "  " + what + "\n";
  }
  out += opt_.trace_commands ? "commands:\n" : "commands of the violating holders' values:\n";
  for (const std::string& line : commands_) {
    bool show = opt_.trace_commands;
    for (auto it = tokens.begin(); !show && it != tokens.end(); ++it) show = line.find(*it) != std::string::npos;
    if (show) out += "  " + line + "\n";
  }
  return out;
}

ScheduleResult Schedule::run() {
  plan_faults();
  for (auto& cp : clients_) {
    SimClient& c = *cp;
    world_.post(0, &c.proc, [&c] { c.nodes->start(); });
    if (c.actors.empty()) {
      world_.post(ms(static_cast<double>(plan_.between(1, 30))), &c.proc, [this, &c] { next(c); });
    }
    for (auto& ap : c.actors) {
      Actor& a = *ap;
      world_.post(ms(static_cast<double>(plan_.between(1, 30))), &c.proc, [this, &a] { crowd_next(a); });
    }
    if (workload_ == Workload::survey) world_.post(ms(1), &c.proc, [this, &c] { survey_next(c); });
    if (workload_ == Workload::election) world_.post(ms(1), &c.proc, [this, &c] { observe_all(c); });
  }
  if (workload_ == Workload::survey) {
    SimClient& c = *clients_[survey_rng_.below(clients_.size())];
    const Nanos at = survey_rng_.between(ms(50), opt_.fault_phase - ms(50));
    world_.post(at, &c.proc, [this, &c] { close_client(c); });
  }
  const Nanos heal = opt_.fault_phase;
  world_.post(heal, nullptr, [this] {
    faults_.emplace_back(world_.now(), "heal: every link, master and process back");
    net_->heal_all();
    for (auto& c : clients_) {
      continue_client(*c);
      c->pause_next_round = 0;
      c->wall_step_next_round = 0;
    }
  });
  // Settle: quarantines (max_ttl + drift from a loss seen at the heal) and
  // late bytes (late_max) run out while the workload goes on.
  const Nanos settle = ms(static_cast<double>(max_ttl.count()) * 1.1) + ms(700);
  world_.run_until(heal + settle);
  stopping_ = true;
  if (workload_ == Workload::election) {  // campaigns that wait for ever end now
    for (auto& c : clients_) {
      world_.post(world_.now(), &c->proc, [&c = *c]() mutable { c.campaign_cancel.request_stop(); });
    }
  }
  auto all_idle = [this] {
    return std::all_of(clients_.begin(), clients_.end(), [](const auto& c) { return c->idle; });
  };
  const Nanos give_up = world_.now() + ms(5000);
  while (!all_idle() && world_.now() < give_up) world_.run_until(world_.now() + ms(10));
  if (!all_idle()) violation("liveness", "the workload did not wind down within 5 s after it was stopped", world_.now());

  // The quiet tail: one loop per client, or per actor (crowd).
  std::size_t loops = 0;
  for (auto& cp : clients_) {
    SimClient& c = *cp;
    if (c.closed) continue;  // survey: closed mid-run
    if (c.actors.empty()) {
      world_.post(world_.now(), &c.proc, [this, &c] { tail_next(c, false); });
      ++loops;
    }
    for (auto& ap : c.actors) {
      Actor& a = *ap;
      world_.post(world_.now(), &c.proc, [this, &a] { crowd_tail(a, false); });
      ++loops;
    }
  }
  const Nanos tail_end = world_.now() + tail_wait * static_cast<Nanos>(resources_.size() + 1);
  while (tail_done_ < loops && world_.now() < tail_end) world_.run_until(world_.now() + ms(10));
  if (tail_done_ < loops) {
    violation("liveness",
              "the quiet tail did not finish (" + std::to_string(loops - tail_done_) +
                  (uses_actors() ? " actors" : " clients") + " still at it)",
              world_.now());
  }
  if (workload_ == Workload::fair && tail_done_ == loops && start_order_check()) {
    const Nanos order_end = world_.now() + tail_wait + order_spacing * static_cast<Nanos>(order_waiters_ + 1) +
                            ms(static_cast<double>(order_wait.count())) + ms(1000);
    while (order_done_ < order_waiters_ && world_.now() < order_end) world_.run_until(world_.now() + ms(10));
    if (order_done_ < order_waiters_) {
      violation("liveness", "order check: " + std::to_string(order_waiters_ - order_done_) + " of " +
                                std::to_string(order_waiters_) + " waiters still at it", world_.now());
    }
    // The dead waiter (if any) came back only now: it must not have been
    // granted ahead of the others. The live ones keep their arrival order.
    for (SimClient* c : order_crashed_) c->proc.resume();
    for (std::size_t i = 0; i + 1 < order_granted_.size(); ++i) {
      if (order_granted_[i] < order_granted_[i + 1]) continue;
      std::string got;
      for (const int pos : order_granted_) got += (got.empty() ? "" : " ") + std::to_string(pos);
      violation("order",
                "order check on " + resources_[0] + ": " + std::to_string(order_waiters_) +
                    " fair waiters that came one after another (" + std::to_string(order_spacing / ns_per_ms) +
                    " ms apart) were granted in the order " + got + ", not in arrival order",
                world_.now());
      break;
    }
  }
  if (workload_ == Workload::fair && !opt_.beyond && tail_done_ == loops && start_lapse_check()) {
    const Nanos lapse_end = world_.now() + tail_wait * 2 + ms(static_cast<double>(
                                                             detail::fair_life(clients_.front()->config.options).count()));
    while (lapse_out_ > 0 && world_.now() < lapse_end) world_.run_until(world_.now() + ms(10));
    if (lapse_out_ > 0) {
      violation("liveness", "lapse check: " + std::to_string(lapse_out_) + " acquires still out", world_.now());
    }
    // The killed waiter's last round (at its resumption) stamped a place
    // that its leave took out, or that lapses a life later.
    fair_until_ = std::max(fair_until_, world_.now() + ms(static_cast<double>(
                                            detail::fair_life(clients_.front()->config.options).count()) *
                                            (1 + 2 * rate_budget)));
  }
  if (workload_ == Workload::rwlock && !opt_.beyond && tail_done_ == loops && start_writer_check()) {
    const Nanos writer_end = world_.now() + ms(static_cast<double>(2 * writer_wait.count())) + ms(1000);
    while (writer_out_ > 0 && world_.now() < writer_end) world_.run_until(world_.now() + ms(10));
    if (writer_out_ > 0) {
      violation("liveness", "writer check: " + std::to_string(writer_out_) + " loops still at it", world_.now());
    }
  }
  if (workload_ == Workload::election && tail_done_ == loops) {
    // Every leader resigned: each observer is told "no leader" (by the
    // resign's message, or its poll; a lost message by the safety net).
    const Options& o = clients_.front()->config.options;
    const Nanos told_by = world_.now() + ms(static_cast<double>(10 * o.wake_safety_net.count())) + ms(1000);
    while (!observers_settled() && world_.now() < told_by) world_.run_until(world_.now() + ms(10));
    if (!observers_settled()) {
      violation("observer", "an observer was not told \"no leader\" after every leader resigned", world_.now());
    }
  }
  world_.run_until(world_.now() + ms(100));
  check_leaks();
  if (workload_ == Workload::fair || (workload_ == Workload::semaphore && result_.fair_acquires > 0)) {
    // Every fair wait and its TTL are over: no queue or turn key may stay.
    world_.run_until(std::max(world_.now(), fair_until_ + ms(100)));
    check_fair_keys();
  }

  // Shut down so that nothing is left in flight (every operation completes).
  if (workload_ == Workload::election) {
    for (auto& c : clients_) world_.post(world_.now(), &c->proc, [&c = *c] { c.reports->close(); });
  }
  std::size_t closed = 0;
  for (auto& cp : clients_) {
    SimClient& c = *cp;
    if (c.closed) {
      if (!c.close_done) {
        violation("liveness", "c" + std::to_string(c.index) + "'s close did not complete", world_.now());
      }
      ++closed;
      continue;
    }
    world_.post(world_.now(), &c.proc, [&c, &closed] {
      c.engine->shutdown([&c, &closed] { c.nodes->close([&closed] { ++closed; }); });
    });
  }
  const Nanos close_end = world_.now() + ms(3000);
  while (closed < clients_.size() && world_.now() < close_end) world_.run_until(world_.now() + ms(10));

  check_holds();
  if (workload_ == Workload::election) {
    for (const auto& c : clients_) election_.stopped.push_back(c->stopped);
    election_.terms_trusted_until = first_data_loss_;
    election_.slack = lost_slack;
    for (ElectionFinding& f : check_election(election_)) {
      violation(std::move(f.kind), std::move(f.what), f.at, std::move(f.tokens));
    }
  }
  result_.commands = net_->executed();
  result_.wakes = net_->messages_delivered();
  result_.unsolicited = net_->unsolicited_delivered();
  result_.trace_hash = net_->hashing ? net_->trace_hash() : 0;
  if (opt_.record) result_.trace = trace_text();
  return result_;
}

}  // namespace

const char* workload_name(Workload w) {
  switch (w) {
    case Workload::plain: return "plain";
    case Workload::fenced: return "fenced";
    case Workload::multi: return "multi";
    case Workload::lease: return "lease";
    case Workload::all: return "all";
    case Workload::leases: return "leases";
    case Workload::crowd: return "crowd";
    case Workload::fair: return "fair";
    case Workload::mixed: return "mixed";
    case Workload::survey: return "survey";
    case Workload::semaphore: return "semaphore";
    case Workload::rwlock: return "rwlock";
    case Workload::election: return "election";
    case Workload::cluster: return "cluster";
  }
  return "?";
}

bool parse_workload(const std::string& text, Workload& out) {
  for (const Workload w : {Workload::plain, Workload::fenced, Workload::multi, Workload::lease, Workload::all,
                           Workload::leases, Workload::crowd, Workload::fair, Workload::mixed, Workload::survey,
                           Workload::semaphore, Workload::rwlock, Workload::election, Workload::cluster}) {
    if (text == workload_name(w)) {
      out = w;
      return true;
    }
  }
  return false;
}

ScheduleResult run_schedule(std::uint64_t seed, const ScheduleOptions& options) {
  Schedule s(seed, options);
  return s.run();
}

}  // namespace redlock::sim
