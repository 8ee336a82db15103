// test_quorum.cpp — the decision rule, exhaustively for N = 1, 3, 5, and
// the fan-out round on a fake transport: early decisions, stragglers,
// timeouts followed by late replies, quarantined nodes, refused sends.
#include <doctest/doctest.h>

#include <array>
#include <vector>

#include "fake_transport.hpp"
#include "redlock/lock.hpp"
#include "quorum.hpp"
#include "resp.hpp"

using namespace redlock;
using namespace redlock::detail;
using redlock::test::FakeTransport;
using redlock::test::Response;

namespace {

constexpr std::array<Outcome, 5> kFirst{Outcome::ok, Outcome::held, Outcome::timeout, Outcome::error,
                                        Outcome::quarantined};

// Every sequence of first outcomes of length n, in order of arrival.
std::vector<std::vector<Outcome>> sequences(std::size_t n) {
  std::vector<std::vector<Outcome>> all{{}};
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::vector<Outcome>> next;
    for (const auto& prefix : all) {
      for (Outcome o : kFirst) {
        auto s = prefix;
        s.push_back(o);
        next.push_back(s);
      }
    }
    all = std::move(next);
  }
  return all;
}

struct Listener final : RoundListener {
  int calls = 0;
  void on_round_decided() override { ++calls; }
};

}  // namespace

TEST_CASE("quorum_of, the public quorum, is the verdict's: the rule a lock round is decided by") {
  for (std::size_t n = 1; n <= 9; ++n) {
    CAPTURE(n);
    CHECK(redlock::quorum_of(n) == lock_rule(RoundMode::majority, n).quorum);
    CHECK(2 * redlock::quorum_of(n) > n);              // two quorums always share a master
    CHECK(2 * (redlock::quorum_of(n) - 1) <= n);       // and none is larger than it needs
  }
}

TEST_CASE("majority: decided exactly once, at the first moment the outcome is certain") {
  for (std::size_t n : {1u, 3u, 5u}) {
    const std::size_t q = n / 2 + 1;
    for (const auto& seq : sequences(n)) {
      QuorumTally tally(n, lock_rule(RoundMode::majority, n));
      std::size_t ok = 0, decided_at = 0, decisions = 0;
      std::size_t expected_at = 0;
      bool expected_success = false;
      for (std::size_t k = 0; k < n; ++k) {
        ok += seq[k] == Outcome::ok ? 1 : 0;
        if (expected_at == 0 && (ok >= q || ok + (n - k - 1) < q)) {
          expected_at = k + 1;
          expected_success = ok >= q;
        }
        if (tally.record(seq[k])) {
          ++decisions;
          decided_at = k + 1;
        }
      }
      CAPTURE(n);
      CAPTURE(ok);
      REQUIRE(decisions == 1);
      CHECK(decided_at == expected_at);
      CHECK(tally.success() == expected_success);
      CHECK(tally.success() == (ok >= q));
    }
  }
}

TEST_CASE("quarantined, held, timeout and error answers never count toward the majority") {
  QuorumTally tally(5, lock_rule(RoundMode::majority, 5));
  CHECK_FALSE(tally.record(Outcome::ok));
  CHECK_FALSE(tally.record(Outcome::quarantined));
  CHECK_FALSE(tally.record(Outcome::quarantined));  // 1 ok + 2 outstanding can still make 3
  CHECK(tally.record(Outcome::held));               // 1 ok + 1 outstanding < 3: certain failure
  CHECK_FALSE(tally.success());
  CHECK_FALSE(tally.record(Outcome::ok));  // an ok after the decision changes nothing
  CHECK_FALSE(tally.success());
}

