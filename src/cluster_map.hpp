// cluster_map.hpp — which primary serves each hash slot of a Redis
// Cluster, read from a CLUSTER SLOTS reply. Pure; any thread.
//
// The reply comes from a server and is hostile until checked: a map the
// member routes by must be whole or not at all, so anything out of shape
// refuses the whole reply, with a reason that names what and where.
// Replicas are skipped (we never read from one), but must be arrays.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/config.hpp"
#include "resp.hpp"
#include "slot.hpp"
#include "wire.hpp"

namespace redlock::detail {

// cluster_slots_limits: the reply limits of the connection that asks
// CLUSTER SLOTS (reply_limits holds 4,096 elements: about 400 ranges).
// One range of a primary with r replicas, each node [endpoint, port, id,
// metadata of up to 2 pairs], is at most 1 + (3 + r) + (1 + r) × 8
// elements: 65,536 hold 5,461 ranges without replicas, 3,120 with one. The
// nesting is exactly 4 deep (reply, range, node, metadata). Every range
// is about 200 bytes, so 8 MiB is never the bound that bites first.
inline constexpr resp::ReplyLimits cluster_slots_limits{8 * 1024 * 1024, 65536, 4};

// ClusterShard — a primary that serves at least one slot.
struct ClusterShard {
  std::string node_id;  // 40 lowercase hex digits, as the cluster names it
  std::string host;     // never empty; printable ASCII, at most 255 bytes
  int port = 0;         // 1..65535

  bool operator==(const ClusterShard&) const = default;
};

// SlotMap — every slot's owner: an index into `shards`, or no_shard for a
// slot nobody serves (unassigned). A node id appears in one shard only.
struct SlotMap {
  static constexpr std::uint16_t no_shard = UINT16_MAX;  // more than the most shards (slot_count)

  std::vector<ClusterShard> shards;  // in the order the reply first names them
  std::vector<std::uint16_t> owners = std::vector<std::uint16_t>(slot_count, no_shard);

  // owner: the shard serving `slot` (0 ≤ slot < slot_count), or null.
  const ClusterShard* owner(int slot) const {
    const std::uint16_t i = owners[static_cast<std::size_t>(slot)];
    return i == no_shard ? nullptr : &shards[i];
  }

  bool operator==(const SlotMap&) const = default;
};

// parse_cluster_slots reads a CLUSTER SLOTS reply: an array of ranges
// [start, end, primary, replica…], each node [endpoint, port, node id,
// anything more (Redis 7's metadata)]. Ranges lie within 0..16383, start ≤
// end, and never overlap; one node id has one address. An endpoint that is
// nil (cluster-preferred-endpoint-type unknown-endpoint) or "" (a node
// that does not know its own address yet) means, as Redis documents, the
// host this reply came from: `answering_host` (with none, a unix socket,
// it is refused like any empty host). "?" (a hostname preferred
// but none announced) names no address at all, so a primary shown so is
// refused. An empty array is a map with no slot served. On refusal,
// nullopt and `why` ("CLUSTER SLOTS: range 3: …", server bytes quoted
// through resp::server_text).
std::optional<SlotMap> parse_cluster_slots(const WireReply& reply, std::string_view answering_host, std::string& why);

// Redirect — what a cluster node's error reply says about a command it did
// not run: MOVED (the slot is served elsewhere: for good), ASK (being
// imported there: this command only, behind ASKING), TRYAGAIN (a
// multi-key command whose keys are split mid-migration), CLUSTERDOWN (the
// cluster serves no slot now).
struct Redirect {
  enum class Kind : std::uint8_t { moved, ask, tryagain, down };
  Kind kind = Kind::moved;
  int slot = -1;  // moved, ask: 0..16383
  Endpoint to;    // moved, ask
};

// parse_redirect reads an error reply's text. "MOVED slot host:port" and
// "ASK slot host:port" (the last ':' ends the host; an empty host means
// `answering_host`, as Redis documents; a host as parse_cluster_slots
// accepts it, a port 1–65535, a slot 0–16383); "TRYAGAIN …" and
// "CLUSTERDOWN …". Anything else, or a MOVED/ASK out of shape, is no
// redirect (nullopt): an error like any other.
std::optional<Redirect> parse_redirect(std::string_view error, std::string_view answering_host);

}  // namespace redlock::detail
