// bed.cpp — masters, counter and fault intervals of one chaos scenario.
#include "bed.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "skewclock.hpp"

namespace redlock::chaos {

namespace {
std::string skew_file(const std::string& dir, std::size_t i) { return dir + "/skew-" + std::to_string(i); }

// The library's data-loss marker (docs/design.md §5): one per master, never
// a lock key. "redlock:*" does not match it today; the name is checked
// anyway, so a changed prefix or pattern cannot turn it into a leak.
constexpr std::string_view kMarkerKey = "redlock-marker";
}  // namespace

ChaosBed::ChaosBed(const BedOptions& options) {
  if (options.sentinel_members > options.nodes) throw std::logic_error("bed: more Sentinel members than members");
  if (options.sentinel_members > 0 && (options.tls || !options.skew_lib.empty() || !options.proxy_bin.empty()))
    throw std::logic_error("bed: Sentinel members go without TLS, the clock-skew shim and the proxies");
  if (options.cluster_members > options.nodes) throw std::logic_error("bed: more Cluster members than members");
  if (options.cluster_members > 0 && (options.sentinel_members > 0 || options.tls || !options.skew_lib.empty() ||
                                      !options.proxy_bin.empty()))
    throw std::logic_error("bed: Cluster members go without Sentinel members, TLS, the clock-skew shim and the proxies");
  if (!options.skew_lib.empty()) {
    char tmpl[] = "/tmp/redlock-chaos-skew-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    skew_dir_ = tmpl;
  }
  if (options.tls) certs_ = std::make_unique<test::TestCerts>();
  sentinels_.resize(options.nodes);
  clusters_.resize(options.nodes);
  primary_.assign(options.nodes, 0);
  // On this thread: a server dies with the thread that started it
  // (PR_SET_PDEATHSIG), so no process is started by a passing thread.
  for (std::size_t i = 0; i < options.sentinel_members; ++i) {
    test::SentinelOptions so;
    so.name = "chaos-" + std::to_string(i + 1);
    so.data.appendfsync_always = options.appendfsync_always;
    sentinels_[i] = std::make_unique<test::SentinelBed>(so);
  }
  for (std::size_t i = 0; i < options.cluster_members; ++i) {
    test::ClusterOptions co;
    co.replicas = 1;  // failovers need a replica
    co.data.appendfsync_always = options.appendfsync_always;
    clusters_[i] = std::make_unique<test::ClusterBed>(co);
  }
  for (std::size_t i = 0; i < options.nodes; ++i) {
    if (sentinels_[i] != nullptr || clusters_[i] != nullptr) {
      masters_.push_back(nullptr);
      continue;
    }
    test::ServerOptions so;
    so.appendfsync_always = options.appendfsync_always;
    if (certs_ != nullptr) {
      tls_ports_.push_back(test::free_port());
      so.extra_args = certs_->server_args(tls_ports_.back(), false);
    }
    if (!skew_dir_.empty()) {
      skewclock::Control(skew_file(skew_dir_, i)).set(skewclock::Settings{});
      so.env = {{"LD_PRELOAD", options.skew_lib}, {"SKEWCLOCK_FILE", skew_file(skew_dir_, i)}};
    }
    masters_.push_back(std::make_unique<test::RedisServer>(so));
    if (!options.proxy_bin.empty()) {
      faultproxy::FaultProxyOptions po;
      po.binary = options.proxy_bin;
      po.target = certs_ != nullptr ? "127.0.0.1:" + std::to_string(tls_ports_.back()) : masters_.back()->address();
      po.listen = {"127.0.0.1:0", "127.0.0.2:0"};
      po.extra_args = {"--keep-in-flight"};
      proxies_.push_back(std::make_unique<faultproxy::FaultProxyProcess>(po));
    }
  }
  counter_ = std::make_unique<test::RedisServer>();
  last_touched_.assign(options.nodes, 0);
}

ChaosBed::~ChaosBed() {
  proxies_.clear();
  masters_.clear();  // stop the servers before their settings files go
  sentinels_.clear();
  clusters_.clear();
  std::error_code ignored;
  if (!skew_dir_.empty()) std::filesystem::remove_all(skew_dir_, ignored);
}

void ChaosBed::skew(std::size_t i, long offset_ms, double rate) {
  if (skew_dir_.empty()) throw std::logic_error("skew: the bed was started without the clock-skew shim");
  skewclock::Control control(skew_file(skew_dir_, i));
  skewclock::Settings s;
  s.offset_ms = offset_ms;
  s.rate = rate;
  control.set(s);
  control.wait_applied(std::chrono::seconds{2});
  open("skew" + std::to_string(i), "clock node " + std::to_string(i + 1) + ": " + std::to_string(offset_ms) +
                                       " ms, rate " + std::to_string(rate));
}

void ChaosBed::unskew(std::size_t i) {
  skewclock::Control control(skew_file(skew_dir_, i));
  control.set(skewclock::Settings{});
  control.wait_applied(std::chrono::seconds{2});
  close("skew" + std::to_string(i));
}

std::string ChaosBed::urls(int group) const {
  std::string out;
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    if (sentinels_[i] != nullptr || clusters_[i] != nullptr) {
      out += (out.empty() ? "" : ",") + (sentinels_[i] != nullptr ? sentinels_[i]->url() : clusters_[i]->url());
      continue;
    }
    const std::string scheme = certs_ != nullptr ? "rediss://" : "redis://";
    const std::string direct = certs_ != nullptr ? "rediss://127.0.0.1:" + std::to_string(tls_ports_[i]) : masters_[i]->url();
    const std::string url =
        proxies_.empty() ? direct : scheme + proxies_[i]->listener(static_cast<std::size_t>(group));
    out += (out.empty() ? "" : ",") + url;
  }
  return out;
}