TEST_CASE("release: decided when all answered or when a quorum confirmed the token is gone") {
  for (std::size_t n : {1u, 3u, 5u}) {
    const std::size_t q = n / 2 + 1;
    for (const auto& seq : sequences(n)) {
      QuorumTally tally(n, lock_rule(RoundMode::release, n));
      std::size_t confirmed = 0, ok = 0, expected_at = 0, decided_at = 0, decisions = 0;
      for (std::size_t k = 0; k < n; ++k) {
        ok += seq[k] == Outcome::ok ? 1 : 0;
        confirmed += seq[k] == Outcome::ok || seq[k] == Outcome::held ? 1 : 0;
        if (expected_at == 0 && (confirmed >= q || k + 1 == n)) expected_at = k + 1;
        if (tally.record(seq[k])) {
          ++decisions;
          decided_at = k + 1;
        }
      }
      REQUIRE(decisions == 1);
      CHECK(decided_at == expected_at);
      CHECK(tally.success() == (ok >= 1 && n - confirmed < q));
    }
  }
}

TEST_CASE("classify quotes at most max_quoted bytes of a server's error, control bytes as '?'") {
  NodeEvent ev;
  ev.kind = EventKind::reply;
  const std::string text = "ERR \n" + std::string(4 << 20, 'e');
  ev.reply = {ReplyView::Type::error, 0, text};
  NodeOutcome out;
  classify(CommandId::acquire, ev, out);
  CHECK(out.outcome == Outcome::error);
  CHECK(out.error.size() < 2 * resp::max_quoted);
  CHECK(out.error.starts_with("ERR ?eee"));
  CHECK(out.error.ends_with("… (" + std::to_string(text.size()) + " bytes)"));
  // Short and printable: quoted whole, as before.
  ev.reply = {ReplyView::Type::error, 0, "NOSCRIPT No matching script"};
  out = {};
  classify(CommandId::acquire, ev, out);
  CHECK(out.error == "NOSCRIPT No matching script");
}

