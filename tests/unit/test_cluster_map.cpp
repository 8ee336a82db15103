// test_cluster_map.cpp — reading CLUSTER SLOTS into a slot map: real
// Redis 7.0 replies (endpoints "", nil, a hostname with metadata),
// fragmented ranges, replicas skipped; and hostile replies refused whole,
// with a reason naming what is wrong, at every level. The reply limits of
// the connection that asks for it.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster_map.hpp"
#include "fake_wire.hpp"

using namespace redlock::detail;
using namespace redlock::test;

namespace {

const std::string id_a = "f2c24c983fc9cd22b9d2d4c0ef020891d5b023a5";  // as a real node named itself
const std::string id_b = std::string(40, 'b');
const std::string id_c = "0123456789abcdef0123456789abcdef01234567";

Reply array(std::vector<Reply> items) { return {WireReply::Type::array, 0, {}, std::move(items)}; }

// node: [endpoint, port, node id, metadata…] (Redis 7 adds the metadata).
Reply node(Reply endpoint, long long port, std::string id, std::vector<Reply> more = {array({})}) {
  std::vector<Reply> e = {std::move(endpoint), integer(port), bulk(std::move(id))};
  e.insert(e.end(), more.begin(), more.end());
  return array(std::move(e));
}
Reply node(std::string host, long long port, std::string id) { return node(bulk(std::move(host)), port, std::move(id)); }

Reply range(long long start, long long end, Reply primary, std::vector<Reply> replicas = {}) {
  std::vector<Reply> e = {integer(start), integer(end), std::move(primary)};
  e.insert(e.end(), replicas.begin(), replicas.end());
  return array(std::move(e));
}

std::optional<SlotMap> parse(const Reply& r, std::string& why, std::string_view answering = "10.0.0.9") {
  why.clear();
  Deep deep;
  return parse_cluster_slots(deep.of(r), answering, why);
}

// refusal: why `r` is refused (empty if it is not).
std::string refusal(const Reply& r, std::string_view answering = "10.0.0.9") {
  std::string why;
  return parse(r, why, answering) ? std::string() : why;
}

// resp_of: `r` as a server sends it.
std::string resp_of(const Reply& r) {
  switch (r.type) {
    case WireReply::Type::integer: return ":" + std::to_string(r.integer) + "\r\n";
    case WireReply::Type::string: return "$" + std::to_string(r.str.size()) + "\r\n" + r.str + "\r\n";
    case WireReply::Type::nil: return "$-1\r\n";
    case WireReply::Type::status: return "+" + r.str + "\r\n";
    case WireReply::Type::error: return "-" + r.str + "\r\n";
    case WireReply::Type::array: break;
  }
  std::string out = "*" + std::to_string(r.elements.size()) + "\r\n";
  for (const Reply& e : r.elements) out += resp_of(e);
  return out;
}

// fragmented: `ranges` one-slot ranges (every other slot) over 3 shards, each
// primary with one replica, every node with a hostname and its metadata.
Reply fragmented(int ranges) {
  std::vector<Reply> out;
  const std::string ids[] = {id_a, id_b, id_c};
  for (int i = 0; i < ranges; ++i) {
    auto with_meta = [](std::string host, int port, std::string id) {
      return node(bulk(std::move(host)), port, std::move(id),
                  {array({bulk("ip"), bulk("10.0.0.1"), bulk("hostname"), bulk("n.example")})});
    };
    const int shard = i % 3;
    out.push_back(range(2 * i, 2 * i, with_meta("p" + std::to_string(shard) + ".example", 7000 + shard, ids[shard]),
                        {with_meta("r.example", 8000 + shard, std::string(40, 'e'))}));
  }
  return array(std::move(out));
}

}  // namespace

TEST_CASE("cluster map: a real single-node reply — endpoint \"\" is the host that answered") {
  // CLUSTER SLOTS of a fresh redis-server 7.0.15 holding 0-100, 200-300 and
  // 16383: it does not know its own IP yet.
  const Reply r = array({range(0, 100, node("", 52843, id_a)), range(200, 300, node("", 52843, id_a)),
                         range(16383, 16383, node("", 52843, id_a))});
  std::string why;
  const auto map = parse(r, why, "127.0.0.1");
  REQUIRE_MESSAGE(map, why);
  REQUIRE(map->shards.size() == 1);
  CHECK(map->shards[0] == ClusterShard{id_a, "127.0.0.1", 52843});
  for (int s : {0, 100, 200, 300, 16383}) CHECK(map->owner(s) == &map->shards[0]);
  for (int s : {101, 199, 301, 16382}) CHECK(map->owner(s) == nullptr);
  CHECK(std::count(map->owners.begin(), map->owners.end(), 0) == 101 + 101 + 1);
}