std::string ChaosBed::direct_urls() const {
  std::string out;
  for (std::size_t i = 0; i < masters_.size(); ++i)
    out += (out.empty() ? "" : ",") + (sentinels_[i] != nullptr   ? sentinels_[i]->url()
                                       : clusters_[i] != nullptr ? clusters_[i]->url()
                                                                 : masters_[i]->url());
  return out;
}

test::RedisServer& ChaosBed::master(std::size_t i) {
  if (sentinels_.at(i) != nullptr) return sentinels_[i]->server(primary_[i]);
  if (clusters_.at(i) != nullptr) throw std::logic_error("node " + std::to_string(i + 1) + " is a Cluster member");
  return *masters_.at(i);
}

void ChaosBed::proxy(std::size_t i, const std::string& listener, const std::string& settings) {
  proxies_.at(i)->control().set(listener, settings);
  open("proxy" + std::to_string(i) + "/" + listener,
       "node " + std::to_string(i + 1) + (listener == "*" ? "" : " group " + listener) + ": " + settings);
}

void ChaosBed::unproxy(std::size_t i, const std::string& listener) {
  proxies_.at(i)->control().clear(listener);
  close("proxy" + std::to_string(i) + "/" + listener);
}

void ChaosBed::open(const std::string& key, const std::string& what) {
  Event e;
  e.type = EventType::fault;
  e.t = monotonic_ns();
  e.error = what;
  open_.emplace_back(key, faults_.size());
  faults_.push_back(e);
}

void ChaosBed::close(const std::string& key, std::int64_t at) {
  auto it = std::find_if(open_.begin(), open_.end(), [&](const auto& p) { return p.first == key; });
  if (it == open_.end()) return;
  faults_[it->second].deadline = at != 0 ? at : monotonic_ns();  // a fault's `deadline` is its end
  open_.erase(it);
}