TEST_CASE("classify maps each script's replies to outcomes") {
  NodeEvent ev;
  ev.kind = EventKind::reply;
  NodeOutcome out;

  ev.reply = {ReplyView::Type::status, 0, "OK"};
  classify(CommandId::acquire, ev, out);
  CHECK(out.outcome == Outcome::ok);

  ev.reply = {ReplyView::Type::integer, 4812, {}};
  out = {};
  classify(CommandId::acquire, ev, out);
  CHECK(out.outcome == Outcome::held);
  CHECK(out.holder_ttl.count() == 4812);
  CHECK(out.error == "held by another token (expires in 4812 ms)");

  ev.reply = {ReplyView::Type::integer, 0, {}};
  out = {};
  classify(CommandId::release, ev, out);
  CHECK(out.outcome == Outcome::held);

  ev.reply = {ReplyView::Type::integer, 1, {}};
  out = {};
  classify(CommandId::extend, ev, out);
  CHECK(out.outcome == Outcome::ok);

  ev.reply = {ReplyView::Type::error, 0, "OOM command not allowed"};
  out = {};
  classify(CommandId::acquire, ev, out);
  CHECK(out.outcome == Outcome::error);
  CHECK(out.error == "OOM command not allowed");

  ev.reply = {ReplyView::Type::nil, 0, {}};
  out = {};
  classify(CommandId::extend, ev, out);
  CHECK(out.outcome == Outcome::error);
  CHECK(out.error == "unexpected reply: nil");

  // SET NX PX answers nil when the key exists: held, with no TTL known; the
  // script never answers nil.
  out = {};
  classify(CommandId::set_nx, ev, out);
  CHECK(out.outcome == Outcome::held);
  CHECK(out.holder_ttl == std::chrono::milliseconds{-1});
  out = {};
  classify(CommandId::acquire, ev, out);
  CHECK(out.outcome == Outcome::error);

  ev.reply = {ReplyView::Type::status, 0, "OK"};
  out = {};
  classify(CommandId::set_nx, ev, out);
  CHECK(out.outcome == Outcome::ok);
  ev.reply = {ReplyView::Type::integer, 5, {}};
  out = {};
  classify(CommandId::set_nx, ev, out);
  CHECK(out.outcome == Outcome::error);

  ev.reply = {ReplyView::Type::status, 0, "OK"};
  ev.quarantined = true;
  ev.text = "restarted recently";
  out = {};
  classify(CommandId::acquire, ev, out);
  CHECK(out.outcome == Outcome::quarantined);
  CHECK(out.error == "restarted recently");

  // Release is not a vote: a quarantined node that deleted our key released it.
  out = {};
  ev.reply = {ReplyView::Type::integer, 1, {}};
  classify(CommandId::release, ev, out);
  CHECK(out.outcome == Outcome::ok);

  NodeEvent timeout;
  timeout.kind = EventKind::timeout;
  timeout.rtt = std::chrono::microseconds{50'200};
  out = {};
  classify(CommandId::acquire, timeout, out);
  CHECK(out.outcome == Outcome::timeout);
  CHECK(out.error == "timeout after 50 ms");
}

TEST_CASE("classify: a fair acquire's [taken, ticket, pttl, rank]") {
  NodeEvent ev;
  ev.kind = EventKind::reply;
  auto fair = [&](std::array<long long, 4> items) {
    ev.reply = {ReplyView::Type::array, 0, {}, {items[0], items[1], items[2], items[3], 0}, 4};
    NodeOutcome out;
    classify(CommandId::fair_acquire, ev, out);
    return out;
  };
  CHECK(fair({1, 0, -2, 0}).outcome == Outcome::ok);  // taken at once, nobody queued
  CHECK(fair({1, 7, -2, 0}).outcome == Outcome::ok);  // taken at its turn
  NodeOutcome held = fair({0, 7, 4812, 2});
  CHECK(held.outcome == Outcome::held);
  CHECK(held.holder_ttl.count() == 4812);
  // Free, but another's turn: nothing was set — held, free now (TTL 0).
  NodeOutcome ahead = fair({0, 7, -2, 3});
  CHECK(ahead.outcome == Outcome::held);
  CHECK(ahead.holder_ttl.count() == 0);
  CHECK(ahead.error == "free, but 3 waiter(s) ahead in the fair queue");
  CHECK(fair({0, 4, -2, -1}).error == "free, but waiters are queued (fair order)");
  ev.reply = {ReplyView::Type::array, 0, {}, {1, 0, 0, 0, 0}, 3};
  NodeOutcome short_reply;
  classify(CommandId::fair_acquire, ev, short_reply);
  CHECK(short_reply.outcome == Outcome::error);
  // A quarantined master's yes is no vote; its fair release still released.
  ev.reply = {ReplyView::Type::array, 0, {}, {1, 3, -2, 0, 0}, 4};
  ev.quarantined = true;
  NodeOutcome q;
  classify(CommandId::fair_acquire, ev, q);
  CHECK(q.outcome == Outcome::quarantined);
  ev.reply = {ReplyView::Type::integer, 1, {}};
  NodeOutcome released;
  classify(CommandId::fair_release, ev, released);
  CHECK(released.outcome == Outcome::ok);
}

TEST_CASE("a fair round's ticket is the highest proposed, its rank the place a majority gives it") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  // Five masters: tickets 3, 5, 4 proposed; ranks 0, 2, 1, none, 0 — a
  // majority (3) puts it at place 1 or ahead.
  const std::vector<std::vector<long long>> replies{
      {0, 3, 100, 0}, {0, 5, 100, 2}, {0, 4, 100, 1}, {}, {0, 2, 100, 0}};
  FakeTransport fake(&loop, 5, [&](std::size_t node, const Call&) {
    return replies[node].empty() ? redlock::test::failed("down") : redlock::test::array_reply(replies[node]);
  });
  QuorumRound* round = QuorumRound::launch(fake, {.command = CommandId::fair_acquire, .key = "k", .arg1 = "t", .arg2 = "1000"},
                                           lock_rule(RoundMode::majority, fake.size()), nullptr);
  CHECK(redlock::test::run_and_close(&loop) == 0);
  CHECK(round->decided());
  CHECK_FALSE(round->tally().success());
  CHECK(round->max_counter() == 5);
  CHECK(round->quorum_rank() == 1);
  round->detach();
}

