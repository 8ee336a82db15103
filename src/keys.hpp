// keys.hpp — the one place where a resource name becomes Redis names.
//
//   lock key      {prefix}{{resource}}:lock       e.g. redlock:{report}:lock
//   fence counter {prefix}{{resource}}:fence
//   release channel {prefix}{{resource}}:released
//   fair queue    {prefix}{{resource}}:queue        (fair acquires only)
//   fair turn     {prefix}{{resource}}:turn
//   fair expiry   {prefix}{{resource}}:expiry       (when each queued waiter's place lapses)
//   permit i      {prefix}{{resource}}:permit<i>:lock  (semaphores: slot i, 0 ≤ i < P)
//   permit fence  {prefix}{{resource}}:permit<i>:fence
//   permits       {prefix}{{resource}}:permits      the semaphore's P
//   permits channel {prefix}{{resource}}:permits:released
//   permits queue {prefix}{{resource}}:permits:queue  (and :permits:turn,
//                 :permits:expiry: a semaphore's fair waiters)
//   readers       {prefix}{{resource}}:readers      (read locks: each reader's expiry)
//   writers       {prefix}{{resource}}:writers      (writers waiting on readers)
//   leader        {prefix}{{resource}}:leader       (elections: the leader's record)
//   leader news   {prefix}{{resource}}:leader:news  (elections: a channel)
//   marker key    redlock-marker                  one per master (data loss)
//   marker server {redlock-marker}:server         the run id that wrote it
//   marker replid {redlock-marker}:replid         its master_replid then
//   slot marker   redlock-marker{T}               one per Cluster slot s in use (T = slot_tag(s))
//   slot server   redlock-marker{T}:server        the run id that wrote it
//   slot replid   redlock-marker{T}:replid        its master_replid then
//
// Why these can never collide (docs/design.md, "Keys"): the prefix holds no
// brace, so the first '{' of every resource name stands right after the
// prefix, and two names with different prefixes differ before it; after it
// comes the resource, which holds no '}', so the first '}' ends it; then
// one of the suffixes above, all different (a permit's slot in decimal
// without leading zeros), so equal names mean equal resource and equal
// kind. The marker key holds no '{' at all. The braces make the resource
// the Redis Cluster hash tag of all its names (a tag ends at the first
// '}', so a resource may not hold one: check_resource refuses it). The
// marker's server and replid keys end in none of the suffixes, so no
// resource name meets them, and their tag puts them in the marker's slot
// (one script, three keys). A slot marker would be a resource name of
// prefix "redlock-marker" and resource T with the suffix "" or ":server",
// and neither is a suffix above; T is the tag of both, so both are in slot
// s. (No suffix may ever be "", ":server" or ":replid".)
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "resp.hpp"
#include "slot.hpp"

