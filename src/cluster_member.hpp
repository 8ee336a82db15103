// cluster_member.hpp — a Redis Cluster as one member: one vote, whatever
// the shards behind it (docs/design.md §5, "Cluster members").
//
// A ClusterTopology reads the slot map; every primary it names gets a
// NodeSession of its own (as_shard: a handshake, run id and replication
// id, the restart quarantine, as for a lone master). A command goes to
// the primary that serves its keys' slot in the current map:
//
// - MOVED: the slot is elsewhere now. The map entry changes at once, a
//   refresh is asked for, and the command is sent there (it did not run).
//   ASK: sent to the node named, behind ASKING (this command only).
//   At most max_redirects of them per command, then it fails. TRYAGAIN
//   and CLUSTERDOWN are errors (a refresh is asked for on CLUSTERDOWN).
// - An acquire is followed, on the same connection, by the marker script
//   of its slot (keys redlock-marker{T}…, src/keys.hpp): its yes counts
//   only if the slot's marker shows the epoch this member knows (or, at
//   the first meeting, an old one), the shard and the slot are out of
//   quarantine, and the shard still serves the slot in the map. A slot
//   that lost its keys (reassigned without them, its shard restarted
//   empty or failed over to a replica that lacks writes, its keys migrated
//   with their marker) reads as created or replaced, and sits out the
//   quarantine from that moment, slot by slot; its state is the member's,
//   not a shard's, so it follows the slot to another shard.
// - Keys of several slots in one call: an extend_batch is sent as one
//   batch per slot and answered as one (any part failed: the batch
//   failed); any other multi-key call is refused, naming the member.
// - Commands taken before the first map wait for it (at most
//   connect_timeout), as a sentinel member's wait for its primary.
//
// Every event reaches the engine as Transport promises: for each accepted
// send, at most one `timeout`, then exactly one final event.
// Loop thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "redlock/config.hpp"
#include "redlock/status.hpp"
#include "cluster_map.hpp"
#include "cluster_topology.hpp"
#include "node_session.hpp"
#include "runtime.hpp"
#include "transport.hpp"
#include "wire.hpp"

namespace redlock::detail {

class ClusterMember {
 public:
  static constexpr unsigned max_redirects = 5;
  static constexpr std::size_t max_shards = 1024;  // sessions one member opens at most

  // Keeps references to everything; `map_wires` opens the topology
  // connection (cluster_slots_limits), `wires` the shards'. on_closed runs
  // once, on a later loop turn than close(), when every part has closed.
  ClusterMember(Runtime& runtime, WireFactory& wires, WireFactory& map_wires, const NodeAddress& address,
                const Options& options, const std::string* shas, QuarantineShare* share,
                std::function<void()> on_closed);
  ClusterMember(const ClusterMember&) = delete;
  ClusterMember& operator=(const ClusterMember&) = delete;
  ~ClusterMember();

  void start();
  void close();
  bool send(const Call& call, ReplySink* sink, std::size_t slot, std::string& why);
  void reapply_quarantine();
  // on_map_read: runs with every map read (also an unchanged one), after
  // the member took it.
  void on_map_read(std::function<void(const SlotMap&)> hook) { on_map_read_ = std::move(hook); }
  // observe: every shard session reports to `telemetry` (may be null) as
  // member `index` (its connections, errors and quarantines, summed).
  void observe(Telemetry* telemetry, std::size_t index) noexcept {
    telemetry_ = telemetry;
    index_ = index;
  }

  const std::string& address() const noexcept { return display_; }
  // health: the member as `redlock nodes` shows it: the shards' primaries
  // in `primary`, the longest quarantine of any shard, the oldest version.
  void health(Clock::time_point now, NodeHealth& out) const;
  // slot_quarantine_left: how long `slot` still sits out (zero: it counts).
  std::chrono::milliseconds slot_quarantine_left(int slot, Clock::time_point now) const;
  std::size_t maps() const noexcept { return topology_.maps(); }

 private:
  struct Part;
  struct Gather;
  struct SlotState {
    Call marker;                   // EVALSHA marker with this slot's keys
    std::string epoch;             // the marker's epoch as last seen ("" none)
    bool met = false;              // a marker answer was read
    bool renew = false;            // a loss was seen: the next marker carries a fresh epoch
    std::optional<Clock::time_point> last_loss;
    std::string reason;
  };

  void on_map(const SlotMap& map);
  NodeSession* session_for(const std::string& host, int port);
  SlotState& slot_state(int slot);
  bool dispatch(Part& part, std::string& why);
  void on_event(Part& part, std::size_t tag, const NodeEvent& ev);
  void judge_marker(Part& part, const NodeEvent& ev, Clock::time_point now);
  void finish(Part& part, const NodeEvent& ev);
  void release(Part& part);
  void gather(Gather& g, std::size_t index, const NodeEvent& ev);
  bool slot_blocked(int slot, Clock::time_point now, std::string& why) const;
  void note_slot_loss(int slot, Clock::time_point at, std::string reason);
  void on_map_timer();
  void fail_later(const std::vector<Part*>& parts);
  void await_map(Part* part);
  void part_closed();

  Runtime& runtime_;
  WireFactory& wires_;
  NodeAddress address_;
  std::string display_;
  const Options& options_;
  const std::string* shas_;
  QuarantineShare* share_;
  std::function<void()> on_closed_;
  std::function<void(const SlotMap&)> on_map_read_;
  Telemetry* telemetry_ = nullptr;
  std::size_t index_ = 0;
  bool closing_ = false;
  bool closed_reported_ = false;
  bool close_hold_ = false;  // close() waits for the parts that waited for a map to fail
  std::size_t parts_open_ = 0;  // topology + sessions not yet closed

  std::optional<SlotMap> map_;
  std::map<std::string, std::unique_ptr<NodeSession>> sessions_;  // by "host:port"
  std::vector<NodeSession*> owner_;                               // per slot, from map_ (null: none)
  std::unordered_map<int, SlotState> slots_;
  std::vector<std::unique_ptr<Part>> live_;  // parts with events still to come
  std::vector<Part*> awaiting_map_;
  std::vector<std::unique_ptr<Gather>> gathers_;
  std::unique_ptr<Timer> map_timer_;  // bounds the wait for the first map
  std::vector<Part*> to_fail_;        // fail_later's
  std::unique_ptr<Timer> fail_timer_;
  bool patched_ = false;              // a MOVED changed owner_ since the map was read
  ClusterTopology topology_;          // last: destroyed first
};

}  // namespace redlock::detail