TEST_CASE("a semaphore's fair round counts each master's yes for the permit in the fifth item; one without it is no vote") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  // Five masters: permits 1, 1, 0 taken; one says taken without a permit
  // (a lock's reply shape); one says taken with a permit out of range.
  const std::vector<std::vector<long long>> replies{
      {1, 4, -2, 0, 1}, {1, 4, -2, 0, 1}, {1, 4, -2, 0, 0}, {1, 4, -2, 0}, {1, 4, -2, 0, 2}};
  FakeTransport fake(&loop, 5, [&](std::size_t node, const Call&) { return redlock::test::array_reply(replies[node]); });
  Call call{.command = CommandId::fair_acquire, .key = "{s}:permits", .arg1 = "t", .arg2 = "1000"};
  call.more_keys = {"{s}:permits:queue", "{s}:permits:turn", "{s}:permits:expiry", "{s}:permit0:lock", "{s}:permit1:lock"};
  call.more_args = {"w", "4", "250", "5000", "0", "2", "0", "{s}:permits:released"};
  QuorumRound* round = QuorumRound::launch(fake, std::move(call), lock_rule(RoundMode::majority, fake.size()), nullptr);
  CHECK(redlock::test::run_and_close(&loop) == 0);
  CHECK(round->decided());
  // Permit 1 has two yes of five: no quorum (a lock's tally would count 5).
  CHECK_FALSE(round->tally().success());
  CHECK(round->tally().ok() == 2);
  CHECK(round->leading_permit() == 1);
  CHECK(round->permit_votes() == std::vector<std::int16_t>{1, 1, 0, -1, -1});
  CHECK(round->outcomes()[3].outcome == Outcome::error);
  CHECK(round->outcomes()[4].error == "unexpected reply: permit 2 of 2");
  CHECK(round->max_counter() == 4);
  round->detach();
}

TEST_CASE("a round is decided by the majority without waiting for stragglers, and tracks them after") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  FakeTransport fake(&loop, 5, [](std::size_t, const Call&) {
    Response r;
    r.manual = true;
    return r;
  });
  Listener listener;
  QuorumRound* round = QuorumRound::launch(fake, {.command = CommandId::acquire, .key = "k", .arg1 = "t", .arg2 = "1000"}, lock_rule(RoundMode::majority, fake.size()),
                                           &listener);
  REQUIRE(fake.held_back.size() == 5);
  CHECK_FALSE(round->decided());
  for (int i = 0; i < 3; ++i) FakeTransport::deliver(fake.held_back[i].first, fake.held_back[i].second);
  CHECK(round->decided());
  CHECK(round->tally().success());
  CHECK(listener.calls == 1);
  CHECK(round->outcomes()[3].outcome == Outcome::pending);
  CHECK(round->outcomes()[4].outcome == Outcome::pending);

  // Node 3 times out, then answers late; node 4 answers. The listener is not called again.
  NodeEvent timeout;
  timeout.kind = EventKind::timeout;
  round->on_node_event(3, timeout);
  FakeTransport::deliver(fake.held_back[3].first, fake.held_back[3].second);
  FakeTransport::deliver(fake.held_back[4].first, fake.held_back[4].second);
  CHECK(listener.calls == 1);
  CHECK(round->outcomes()[3].outcome == Outcome::timeout);
  CHECK(round->outcomes()[4].outcome == Outcome::ok);
  round->detach();  // all final: frees now (ASan would report a leak otherwise)
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("a round whose sends are all refused is decided inside launch without calling the listener") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  FakeTransport fake(&loop, 3, [](std::size_t, const Call&) { return Response{}; });
  fake.refuse[0] = fake.refuse[1] = fake.refuse[2] = true;
  Listener listener;
  QuorumRound* round = QuorumRound::launch(fake, {.command = CommandId::acquire, .key = "k", .arg1 = "t", .arg2 = "1000"}, lock_rule(RoundMode::majority, fake.size()),
                                           &listener);
  CHECK(round->decided());
  CHECK_FALSE(round->tally().success());
  CHECK(listener.calls == 0);
  CHECK(round->outcomes()[1].error == "connection refused");
  round->detach();
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("a detached round outlives its owner until the stragglers are final") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  FakeTransport fake(&loop, 3, [](std::size_t node, const Call&) {
    Response r;
    r.delay_ms = node == 2 ? 30 : 0;
    return r;
  });
  Listener listener;
  QuorumRound* round = QuorumRound::launch(fake, {.command = CommandId::release, .key = "k", .arg1 = "t", .arg2 = "c"}, lock_rule(RoundMode::release, fake.size()),
                                           &listener);
  round->detach();
  // The straggler's reply arrives after detach; the round must still be alive to take it.
  CHECK(redlock::test::run_and_close(&loop) == 0);
  CHECK(listener.calls == 0);
}

