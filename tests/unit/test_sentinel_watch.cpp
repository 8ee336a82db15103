// test_sentinel_watch.cpp — where a sentinel member's primary is
// (src/sentinel_watch.hpp) on a fake Wire and manual time: the answers a
// sentinel may give, the subscription to +switch-master, and moving on to
// the next sentinel.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "fake_wire.hpp"
#include "sentinel_watch.hpp"
#include "test_runtime.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace redlock::test;
using std::chrono::milliseconds;

namespace {

std::optional<Endpoint> addr(const Reply& r) {
  std::vector<WireReply> store;
  for (const Reply& e : r.elements) store.push_back({e.type, e.integer, e.str, {}});
  const WireReply w{r.type, r.integer, r.str, store};
  std::string why;
  return parse_master_addr(w, why);
}

Reply push(std::string kind, std::string channel, std::string payload) {
  Reply r = strings({std::move(kind), std::move(channel)});
  r.elements.push_back(bulk(std::move(payload)));
  return r;
}

struct Bed {
  ManualRuntime runtime;
  FakeWireFactory wires;
  Options options;
  NodeAddress member;
  std::vector<std::string> named;
  int closed = 0;
  std::optional<SentinelWatch> watch;

  Bed() {
    member.kind = NodeAddress::Kind::sentinel;
    member.seeds = {{"10.0.0.1", 26379}, {"10.0.0.2", 26379}};
    member.master_name = "m1";
    member.sentinel_password = "s3cret";
    member.password = "data-pw";
  }
  void start() {
    watch.emplace(runtime, wires, member, options,
                  [this](const Endpoint& e) { named.push_back(e.host + ":" + std::to_string(e.port)); },
                  [this] { ++closed; });
    watch->start();
  }
  FakeWire& wire() {
    REQUIRE(wires.live != nullptr);
    return *wires.live;
  }
  // reconnected: the next connection, after the backoff.
  void reconnected() {
    for (const int connects = wires.connects; wires.connects == connects;) runtime.advance(milliseconds{1});
    wire().connected();
  }
};

}  // namespace

TEST_CASE("a +switch-master payload names a primary only for our name and only in its exact shape") {
  CHECK(parse_switch_master("m1 10.0.0.1 6379 10.0.0.2 6380", "m1") == Endpoint{"10.0.0.2", 6380});
  CHECK(parse_switch_master("m1 ::1 6379 ::1 6380", "m1") == Endpoint{"::1", 6380});
  for (const char* bad : {"m2 10.0.0.1 6379 10.0.0.2 6380", "m1 10.0.0.1 6379 10.0.0.2", "m1 a 1 b 2 c",
                          "m1 a 1 b 0", "m1 a 1 b 65536", "m1 a 1 b 12x", "m1 a 1 b -1", "m1 a 1 b ",
                          "m1 a 1  6380", "", "m1", "m1  a 1 b 2", "m1 a 1 b 000000006380"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_switch_master(bad, "m1"));
  }
  CHECK_FALSE(parse_switch_master("m1 a 1 " + std::string(256, 'h') + " 2", "m1"));
  CHECK(parse_switch_master("m1 a 1 " + std::string(255, 'h') + " 2", "m1"));
}

TEST_CASE("get-master-addr-by-name: [host, port] only") {
  CHECK(addr(strings({"127.0.0.1", "6379"})) == Endpoint{"127.0.0.1", 6379});
  CHECK_FALSE(addr(nil()));
  CHECK_FALSE(addr(error("ERR no such master")));
  CHECK_FALSE(addr(strings({"127.0.0.1"})));
  CHECK_FALSE(addr(strings({"127.0.0.1", "6379", "x"})));
  CHECK_FALSE(addr(strings({"127.0.0.1", "0"})));
  CHECK_FALSE(addr(strings({"", "6379"})));
  CHECK_FALSE(addr(strings({"a\nb", "6379"})));
  Reply ints{WireReply::Type::array, 0, {}, {integer(1), integer(2)}};
  CHECK_FALSE(addr(ints));
  CHECK_FALSE(addr(bulk("127.0.0.1:6379")));
  std::string why;
  const WireReply nil_reply{WireReply::Type::nil, 0, {}, {}};
  parse_master_addr(nil_reply, why);
  CHECK(why == "does not monitor that name");
}

