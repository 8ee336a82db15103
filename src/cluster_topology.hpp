// cluster_topology.hpp — which primary serves each slot of a cluster
// member (redis+cluster://h:p,h:p), kept current. One connection at a
// time, to a seed or to a node the last map named: `CLUSTER SLOTS` at each
// connect, again when the member asks (refresh(): a MOVED, a CLUSTERDOWN,
// a shard's connection lost) and every `refresh_interval`; at most one in
// flight and at most one per `min_gap`, so a storm of MOVED replies costs
// one question. Each map read whole (parse_cluster_slots: anything out of
// shape refuses the whole reply, and the connection moves on to the next
// node) goes to the member through on_map; the member decides what a
// changed owner means. (Not wired yet: cluster members are refused when a
// client is created.)
//
// The connection asks for CLUSTER SLOTS with a WireFactory of its own
// (cluster_slots_limits: a fragmented map is larger than any lock reply).
// Loop thread only; no I/O of its own, so the simulator can run it.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/config.hpp"
#include "cluster_map.hpp"
#include "connection.hpp"
#include "runtime.hpp"
#include "wire.hpp"

namespace redlock::detail {

class ClusterTopology final : private ConnectionOwner {
 public:
  static constexpr std::chrono::milliseconds refresh_interval{1000};
  static constexpr std::chrono::milliseconds min_gap{50};

  // on_map runs with every map read (also an unchanged one); on_closed
  // once, on a later loop turn than close(). Keeps `runtime`, `wires` and
  // `options`, which must outlive it. `member`'s credentials and TLS are
  // used for every node.
  ClusterTopology(Runtime& runtime, WireFactory& wires, const NodeAddress& member, const Options& options,
                  std::function<void(const SlotMap&)> on_map, std::function<void()> on_closed);
  ClusterTopology(const ClusterTopology&) = delete;
  ClusterTopology& operator=(const ClusterTopology&) = delete;

  void start();
  // refresh: ask again soon (at once, or once min_gap has passed since the
  // last question). `why` is kept for reports.
  void refresh(std::string_view why);
  void close();

  // maps: how many maps have been read (0: none yet).
  std::size_t maps() const noexcept { return maps_; }
  // last_error: why the last connection or map went, naming the node
  // ("" when none has).
  const std::string& last_error() const noexcept { return last_error_; }
  // refresh_reason: what asked for the latest refresh ("" when nothing has).
  const std::string& refresh_reason() const noexcept { return last_refresh_reason_; }

 private:
  // ConnectionOwner
  bool on_open() override;
  void on_reply(const WireReply& reply) override;
  void on_down(std::string_view why) override;
  void on_state(Connection::State from, Connection::State to, std::string_view reason) override;

  bool ask();
  void on_timer();
  void next_node();

  Runtime& runtime_;
  const Options& options_;
  std::vector<Endpoint> seeds_;
  std::vector<Endpoint> known_;  // the primaries of the last map
  std::size_t next_ = 0;         // into seeds_ then known_
  NodeAddress node_;             // the one dialled now (the Connection reads it at each open)
  bool in_flight_ = false;       // a CLUSTER SLOTS is unanswered
  bool wanted_ = false;          // a refresh is due once the gap has passed
  TimePoint asked_at_{};
  std::size_t maps_ = 0;
  std::string last_error_;
  std::string last_refresh_reason_;  // what asked for the latest refresh
  std::function<void(const SlotMap&)> on_map_;
  std::unique_ptr<Timer> timer_;  // the periodic refresh and the gap
  Connection conn_;               // last: destroyed first
};

}  // namespace redlock::detail
