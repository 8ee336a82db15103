// cluster_topology.cpp — a cluster member's slot map, kept current. See
// cluster_topology.hpp.
#include "cluster_topology.hpp"

#include <algorithm>
#include <array>

namespace redlock::detail {

ClusterTopology::ClusterTopology(Runtime& runtime, WireFactory& wires, const NodeAddress& member,
                                 const Options& options, std::function<void(const SlotMap&)> on_map,
                                 std::function<void()> on_closed)
    : runtime_(runtime),
      options_(options),
      seeds_(member.seeds),
      on_map_(std::move(on_map)),
      timer_(runtime.timer([this] { on_timer(); })),
      conn_(runtime, wires, node_, options, *this, std::move(on_closed)) {
  node_.kind = NodeAddress::Kind::tcp;
  node_.user = member.user;
  node_.password = member.password;
  node_.tls = member.tls;
  if (!seeds_.empty()) {
    node_.host = seeds_[0].host;
    node_.port = seeds_[0].port;
  }
}

void ClusterTopology::start() {
  if (!seeds_.empty()) conn_.start();
}

// on_open: the map is the handshake; the connection is ready once one is
// read whole.
bool ClusterTopology::on_open() { return ask(); }

bool ClusterTopology::ask() {
  static constexpr std::array<std::string_view, 2> argv{"CLUSTER", "SLOTS"};
  if (!conn_.write(argv)) return false;
  in_flight_ = true;
  wanted_ = false;
  asked_at_ = runtime_.now();
  // Unanswered past stall_timeout, the node is dropped (on_timer).
  if (timer_) timer_->start(options_.stall_timeout);
  return true;
}

void ClusterTopology::on_reply(const WireReply& reply) {
  if (!in_flight_) return conn_.drop("unsolicited reply (no CLUSTER SLOTS was waiting for one); reconnecting");
  in_flight_ = false;
  std::string why;
  std::optional<SlotMap> map = parse_cluster_slots(reply, node_.host, why);
  if (!map) return conn_.drop(std::move(why));
  ++maps_;
  known_.clear();
  for (const ClusterShard& shard : map->shards) known_.push_back(Endpoint{shard.host, shard.port});
  if (conn_.state() == Connection::State::handshaking) conn_.ready();
  // Next: a refresh asked for meanwhile, once the gap has passed; else the
  // periodic one.
  const TimePoint now = runtime_.now();
  const auto gap_left = std::max(std::chrono::ceil<std::chrono::milliseconds>(asked_at_ + min_gap - now),
                                 std::chrono::milliseconds{0});
  timer_->start(wanted_ ? gap_left : refresh_interval);
  on_map_(*map);  // may call refresh() or close()
}

void ClusterTopology::refresh(std::string_view why) {
  last_refresh_reason_ = why;
  wanted_ = true;
  if (in_flight_ || conn_.state() != Connection::State::ready || timer_ == nullptr) return;  // asked at the answer or the connect
  const TimePoint due = asked_at_ + min_gap;
  const TimePoint now = runtime_.now();
  if (now >= due) {
    if (!ask()) conn_.drop("cannot queue CLUSTER SLOTS");
    return;
  }
  timer_->start(std::chrono::ceil<std::chrono::milliseconds>(due - now));
}

void ClusterTopology::on_timer() {
  if (conn_.state() != Connection::State::ready) return;
  if (in_flight_) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(runtime_.now() - asked_at_);
    return conn_.drop("no answer to CLUSTER SLOTS for " + std::to_string(waited.count()) + " ms (stalled); reconnecting");
  }
  if (!ask()) conn_.drop("cannot queue CLUSTER SLOTS");
}

// on_down: the next connection dials the next node: the seeds, then the
// primaries the last map named.
void ClusterTopology::on_down(std::string_view why) {
  last_error_ = "cluster node " + node_.display() + ": " + std::string(why);
  in_flight_ = false;
  if (timer_) timer_->stop();
  next_node();
}

void ClusterTopology::next_node() {
  const std::size_t count = seeds_.size() + known_.size();
  if (count == 0) return;
  next_ = (next_ + 1) % count;
  const Endpoint& e = next_ < seeds_.size() ? seeds_[next_] : known_[next_ - seeds_.size()];
  node_.host = e.host;
  node_.port = e.port;
}

void ClusterTopology::on_state(Connection::State, Connection::State to, std::string_view) {
  if (to == Connection::State::closed) timer_.reset();
}

void ClusterTopology::close() {
  if (timer_) timer_->stop();
  conn_.close(std::chrono::milliseconds{0});
}

}  // namespace redlock::detail
