// cluster_map.cpp — reading CLUSTER SLOTS. See cluster_map.hpp.
#include "cluster_map.hpp"

#include <algorithm>
#include <charconv>
#include <unordered_map>

namespace redlock::detail {

namespace {

// max_host: the longest host name DNS allows.
constexpr std::size_t max_host = 255;

// shown: a reply as an error message names it (server bytes quoted).
std::string shown(const WireReply& r) {
  switch (r.type) {
    case WireReply::Type::status: return "the status '" + resp::server_text(r.str) + "'";
    case WireReply::Type::string: return "the string '" + resp::server_text(r.str) + "'";
    case WireReply::Type::integer: return "the integer " + std::to_string(r.integer);
    case WireReply::Type::error: return "the error '" + resp::server_text(r.str) + "'";
    case WireReply::Type::array: return "an array of " + std::to_string(r.elements.size());
    case WireReply::Type::nil: break;
  }
  return "nil";
}

bool is_node_id(std::string_view s) {
  return s.size() == 40 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// is_host: what we may hand the resolver (a C string: no NUL) and print:
// printable ASCII without spaces.
bool is_host(std::string_view s) {
  return !s.empty() && s.size() <= max_host &&
         std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

// ReplyReader — the checks, each naming where it failed.
class ReplyReader {
 public:
  ReplyReader(std::string_view answering_host, std::string& why) : answering_host_(answering_host), why_(why) {}

  std::optional<SlotMap> read(const WireReply& reply) {
    if (reply.type == WireReply::Type::error) {
      why_ = "CLUSTER SLOTS failed: " + resp::server_text(reply.str);
      return std::nullopt;
    }
    where_ = "CLUSTER SLOTS: ";
    if (reply.type != WireReply::Type::array) {
      fail(shown(reply) + ", not an array of ranges");
      return std::nullopt;
    }
    for (std::size_t i = 0; i < reply.elements.size(); ++i) {
      where_ = "CLUSTER SLOTS: range " + std::to_string(i) + ": ";
      if (!read_range(reply.elements[i])) return std::nullopt;
    }
    return std::move(map_);
  }

 private:
  // read_range: [start, end, primary, replica…]; the primary owns start..end.
  bool read_range(const WireReply& range) {
    if (range.type != WireReply::Type::array || range.elements.size() < 3) {
      return fail(shown(range) + ", not [start, end, primary, replica…]");
    }
    const std::span<const WireReply> e = range.elements;
    if (!is_slot(e[0])) return fail("the start is " + shown(e[0]) + ", not a slot (0..16383)");
    if (!is_slot(e[1])) return fail("the end is " + shown(e[1]) + ", not a slot (0..16383)");
    const auto start = static_cast<int>(e[0].integer);
    const auto end = static_cast<int>(e[1].integer);
    if (start > end) return fail("starts at slot " + std::to_string(start) + ", after its end " + std::to_string(end));
    for (std::size_t r = 3; r < e.size(); ++r) {
      if (e[r].type != WireReply::Type::array) {
        return fail("replica " + std::to_string(r - 3) + " is " + shown(e[r]) + ", not an array");
      }
    }
    std::uint16_t shard = 0;
    if (!read_primary(e[2], shard)) return false;
    for (int s = start; s <= end; ++s) {
      std::uint16_t& owner = map_.owners[static_cast<std::size_t>(s)];
      if (owner != SlotMap::no_shard) return fail("slot " + std::to_string(s) + " is in an earlier range too");
      owner = shard;
    }
    return true;
  }

  // read_primary: [endpoint, port, node id, …] → the index of its shard.
  bool read_primary(const WireReply& node, std::uint16_t& index) {
    if (node.type != WireReply::Type::array || node.elements.size() < 3) {
      return fail("the primary is " + shown(node) + ", not [endpoint, port, node id, …]");
    }
    const std::span<const WireReply> e = node.elements;
    ClusterShard shard;
    if (e[2].type != WireReply::Type::string || !is_node_id(e[2].str)) {
      return fail("the primary's node id is " + shown(e[2]) + ", not 40 lowercase hex digits");
    }
    shard.node_id = e[2].str;
    const std::string_view id = e[2].str;
    if (e[0].type == WireReply::Type::nil || (e[0].type == WireReply::Type::string && e[0].str.empty())) {
      shard.host = answering_host_;  // "the host you asked" (cluster_map.hpp)
    } else if (e[0].type == WireReply::Type::string && e[0].str == "?") {
      return fail("node " + shard.node_id +
                  " has no known address ('?': a hostname is preferred but it announces none)");
    } else if (e[0].type == WireReply::Type::string) {
      shard.host = e[0].str;
    } else {
      return fail("node " + shard.node_id + ": the endpoint is " + shown(e[0]) + ", not a host");
    }
    if (!is_host(shard.host)) {
      return fail("node " + shard.node_id + ": the host '" + resp::server_text(shard.host) + "' (" +
                  std::to_string(shard.host.size()) + " bytes) is not 1 to 255 bytes of printable ASCII");
    }
    if (e[1].type != WireReply::Type::integer || e[1].integer < 1 || e[1].integer > 65535) {
      return fail("node " + shard.node_id + ": the port is " + shown(e[1]) + ", not 1..65535");
    }
    shard.port = static_cast<int>(e[1].integer);
    return shard_of(id, std::move(shard), index);
  }

  // shard_of: one shard per node id, which keeps one address; and one node
  // per address.
  bool shard_of(std::string_view id, ClusterShard shard, std::uint16_t& index) {
    std::string address = shard.host + ":" + std::to_string(shard.port);
    const auto known = by_id_.find(id);
    if (known != by_id_.end()) {
      const ClusterShard& before = map_.shards[known->second];
      index = known->second;
      if (before.host == shard.host && before.port == shard.port) return true;
      return fail("node " + shard.node_id + " is at " + resp::server_text(address) + ", and at " +
                  resp::server_text(before.host + ":" + std::to_string(before.port)) + " in an earlier range");
    }
    const auto [other, fresh] = by_address_.try_emplace(std::move(address), id);
    if (!fresh) {
      return fail("nodes " + std::string(other->second) + " and " + shard.node_id + " are both at " +
                  resp::server_text(other->first));
    }
    // At most slot_count shards: each one owns a slot of its own.
    index = static_cast<std::uint16_t>(map_.shards.size());
    by_id_.emplace(id, index);
    map_.shards.push_back(std::move(shard));
    return true;
  }

  static bool is_slot(const WireReply& r) {
    return r.type == WireReply::Type::integer && r.integer >= 0 && r.integer < slot_count;
  }

  // fail: the reading stops, for `what` at where_.
  bool fail(const std::string& what) {
    why_ = where_ + what;
    return false;
  }

  std::string_view answering_host_;
  std::string& why_;
  std::string where_;
  SlotMap map_;
  // Node ids are views into the reply, which outlives the reading.
  std::unordered_map<std::string_view, std::uint16_t> by_id_;     // node id → shard
  std::unordered_map<std::string, std::string_view> by_address_;  // host:port → node id
};

}  // namespace

std::optional<SlotMap> parse_cluster_slots(const WireReply& reply, std::string_view answering_host, std::string& why) {
  return ReplyReader(answering_host, why).read(reply);
}

std::optional<Redirect> parse_redirect(std::string_view error, std::string_view answering_host) {
  Redirect r;
  if (error.starts_with("TRYAGAIN")) {
    r.kind = Redirect::Kind::tryagain;
    return r;
  }
  if (error.starts_with("CLUSTERDOWN")) {
    r.kind = Redirect::Kind::down;
    return r;
  }
  if (error.starts_with("MOVED ")) {
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.kind = Redirect::Kind::ask;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view slot = error.substr(0, space);
  const std::string_view where = error.substr(space + 1);
  const std::size_t colon = where.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const std::string_view host = colon == 0 ? answering_host : where.substr(0, colon);
  const std::string_view port = where.substr(colon + 1);
  int s = -1, p = 0;
  const auto [slot_end, slot_ec] = std::from_chars(slot.data(), slot.data() + slot.size(), s);
  const auto [port_end, port_ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (slot.empty() || slot_ec != std::errc{} || slot_end != slot.data() + slot.size() || s < 0 || s >= slot_count)
    return std::nullopt;
  if (port.empty() || port_ec != std::errc{} || port_end != port.data() + port.size() || p < 1 || p > 65535)
    return std::nullopt;
  if (!is_host(host)) return std::nullopt;
  r.slot = s;
  r.to.host.assign(host);
  r.to.port = p;
  return r;
}

}  // namespace redlock::detail
