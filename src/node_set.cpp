// node_set.cpp — the N masters of one client. See node_set.hpp.
#include "node_set.hpp"

#include "sha1.hpp"
#include "telemetry.hpp"

namespace redlock::detail {

const std::array<std::string, script_count>& script_shas() {
  static const std::array<std::string, script_count> shas = [] {
    std::array<std::string, script_count> out;
    for (std::size_t i = 0; i < script_count; ++i) out[i] = sha1_hex(script_bodies[i]);
    return out;
  }();
  return shas;
}

NodeSet::NodeSet(Runtime& runtime, WireFactory& wires, const Config& config, WireFactory* map_wires)
    : runtime_(runtime), wake_(runtime, wires, config.nodes, config.options) {
  sessions_.reserve(config.nodes.size());
  for (const NodeAddress& address : config.nodes) {
    if (address.kind == NodeAddress::Kind::cluster) {
      // A cluster member's sessions are its shards' (ClusterMember).
      sessions_.push_back(nullptr);
      clusters_.push_back(std::make_unique<ClusterMember>(
          runtime, wires, map_wires != nullptr ? *map_wires : wires, address, config.options, script_shas().data(),
          &quarantine_, [this] { session_closed(); }));
      // Its wake-up subscriber listens on a node of the map (a PUBLISH
      // reaches every node): the first seed, until the map no longer names
      // it as a primary (down, a replica, gone).
      clusters_.back()->on_map_read([this, i = clusters_.size() - 1](const SlotMap& map) { listen_on(i, map); });
      continue;
    }
    clusters_.push_back(nullptr);
    sessions_.push_back(std::make_unique<NodeSession>(runtime, wires, address, config.options, script_shas().data(),
                                                      [this] { session_closed(); }, [this] { mark_duplicates(); }));
  }
  quarantine_.raised = [this] {
    for (auto& session : sessions_) {
      if (session) session->reapply_quarantine();
    }
    for (auto& cluster : clusters_) {
      if (cluster) cluster->reapply_quarantine();
    }
  };
  for (auto& session : sessions_) {
    if (session) session->share(&quarantine_);
  }
  for (std::size_t i = 0; i < config.nodes.size(); ++i) {
    if (config.nodes[i].kind != NodeAddress::Kind::sentinel) {
      watches_.push_back(nullptr);
      continue;
    }
    watches_.push_back(std::make_unique<SentinelWatch>(
        runtime, wires, config.nodes[i], config.options, [this, i](const Endpoint& primary) { named(i, primary); },
        [this] { session_closed(); }));
    // Its primary went away or is no primary: ask the next sentinel.
    sessions_[i]->on_lost([watch = watches_[i].get()](std::string_view why) { watch->refresh(why); });
  }
  parts_ = sessions_.size();
  for (const auto& watch : watches_) parts_ += watch ? 1 : 0;
  std::vector<std::string> addresses;
  for (std::size_t i = 0; i < sessions_.size(); ++i) addresses.push_back(address(i));
  telemetry_ = std::make_shared<Telemetry>(config.options.observer, std::move(addresses));
  for (std::size_t i = 0; i < sessions_.size(); ++i) {
    if (sessions_[i]) sessions_[i]->observe(telemetry_.get(), i);
    if (clusters_[i]) clusters_[i]->observe(telemetry_.get(), i);
  }
  wake_.observe(telemetry_.get());
}

NodeSet::~NodeSet() = default;

void NodeSet::start() {
  for (auto& session : sessions_) {
    if (session) session->start();
  }
  for (auto& cluster : clusters_) {
    if (cluster) cluster->start();
  }
  for (auto& watch : watches_) {
    if (watch) watch->start();
  }
}

// listen_on: a cluster member's subscriber moves to the map's first
// primary when the node it listens on is none of the map's primaries.
void NodeSet::listen_on(std::size_t member, const SlotMap& map) {
  if (map.shards.empty()) return;
  const NodeAddress& now = wake_.target(member);
  for (const ClusterShard& shard : map.shards) {
    if (shard.host == now.host && shard.port == now.port) return;
  }
  wake_.retarget(member, {map.shards.front().host, map.shards.front().port},
                 "the cluster's map names it no primary");
}

// named: a sentinel named member's primary (again, or another).
void NodeSet::named(std::size_t member, const Endpoint& primary) {
  sessions_[member]->retarget(primary);
  wake_.retarget(member, primary, "the sentinels name another primary");
}

void NodeSet::close(std::function<void()> on_closed) {
  on_closed_ = std::move(on_closed);
  wake_.close([this] {
    wake_closed_ = true;
    maybe_closed();
  });
  if (sessions_.empty()) {
    // Nothing to wait for, but still never on the caller's stack.
    later_ = runtime_.timer([this] {
      sessions_closed_ = true;
      maybe_closed();
    });
    later_->start(std::chrono::milliseconds{0});
    return;
  }
  for (auto& session : sessions_) {
    if (session) session->close();
  }
  for (auto& cluster : clusters_) {
    if (cluster) cluster->close();
  }
  for (auto& watch : watches_) {
    if (watch) watch->close();
  }
}

const std::string& NodeSet::address(std::size_t node) const {
  return sessions_[node] ? sessions_[node]->address() : clusters_[node]->address();
}

bool NodeSet::send(std::size_t node, const Call& call, ReplySink* sink, std::size_t slot, std::string& why) {
  if (sessions_[node] ? sessions_[node]->send(call, sink, slot, why) : clusters_[node]->send(call, sink, slot, why))
    return true;
  telemetry_->node_error(node);
  return false;
}

// mark_duplicates: one server, one vote. Two configured masters that
// reported the same run id (two spellings of one address, two db numbers,
// unix and TCP) are one server: every one after the first is excluded,
// with a text naming both. Run after each handshake (a node may have been
// moved, or restarted as another server).
void NodeSet::mark_duplicates() {
  for (std::size_t i = 0; i < sessions_.size(); ++i) {
    if (!sessions_[i]) continue;  // a cluster member: one yes per server per round still holds (NodeEvent::server)
    const std::string& run_id = sessions_[i]->run_id();
    std::string text;
    for (std::size_t j = 0; j < i && text.empty() && !run_id.empty(); ++j) {
      if (sessions_[j] && sessions_[j]->run_id() == run_id) {
        text = "the same server as " + sessions_[j]->address() + " (run_id " + run_id +
               "): one server, one vote; configure it once";
      }
    }
    sessions_[i]->set_duplicate_of(std::move(text));
  }
}

void NodeSet::session_closed() {
  if (++closed_ < parts_) return;
  sessions_closed_ = true;
  maybe_closed();
}

void NodeSet::maybe_closed() {
  if (!sessions_closed_ || !wake_closed_) return;
  later_.reset();
  std::function<void()> done = std::move(on_closed_);
  if (done) done();  // may free this NodeSet
}

}  // namespace redlock::detail
