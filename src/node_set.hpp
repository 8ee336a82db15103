// node_set.hpp — the N masters of one client: one NodeSession per
// configured master, all on one Runtime and one WireFactory, as the
// Transport the engine, the watchdogs and the surveys send through, and
// the WakeHub (one pub/sub connection per master) that its watch() goes
// to. It also keeps "one server, one vote" (masters that report the same
// run id) and closes every session and subscriber gracefully.
//
// Production builds it on a UvRuntime and a SocketWireFactory (ClientCore
// in src/async_client.cpp); the simulator (tools/sim) on simulated time and
// simulated connections. The same code decides in both.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redlock/config.hpp"
#include "cluster_member.hpp"
#include "node_session.hpp"
#include "runtime.hpp"
#include "scripts.hpp"
#include "sentinel_watch.hpp"
#include "transport.hpp"
#include "wake.hpp"
#include "wire.hpp"

namespace redlock::detail {

// script_shas: every script's SHA-1 (EVALSHA's name for it), in
// script_bodies' order. The bodies are constants, so they are hashed once
// per process, at the first call (thread-safe), not for each NodeSet.
const std::array<std::string, script_count>& script_shas();

class NodeSet final : public Transport {
 public:
  // NodeSet keeps references to all of them; they must outlive it. Nothing
  // connects before start(). `map_wires` opens a cluster member's
  // topology connection (larger replies: cluster_slots_limits); null:
  // `wires`.
  NodeSet(Runtime& runtime, WireFactory& wires, const Config& config, WireFactory* map_wires = nullptr);
  NodeSet(const NodeSet&) = delete;
  NodeSet& operator=(const NodeSet&) = delete;
  ~NodeSet() override;

  void start();
  // close closes every session gracefully (see NodeSession::close) and
  // every subscriber; on_closed runs once, when the last of them has
  // closed (on a later loop turn at the earliest). Waiters still watching
  // get no more wake-ups (a later watch() is `unavailable`).
  void close(std::function<void()> on_closed);

  std::size_t size() const override { return sessions_.size(); }
  // node: member i's session; not for a cluster member (see cluster()).
  const std::string& address(std::size_t node) const override;
  bool send(std::size_t node, const Call& call, ReplySink* sink, std::size_t slot, std::string& why) override;
  WatchState watch(const std::string& channel, WakeListener* listener) override {
    return wake_.watch(channel, listener);
  }
  void unwatch(const std::string& channel, WakeListener* listener) override { wake_.unwatch(channel, listener); }
  std::optional<std::uint64_t> heard(const std::string& channel) const override { return wake_.heard(channel); }

  const NodeSession& node(std::size_t i) const { return *sessions_[i]; }
  // watch: member i's SentinelWatch (null unless it is a sentinel member).
  const SentinelWatch* sentinel_watch(std::size_t i) const { return watches_[i].get(); }
  // cluster: member i's ClusterMember (null unless it is a cluster member).
  const ClusterMember* cluster(std::size_t i) const { return clusters_[i].get(); }
  Telemetry* telemetry() noexcept override { return telemetry_.get(); }
  // shared_telemetry: for a client's stats(), read from any thread.
  const std::shared_ptr<Telemetry>& shared_telemetry() const noexcept { return telemetry_; }

 private:
  void mark_duplicates();
  void named(std::size_t member, const Endpoint& primary);
  void listen_on(std::size_t member, const SlotMap& map);
  void session_closed();
  void maybe_closed();

  Runtime& runtime_;
  std::shared_ptr<Telemetry> telemetry_;  // before the sessions and subscribers: they report to it
  QuarantineShare quarantine_;  // before the sessions: they point to it
  std::vector<std::unique_ptr<NodeSession>> sessions_;
  WakeHub wake_;
  // One per member, null but for sentinel members: where its primary is.
  std::vector<std::unique_ptr<SentinelWatch>> watches_;
  // One per member, null but for cluster members.
  std::vector<std::unique_ptr<ClusterMember>> clusters_;
  std::size_t parts_ = 0;   // sessions and watches: what close() waits for
  std::size_t closed_ = 0;  // of them, closed
  bool sessions_closed_ = false;
  bool wake_closed_ = false;
  std::function<void()> on_closed_;
  std::unique_ptr<Timer> later_;  // close() of an empty set reports on a later turn
};

}  // namespace redlock::detail