std::vector<std::int64_t> ChaosBed::on_members(const std::vector<std::size_t>& members,
                                               const std::function<void(std::size_t)>& step) {
  std::vector<std::int64_t> ended(members.size(), 0);
  std::vector<std::exception_ptr> errors(members.size());
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < members.size(); ++k) {
    threads.emplace_back([&, k] {
      try {
        step(members[k]);
      } catch (...) {
        errors[k] = std::current_exception();
      }
      ended[k] = monotonic_ns();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return ended;
}

void ChaosBed::fail_over(const std::vector<std::size_t>& members) {
  for (auto i : members) {
    if (!sentinel_member(i)) throw std::logic_error("fail_over: node " + std::to_string(i + 1) + " is no Sentinel member");
    open("failover" + std::to_string(i), "failover node " + std::to_string(i + 1) + " (SENTINEL FAILOVER)");
  }
  const auto ended = on_members(members, [&](std::size_t i) { primary_[i] = sentinels_[i]->fail_over(); });
  for (std::size_t k = 0; k < members.size(); ++k) close("failover" + std::to_string(members[k]), ended[k]);
}

void ChaosBed::kill_primary(const std::vector<std::size_t>& members) {
  for (auto i : members) {
    if (!sentinel_member(i)) throw std::logic_error("kill_primary: node " + std::to_string(i + 1) + " is no Sentinel member");
    open("failover" + std::to_string(i), "failover node " + std::to_string(i + 1) + " (kill -9 primary)");
  }
  std::vector<std::size_t> killed;
  for (auto i : members) killed.push_back(primary_[i]);
  const auto promoted = on_members(members, [&](std::size_t i) { primary_[i] = sentinels_[i]->kill_primary(); });
  for (std::size_t k = 0; k < members.size(); ++k) close("failover" + std::to_string(members[k]), promoted[k]);
  // The killed servers back as replicas, one after another on this thread
  // (a server dies with the thread that started it: PR_SET_PDEATHSIG). Not
  // a fault of the members' votes: shown so the timeline tells when the
  // next failover has a replica to promote.
  for (std::size_t k = 0; k < members.size(); ++k) {
    const std::string key = "rejoin" + std::to_string(members[k]);
    open(key, "rejoin node " + std::to_string(members[k] + 1) + ": the killed server, wiped, as its replica");
    sentinels_[members[k]]->rejoin(killed[k]);
    close(key);
  }
}

std::size_t ChaosBed::next_primary(std::size_t i, int slot) const {
  const test::ClusterBed& c = *clusters_.at(i);
  return c.primary((c.shard_of(c.owner(slot)) + 1) % c.shards());
}

void ChaosBed::cluster_reassign(const std::vector<std::size_t>& members, const std::vector<int>& slots) {
  std::string which;
  for (int slot : slots) which += (which.empty() ? "" : ", ") + std::to_string(slot);
  for (auto i : members) {
    if (!cluster_member(i)) throw std::logic_error("cluster_reassign: node " + std::to_string(i + 1) + " is no Cluster member");
    open("cluster" + std::to_string(i), "reassign node " + std::to_string(i + 1) + ": slot(s) " + which +
                                            " to the next shard without their keys");
  }
  const auto ended = on_members(members, [&](std::size_t i) {
    for (int slot : slots) clusters_[i]->reassign_without_keys(slot, next_primary(i, slot));
  });
  for (std::size_t k = 0; k < members.size(); ++k) close("cluster" + std::to_string(members[k]), ended[k]);
}

void ChaosBed::cluster_migrate(const std::vector<std::size_t>& members, const std::vector<int>& slots) {
  std::string which;
  for (int slot : slots) which += (which.empty() ? "" : ", ") + std::to_string(slot);
  for (auto i : members) {
    if (!cluster_member(i)) throw std::logic_error("cluster_migrate: node " + std::to_string(i + 1) + " is no Cluster member");
    open("cluster" + std::to_string(i), "migrate node " + std::to_string(i + 1) + ": slot(s) " + which +
                                            " to the next shard, keys and marker with them");
  }
  const auto ended = on_members(members, [&](std::size_t i) {
    for (int slot : slots) clusters_[i]->migrate(slot, next_primary(i, slot));
  });
  for (std::size_t k = 0; k < members.size(); ++k) close("cluster" + std::to_string(members[k]), ended[k]);
}

void ChaosBed::cluster_failover(const std::vector<std::size_t>& members, int slot) {
  std::vector<std::size_t> killed;
  for (auto i : members) {
    if (!cluster_member(i)) throw std::logic_error("cluster_failover: node " + std::to_string(i + 1) + " is no Cluster member");
    const test::ClusterBed& c = *clusters_[i];
    killed.push_back(c.primary(c.shard_of(c.owner(slot))));
    open("cluster" + std::to_string(i), "failover node " + std::to_string(i + 1) + ": kill -9 the primary of slot " +
                                            std::to_string(slot) + "'s shard");
  }
  const auto promoted = on_members(members, [&](std::size_t i) {
    const test::ClusterBed& c = *clusters_[i];
    clusters_[i]->kill_primary(c.shard_of(c.owner(slot)));
  });
  for (std::size_t k = 0; k < members.size(); ++k) {
    close("cluster" + std::to_string(members[k]), promoted[k]);
    // A release the killed primary took and never passed on leaves its key
    // on the promoted replica until its TTL: not a leak.
    last_touched_[members[k]] = promoted[k];
  }
  // The killed servers back as replicas, one after another on this thread
  // (a server dies with the thread that started it: PR_SET_PDEATHSIG).
  for (std::size_t k = 0; k < members.size(); ++k) {
    const std::string key = "rejoin" + std::to_string(members[k]);
    open(key, "rejoin node " + std::to_string(members[k] + 1) + ": the killed server, empty, as its shard's replica");
    rejoin_cluster_node(members[k], killed[k]);
    close(key);
  }
}

void ChaosBed::rejoin_cluster_node(std::size_t i, std::size_t j) {
  test::RedisServer& server = clusters_.at(i)->node(j);
  server.restart(false);  // no persistence: empty; nodes.conf kept, so the same node of the cluster
  // It comes back claiming its old slots at its old epoch; gossip tells it
  // the replica it had owns them at a newer one, and it turns replica.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds{20};
  std::string last;
  for (;;) {
    const test::Reply r = server.command({"INFO", "replication"});
    last = r.str;
    if (last.find("role:slave") != std::string::npos && last.find("master_link_status:up") != std::string::npos)
      return;
    if (std::chrono::steady_clock::now() > give_up)
      throw std::runtime_error("rejoin node " + std::to_string(i + 1) + ": " + server.address() +
                               " not a replica in sync after 20 s: " + last);
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
}

void ChaosBed::kill(std::size_t i) {
  master(i).kill();
  last_touched_[i] = monotonic_ns();
  open("node" + std::to_string(i), "kill node " + std::to_string(i + 1));
}

void ChaosBed::pause(std::size_t i) {
  master(i).pause();
  open("node" + std::to_string(i), "pause node " + std::to_string(i + 1));
}

void ChaosBed::resume(std::size_t i) {
  master(i).resume();
  close("node" + std::to_string(i));
}

void ChaosBed::restart(std::size_t i, bool wipe) {
  const std::string key = "node" + std::to_string(i);
  const bool was_down = std::any_of(open_.begin(), open_.end(), [&](const auto& p) { return p.first == key; });
  if (!was_down) open(key, (wipe ? "wipe+restart node " : "restart node ") + std::to_string(i + 1));
  master(i).restart(wipe);
  last_touched_[i] = monotonic_ns();
  close(key);
}

void ChaosBed::flushall(std::size_t i) {
  const std::string key = "flush" + std::to_string(i);
  open(key, "flushall node " + std::to_string(i + 1));
  const test::Reply r = master(i).command({"FLUSHALL"});
  close(key);
  if (r.str != "OK") throw std::runtime_error("FLUSHALL on node " + std::to_string(i + 1) + ": " + r.str);
}

void ChaosBed::pause_process(support::Process& worker, const std::string& what) {
  worker.pause();
  open("pid" + std::to_string(worker.pid()), what);
}

void ChaosBed::resume_process(support::Process& worker) {
  worker.resume();
  close("pid" + std::to_string(worker.pid()));
}

void ChaosBed::kill_process(support::Process& worker, const std::string& what) {
  worker.kill();
  const std::string key = "killed pid" + std::to_string(worker.pid());
  open(key, what);
  close(key);
}

void ChaosBed::heal_all() {
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    if (clusters_[i] != nullptr) {
      for (std::size_t j = 0; j < clusters_[i]->size(); ++j)
        if (!clusters_[i]->node(j).running()) rejoin_cluster_node(i, j);
      continue;
    }
    if (sentinels_[i] != nullptr) {
      for (std::size_t k = 0; k < 2; ++k) {
        auto& server = sentinels_[i]->server(k);
        if (server.running()) server.resume();  // a no-op unless paused
      }
      for (std::size_t k = 0; k < 2; ++k)
        if (!sentinels_[i]->server(k).running()) sentinels_[i]->rejoin(k);
      close("node" + std::to_string(i));
      continue;
    }
    auto& m = *masters_[i];
    if (!m.running()) {
      m.restart(false);
    } else {
      m.resume();  // a no-op unless paused
    }
    close("node" + std::to_string(i));
    if (!skew_dir_.empty()) unskew(i);
    if (!proxies_.empty()) proxies_[i]->control().clear("*");
  }
  while (!open_.empty()) close(open_.front().first);
}

std::size_t ChaosBed::leaked_keys(std::chrono::milliseconds grace) {
  const std::int64_t now = monotonic_ns();
  std::size_t n = 0;
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    const bool recent = last_touched_[i] != 0 &&
                        (grace == std::chrono::milliseconds::max() ||
                         now - last_touched_[i] < std::chrono::nanoseconds(grace).count());
    if (recent) continue;
    // A Cluster member's keys are on its shards' primaries (KEYS answers
    // for the node's own slots).
    std::vector<test::RedisServer*> servers;
    if (clusters_[i] != nullptr) {
      for (std::size_t s = 0; s < clusters_[i]->shards(); ++s)
        servers.push_back(&clusters_[i]->node(clusters_[i]->primary(s)));
    } else {
      servers.push_back(&master(i));
    }
    // (A semaphore's permits key keeps its P for good, as a fence counter
    // keeps its fence and an election its last record: not lock keys.)
    for (test::RedisServer* server : servers) {
      for (const std::string& key : server->keys("redlock:*")) {
        n += key != kMarkerKey && !key.ends_with("}:permits") && !key.ends_with("}:fence") &&
                     !key.ends_with("}:leader")
                 ? 1
                 : 0;
      }
    }
  }
  return n;
}

std::int64_t ChaosBed::counter_value(const std::string& resource) {
  const test::Reply r = counter_->command({"GET", "counter:" + resource});
  return r.str.empty() ? 0 : std::stoll(r.str);
}

std::int64_t ChaosBed::counter_total() {
  // One call, however many resources: the sum is taken inside the server.
  const test::Reply r = counter_->command(
      {"EVAL",
       "local n = 0 for _, k in ipairs(redis.call('KEYS', 'counter:*')) do n = n + redis.call('GET', k) end return n",
       "0"});
  if (r.type != REDIS_REPLY_INTEGER) throw std::runtime_error("counter redis: " + r.str);
  return r.integer;
}

}  // namespace redlock::chaos
