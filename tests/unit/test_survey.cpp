// test_survey.cpp — reading the inspect script's reply, and the verdict of
// `redlock status` (src/survey.cpp); surveys and Runtime::post on a
// manual runtime (no loop).
#include <doctest/doctest.h>

#include <vector>

#include "fake_transport.hpp"
#include "survey.hpp"
#include "test_runtime.hpp"

using redlock::NodeHolding;
using redlock::detail::Survey;
using redlock::detail::SurveyAnswer;
using redlock::test::FakeTransport;
using redlock::test::ManualRuntime;
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

TEST_CASE("parse_inspect: a fair queue before the holding, and replies without one read as before") {
  NodeHolding h;
  REQUIRE(parse_inspect("queue 3 0123abcd4567ef01 9812 17 Q0123abcd4567ef01 with spaces", h));
  CHECK(h.state == NodeHolding::State::held);
  CHECK(h.queued == 3);
  CHECK(h.queue_head == "0123abcd4567ef01");
  CHECK(h.ttl == milliseconds{9812});
  CHECK(h.fence == 17);
  CHECK(h.token == "Q0123abcd4567ef01 with spaces");

  NodeHolding f;  // a queue on a free lock: its head's turn (docs/design.md, "Fair order")
  REQUIRE(parse_inspect("queue 1 ? -2 0", f));
  CHECK(f.state == NodeHolding::State::free);
  CHECK(f.queued == 1);
  CHECK(f.queue_head == "?");

  NodeHolding none;  // no queue: nothing before the holding
  none.queued = 9;  // left from an earlier answer: cleared
  none.queue_head = "stale";
  REQUIRE(parse_inspect("-2 4", none));
  CHECK(none.queued == 0);
  CHECK(none.queue_head.empty());

  NodeHolding wrong;
  REQUIRE(parse_inspect("wrongtype string redlock:{r}:queue", wrong));
  CHECK(wrong.state == NodeHolding::State::wrong_type);
  CHECK(wrong.error == "WRONGTYPE: the key redlock:{r}:queue holds a string, not a fair queue");
  CHECK(wrong.queued == 0);

  // "queue" is never a PTTL: a malformed prefix is no reply we know.
  for (const char* bad : {"queue", "queue ", "queue 3", "queue 3 head", "queue 0 head -2 0", "queue -1 head -2 0",
                          "queue x head -2 0", "queue 3  -2 0", "queue 2 head garbage"}) {
    CAPTURE(bad);
    NodeHolding b;
    CHECK_FALSE(parse_inspect(bad, b));
    CHECK(b.state == NodeHolding::State::unreachable);
    CHECK(b.queued == 0);
    CHECK(b.queue_head.empty());
    CHECK(b.error.find("unexpected reply") != std::string::npos);
  }
}