TEST_CASE("the watch asks, subscribes on the same connection, and follows every switch of its name") {
  Bed bed;
  bed.start();
  REQUIRE(bed.wires.dialled == std::vector<std::string>{"10.0.0.1:26379"});
  bed.wire().connected();
  bed.wire().flush();
  // AUTH with the sentinels' password, never the data nodes'.
  REQUIRE(bed.wire().sent.size() == 3);
  CHECK(bed.wire().sent[0] == Command{"AUTH", "s3cret"});
  CHECK(bed.wire().sent[1] == Command{"SENTINEL", "get-master-addr-by-name", "m1"});
  CHECK(bed.wire().sent[2] == Command{"SUBSCRIBE", "+switch-master"});
  bed.wire().answer(status());
  bed.wire().answer(strings({"127.0.0.1", "6379"}));
  CHECK(bed.named == std::vector<std::string>{"127.0.0.1:6379"});
  bed.wire().answer(push("subscribe", "+switch-master", "1"));  // the count, as a bulk here: not read
  bed.wire().answer(push("message", "+switch-master", "other 127.0.0.1 1 127.0.0.1 2"));
  bed.wire().answer(push("message", "+switch-master", "m1 127.0.0.1 6379 127.0.0.1 6380"));
  bed.wire().answer(push("message", "+switch-master", "m1 garbage"));
  CHECK(bed.named == std::vector<std::string>{"127.0.0.1:6379", "127.0.0.1:6380"});
  CHECK(bed.watch->primary() == Endpoint{"127.0.0.1", 6380});
  CHECK(bed.wires.connects == 1);

  SUBCASE("anything else on the subscription ends it; the next sentinel is asked") {
    bed.wire().answer(status("OK"));
    CHECK(bed.wires.live == nullptr);
    bed.reconnected();
    CHECK(bed.wires.dialled.back() == "10.0.0.2:26379");
  }
  SUBCASE("refresh asks the next sentinel at once") {
    bed.watch->refresh("connection refused");
    CHECK(bed.wires.connects == 2);
    CHECK(bed.wires.dialled.back() == "10.0.0.2:26379");
    CHECK(bed.watch->last_error() == "sentinel 10.0.0.1:26379: asking the next sentinel: connection refused");
  }
  SUBCASE("close: no reconnect, closed on a later turn") {
    bed.watch->close();
    CHECK(bed.wires.live == nullptr);
    bed.runtime.advance(milliseconds{1});
    CHECK(bed.closed == 1);
  }
}

TEST_CASE("a sentinel that does not know the name, answers garbage or is down is skipped for the next one") {
  Bed bed;
  bed.member.sentinel_password.clear();
  bed.start();
  bed.wire().connected();
  bed.wire().flush();
  bed.wire().answer(nil());
  CHECK(bed.wires.live == nullptr);
  CHECK(bed.watch->last_error() == "sentinel 10.0.0.1:26379: does not monitor that name");
  bed.reconnected();
  CHECK(bed.wires.dialled.back() == "10.0.0.2:26379");
  bed.wire().flush();
  bed.wire().answer(strings({"127.0.0.1", "99999"}));
  CHECK(bed.watch->last_error() == "sentinel 10.0.0.2:26379: named a primary that is no host:port (127.0.0.1:99999)");
  bed.reconnected();
  CHECK(bed.wires.dialled.back() == "10.0.0.1:26379");  // round the list again
  bed.wire().lose("connection refused");
  bed.reconnected();
  CHECK(bed.wires.dialled.back() == "10.0.0.2:26379");
  bed.wire().flush();
  bed.wire().answer(strings({"127.0.0.1", "6379"}));
  CHECK(bed.named == std::vector<std::string>{"127.0.0.1:6379"});
}