TEST_CASE("one server, one vote: a round counts one yes per server, whatever the names it was reached by") {
  // Nodes 0 and 1 are one server (the same run id) that the client has not
  // told apart yet; node 2 is another, nodes 3 and 4 do not answer.
  uv_loop_t loop;
  uv_loop_init(&loop);
  FakeTransport fake(&loop, 5, [](std::size_t node, const Call&) {
    Response r;
    r.server = node <= 1 ? 7 : 8;
    if (node >= 3) r = redlock::test::failed("connection refused");
    return r;
  });
  Listener listener;
  QuorumRound* round = QuorumRound::launch(fake, {.command = CommandId::acquire, .key = "k", .arg1 = "t", .arg2 = "1000"}, lock_rule(RoundMode::majority, fake.size()),
                                           &listener);
  CHECK(redlock::test::run_and_close(&loop) == 0);
  REQUIRE(round->decided());
  CHECK_FALSE(round->tally().success());  // 2 servers of a needed 3
  CHECK(round->tally().ok() == 2);
  CHECK(round->outcomes()[1].outcome == Outcome::error);
  CHECK(round->outcomes()[1].error.find("one server, one vote") != std::string::npos);
  round->detach();
}

TEST_CASE("decide: the quorum is the rule's, not always a majority") {
  // Four of five must say yes (a quorum other than N/2 + 1).
  const RoundRule four{RoundMode::majority, 4};
  QuorumTally tally(5, four);
  CHECK_FALSE(tally.record(Outcome::ok));
  CHECK_FALSE(tally.record(Outcome::ok));
  CHECK_FALSE(tally.record(Outcome::ok));  // 3 yes: a majority, not this quorum
  CHECK(decide(tally) == Verdict::open);
  CHECK(tally.record(Outcome::ok));
  CHECK(decide(tally) == Verdict::yes);

  QuorumTally lost(5, four);
  CHECK_FALSE(lost.record(Outcome::ok));
  CHECK_FALSE(lost.record(Outcome::held));  // 1 yes + 3 outstanding: 4 still possible
  CHECK(decide(lost) == Verdict::open);
  CHECK(lost.record(Outcome::timeout));  // 1 yes + 2 outstanding < 4 (a majority could still say yes)
  CHECK(decide(lost) == Verdict::refused);
}