TEST_CASE("cluster map: three shards over fragmented ranges, with metadata and replicas") {
  const Reply meta = array({bulk("hostname"), bulk("a.example")});
  const Reply r = array({
      range(0, 5460, node(bulk("10.0.0.1"), 7000, id_a, {meta}), {node("10.0.0.4", 7003, id_c.substr(0, 39) + "f")}),
      range(5461, 10922, node("10.0.0.2", 7001, id_b), {node("10.0.0.5", 7004, std::string(40, 'd')),
                                                         node("10.0.0.6", 7005, std::string(40, 'e'))}),
      range(10923, 12000, node(bulk("10.0.0.3"), 7002, id_c, {meta, integer(7), array({array({})})})),
      range(12001, 12001, node("10.0.0.1", 7000, id_a)),  // the same node again: its shard
      range(12003, 16383, node(bulk("10.0.0.3"), 7002, id_c, {})),  // Redis 6: no metadata
  });
  std::string why;
  const auto map = parse(r, why);
  REQUIRE_MESSAGE(map, why);
  REQUIRE(map->shards.size() == 3);
  CHECK(map->shards[0] == ClusterShard{id_a, "10.0.0.1", 7000});
  CHECK(map->shards[1] == ClusterShard{id_b, "10.0.0.2", 7001});
  CHECK(map->shards[2] == ClusterShard{id_c, "10.0.0.3", 7002});
  CHECK(map->owner(0)->node_id == id_a);
  CHECK(map->owner(5460)->node_id == id_a);
  CHECK(map->owner(5461)->node_id == id_b);
  CHECK(map->owner(10922)->node_id == id_b);
  CHECK(map->owner(10923)->node_id == id_c);
  CHECK(map->owner(12001)->node_id == id_a);
  CHECK(map->owner(12002) == nullptr);  // unassigned
  CHECK(map->owner(16383)->node_id == id_c);
  std::string again;
  CHECK(parse(r, again) == map);  // the same reply, the same map
}

TEST_CASE("cluster map: a nil endpoint is the host that answered; \"?\" names no address and is refused") {
  std::string why;
  const auto map = parse(array({range(0, 16383, node(nil(), 7000, id_a))}), why, "cache.example");
  REQUIRE_MESSAGE(map, why);
  CHECK(map->shards[0].host == "cache.example");
  CHECK(refusal(array({range(0, 16383, node("?", 7000, id_a))})) ==
        "CLUSTER SLOTS: range 0: node " + id_a + " has no known address ('?': a hostname is preferred but it announces none)");
  // A replica's "?" is not ours to judge.
  CHECK(refusal(array({range(0, 16383, node("h", 7000, id_a), {node("?", 7001, id_b)})})).empty());
  // The connection that answered has no host (a unix socket): nothing to use.
  CHECK(refusal(array({range(0, 1, node("", 7000, id_a))}), "").find("is not 1 to 255 bytes") != std::string::npos);
}

TEST_CASE("cluster map: an empty array is a cluster with no slot served") {
  std::string why;
  const auto map = parse(array({}), why);
  REQUIRE_MESSAGE(map, why);
  CHECK(map->shards.empty());
  CHECK(std::all_of(map->owners.begin(), map->owners.end(), [](auto o) { return o == SlotMap::no_shard; }));
}

TEST_CASE("cluster map: the edges that are allowed") {
  const std::string longest(255, 'h');
  std::string why;
  const auto map = parse(array({range(0, 0, node(longest, 1, id_a)), range(16383, 16383, node("h", 65535, id_b)),
                                range(1, 16382, node("h", 2, id_c), {array({}), array({integer(1)})})}),
                         why);
  REQUIRE_MESSAGE(map, why);
  CHECK(map->shards[0].host == longest);
  CHECK(map->shards[0].port == 1);
  CHECK(map->shards[1].port == 65535);
  CHECK(std::none_of(map->owners.begin(), map->owners.end(), [](auto o) { return o == SlotMap::no_shard; }));
}

