// test_survey.cpp — reading the inspect script's reply, and the verdict of
// `redlock status` (src/survey.cpp).
#include <doctest/doctest.h>

#include "survey.hpp"

using redlock::NodeHolding;
using redlock::ResourceStatus;
using redlock::detail::parse_inspect;
using redlock::detail::summarize;
using std::chrono::milliseconds;

TEST_CASE("parse_inspect: held, free, no expiry, tokens with spaces, and garbage") {
  NodeHolding h;
  REQUIRE(parse_inspect("9812 17 3f9c0a", h));
  CHECK(h.state == NodeHolding::State::held);
  CHECK(h.ttl == milliseconds{9812});
  CHECK(h.fence == 17);
  CHECK(h.token == "3f9c0a");

  NodeHolding f;
  REQUIRE(parse_inspect("-2 4", f));
  CHECK(f.state == NodeHolding::State::free);
  CHECK(f.fence == 4);
  CHECK(f.token.empty());

  NodeHolding forever;
  REQUIRE(parse_inspect("-1 0 written by hand", forever));
  CHECK(forever.state == NodeHolding::State::held);
  CHECK(forever.ttl == milliseconds{-1});
  CHECK(forever.token == "written by hand");

  for (const char* bad : {"", "abc", "12", "12 x tok", "-2", "-3 0 tok", "-2 0 extra", "5 -1 tok"}) {
    CAPTURE(bad);
    NodeHolding b;
    CHECK_FALSE(parse_inspect(bad, b));
    CHECK(b.state == NodeHolding::State::unreachable);
    CHECK(b.error.find("unexpected reply") != std::string::npos);
  }
}

TEST_CASE("parse_inspect: a key of another type is wrong_type, naming the key and its type") {
  NodeHolding lock;
  REQUIRE(parse_inspect("wrongtype list redlock:{r}:lock", lock));
  CHECK(lock.state == NodeHolding::State::wrong_type);
  CHECK(lock.error == "WRONGTYPE: the key redlock:{r}:lock holds a list, not a lock");
  CHECK(std::string(redlock::state_name(lock.state)) == "wrong_type");

  NodeHolding fence;  // a resource name may hold spaces: the key comes last
  REQUIRE(parse_inspect("wrongtype hash redlock:{a b}:fence", fence));
  CHECK(fence.state == NodeHolding::State::wrong_type);
  CHECK(fence.error == "WRONGTYPE: the key redlock:{a b}:fence holds a hash, not a fence counter");

  NodeHolding untyped;  // the user may not run TYPE
  REQUIRE(parse_inspect("wrongtype unknown redlock:{r}:lock", untyped));
  CHECK(untyped.state == NodeHolding::State::wrong_type);
  CHECK(untyped.error == "WRONGTYPE: the key redlock:{r}:lock holds a value of another type, not a lock");

  for (const char* bad : {"wrongtype", "wrongtype list", "wrongtype  key", "wrongtype list "}) {
    CAPTURE(bad);
    NodeHolding b;
    CHECK_FALSE(parse_inspect(bad, b));
    CHECK(b.state == NodeHolding::State::unreachable);
  }
}

namespace {

NodeHolding held(const std::string& token, long long ttl, bool quarantined = false) {
  NodeHolding h;
  h.state = NodeHolding::State::held;
  h.token = token;
  h.ttl = milliseconds{ttl};
  h.quarantined = quarantined;
  return h;
}

NodeHolding with_state(NodeHolding::State s) {
  NodeHolding h;
  h.state = s;
  return h;
}

}  // namespace

TEST_CASE("summarize: a majority on one token, its TTL the quorum-th longest") {
  ResourceStatus st;
  st.nodes = {held("a", 900), held("a", 500), held("a", 700), held("b", 5000), with_state(NodeHolding::State::free)};
  summarize(st);
  CHECK(st.quorum == 3);
  CHECK(st.held);
  CHECK(st.token == "a");
  CHECK(st.agreeing == 3);
  CHECK(st.ttl == milliseconds{500});
  CHECK(st.free_nodes == 1);
}

TEST_CASE("summarize: quarantined masters do not count; a split or a minority is not held") {
  ResourceStatus q;
  q.nodes = {held("a", 900), held("a", 900, true), held("a", 900, true), with_state(NodeHolding::State::unreachable),
             with_state(NodeHolding::State::free)};
  summarize(q);
  CHECK_FALSE(q.held);
  CHECK(q.token == "a");
  CHECK(q.agreeing == 1);
  CHECK(q.free_nodes == 1);

  ResourceStatus split;
  split.nodes = {held("a", 1), held("a", 1), held("b", 1), held("b", 1), with_state(NodeHolding::State::free)};
  summarize(split);
  CHECK_FALSE(split.held);
  CHECK(split.agreeing == 2);

  ResourceStatus none;
  none.nodes = {with_state(NodeHolding::State::free), with_state(NodeHolding::State::unreachable),
                with_state(NodeHolding::State::free)};
  summarize(none);
  CHECK_FALSE(none.held);
  CHECK(none.token.empty());
  CHECK(none.agreeing == 0);
  CHECK(none.free_nodes == 2);
  CHECK(none.quorum == 2);

  ResourceStatus forever;
  forever.nodes = {held("a", -1), held("a", -1), held("a", 100)};
  summarize(forever);
  CHECK(forever.held);
  CHECK(forever.ttl == milliseconds{-1});
}