TEST_CASE("parse_inspect: lapsed places (their waiters sent no round within their life) are counted apart") {
  NodeHolding h;  // live waiters and lapsed ones
  REQUIRE(parse_inspect("lapsed 2 queue 1 0123abcd4567ef01 9812 17 Qx", h));
  CHECK(h.state == NodeHolding::State::held);
  CHECK(h.lapsed == 2);
  CHECK(h.queued == 1);
  CHECK(h.queue_head == "0123abcd4567ef01");
  CHECK(h.token == "Qx");

  NodeHolding dead;  // a queue nobody serves: no live waiter, no head
  dead.queued = 4;   // left from an earlier answer: cleared
  dead.queue_head = "stale";
  REQUIRE(parse_inspect("lapsed 1 -2 0", dead));
  CHECK(dead.state == NodeHolding::State::free);
  CHECK(dead.lapsed == 1);
  CHECK(dead.queued == 0);
  CHECK(dead.queue_head.empty());

  NodeHolding none;
  none.lapsed = 3;  // cleared too
  REQUIRE(parse_inspect("-2 0", none));
  CHECK(none.lapsed == 0);

  NodeHolding wrong;
  REQUIRE(parse_inspect("wrongtype string redlock:{r}:expiry", wrong));
  CHECK(wrong.error == "WRONGTYPE: the key redlock:{r}:expiry holds a string, not a fair queue's expiry set");

  for (const char* bad : {"lapsed", "lapsed ", "lapsed 0 -2 0", "lapsed -1 -2 0", "lapsed x -2 0",
                          "lapsed 2 queue 0 h -2 0", "queue 1 h lapsed 2 -2 0"}) {
    CAPTURE(bad);
    NodeHolding b;
    CHECK_FALSE(parse_inspect(bad, b));
    CHECK(b.state == NodeHolding::State::unreachable);
    CHECK(b.lapsed == 0);
    CHECK(b.queued == 0);
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

namespace {

NodeHolding queued(std::size_t n, const std::string& head, bool quarantined = false) {
  NodeHolding h;
  h.state = NodeHolding::State::free;
  h.queued = n;
  h.queue_head = head;
  h.quarantined = quarantined;
  return h;
}

}  // namespace

TEST_CASE("summarize: the fair queue a majority reports at least, and the head a majority names") {
  ResourceStatus st;  // 3, 2, 2, 1, 0: a majority (3) reports 2 or more
  st.nodes = {queued(3, "w1"), queued(2, "w1"), queued(2, "w1"), queued(1, "w2"), queued(0, "")};
  summarize(st);
  CHECK(st.queued == 2);
  CHECK(st.queue_head == "w1");

  ResourceStatus none;
  none.nodes = {queued(0, ""), queued(0, ""), queued(0, "")};
  summarize(none);
  CHECK(none.queued == 0);
  CHECK(none.queue_head.empty());

  ResourceStatus lapsed;  // a queue nobody serves: no live waiter, the lapsed places a majority keeps
  lapsed.nodes = {queued(0, ""), queued(0, ""), queued(0, "")};
  lapsed.nodes[0].lapsed = 2;
  lapsed.nodes[1].lapsed = 1;
  summarize(lapsed);
  CHECK(lapsed.queued == 0);
  CHECK(lapsed.lapsed == 1);
  CHECK(lapsed.queue_head.empty());

  ResourceStatus minority;  // on one master of three: not a majority's
  minority.nodes = {queued(4, "w1"), queued(0, ""), with_state(NodeHolding::State::unreachable)};
  summarize(minority);
  CHECK(minority.queued == 0);
  CHECK(minority.queue_head.empty());

  ResourceStatus split;  // every master queues, but no majority names one head
  split.nodes = {queued(2, "w1"), queued(2, "w1"), queued(2, "w2"), queued(2, "w2"), queued(2, "w3")};
  summarize(split);
  CHECK(split.queued == 2);
  CHECK(split.queue_head.empty());

  ResourceStatus quarantine;  // quarantined masters do not count: 2 of 5 left, quorum 3
  quarantine.nodes = {queued(2, "w1"), queued(2, "w1"), queued(2, "w1", true), queued(2, "w1", true),
                      queued(2, "w1", true)};
  summarize(quarantine);
  CHECK(quarantine.queued == 0);
  CHECK(quarantine.queue_head.empty());

  ResourceStatus down;  // an unreachable master counts as 0: 2, 2, 0 → 2
  down.nodes = {queued(2, "w1"), queued(2, "w1"), with_state(NodeHolding::State::unreachable)};
  summarize(down);
  CHECK(down.queued == 2);
  CHECK(down.queue_head == "w1");
}

TEST_CASE("parse_inspect: readers and writers waiting come first; the readers' mark is shared, not a token") {
  NodeHolding h;
  REQUIRE(parse_inspect("readers 3 writers 1 4210 0 ~readers", h));
  CHECK(h.state == NodeHolding::State::shared);
  CHECK(std::string(redlock::state_name(h.state)) == "shared");
  CHECK(h.readers == 3);
  CHECK(h.writers_waiting == 1);
  CHECK(h.ttl == milliseconds{4210});
  CHECK(h.token.empty());
  CHECK_FALSE(h.owner.has_value());

  NodeHolding writer;  // a writer holds; another waits behind its intent, with the fair queue too
  REQUIRE(parse_inspect("writers 2 lapsed 1 queue 1 0123abcd4567ef01 800 5 w~x", writer));
  CHECK(writer.state == NodeHolding::State::held);
  CHECK(writer.token == "w~x");
  CHECK(writer.readers == 0);
  CHECK(writer.writers_waiting == 2);
  CHECK(writer.lapsed == 1);
  CHECK(writer.queued == 1);

  NodeHolding mark_minus;  // a value that merely starts as the mark is a token
  REQUIRE(parse_inspect("800 0 ~readers2", mark_minus));
  CHECK(mark_minus.state == NodeHolding::State::held);

  NodeHolding cleared;
  cleared.readers = 7;  // left from an earlier answer: cleared
  cleared.writers_waiting = 2;
  REQUIRE(parse_inspect("-2 0", cleared));
  CHECK(cleared.readers == 0);
  CHECK(cleared.writers_waiting == 0);

  NodeHolding wrong;
  REQUIRE(parse_inspect("wrongtype string redlock:{r}:readers", wrong));
  CHECK(wrong.error == "WRONGTYPE: the key redlock:{r}:readers holds a string, not a read-write lock's readers");

  // In that order only, each a count above 0.
  for (const char* bad : {"readers", "readers ", "readers 0 -2 0", "readers x -2 0", "writers -1 -2 0",
                          "writers 1 readers 2 -2 0", "lapsed 1 readers 2 -2 0", "readers 2"}) {
    CAPTURE(bad);
    NodeHolding b;
    CHECK_FALSE(parse_inspect(bad, b));
    CHECK(b.state == NodeHolding::State::unreachable);
    CHECK(b.readers == 0);
    CHECK(b.writers_waiting == 0);
  }
}

TEST_CASE("parse_inspect and summarize: a semaphore's permits, first of all; believed from a majority, up to 100") {
  NodeHolding h;
  REQUIRE(parse_inspect("permits 3 -2 0", h));
  CHECK(h.permits == 3);
  CHECK(h.state == NodeHolding::State::free);
  NodeHolding both;  // never both in practice; the order is fixed all the same
  REQUIRE(parse_inspect("permits 2 readers 1 900 0 ~readers", both));
  CHECK(both.permits == 2);
  CHECK(both.readers == 1);
  for (const char* bad : {"permits 0 -2 0", "readers 1 permits 2 -2 0", "permits x -2 0"}) {
    CAPTURE(bad);
    NodeHolding b;
    CHECK_FALSE(parse_inspect(bad, b));
    CHECK(b.permits == 0);
  }
  auto says = [](std::size_t p, bool quarantined = false) {
    NodeHolding n;
    n.state = NodeHolding::State::free;
    n.permits = p;
    n.quarantined = quarantined;
    return n;
  };
  ResourceStatus st;
  st.nodes = {says(3), says(3), says(3), says(2), says(0)};
  summarize(st);
  CHECK(st.permits == 3);
  ResourceStatus minority;  // 2 of 5 say 4, quarantined ones do not count
  minority.nodes = {says(4), says(4), says(4, true), says(0), says(0)};
  summarize(minority);
  CHECK(minority.permits == 0);
  ResourceStatus too_many;  // no master makes a report survey more than 100 permits
  too_many.nodes = {says(101), says(101), says(101)};
  summarize(too_many);
  CHECK(too_many.permits == 0);
}

TEST_CASE("summarize: readers on a majority make it shared, with the readers and writers a majority reports") {
  auto shared = [](std::size_t readers, long long ttl, std::size_t writers = 0) {
    NodeHolding h;
    h.state = NodeHolding::State::shared;
    h.readers = readers;
    h.writers_waiting = writers;
    h.ttl = milliseconds{ttl};
    return h;
  };
  ResourceStatus st;  // 3, 2, 2 readers on three masters; a writer's intent on two
  st.nodes = {shared(3, 900, 1), shared(2, 700, 1), shared(2, 500), held("w", 100), with_state(NodeHolding::State::free)};
  summarize(st);
  CHECK(st.shared);
  CHECK_FALSE(st.held);
  CHECK(st.readers == 2);
  CHECK(st.writers_waiting == 0);  // on two of five only
  CHECK(st.ttl == milliseconds{500});
  CHECK(st.token == "w");
  CHECK(st.agreeing == 1);

  ResourceStatus minority;  // readers on one of three, quarantined ones not counted
  minority.nodes = {shared(1, 900), shared(1, 900), with_state(NodeHolding::State::free)};
  minority.nodes[1].quarantined = true;
  summarize(minority);
  CHECK_FALSE(minority.shared);
  CHECK(minority.ttl == milliseconds{0});
  CHECK(minority.readers == 0);
}

TEST_CASE("Runtime::post runs each task once, on a later turn, in order, and frees its timer") {
  ManualRuntime rt;
  std::vector<int> ran;
  rt.post([&] { ran.push_back(1); });
  rt.post([&] {
    ran.push_back(2);
    rt.post([&] { ran.push_back(3); });  // posted inside a task: due now, after the others
  });
  CHECK(ran.empty());  // never inside post()
  rt.advance(milliseconds{0});
  CHECK(ran == std::vector<int>{1, 2, 3});
  CHECK(rt.timers() == 0);
  rt.advance(milliseconds{10});
  CHECK(ran == std::vector<int>{1, 2, 3});
}

namespace {

redlock::test::Response held_ping() {
  redlock::test::Response r;
  r.manual = true;
  r.text = "PONG";
  return r;
}

}  // namespace

TEST_CASE("a survey on a Runtime: done at the last first event, freed on a later turn after the last final one") {
  ManualRuntime rt;
  FakeTransport t(nullptr, 3, [](std::size_t, const redlock::detail::Call&) { return held_ping(); });
  t.refuse[2] = true;
  std::vector<SurveyAnswer> got;
  int done = 0, freed = 0;
  Survey::launch(rt, t, redlock::detail::Call{.command = redlock::detail::CommandId::ping},
                 [&](std::vector<SurveyAnswer> a) { ++done, got = std::move(a); }, [&] { ++freed; });
  REQUIRE(t.held_back.size() == 2);
  FakeTransport::deliver(t.held_back[0].first, t.held_back[0].second);
  rt.advance(milliseconds{0});
  CHECK(done == 0);
  FakeTransport::deliver(t.held_back[1].first, t.held_back[1].second);
  CHECK(done == 1);
  REQUIRE(got.size() == 3);
  CHECK(got[0].answered);
  CHECK(got[1].text == "PONG");
  CHECK_FALSE(got[2].answered);
  CHECK(got[2].text == "connection refused");
  CHECK(freed == 0);  // never inside a node's event: the node still holds the survey
  rt.advance(milliseconds{0});
  CHECK(freed == 1);
  CHECK(rt.timers() == 0);
}

TEST_CASE("a survey every send of which is refused is done on a later turn, never inside launch") {
  ManualRuntime rt;
  FakeTransport t(nullptr, 2, [](std::size_t, const redlock::detail::Call&) { return held_ping(); });
  t.refuse[0] = t.refuse[1] = true;
  int done = 0, freed = 0;
  Survey::launch(rt, t, redlock::detail::Call{.command = redlock::detail::CommandId::ping},
                 [&](std::vector<SurveyAnswer> a) { done += static_cast<int>(a.size()); }, [&] { ++freed; });
  CHECK(done == 0);
  CHECK(freed == 0);
  rt.advance(milliseconds{0});  // fires what is due now, what it starts with delay 0 too
  CHECK(done == 2);
  CHECK(freed == 1);
  CHECK(rt.timers() == 0);
}