TEST_CASE("cluster map: hostile replies are refused whole, naming what and where") {
  const Reply ok = node("h", 7000, id_a);
  struct Case {
    Reply reply;
    std::string why;
  };
  const std::string at0 = "CLUSTER SLOTS: range 0: ";
  const std::string at1 = "CLUSTER SLOTS: range 1: ";
  const Case cases[] = {
      // The reply itself.
      {error("CLUSTERDOWN\x1b[31m off"), "CLUSTER SLOTS failed: CLUSTERDOWN?[31m off"},
      {error("ERR This instance has cluster support disabled"),
       "CLUSTER SLOTS failed: ERR This instance has cluster support disabled"},
      {status("OK"), "CLUSTER SLOTS: the status 'OK', not an array of ranges"},
      {integer(3), "CLUSTER SLOTS: the integer 3, not an array of ranges"},
      {nil(), "CLUSTER SLOTS: nil, not an array of ranges"},
      {bulk("x"), "CLUSTER SLOTS: the string 'x', not an array of ranges"},
      // A range.
      {array({integer(0)}), at0 + "the integer 0, not [start, end, primary, replica…]"},
      {array({array({integer(0), integer(1)})}), at0 + "an array of 2, not [start, end, primary, replica…]"},
      {array({range(0, 1, ok), nil()}), at1 + "nil, not [start, end, primary, replica…]"},
      {array({array({bulk("0"), integer(1), ok})}), at0 + "the start is the string '0', not a slot (0..16383)"},
      {array({array({integer(0), status("1"), ok})}), at0 + "the end is the status '1', not a slot (0..16383)"},
      {array({range(-1, 1, ok)}), at0 + "the start is the integer -1, not a slot (0..16383)"},
      {array({range(0, 16384, ok)}), at0 + "the end is the integer 16384, not a slot (0..16383)"},
      {array({range(0, LLONG_MAX, ok)}), at0 + "the end is the integer 9223372036854775807, not a slot (0..16383)"},
      {array({range(LLONG_MIN, 5, ok)}), at0 + "the start is the integer -9223372036854775808, not a slot (0..16383)"},
      {array({range(10, 9, ok)}), at0 + "starts at slot 10, after its end 9"},
      {array({range(0, 100, ok), range(100, 200, node("h2", 7000, id_b))}), at1 + "slot 100 is in an earlier range too"},
      {array({range(50, 60, ok), range(0, 16383, ok)}), at1 + "slot 50 is in an earlier range too"},
      {array({range(0, 1, ok, {integer(5)})}), at0 + "replica 0 is the integer 5, not an array"},
      {array({range(0, 1, ok, {array({}), bulk("r")})}), at0 + "replica 1 is the string 'r', not an array"},
      // The primary.
      {array({array({integer(0), integer(1), bulk("h:7000")})}),
       at0 + "the primary is the string 'h:7000', not [endpoint, port, node id, …]"},
      {array({array({integer(0), integer(1), array({bulk("h"), integer(7000)})})}),
       at0 + "the primary is an array of 2, not [endpoint, port, node id, …]"},
      {array({range(0, 1, node("h", 7000, id_a.substr(1)))}),
       at0 + "the primary's node id is the string '" + id_a.substr(1) + "', not 40 lowercase hex digits"},
      {array({range(0, 1, node("h", 7000, id_a + "0"))}),
       at0 + "the primary's node id is the string '" + id_a + "0', not 40 lowercase hex digits"},
      {array({range(0, 1, node("h", 7000, std::string(40, 'A')))}),
       at0 + "the primary's node id is the string '" + std::string(40, 'A') + "', not 40 lowercase hex digits"},
      {array({range(0, 1, node("h", 7000, std::string(39, 'a') + "g"))}),
       at0 + "the primary's node id is the string '" + std::string(39, 'a') + "g', not 40 lowercase hex digits"},
      {array({range(0, 1, node("h", 7000, std::string(39, 'a') + '\n'))}),
       at0 + "the primary's node id is the string '" + std::string(39, 'a') + "?', not 40 lowercase hex digits"},
      {array({range(0, 1, array({bulk("h"), integer(7000), integer(5)}))}),
       at0 + "the primary's node id is the integer 5, not 40 lowercase hex digits"},
      {array({range(0, 1, node(integer(1), 7000, id_a))}), at0 + "node " + id_a + ": the endpoint is the integer 1, not a host"},
      {array({range(0, 1, node(array({}), 7000, id_a))}), at0 + "node " + id_a + ": the endpoint is an array of 0, not a host"},
      {array({range(0, 1, node("h", 0, id_a))}), at0 + "node " + id_a + ": the port is the integer 0, not 1..65535"},
      {array({range(0, 1, node("h", 65536, id_a))}), at0 + "node " + id_a + ": the port is the integer 65536, not 1..65535"},
      {array({range(0, 1, node("h", -7000, id_a))}), at0 + "node " + id_a + ": the port is the integer -7000, not 1..65535"},
      {array({range(0, 1, array({bulk("h"), bulk("7000"), bulk(id_a)}))}),
       at0 + "node " + id_a + ": the port is the string '7000', not 1..65535"},
      {array({range(0, 1, node("a b", 7000, id_a))}),
       at0 + "node " + id_a + ": the host 'a b' (3 bytes) is not 1 to 255 bytes of printable ASCII"},
      {array({range(0, 1, node(std::string("a\0b", 3), 7000, id_a))}),
       at0 + "node " + id_a + ": the host 'a?b' (3 bytes) is not 1 to 255 bytes of printable ASCII"},
      {array({range(0, 1, node("h\xc3\xa9", 7000, id_a))}),
       at0 + "node " + id_a + ": the host 'h\xc3\xa9' (3 bytes) is not 1 to 255 bytes of printable ASCII"},
      // One node id, one address; one address, one node.
      {array({range(0, 1, ok), range(2, 3, node("h", 7001, id_a))}),
       at1 + "node " + id_a + " is at h:7001, and at h:7000 in an earlier range"},
      {array({range(0, 1, ok), range(2, 3, node("h", 7000, id_b))}), at1 + "nodes " + id_a + " and " + id_b + " are both at h:7000"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.why);
    CHECK(refusal(c.reply) == c.why);
  }
  // A huge host: its length named, its bytes quoted cut short.
  const std::string why = refusal(array({range(0, 1, node(std::string(100000, 'h'), 7000, id_a))}));
  CHECK(why.starts_with(at0 + "node " + id_a + ": the host '" + std::string(256, 'h') + "… (100000 bytes)' (100000 bytes)"));
}

