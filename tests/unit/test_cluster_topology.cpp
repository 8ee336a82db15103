// test_cluster_topology.cpp — a cluster member's slot map kept current
// (src/cluster_topology.hpp) on a fake Wire and manual time: the map at
// each connect, refreshes asked for (at most one in flight, one per gap),
// the periodic one, a hostile map refused whole, and moving on from a
// node that fails to the next seed or to a node the last map named.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "cluster_topology.hpp"
#include "fake_wire.hpp"
#include "test_runtime.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace redlock::test;
using std::chrono::milliseconds;

namespace {

// shard_range: [start, end, [host, port, id]].
Reply shard_range(long long start, long long end, std::string host, long long port, char id) {
  Reply primary = strings({std::move(host)});
  primary.elements.push_back(integer(port));
  primary.elements.push_back(bulk(std::string(40, id)));
  return {WireReply::Type::array, 0, {}, {integer(start), integer(end), std::move(primary)}};
}

// two_shards: slots 0–8191 on 10.0.1.1:7001, the rest on `second`.
Reply two_shards(std::string second = "10.0.1.2") {
  return {WireReply::Type::array, 0, {},
          {shard_range(0, 8191, "10.0.1.1", 7001, 'a'), shard_range(8192, 16383, std::move(second), 7002, 'b')}};
}

struct Bed {
  ManualRuntime runtime;
  FakeWireFactory wires;
  Options options;
  NodeAddress member;
  std::vector<SlotMap> maps;
  int closed = 0;
  std::optional<ClusterTopology> topology;

  Bed() {
    member.kind = NodeAddress::Kind::cluster;
    member.seeds = {{"10.0.0.1", 7001}, {"10.0.0.2", 7001}};
    member.password = "pw";
  }
  void start() {
    topology.emplace(runtime, wires, member, options, [this](const SlotMap& m) { maps.push_back(m); },
                     [this] { ++closed; });
    topology->start();
  }
  FakeWire& wire() {
    REQUIRE(wires.live != nullptr);
    return *wires.live;
  }
  // asks: how many CLUSTER SLOTS went out on any connection.
  std::size_t asks() const {
    std::size_t n = 0;
    for (const Command& c : wires.log) n += c == Command{"CLUSTER", "SLOTS"} ? 1 : 0;
    return n;
  }
  // connect: the live connection comes up and its AUTH is answered.
  void connect() {
    wire().connected();
    wire().flush();
    REQUIRE(wire().sent.at(0) == Command{"AUTH", "pw"});
    wire().answer(status());
  }
  void reconnected() {
    for (int i = 0; wires.live == nullptr && i < 10000; ++i) runtime.advance(milliseconds{1});
    connect();
  }
};

}  // namespace

TEST_CASE("the map is read at the connect, and again when asked, at most one question in flight and one per gap") {
  Bed bed;
  bed.start();
  bed.connect();
  REQUIRE(bed.wire().sent.at(1) == Command{"CLUSTER", "SLOTS"});
  bed.wire().answer(two_shards());
  REQUIRE(bed.maps.size() == 1);
  CHECK(bed.maps[0].owner(0)->host == "10.0.1.1");
  CHECK(bed.maps[0].owner(16383)->port == 7002);
  CHECK(bed.topology->maps() == 1);

  // A MOVED storm right after the answer: one question, once the gap has passed.
  for (int i = 0; i < 100; ++i) bed.topology->refresh("MOVED 42 10.0.1.2:7002");
  CHECK(bed.asks() == 1);
  bed.runtime.advance(ClusterTopology::min_gap);
  bed.wire().flush();
  CHECK(bed.asks() == 2);
  for (int i = 0; i < 100; ++i) bed.topology->refresh("MOVED");  // while it is in flight: nothing more
  bed.runtime.advance(ClusterTopology::min_gap * 3);
  CHECK(bed.asks() == 2);
  bed.wire().answer(two_shards("10.0.1.3"));
  REQUIRE(bed.maps.size() == 2);
  CHECK(bed.maps[1].owner(16383)->host == "10.0.1.3");
  // Asked for while in flight: asked again after the gap since the last question.
  bed.runtime.advance(ClusterTopology::min_gap);
  bed.wire().flush();
  CHECK(bed.asks() == 3);
  bed.wire().answer(two_shards("10.0.1.3"));
  CHECK(bed.maps.size() == 3);  // an unchanged map is reported too

  SUBCASE("nothing asked: the periodic refresh") {
    bed.runtime.advance(ClusterTopology::refresh_interval);
    bed.wire().flush();
    CHECK(bed.asks() == 4);
  }
  SUBCASE("close: no reconnect, closed on a later turn") {
    bed.topology->close();
    CHECK(bed.wires.live == nullptr);
    bed.runtime.advance(milliseconds{1});
    CHECK(bed.closed == 1);
    bed.runtime.advance(ClusterTopology::refresh_interval * 2);
    CHECK(bed.wires.connects == 1);
  }
}

TEST_CASE("a map out of shape is refused whole and the next node is asked; then the nodes the last map named") {
  Bed bed;
  bed.start();
  bed.connect();
  bed.wire().answer(two_shards());
  REQUIRE(bed.maps.size() == 1);
  bed.runtime.advance(ClusterTopology::refresh_interval);
  bed.wire().flush();
  // Overlapping ranges: refused, nothing reported, the connection dropped.
  bed.wire().answer({WireReply::Type::array, 0, {}, {shard_range(0, 9000, "10.0.1.1", 7001, 'a'),
                                                       shard_range(8192, 16383, "10.0.1.2", 7002, 'b')}});
  CHECK(bed.maps.size() == 1);
  CHECK(bed.wires.live == nullptr);
  CHECK(bed.topology->last_error().starts_with("cluster node 10.0.0.1:7001: CLUSTER SLOTS: range 1"));
  bed.reconnected();
  CHECK(bed.wires.dialled.back() == "10.0.0.2:7001");
  bed.wire().answer(error("CLUSTERDOWN The cluster is down"));
  CHECK(bed.topology->last_error() == "cluster node 10.0.0.2:7001: CLUSTER SLOTS failed: CLUSTERDOWN The cluster is down");
  bed.reconnected();
  CHECK(bed.wires.dialled.back() == "10.0.1.1:7001");  // the seeds, then the primaries last named
  bed.wire().lose("connection refused");
  bed.reconnected();
  CHECK(bed.wires.dialled.back() == "10.0.1.2:7002");
  bed.wire().answer(two_shards());
  CHECK(bed.maps.size() == 2);
}

TEST_CASE("a node that stops answering CLUSTER SLOTS is dropped within stall_timeout; an unasked reply ends the connection") {
  Bed bed;
  bed.start();
  bed.connect();
  bed.wire().answer(two_shards());
  bed.runtime.advance(ClusterTopology::refresh_interval);
  bed.wire().flush();
  REQUIRE(bed.asks() == 2);
  bed.runtime.advance(bed.options.stall_timeout);
  CHECK(bed.wires.live == nullptr);
  CHECK(bed.topology->last_error().find("no answer to CLUSTER SLOTS") != std::string::npos);
  bed.reconnected();
  bed.wire().answer(two_shards());
  bed.wire().answer(two_shards());  // nothing asked
  CHECK(bed.wires.live == nullptr);
  CHECK(bed.topology->last_error().find("unsolicited reply") != std::string::npos);
  CHECK(bed.maps.size() == 2);
}