TEST_CASE("decide: the clocks judge a quorum of yes — too late before too short") {
  QuorumTally tally(3, lock_rule(RoundMode::majority, 3));
  tally.record(Outcome::ok);
  tally.record(Outcome::ok);
  using std::chrono::microseconds;
  using std::chrono::milliseconds;
  const RoundClock fine{.validity = microseconds{50'000}, .min_validity = milliseconds{1}, .in_time = true};
  const RoundClock at_min{.validity = microseconds{1'000}, .min_validity = milliseconds{1}, .in_time = true};
  const RoundClock late{.validity = microseconds{0}, .min_validity = milliseconds{1}, .in_time = false};
  CHECK(decide(tally, &fine) == Verdict::yes);
  CHECK(decide(tally, &at_min) == Verdict::too_short);  // at the minimum is not above it
  CHECK(decide(tally, &late) == Verdict::too_late);
  // No quorum: the clocks do not matter.
  QuorumTally none(3, lock_rule(RoundMode::majority, 3));
  none.record(Outcome::timeout);
  none.record(Outcome::error);
  CHECK(decide(none, &fine) == Verdict::no_quorum);
}

TEST_CASE("decide: release verdicts, and tally_of counts a silent node as unsure") {
  const RoundRule rule = lock_rule(RoundMode::release, 3);
  std::vector<NodeOutcome> nodes(3);
  nodes[0].outcome = Outcome::ok;
  nodes[1].outcome = Outcome::held;
  nodes[2].outcome = Outcome::pending;
  CHECK(decide(tally_of(nodes, rule)) == Verdict::yes);  // one may still hold it: fewer than 2
  nodes[0].outcome = Outcome::held;
  CHECK(decide(tally_of(nodes, rule)) == Verdict::refused);  // never ours anywhere we heard from
  nodes[1].outcome = Outcome::timeout;
  CHECK(decide(tally_of(nodes, rule)) == Verdict::no_quorum);  // may still be on 2 of 3
  // A release's quorum too is the rule's: with 3 of 3, one unsure of three is enough.
  nodes = std::vector<NodeOutcome>(3);
  nodes[0].outcome = nodes[1].outcome = Outcome::ok;
  nodes[2].outcome = Outcome::timeout;
  CHECK(decide(tally_of(nodes, {RoundMode::release, 1})) == Verdict::no_quorum);
  CHECK(decide(tally_of(nodes, {RoundMode::release, 2})) == Verdict::yes);
}

TEST_CASE("refused_for_good: even if every other node said yes, no quorum would") {
  std::vector<NodeOutcome> nodes(5);
  nodes[0].outcome = nodes[1].outcome = Outcome::held;
  nodes[2].outcome = Outcome::timeout;
  CHECK_FALSE(refused_for_good(nodes, lock_rule(RoundMode::majority, 5)));  // 3 may still say yes
  CHECK(refused_for_good(nodes, {RoundMode::majority, 4}));                 // 3 < 4
  nodes[2].outcome = Outcome::held;
  CHECK(refused_for_good(nodes, lock_rule(RoundMode::majority, 5)));
}

TEST_CASE("quorum_at_most / quorum_at_least: the quorum-th smallest / largest value; none when fewer told") {
  std::vector<long long> v{40, 0, 10, 30};
  CHECK(quorum_at_most(v, 3) == 30);
  v = {40, 0, 10, 30};
  CHECK(quorum_at_most(v, 1) == 0);
  v = {40, 0, 10, 30};
  CHECK(quorum_at_least(v, 3) == 10);
  v = {40, 0, 10, 30};
  CHECK(quorum_at_least(v, 1) == 40);
  v = {5, 7};
  CHECK_FALSE(quorum_at_most(v, 3).has_value());
  CHECK_FALSE(quorum_at_least(v, 3).has_value());
  CHECK_FALSE(quorum_at_most(v, 0).has_value());
}

TEST_CASE("quorum_says: a count of agreeing nodes is a quorum's word, by decide()") {
  CHECK(quorum_says(3, 5, 3));
  CHECK_FALSE(quorum_says(2, 5, 3));
  CHECK_FALSE(quorum_says(3, 5, 4));
  CHECK(quorum_says(5, 5, 5));
  CHECK_FALSE(quorum_says(0, 0, 1));
}

TEST_CASE("one_vote: one server, one yes; an unknown server (0) is never merged") {
  std::vector<std::uint64_t> yes;
  CHECK(one_vote(yes, 7));
  CHECK(one_vote(yes, 9));
  CHECK_FALSE(one_vote(yes, 7));
  CHECK(one_vote(yes, 0));
  CHECK(one_vote(yes, 0));
}