TEST_CASE("cluster map: a fragmented cluster's reply passes cluster_slots_limits, and not reply_limits") {
  const Reply r = fragmented(3000);  // one-slot ranges, a replica each, metadata on every node
  const std::string bytes = resp_of(r);
  std::string why;
  resp::ReplyScanner usual(resp::reply_limits);
  CHECK_FALSE(usual.scan(bytes, why));
  CHECK(why.starts_with("reply too large: "));
  resp::ReplyScanner larger(cluster_slots_limits);
  CHECK_MESSAGE(larger.scan(bytes, why), why);
  CHECK(larger.ready() == 1);
  const auto map = parse(r, why);
  REQUIRE_MESSAGE(map, why);
  CHECK(map->shards.size() == 3);
  CHECK(map->owner(2 * 2999)->node_id == id_c);
  CHECK(map->owner(2 * 2999 + 1) == nullptr);
}

TEST_CASE("cluster redirect: MOVED, ASK, TRYAGAIN and CLUSTERDOWN as a 7.0 node words them") {
  const auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381", "10.0.0.9");
  REQUIRE(moved);
  CHECK(moved->kind == Redirect::Kind::moved);
  CHECK(moved->slot == 3999);
  CHECK(moved->to == redlock::Endpoint{"127.0.0.1", 6381});
  const auto ask = parse_redirect("ASK 16383 ::1:7002", "h");
  REQUIRE(ask);
  CHECK(ask->kind == Redirect::Kind::ask);
  CHECK(ask->slot == 16383);
  CHECK(ask->to == redlock::Endpoint{"::1", 7002});  // the last ':' ends the host
  // An empty host (cluster-preferred-endpoint-type unknown-endpoint): the
  // node that answered.
  const auto here = parse_redirect("MOVED 0 :7003", "127.0.0.7");
  REQUIRE(here);
  CHECK(here->to == redlock::Endpoint{"127.0.0.7", 7003});
  CHECK(parse_redirect("TRYAGAIN Multiple keys request during rehashing of slot", "h")->kind ==
        Redirect::Kind::tryagain);
  CHECK(parse_redirect("CLUSTERDOWN The cluster is down", "h")->kind == Redirect::Kind::down);
}

TEST_CASE("cluster redirect: anything out of shape is no redirect, but an error like any other") {
  const char* hostile[] = {
      "MOVED",                          // nothing after
      "MOVED 3999",                     // no address
      "MOVED 3999 127.0.0.1",           // no port
      "MOVED 16384 127.0.0.1:6381",     // slot out of range
      "MOVED -1 127.0.0.1:6381",        // negative slot
      "MOVED 12a 127.0.0.1:6381",       // not a number
      "ASK 1 127.0.0.1:0",              // port 0
      "ASK 1 127.0.0.1:65536",          // port out of range
      "ASK 1 127.0.0.1:+80",            // a sign
      "MOVED 1 bad\x01host:6381",       // a control byte in the host
      "MOVED 1 :6381",                  // empty host and no answering host (a unix socket)
      "WRONGTYPE Operation against a key holding the wrong kind of value",
      "moved 1 127.0.0.1:6381",         // Redis's words are upper case
  };
  for (const char* text : hostile) {
    CAPTURE(text);
    CHECK_FALSE(parse_redirect(text, ""));
  }
  const std::string long_host = "MOVED 1 " + std::string(256, 'h') + ":6381";
  CHECK_FALSE(parse_redirect(long_host, ""));
}