namespace redlock::detail {

inline constexpr std::string_view marker_key = "redlock-marker";
inline constexpr std::string_view marker_server_key = "{redlock-marker}:server";
inline constexpr std::string_view marker_replid_key = "{redlock-marker}:replid";

// slot_marker_key / slot_marker_server_key / slot_marker_replid_key: the
// data-loss marker of one Cluster slot, the run id that wrote it and that
// server's replication id then; they go with the slot's keys when it moves
// to another shard, as a shard's own marker cannot.
inline std::string slot_marker_key(int slot) { return std::string(marker_key) + '{' + slot_tag(slot) + '}'; }
inline std::string slot_marker_server_key(int slot) { return slot_marker_key(slot) + ":server"; }
inline std::string slot_marker_replid_key(int slot) { return slot_marker_key(slot) + ":replid"; }

// assign_resource_name makes `out` {prefix}{{resource}}{suffix}, in the
// room it has (a buffer used again allocates nothing).
inline void assign_resource_name(std::string& out, std::string_view prefix, std::string_view resource,
                                 std::string_view suffix) {
  out.clear();
  out.reserve(prefix.size() + resource.size() + suffix.size() + 2);
  out += prefix;
  out += '{';
  out += resource;
  out += '}';
  out += suffix;
}

// append_resource_name_bulk appends {prefix}{{resource}}{suffix} to `out`
// as a RESP bulk string (a batch round's keys, encoded once).
inline void append_resource_name_bulk(std::string& out, std::string_view prefix, std::string_view resource,
                                      std::string_view suffix) {
  resp::append_header(out, '$', prefix.size() + resource.size() + suffix.size() + 2);
  out += prefix;
  out += '{';
  out += resource;
  out += '}';
  out += suffix;
  out += "\r\n";
}

// resource_name is {prefix}{{resource}}{suffix}.
inline std::string resource_name(std::string_view prefix, std::string_view resource, std::string_view suffix) {
  std::string out;
  assign_resource_name(out, prefix, resource, suffix);
  return out;
}

// resource_set: the resources of a multi-resource lock as the engine takes
// them — sorted, without duplicates: the same set is then the same keys in
// the same order on every master.
inline std::vector<std::string> resource_set(std::vector<std::string> resources) {
  std::sort(resources.begin(), resources.end());
  resources.erase(std::unique(resources.begin(), resources.end()), resources.end());
  return resources;
}

inline constexpr std::string_view lock_suffix = ":lock";
inline std::string lock_key(std::string_view prefix, std::string_view resource) {
  return resource_name(prefix, resource, lock_suffix);
}
inline std::string fence_key(std::string_view prefix, std::string_view resource) {
  return resource_name(prefix, resource, ":fence");
}
inline std::string release_channel(std::string_view prefix, std::string_view resource) {
  return resource_name(prefix, resource, ":released");
}

// permit_key: slot `slot` of the semaphore `resource` — a lock key
// (sibling_of gives its fence counter).
inline std::string permit_suffix(std::size_t slot) { return ":permit" + std::to_string(slot) + std::string(lock_suffix); }
inline std::string permit_key(std::string_view prefix, std::string_view resource, std::size_t slot) {
  return resource_name(prefix, resource, permit_suffix(slot));
}
inline std::string permits_key(std::string_view prefix, std::string_view resource) {
  return resource_name(prefix, resource, ":permits");
}
inline std::string permits_channel(std::string_view prefix, std::string_view resource) {
  return resource_name(prefix, resource, ":permits:released");
}

// sibling_of is the name of another kind for a lock key's resource
// (…}:lock → …}{suffix}).
inline std::string sibling_of(std::string_view lock_key, std::string_view suffix) {
  std::string out(lock_key.substr(0, lock_key.size() - lock_suffix.size()));
  out += suffix;
  return out;
}

// channel_of is the release channel of a lock key (…}:lock → …}:released).
inline std::string channel_of(std::string_view lock_key) { return sibling_of(lock_key, ":released"); }

// fence_key_of is the fence counter of a lock key (…}:lock → …}:fence).
inline std::string fence_key_of(std::string_view lock_key) { return sibling_of(lock_key, ":fence"); }

// leader_key_of / leader_channel_of: an election's record and its news
// channel, of the lock key its leaders hold (…}:leader, …}:leader:news).
inline std::string leader_key_of(std::string_view lock_key) { return sibling_of(lock_key, ":leader"); }
inline std::string leader_channel_of(std::string_view lock_key) { return sibling_of(lock_key, ":leader:news"); }

// fair_base_of: the stem of the fair queue's names for a lock key
// (…}:lock → …}) or for a semaphore's permit key or permits key
// (…}:permit<i>:lock, …}:permits → …}:permits): the first '}' ends the
// resource, since the prefix holds no brace and the resource no '}'. A
// lock and a semaphore of one name queue apart.
inline std::string fair_base_of(std::string_view key) {
  const std::size_t brace = key.find('}');
  std::string out(key.substr(0, brace + 1));
  if (key.substr(brace + 1).starts_with(":permit")) out += ":permits";
  return out;
}

// queue_key_of / turn_key_of: the fair queue and turn key of a lock (…}:queue,
// …}:turn) or of a semaphore's permits (…}:permits:queue, …}:permits:turn);
// src/scripts.hpp, "Fair order".
inline std::string queue_key_of(std::string_view key) { return fair_base_of(key) + ":queue"; }
inline std::string turn_key_of(std::string_view key) { return fair_base_of(key) + ":turn"; }
// readers_key_of / writers_key_of: a read-write lock's sorted sets — the
// readers by the master's time when each one's hold ends, and the writers
// that wait, by when each one's intent lapses (docs/design.md, "Read-write
// locks"). While a reader holds, the lock key holds readers_mark.
inline std::string readers_key_of(std::string_view lock_key) { return sibling_of(lock_key, ":readers"); }
inline std::string writers_key_of(std::string_view lock_key) { return sibling_of(lock_key, ":writers"); }
// readers_mark: the lock key's value while readers hold it. No value is
// ever this: a token has 1 to 128 characters before any '~'
// (src/token.hpp), so no value starts with one.
inline constexpr std::string_view readers_mark = "~readers";

// expiry_key_of: the sorted set of a fair queue's waiters by the master's
// time when each one's place lapses unless its next round comes first.
inline std::string expiry_key_of(std::string_view key) { return fair_base_of(key) + ":expiry"; }

}  // namespace redlock::detail
