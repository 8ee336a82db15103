// test_extend_batch.cpp — the lease extensions' batcher (src/extend_batch):
// what a round sends, when, and how one answer of flags becomes each
// lease's own verdict. An Engine over a fake transport (the test answers
// every send by hand) and a ManualRuntime (time moves only on advance()).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine.hpp"
#include "extend_batch.hpp"
#include "keys.hpp"
#include "lease_service.hpp"
#include "quorum.hpp"
#include "resp.hpp"
#include "test_runtime.hpp"
#include "timer_queue.hpp"
#include "validity.hpp"

using namespace redlock;
using namespace redlock::detail;
using redlock::test::ManualRuntime;
using std::chrono::milliseconds;

namespace {

// Inner — the masters: records every send; the test answers by hand.
struct Inner final : Transport {
  struct Sent {
    std::size_t node;
    const Call* call;  // the round's own Call: valid until the round frees itself
    ReplySink* sink;
    std::size_t slot;
    bool final = false;  // the test gave it its final event
  };
  std::vector<std::string> addresses;
  std::vector<std::string> refuse;  // per node: when not empty, send fails with this why
  std::vector<Sent> sent;

  explicit Inner(std::size_t n) : refuse(n) {
    for (std::size_t i = 0; i < n; ++i) addresses.push_back("node" + std::to_string(i) + ":6379");
  }
  std::size_t size() const override { return addresses.size(); }
  const std::string& address(std::size_t node) const override { return addresses[node]; }
  bool send(std::size_t node, const Call& call, ReplySink* sink, std::size_t slot, std::string& why) override {
    if (!refuse[node].empty()) {
      why = refuse[node];
      return false;
    }
    sent.push_back({node, &call, sink, slot});
    return true;
  }
  // nodes_of: the nodes sends [from, sent.size()) went to, in order.
  std::vector<std::size_t> nodes_of(std::size_t from) const {
    std::vector<std::size_t> out;
    for (std::size_t i = from; i < sent.size(); ++i) out.push_back(sent[i].node);
    return out;
  }
};

// FakeLease — a watchdog's side: fixed strings, and every verdict it was told.
struct FakeLease final : Extendee {
  std::string resource;
  std::string token;
  milliseconds ttl;
  TimePoint deadline{};  // none: never too late
  std::vector<Result<Extension>> verdicts;
  std::function<void()> told;     // called after each verdict is recorded
  std::vector<std::string> more;  // a lease of several resources: the others

  FakeLease(std::string r, std::string t, milliseconds l) : resource(std::move(r)), token(std::move(t)), ttl(l) {}
  std::string_view extend_resource() const override { return resource; }
  std::span<const std::string> extend_more() const override { return more; }
  std::string_view extend_token() const override { return token; }
  milliseconds extend_ttl() const override { return ttl; }
  TimePoint extend_deadline() const override { return deadline; }
  void verdict(Result<Extension> r) {
    verdicts.push_back(std::move(r));
    if (told) told();
  }

  bool extended() const { return verdicts.size() == 1 && verdicts[0].ok(); }
  const Error& error() const {
    REQUIRE(verdicts.size() == 1);
    REQUIRE_FALSE(verdicts[0].ok());
    return verdicts[0].error();
  }
};

// keys_of / args_of: the KEYS and ARGV a round's Call sends, whichever form
// it takes (the plain extend's key, arg1, arg2; extend_batch's encoded once).
std::vector<std::string> keys_of(const Call& c) {
  if (c.encoded_key_count == 0) {
    std::vector<std::string> out{c.key};
    out.insert(out.end(), c.more_keys.begin(), c.more_keys.end());
    return out;
  }
  std::vector<std::string_view> keys;
  REQUIRE(resp::split_bulks(c.encoded_keys, c.encoded_key_count, keys));
  return {keys.begin(), keys.end()};
}
std::vector<std::string> args_of(const Call& c) {
  if (c.encoded_key_count == 0) {
    std::vector<std::string> out{c.arg1, c.arg2};
    out.insert(out.end(), c.more_args.begin(), c.more_args.end());
    return out;
  }
  std::vector<std::string_view> args;
  REQUIRE(resp::split_bulks(c.encoded_args, c.encoded_arg_count, args));
  return {args.begin(), args.end()};
}

constexpr milliseconds ttl30s{30000};
const char* const not_present = "token not present (expired, released, or another holder)";

// validity: what a lease of `ttl` has left `elapsed` after its round was
// sent, at the default drift_factor 0.01 (drift = ceil(ttl / 100) + 2 ms).
milliseconds validity(milliseconds ttl, milliseconds elapsed) {
  return ttl - elapsed - drift_allowance(ttl, 0.01);
}

// Told — the sink of the fake leases' batcher: each verdict goes back to
// its lease.
struct Told final : ExtendSink {
  void on_batch_extended(Extendee& lease, TimePoint, Result<Extension> r) override {
    static_cast<FakeLease&>(lease).verdict(std::move(r));
  }
};

struct Bed {
  ManualRuntime runtime;
  Inner inner;
  Options options;
  std::deque<FakeLease> leases;  // before the engine: the batcher's teardown may still tell them
  Told told;
  std::optional<Engine> engine;
  std::optional<ExtendBatcher> fakes;   // the fake leases' batcher (batcher())
  std::optional<LeaseService> service;  // the kept leases' (kept())

  Bed(std::size_t nodes, milliseconds window, std::size_t max) : inner(nodes) {
    options.prefix = "app:";
    options.extend_batch_window = window;
    options.extend_batch_max = max;
    engine.emplace(runtime, inner, options);
  }
  // The batchers go before the engine, whose timer queue their timers are on.
  ~Bed() {
    service.reset();
    fakes.reset();
    if (engine) {
      engine->shutdown(nullptr);
      engine.reset();
    }
  }

  ExtendBatcher& batcher() {
    if (!fakes) fakes.emplace(*engine, options.extend_batch_window, options.extend_batch_max, told);
    return *fakes;
  }
  LeaseService& kept() {
    if (!service) service.emplace(*engine);
    return *service;
  }
  // align_to: advance to the next point of `grid` (now, if on one); the point.
  TimePoint align_to(milliseconds grid) {
    const auto off = runtime.now().time_since_epoch() % grid;
    runtime.advance(std::chrono::duration_cast<milliseconds>((grid - off) % grid));
    return runtime.now();
  }
  FakeLease& lease(std::string resource, std::string token, milliseconds ttl = ttl30s) {
    return leases.emplace_back(std::move(resource), std::move(token), ttl);
  }
  void submit(FakeLease& l) { batcher().submit(&l, runtime.now()); }
  // two_submitted: leases "a" and "b" (value "v"), both submitted.
  struct Two {
    FakeLease& a;
    FakeLease& b;
  };
  Two two_submitted() {
    FakeLease& a = lease("a", "v");
    FakeLease& b = lease("b", "v");
    submit(a);
    submit(b);
    return {a, b};
  }
  void turn() { runtime.advance(milliseconds{0}); }

  // Events for send i (an index into inner.sent).
  void event(std::size_t i, const NodeEvent& e) {
    REQUIRE(i < inner.sent.size());
    Inner::Sent& s = inner.sent[i];
    REQUIRE_FALSE(s.final);
    if (e.kind != EventKind::timeout) s.final = true;
    s.sink->on_node_event(s.slot, e);
  }
  void flags(std::size_t i, std::string_view f, std::uint64_t server = 0, bool quarantined = false) {
    NodeEvent e;
    e.kind = EventKind::reply;
    e.reply.type = ReplyView::Type::string;
    e.reply.str = f;
    e.server = server;
    e.quarantined = quarantined;
    if (quarantined) e.text = "quarantined until T";
    event(i, e);
  }
  void integer(std::size_t i, long long v) {
    NodeEvent e;
    e.kind = EventKind::reply;
    e.reply.type = ReplyView::Type::integer;
    e.reply.integer = v;
    event(i, e);
  }
  void timeout(std::size_t i) {
    NodeEvent e;
    e.kind = EventKind::timeout;
    e.rtt = std::chrono::microseconds{50000};
    event(i, e);
  }
  void failed(std::size_t i, std::string_view why) {
    NodeEvent e;
    e.kind = EventKind::failed;
    e.text = why;
    event(i, e);
  }
  // yes_all: every send still unanswered says yes for all its keys.
  void yes_all() {
    for (std::size_t i = 0; i < inner.sent.size(); ++i) {
      if (inner.sent[i].final) continue;
      const Call& c = *inner.sent[i].call;
      if (c.command == CommandId::extend) {
        integer(i, 1);
      } else {
        flags(i, std::string(keys_of(c).size(), '1'));
      }
    }
  }
  // finish: every send gets its final event, the verdicts go out, the
  // client closes (the service, the batchers, the engine); then every
  // round must have freed itself (a round's only timer is its delivery).
  void finish() {
    for (std::size_t i = 0; i < inner.sent.size(); ++i) {
      if (!inner.sent[i].final) failed(i, "test over");
    }
    turn();
    if (service) service->close();  // its batcher goes with the close
    fakes.reset();
    engine->shutdown(nullptr);
    turn();
    CHECK(engine->timers().timers() == 0);
  }
};

}  // namespace

TEST_CASE("leases submitted within the window go as one extend_batch call per round, the same Call to every node") {
  Bed bed(3, milliseconds{10}, 512);
  FakeLease& a = bed.lease("r0", "v0");
  FakeLease& b = bed.lease("r1", "v1");
  FakeLease& c = bed.lease("r2", "v2", milliseconds{5000});  // each lease keeps its own ttl
  bed.submit(a);
  bed.runtime.advance(milliseconds{4});
  bed.submit(b);
  bed.submit(c);
  CHECK(bed.inner.sent.empty());
  CHECK(bed.batcher().queued() == 3);
  bed.runtime.advance(milliseconds{5});  // 9 ms after the first submit: the window still runs
  CHECK(bed.inner.sent.empty());
  bed.runtime.advance(milliseconds{1});
  REQUIRE(bed.inner.sent.size() == 3);  // one per node
  CHECK(bed.batcher().queued() == 0);
  for (std::size_t node = 0; node < 3; ++node) {
    const Inner::Sent& s = bed.inner.sent[node];
    CHECK(s.node == node);
    CHECK(s.slot == node);
    CHECK(s.call == bed.inner.sent[0].call);  // one Call serves every node
    CHECK(s.sink == bed.inner.sent[0].sink);
    CHECK(bed.batcher().in_flight(node) == 3);  // keys in flight
  }
  const Call& call = *bed.inner.sent[0].call;
  CHECK(call.command == CommandId::extend_batch);
  CHECK(keys_of(call).front() == lock_key("app:", "r0"));
  CHECK(keys_of(call) == std::vector<std::string>{"app:{r0}:lock", "app:{r1}:lock", "app:{r2}:lock"});
  CHECK(args_of(call) == std::vector<std::string>{"v0", "30000", "v1", "30000", "v2", "5000"});
  bed.yes_all();
  bed.turn();
  CHECK(a.extended());
  CHECK(b.extended());
  CHECK(c.extended());
  for (std::size_t node = 0; node < 3; ++node) CHECK(bed.batcher().in_flight(node) == 0);
  bed.finish();
}

TEST_CASE("a lease of several resources rides the round with a key each; a master's yes needs all of its keys") {
  Bed bed(3, milliseconds{10}, 512);
  FakeLease& multi = bed.lease("a", "vm");
  multi.more = {"b", "c"};
  FakeLease& single = bed.lease("d", "vd");
  FakeLease& broken = bed.lease("e", "ve");
  broken.more = {"f"};
  bed.submit(multi);
  bed.submit(single);
  bed.submit(broken);
  bed.runtime.advance(milliseconds{10});
  REQUIRE(bed.inner.sent.size() == 3);
  const Call& call = *bed.inner.sent[0].call;
  CHECK(call.command == CommandId::extend_batch);
  CHECK(keys_of(call) == std::vector<std::string>{lock_key("app:", "a"), lock_key("app:", "b"), lock_key("app:", "c"),
                                                  lock_key("app:", "d"), lock_key("app:", "e"), lock_key("app:", "f")});
  CHECK(args_of(call) == std::vector<std::string>{"vm", "30000", "vm", "30000", "vm", "30000", "vd", "30000", "ve",
                                                  "30000", "ve", "30000"});
  for (std::size_t node = 0; node < 3; ++node) CHECK(bed.batcher().in_flight(node) == 6);  // keys, not leases
  // multi: all three keys on m0 and m2, one missing on m1 → yes 2 of 3.
  // broken: f is gone on m0 and m1 (e still there) → one yes: refused.
  bed.flags(0, "111110");
  bed.flags(1, "101110");
  bed.flags(2, "111111");
  bed.turn();
  CHECK(multi.extended());
  CHECK(single.extended());
  const Error& e = broken.error();
  CHECK(e.nodes.at(0).outcome == Outcome::held);
  CHECK(e.nodes.at(1).outcome == Outcome::held);
  CHECK(e.nodes.at(2).outcome == Outcome::ok);
  CHECK(e.nodes.at(0).error == not_present);
  bed.finish();
}

TEST_CASE("rounds count keys: leases of several resources fill extend_batch_max with their keys") {
  Bed bed(3, milliseconds{10}, 4);
  FakeLease& a = bed.lease("a", "v");
  a.more = {"a2", "a3"};
  FakeLease& b = bed.lease("b", "v");
  b.more = {"b2"};
  bed.submit(a);
  bed.runtime.advance(milliseconds{1});
  CHECK(bed.inner.sent.empty());  // 3 keys: the window runs
  bed.submit(b);                  // 5 keys queued: full rounds go on the next turn
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 6);  // a alone (with b, 5 > 4), then b
  CHECK(keys_of(*bed.inner.sent[0].call) == std::vector<std::string>{lock_key("app:", "a"), lock_key("app:", "a2"),
                                                                     lock_key("app:", "a3")});
  CHECK(keys_of(*bed.inner.sent[3].call) == std::vector<std::string>{lock_key("app:", "b"), lock_key("app:", "b2")});
  bed.yes_all();
  bed.turn();
  CHECK(a.extended());
  CHECK(b.extended());
  bed.finish();
}

TEST_CASE("a lease alone goes as the plain extend command; integer replies 1/0 decide it") {
  Bed bed(3, milliseconds{10}, 512);
  FakeLease& solo = bed.lease("solo", "tok");
  bed.submit(solo);
  bed.runtime.advance(milliseconds{10});
  REQUIRE(bed.inner.sent.size() == 3);
  const Call& call = *bed.inner.sent[0].call;
  CHECK(call.command == CommandId::extend);
  CHECK(call.key == "app:{solo}:lock");
  CHECK(call.arg1 == "tok");
  CHECK(call.arg2 == "30000");
  CHECK(call.more_keys.empty());
  CHECK(call.more_args.empty());
  bed.integer(0, 1);
  bed.integer(1, 0);
  bed.turn();
  CHECK(solo.verdicts.empty());  // 1 yes, 1 to come: not certain yet
  bed.integer(2, 1);
  CHECK(solo.verdicts.empty());  // on a later loop turn only
  bed.turn();
  REQUIRE(solo.extended());
  CHECK(solo.verdicts[0]->validity == validity(ttl30s, milliseconds{0}));

  // Two 0s: refused, for good.
  FakeLease& gone = bed.lease("gone", "tok");
  bed.submit(gone);
  bed.runtime.advance(milliseconds{10});
  REQUIRE(bed.inner.sent.size() == 6);
  CHECK(bed.inner.sent[3].call->command == CommandId::extend);
  bed.integer(3, 0);
  bed.integer(4, 0);
  bed.turn();
  const Error& e = gone.error();
  CHECK(e.code == Errc::not_held);
  REQUIRE(e.nodes.size() == 3);
  CHECK(e.nodes[0].outcome == Outcome::held);
  CHECK(e.nodes[0].error == not_present);
  CHECK(e.nodes[1].outcome == Outcome::held);
  CHECK(e.nodes[2].outcome == Outcome::pending);
  CHECK(refused_for_good(e.nodes, lock_rule(RoundMode::majority, e.nodes.size())));
  bed.finish();
}

TEST_CASE("each lease gets the verdict of its own flag; verdicts come on a later loop turn, never inside a reply") {
  Bed bed(3, milliseconds{0}, 512);
  FakeLease& a = bed.lease("a", "va");
  FakeLease& b = bed.lease("b", "vb");
  FakeLease& c = bed.lease("c", "vc");
  bed.submit(a);
  bed.submit(b);
  bed.submit(c);
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 3);
  bed.runtime.advance(milliseconds{5});  // the masters take 5 ms
  bed.flags(0, "101");
  bed.flags(1, "101");  // decides all three
  for (const FakeLease* l : {&a, &b, &c}) CHECK(l->verdicts.empty());
  bed.turn();
  const milliseconds left = validity(ttl30s, milliseconds{5});
  CHECK(left == milliseconds{29693});
  for (FakeLease* l : {&a, &c}) {
    REQUIRE(l->extended());
    CHECK(l->verdicts[0]->validity == left);
    CHECK(l->verdicts[0]->validity_deadline == bed.runtime.now() + left);
  }
  const Error& e = b.error();
  CHECK(e.code == Errc::not_held);
  CHECK(e.attempts == 1);
  CHECK(e.elapsed == std::chrono::microseconds{5000});
  REQUIRE(e.nodes.size() == 3);
  CHECK(e.nodes[0].address == "node0:6379");
  CHECK(e.nodes[0].outcome == Outcome::held);
  CHECK(e.nodes[0].error == not_present);
  CHECK(e.nodes[1].outcome == Outcome::held);
  CHECK(e.nodes[2].outcome == Outcome::pending);
  CHECK(refused_for_good(e.nodes, lock_rule(RoundMode::majority, e.nodes.size())));  // 2 of 3 said 0: no majority can ever say yes again
  // The last master's answer, late, changes nothing.
  bed.flags(2, "111");
  bed.turn();
  for (const FakeLease* l : {&a, &b, &c}) CHECK(l->verdicts.size() == 1);
  bed.finish();
}

TEST_CASE("a lease is decided as soon as it is certain: yes from a majority, or too few left to make one") {
  Bed bed(5, milliseconds{0}, 512);
  FakeLease& yes = bed.lease("yes", "v");
  FakeLease& no = bed.lease("no", "v");
  bed.submit(yes);
  bed.submit(no);
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 5);
  bed.runtime.advance(milliseconds{3});
  bed.flags(0, "10");
  bed.flags(1, "10");
  bed.turn();
  CHECK(yes.verdicts.empty());  // 2 yes of the 3 needed
  CHECK(no.verdicts.empty());   // 0 yes, 3 still to answer: could still make 3
  bed.failed(2, "connection lost");
  bed.turn();
  CHECK(yes.verdicts.empty());
  const Error& e = no.error();  // 0 yes + 2 unanswered < 3
  CHECK(e.code == Errc::not_held);
  REQUIRE(e.nodes.size() == 5);
  CHECK(e.nodes[0].outcome == Outcome::held);
  CHECK(e.nodes[1].outcome == Outcome::held);
  CHECK(e.nodes[2].outcome == Outcome::error);
  CHECK(e.nodes[2].error == "connection lost");
  CHECK(e.nodes[3].outcome == Outcome::pending);
  CHECK(e.nodes[4].outcome == Outcome::pending);
  CHECK_FALSE(refused_for_good(e.nodes, lock_rule(RoundMode::majority, e.nodes.size())));  // 2 zeros of 5: a majority might still say yes
  bed.flags(3, "11");  // the third yes: decided without node 4
  bed.turn();
  REQUIRE(yes.extended());
  CHECK(yes.verdicts[0]->validity == validity(ttl30s, milliseconds{3}));
  // The slow master times out, then answers: nothing changes.
  bed.timeout(4);
  bed.turn();
  bed.flags(4, "00");
  bed.turn();
  CHECK(yes.verdicts.size() == 1);
  CHECK(no.verdicts.size() == 1);
  for (std::size_t node = 0; node < 5; ++node) CHECK(bed.batcher().in_flight(node) == 0);
  bed.finish();
}

TEST_CASE("a quarantined master's yes does not count") {
  Bed bed(3, milliseconds{0}, 512);
  auto [a, b] = bed.two_submitted();
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 3);
  bed.flags(0, "11", 0, true);
  bed.flags(1, "11");
  bed.turn();
  CHECK(a.verdicts.empty());  // one yes that counts, one master to come
  CHECK(b.verdicts.empty());
  bed.flags(2, "10");
  bed.turn();
  CHECK(a.extended());
  const Error& e = b.error();
  CHECK(e.code == Errc::not_held);
  REQUIRE(e.nodes.size() == 3);
  CHECK(e.nodes[0].outcome == Outcome::quarantined);
  CHECK(e.nodes[0].error == "quarantined until T");
  CHECK(e.nodes[1].outcome == Outcome::ok);
  CHECK(e.nodes[2].outcome == Outcome::held);
  bed.finish();
}

TEST_CASE("one server reached under two names votes once") {
  Bed bed(3, milliseconds{0}, 512);
  auto [a, b] = bed.two_submitted();
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 3);
  bed.flags(0, "11", 7);
  bed.flags(1, "11", 7);  // the same server again
  bed.turn();
  CHECK(a.verdicts.empty());
  CHECK(b.verdicts.empty());
  bed.flags(2, "01", 9);
  bed.turn();
  CHECK(b.extended());  // servers 7 and 9
  const Error& e = a.error();
  REQUIRE(e.nodes.size() == 3);
  CHECK(e.nodes[0].outcome == Outcome::ok);
  CHECK(e.nodes[1].outcome == Outcome::error);
  CHECK(e.nodes[1].error.find("same server") != std::string::npos);
  CHECK(e.nodes[2].outcome == Outcome::held);
  bed.finish();
}

TEST_CASE("an answer that is not one 0/1 flag per lease is an error for every lease, never a guess") {
  SUBCASE("extend_batch: a flag short, a character that is no flag, another type") {
    Bed bed(3, milliseconds{0}, 512);
    FakeLease& a = bed.lease("a", "v");
    FakeLease& b = bed.lease("b", "v");
    FakeLease& c = bed.lease("c", "v");
    bed.submit(a);
    bed.submit(b);
    bed.submit(c);
    bed.turn();
    REQUIRE(bed.inner.sent.size() == 3);
    bed.flags(0, "11");
    bed.flags(1, "1x1");
    bed.integer(2, 1);
    bed.turn();
    for (const FakeLease* l : {&a, &b, &c}) {
      const Error& e = l->error();
      CHECK(e.code == Errc::no_quorum);
      REQUIRE(e.nodes.size() == 3);
      for (const NodeOutcome& n : e.nodes) {
        CHECK(n.outcome == Outcome::error);
        CHECK(n.error.find("unexpected answer") != std::string::npos);
      }
      CHECK(e.nodes[0].error == "unexpected answer to extend_batch (expected 3 flag(s) 0/1, got 2 characters)");
      CHECK(e.nodes[1].error == "unexpected answer to extend_batch (expected 3 flag(s) 0/1, got 3 characters)");
      CHECK(e.nodes[2].error == "unexpected answer to extend_batch (expected 3 flag(s) 0/1, got another type)");
    }
    bed.finish();
  }
  SUBCASE("extend: an integer other than 0/1, or a string") {
    Bed bed(3, milliseconds{0}, 512);
    FakeLease& a = bed.lease("a", "v");
    bed.submit(a);
    bed.turn();
    REQUIRE(bed.inner.sent.size() == 3);
    bed.integer(0, 2);
    bed.flags(1, "1");
    bed.turn();
    const Error& e = a.error();
    CHECK(e.code == Errc::no_quorum);
    REQUIRE(e.nodes.size() == 3);
    CHECK(e.nodes[0].error == "unexpected answer to extend (expected 1 flag(s) 0/1, got another type)");
    CHECK(e.nodes[1].error == "unexpected answer to extend (expected 1 flag(s) 0/1, got 1 characters)");
    CHECK(e.nodes[2].outcome == Outcome::pending);
    bed.finish();
  }
}

TEST_CASE("a majority past the lease's deadline is too late; one leaving too little validity is too short") {
  SUBCASE("too_late: the verdict is delivered at or after extend_deadline()") {
    Bed bed(3, milliseconds{0}, 512);
    const TimePoint start = bed.runtime.now();
    FakeLease& late = bed.lease("late", "v");
    FakeLease& just = bed.lease("just", "v");
    FakeLease& free = bed.lease("free", "v");  // no deadline at all
    late.deadline = start + milliseconds{30};
    just.deadline = start + milliseconds{31};
    bed.submit(late);
    bed.submit(just);
    bed.submit(free);
    bed.turn();
    REQUIRE(bed.inner.sent.size() == 3);
    bed.runtime.advance(milliseconds{30});
    bed.flags(0, "111");
    bed.flags(1, "111");
    bed.turn();
    const Error& e = late.error();
    CHECK(e.code == Errc::too_late);
    CHECK(e.nodes.size() == 3);
    CHECK(e.nodes[0].outcome == Outcome::ok);
    REQUIRE(just.extended());
    CHECK(just.verdicts[0]->validity == validity(ttl30s, milliseconds{30}));
    CHECK(free.extended());
    bed.finish();
  }
  SUBCASE("validity_too_short: validity not above min_validity") {
    Bed bed(3, milliseconds{0}, 512);
    bed.options.min_validity = milliseconds{500};
    FakeLease& brief = bed.lease("brief", "v", milliseconds{1000});  // drift 12 ms
    FakeLease& roomy = bed.lease("roomy", "v", milliseconds{2000});  // drift 22 ms
    bed.submit(brief);
    bed.submit(roomy);
    bed.turn();
    REQUIRE(bed.inner.sent.size() == 3);
    CHECK(args_of(*bed.inner.sent[0].call) == std::vector<std::string>{"v", "1000", "v", "2000"});
    bed.runtime.advance(milliseconds{488});  // brief: 1000 − 488 − 12 = 500 ms left, not above 500
    bed.flags(0, "11");
    bed.flags(1, "11");
    bed.turn();
    CHECK(brief.error().code == Errc::validity_too_short);
    REQUIRE(roomy.extended());
    CHECK(roomy.verdicts[0]->validity == milliseconds{2000 - 488 - 22});
    bed.finish();
  }
}

TEST_CASE("more than max leases: rounds of at most max; a full round goes on the next loop turn") {
  Bed bed(3, milliseconds{10}, 2);
  FakeLease& l0 = bed.lease("l0", "v0");
  FakeLease& l1 = bed.lease("l1", "v1");
  bed.submit(l0);
  bed.submit(l1);  // full
  CHECK(bed.inner.sent.empty());  // never inside submit
  bed.turn();      // no wait for the window
  REQUIRE(bed.inner.sent.size() == 3);
  CHECK(bed.inner.sent[0].call->command == CommandId::extend_batch);
  CHECK(keys_of(*bed.inner.sent[0].call) == std::vector<std::string>{"app:{l0}:lock", "app:{l1}:lock"});
  bed.yes_all();

  // Five more: 2 + 2 + 1, all at once.
  for (int i = 2; i < 7; ++i) bed.submit(bed.lease("l" + std::to_string(i), "v" + std::to_string(i)));
  CHECK(bed.batcher().queued() == 5);
  bed.turn();
  CHECK(bed.batcher().queued() == 0);
  REQUIRE(bed.inner.sent.size() == 12);
  std::vector<const Call*> calls;
  for (std::size_t i = 3; i < 12; ++i) {
    if (std::find(calls.begin(), calls.end(), bed.inner.sent[i].call) == calls.end()) calls.push_back(bed.inner.sent[i].call);
  }
  REQUIRE(calls.size() == 3);  // three rounds, each one Call to the three nodes
  CHECK(calls[0]->command == CommandId::extend_batch);
  CHECK(keys_of(*calls[0]) == std::vector<std::string>{"app:{l2}:lock", "app:{l3}:lock"});
  CHECK(args_of(*calls[0]) == std::vector<std::string>{"v2", "30000", "v3", "30000"});
  CHECK(calls[1]->command == CommandId::extend_batch);
  CHECK(keys_of(*calls[1]) == std::vector<std::string>{"app:{l4}:lock", "app:{l5}:lock"});
  CHECK(calls[2]->command == CommandId::extend);
  CHECK(calls[2]->key == "app:{l6}:lock");
  CHECK(calls[2]->arg1 == "v6");

  // One more, alone: it waits for the window.
  FakeLease& late = bed.lease("l7", "v7");
  bed.submit(late);
  bed.turn();
  CHECK(bed.inner.sent.size() == 12);
  bed.runtime.advance(milliseconds{9});
  CHECK(bed.inner.sent.size() == 12);
  bed.runtime.advance(milliseconds{1});
  REQUIRE(bed.inner.sent.size() == 15);
  CHECK(bed.inner.sent[12].call->command == CommandId::extend);
  CHECK(bed.inner.sent[12].call->key == "app:{l7}:lock");

  bed.yes_all();
  bed.turn();
  for (const FakeLease& l : bed.leases) CHECK(l.extended());
  bed.finish();
}

TEST_CASE("flow control: a master with keys_in_flight keys outstanding gets the next round later, from its own queue") {
  static_assert(ExtendBatcher::keys_in_flight == 2048);
  Bed bed(3, milliseconds{0}, 1024);
  // submit_round: 1024 leases, one full round (it goes on the next turn).
  auto submit_round = [&bed](const std::string& tag) {
    for (int k = 0; k < 1024; ++k) bed.submit(bed.lease(tag + std::to_string(k), "v"));
    bed.turn();
  };
  const std::string all_yes(1024, '1');
  submit_round("a");
  submit_round("b");
  REQUIRE(bed.inner.sent.size() == 6);  // rounds a and b, to every node
  for (std::size_t node = 0; node < 3; ++node) CHECK(bed.batcher().in_flight(node) == 2048);
  for (std::size_t i : {0, 1, 3, 4}) bed.flags(i, all_yes);  // nodes 0 and 1 answer; node 2 does not
  CHECK(bed.batcher().in_flight(0) == 0);
  CHECK(bed.batcher().in_flight(2) == 2048);

  // Round c: node 2 is full, so c waits in node 2's queue; the others get it.
  submit_round("c");
  REQUIRE(bed.inner.sent.size() == 8);
  CHECK(bed.inner.nodes_of(6) == std::vector<std::size_t>{0, 1});
  CHECK(bed.batcher().waiting(2) == 1);
  CHECK(bed.batcher().queued() == 0);
  bed.flags(6, all_yes);
  bed.flags(7, all_yes);
  bed.turn();
  std::size_t extended = 0;
  for (const FakeLease& l : bed.leases) extended += l.extended() ? 1 : 0;
  CHECK(extended == 3 * 1024);  // the slow master held nobody up

  // A timeout is no final event: node 2 stays full.
  bed.timeout(2);
  bed.turn();
  CHECK(bed.inner.sent.size() == 8);
  CHECK(bed.batcher().waiting(2) == 1);
  // Its answer to round a frees room: c goes to it on the next turn (never
  // inside the event), so node 2 misses no round.
  bed.flags(2, all_yes);
  CHECK(bed.inner.sent.size() == 8);
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 9);
  CHECK(bed.inner.sent[8].node == 2);
  CHECK(bed.inner.sent[8].call == bed.inner.sent[6].call);
  CHECK(bed.batcher().waiting(2) == 0);
  CHECK(bed.batcher().in_flight(2) == 2048);
  bed.finish();
}

TEST_CASE("flow control: a round bigger than the limit still goes to an idle master") {
  Bed bed(3, milliseconds{0}, 4096);
  for (int k = 0; k < 3000; ++k) bed.submit(bed.lease("l" + std::to_string(k), "v"));
  bed.runtime.advance(milliseconds{0});
  REQUIRE(bed.inner.sent.size() == 3);
  for (std::size_t node = 0; node < 3; ++node) CHECK(bed.batcher().in_flight(node) == 3000);
  bed.yes_all();
  bed.turn();
  for (const FakeLease& l : bed.leases) CHECK(l.extended());
  bed.finish();
}

TEST_CASE("a send the transport refuses is that master's error") {
  SUBCASE("one master refuses") {
    Bed bed(3, milliseconds{0}, 512);
    bed.inner.refuse[1] = "not connected";
    auto [a, b] = bed.two_submitted();
    bed.turn();
    REQUIRE(bed.inner.sent.size() == 2);
    CHECK(bed.inner.nodes_of(0) == std::vector<std::size_t>{0, 2});
    CHECK(bed.batcher().in_flight(1) == 0);
    bed.flags(0, "11");
    bed.flags(1, "10");
    bed.turn();
    CHECK(a.extended());
    const Error& e = b.error();
    CHECK(e.code == Errc::not_held);
    REQUIRE(e.nodes.size() == 3);
    CHECK(e.nodes[1].outcome == Outcome::error);
    CHECK(e.nodes[1].error == "not connected");
    bed.finish();
  }
  SUBCASE("every master refuses: every lease fails, on a loop turn of its own") {
    Bed bed(3, milliseconds{0}, 512);
    for (std::string& r : bed.inner.refuse) r = "not connected";
    auto [a, b] = bed.two_submitted();
    bed.turn();
    CHECK(bed.inner.sent.empty());
    for (const FakeLease* l : {&a, &b}) {
      const Error& e = l->error();
      CHECK(e.code == Errc::no_quorum);
      REQUIRE(e.nodes.size() == 3);
      for (const NodeOutcome& n : e.nodes) CHECK(n.error == "not connected");
    }
    bed.finish();
  }
}

TEST_CASE("closing: queued leases get Errc::closed, and nothing is sent for them") {
  SUBCASE("the batcher going (its service closing) tells queued leases at once") {
    Bed bed(3, milliseconds{10}, 512);
    auto [a, b] = bed.two_submitted();
    bed.fakes.reset();
    for (const FakeLease* l : {&a, &b}) {
      CHECK(l->error().code == Errc::closed);
      CHECK(l->error().message == "the client was closed");
    }
    bed.runtime.advance(milliseconds{20});
    CHECK(bed.inner.sent.empty());
    CHECK(a.verdicts.size() == 1);
    bed.finish();
  }
  SUBCASE("shutdown while an operation lives: the batcher's next round fails every lease, closed") {
    Bed bed(3, milliseconds{0}, 512);
    Lock lock;
    lock.resource = "op";
    lock.token = "optok";
    lock.ttl = ttl30s;
    std::optional<Result<Lock>> op_result;
    bed.engine->extend(lock, ttl30s, [&](Result<Lock> r) { op_result.emplace(std::move(r)); });
    bed.turn();
    const std::size_t op_sends = bed.inner.sent.size();
    REQUIRE(op_sends == 3);
    FakeLease& a = bed.lease("a", "v");
    FakeLease& b = bed.lease("b", "v");
    // Told by the batcher's round (launched closed), not by the batcher
    // going away: the operation still lives then.
    std::vector<std::size_t> live_when_told;
    for (FakeLease* l : {&a, &b}) l->told = [&] { live_when_told.push_back(bed.engine->live_operations()); };
    bed.submit(a);
    bed.submit(b);
    bed.engine->shutdown(nullptr);
    CHECK(bed.engine->live_operations() == 1);
    CHECK(a.verdicts.empty());
    bed.turn();
    CHECK(live_when_told == std::vector<std::size_t>{1, 1});
    for (const FakeLease* l : {&a, &b}) {
      CHECK(l->error().code == Errc::closed);
      CHECK(l->error().message == "the client was closed");
    }
    CHECK(bed.inner.sent.size() == op_sends);
    REQUIRE(op_result.has_value());
    CHECK(op_result->error().code == Errc::closed);
    bed.finish();
  }
  SUBCASE("a round in flight when the batcher goes still delivers its verdicts") {
    Bed bed(3, milliseconds{0}, 512);
    FakeLease& a = bed.lease("a", "v");
    bed.submit(a);
    bed.turn();
    REQUIRE(bed.inner.sent.size() == 3);
    bed.fakes.reset();  // the batcher goes
    CHECK(a.verdicts.empty());
    bed.integer(0, 1);
    bed.integer(1, 1);
    bed.integer(2, 1);
    bed.turn();
    CHECK(a.extended());
    bed.finish();
  }
}

// A silenced batcher (its service going with its leases) tells nobody:
// neither the queued leases when it goes nor a round in flight.
TEST_CASE("a silenced batcher tells no lease, queued or in a round in flight") {
  Bed bed(3, milliseconds{0}, 512);
  FakeLease& a = bed.lease("a", "v");
  bed.submit(a);
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 3);
  FakeLease& b = bed.lease("b", "v");
  bed.submit(b);
  bed.batcher().silence();
  bed.fakes.reset();
  bed.integer(0, 1);
  bed.integer(1, 1);
  bed.integer(2, 1);
  bed.turn();
  CHECK(a.verdicts.empty());
  CHECK(b.verdicts.empty());
  bed.finish();
}

TEST_CASE("destroying the batcher tells queued leases Errc::closed at once") {
  Bed bed(3, milliseconds{10}, 512);
  auto [a, b] = bed.two_submitted();
  bed.fakes.reset();
  for (const FakeLease* l : {&a, &b}) {
    CHECK(l->error().code == Errc::closed);
    CHECK(l->error().message == "the client was closed");
  }
  CHECK(bed.inner.sent.empty());
}

// ---- The watchdogs over the batcher (LeaseService, src/lease_service.hpp) --------------
//
// A lease record kept by a LeaseService: its timer is an entry of
// the service's wheel on the same ManualRuntime, its extensions go through
// the batcher above. Time moves only on advance().

namespace {

// Losses — what on_lost was told.
struct Losses {
  int count = 0;
  std::string why;
  LostCallback callback() {
    return [this](const Error& e) {
      ++count;
      why = e.message;
    };
  }
};

// keep: a lease of `resource` (`ttl` of validity from now) under the keeper.
std::shared_ptr<LeaseState> keep(Bed& bed, std::string resource, Losses& losses, LeaseOptions opts = {},
                                 milliseconds ttl = milliseconds{3000}) {
  Lock l;
  l.resource = std::move(resource);
  l.token = "tok-" + l.resource;
  l.ttl = ttl;
  l.validity = ttl;
  l.validity_deadline = bed.runtime.now() + ttl;
  l.attempts = 1;
  opts.on_lost = losses.callback();
  auto s = make_lease(std::move(l), std::move(opts), {}, nullptr);
  bed.kept().keep(s);
  return s;
}

}  // namespace

TEST_CASE("a kept lease is extended once extend_at of its validity has passed, its deadline moves; stop lets go") {
  Bed bed(3, milliseconds{0}, 512);
  Losses losses;
  auto s = keep(bed, "r", losses);
  LeaseService& keeper = bed.kept();
  CHECK(keeper.live() == 1);
  CHECK(s.use_count() == 2);  // the keeper holds the record while it runs
  bed.runtime.advance(milliseconds{999});
  CHECK(bed.inner.sent.empty());
  bed.runtime.advance(milliseconds{1});  // 1/3 of 3 s: submitted, the round goes on the next turn
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 3);
  CHECK(bed.inner.sent[0].call->command == CommandId::extend);  // a round of one lease: the plain extend
  CHECK(bed.inner.sent[0].call->arg1 == "tok-r");
  const TimePoint sent_at = bed.runtime.now();
  bed.runtime.advance(milliseconds{5});
  bed.yes_all();
  bed.turn();
  CHECK(s->extensions == 1);
  CHECK(s->deadline() == bed.runtime.now() + validity(milliseconds{3000}, milliseconds{5}));
  CHECK(s->deadline() > sent_at + milliseconds{2900});
  // The next extension comes a third of the new validity later.
  const std::size_t before = bed.inner.sent.size();
  bed.runtime.advance(milliseconds{900});
  CHECK(bed.inner.sent.size() == before);
  bed.runtime.advance(milliseconds{200});
  bed.turn();
  CHECK(bed.inner.sent.size() == before + 3);
  bed.yes_all();
  bed.turn();
  CHECK(s->extensions == 2);

  keeper.stop(*s);
  keeper.stop(*s);  // idempotent
  CHECK(keeper.live() == 1);  // let go on a later turn, never inside stop()
  bed.runtime.advance(milliseconds{1});
  CHECK(keeper.live() == 0);
  CHECK(s.use_count() == 1);
  bed.runtime.advance(milliseconds{10000});
  CHECK(bed.inner.sent.size() == before + 3);  // stopped: no more extensions
  CHECK(losses.count == 0);  // a release is not a loss
  bed.finish();
}

TEST_CASE("with a batch window, extensions are planned on a grid: leases due apart share one round, never later, at most 1/16 earlier") {
  Bed bed(3, milliseconds{10}, 512);
  Losses losses;
  // A 3 s lease extends after 1 s: its grid is the power of two of ms at
  // most 1000 / 16, 32 ms. Start on a grid point.
  const TimePoint t0 = bed.align_to(milliseconds{32});
  bed.runtime.advance(milliseconds{1});
  auto a = keep(bed, "a", losses);  // due at t0 + 1001 ms
  bed.runtime.advance(milliseconds{8});
  auto b = keep(bed, "b", losses);  // due at t0 + 1009 ms
  // Both are planned at the grid point before: t0 + 992 ms (1/16 of 1 s is
  // 62.5 ms: never earlier than that).
  bed.runtime.advance_to(t0 + milliseconds{991});
  CHECK(bed.kept().batcher().queued() == 0);
  bed.runtime.advance(milliseconds{1});
  CHECK(bed.kept().batcher().queued() == 2);
  CHECK(bed.inner.sent.empty());  // the window
  bed.runtime.advance(milliseconds{10});
  REQUIRE(bed.inner.sent.size() == 3);  // one round for both
  CHECK(bed.inner.sent[0].call->command == CommandId::extend_batch);
  CHECK(keys_of(*bed.inner.sent[0].call) == std::vector<std::string>{lock_key("app:", "a"), lock_key("app:", "b")});
  bed.yes_all();
  bed.turn();
  CHECK(a->extensions == 1);
  CHECK(b->extensions == 1);
  CHECK(losses.count == 0);
  bed.finish();
}

TEST_CASE("a grid point gathers at most one full round: a lease beyond it tries the finer grids' points, then goes when planned") {
  // extend_batch_max 2, window 10 ms, five leases due within one 32 ms grid
  // interval: a and b are planned at its point (t0 + 992 ms); c and d find
  // it full and take the 16 ms grid's point (t0 + 1008 ms); e finds both
  // full, and the next grid (8 ms) is not above the window: it goes when
  // planned. (A burst of leases, dense enough to fill rounds alone, would
  // otherwise meet in bursts of rounds that queue per master.)
  Bed bed(3, milliseconds{10}, 2);
  Losses losses;
  const TimePoint t0 = bed.align_to(milliseconds{32});
  std::vector<std::shared_ptr<LeaseState>> kept;
  for (const auto& [name, at] : {std::pair{"a", 1}, {"b", 3}, {"c", 9}, {"d", 11}, {"e", 13}}) {
    bed.runtime.advance_to(t0 + milliseconds{at});
    kept.push_back(keep(bed, name, losses));  // due at t0 + 1000 ms + at
  }
  auto sent_keys = [&](std::size_t i) { return keys_of(*bed.inner.sent.at(i).call); };
  auto until = [&](long long ms) { bed.runtime.advance_to(t0 + milliseconds{ms}); };
  until(991);
  CHECK(bed.inner.sent.empty());
  until(992);
  REQUIRE(bed.inner.sent.size() == 3);  // a full round goes at once
  CHECK(sent_keys(0) == std::vector<std::string>{lock_key("app:", "a"), lock_key("app:", "b")});
  bed.yes_all();
  bed.turn();
  until(1007);
  CHECK(bed.inner.sent.size() == 3);
  until(1008);
  REQUIRE(bed.inner.sent.size() == 6);
  CHECK(sent_keys(3) == std::vector<std::string>{lock_key("app:", "c"), lock_key("app:", "d")});
  bed.yes_all();
  bed.turn();
  until(1012);
  CHECK(bed.kept().batcher().queued() == 0);
  until(1013);
  CHECK(bed.kept().batcher().queued() == 1);  // e, when planned, for the window
  until(1023);
  REQUIRE(bed.inner.sent.size() == 9);
  CHECK(sent_keys(6) == std::vector<std::string>{lock_key("app:", "e")});
  bed.yes_all();
  bed.turn();
  for (const auto& s : kept) CHECK(s->extensions == 1);
  CHECK(losses.count == 0);
  bed.finish();
}

TEST_CASE("the grid is no wider than what gathers about one round: with many leases kept, extensions go when planned") {
  // extend_batch_max 2 and 200 leases: planned 1 s ahead with 200 kept, a
  // point of any grid wider than the window would gather more than
  // extend_batch_max of them (were they all planned alike): no grid. (The
  // 199 others are of 60 s: none falls due during the test.)
  Bed bed(3, milliseconds{10}, 2);
  Losses losses;
  std::vector<std::shared_ptr<LeaseState>> kept;
  for (int i = 0; i < 199; ++i) kept.push_back(keep(bed, "r" + std::to_string(i), losses, {}, milliseconds{60000}));
  // Lease x is kept 1 ms after a point of the grid it would get alone
  // (32 ms): planned 1000 ms later, 9 ms after a grid point.
  bed.align_to(milliseconds{32});
  bed.runtime.advance(milliseconds{1});
  kept.push_back(keep(bed, "x", losses));
  const std::string x = lock_key("app:", "x");
  auto sent_x = [&] {
    for (const auto& sent : bed.inner.sent) {
      const std::vector<std::string> keys = keys_of(*sent.call);
      if (std::find(keys.begin(), keys.end(), x) != keys.end()) return true;
    }
    return false;
  };
  bed.runtime.advance(milliseconds{999});
  CHECK(bed.kept().batcher().queued() == 0);
  CHECK_FALSE(sent_x());
  bed.runtime.advance(milliseconds{1});
  CHECK(bed.kept().batcher().queued() == 1);  // x, for the window
  bed.runtime.advance(milliseconds{10});
  CHECK(sent_x());
  bed.yes_all();
  bed.turn();
  CHECK(losses.count == 0);
  bed.finish();
}

TEST_CASE("without batching in time (window 0, or extend_batch_max 1) an extension goes exactly when planned") {
  for (auto [window, max] : {std::pair{milliseconds{0}, std::size_t{512}}, {milliseconds{10}, std::size_t{1}}}) {
    CAPTURE(window.count());
    CAPTURE(max);
    Bed bed(3, window, max);
    Losses losses;
    bed.runtime.advance(milliseconds{1});
    auto a = keep(bed, "a", losses);
    bed.runtime.advance(milliseconds{999});
    CHECK(bed.kept().batcher().queued() == 0);
    CHECK(bed.inner.sent.empty());
    bed.runtime.advance(window + milliseconds{1});
    CHECK(bed.inner.sent.size() == 3);
    bed.yes_all();
    bed.turn();
    CHECK(a->extensions == 1);
    bed.finish();
  }
}

TEST_CASE("an extension refused by a majority loses the lease at once, told once, with the stop token requested") {
  Bed bed(3, milliseconds{0}, 512);
  Losses losses;
  auto s = keep(bed, "r", losses);
  const std::stop_token stop = s->stop_token();
  bed.runtime.advance(milliseconds{1000});
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 3);
  bed.integer(0, 0);
  bed.integer(1, 0);  // two of three: no majority can say yes any more
  bed.turn();
  CHECK(losses.count == 1);
  CHECK(losses.why.find("extension refused") != std::string::npos);
  CHECK(stop.stop_requested());
  {
    std::lock_guard lock(s->mu);
    REQUIRE(s->lost);
    CHECK(s->lost_error().code == Errc::lost);
    CHECK(s->lost_error().nodes.size() == 3);
  }
  bed.integer(2, 1);  // the straggler changes nothing
  bed.runtime.advance(milliseconds{5000});
  CHECK(losses.count == 1);
  CHECK(bed.kept().live() == 0);
  CHECK(s.use_count() == 1);
  bed.finish();
}

TEST_CASE("with no answer a lease is lost before its deadline, never after; the late verdict lets the record go") {
  Bed bed(3, milliseconds{0}, 512);
  Losses losses;
  auto s = keep(bed, "r", losses);
  const TimePoint deadline = s->deadline();
  bed.runtime.advance(milliseconds{1000});
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 3);
  bed.runtime.advance(milliseconds{1997});  // 3 ms before the deadline: not yet
  CHECK(losses.count == 0);
  bed.runtime.advance(milliseconds{1});  // the deadline less the 2 ms margin
  CHECK(losses.count == 1);
  CHECK(bed.runtime.now() < deadline);
  CHECK(losses.why.find("validity deadline passed while an extension was still unanswered") != std::string::npos);
  CHECK(s.use_count() == 2);  // the extension is still in flight: the keeper holds on
  bed.yes_all();  // a majority, but after the deadline: too late, and stopped anyway
  bed.turn();
  CHECK(s->extensions == 0);
  CHECK(s->deadline() == deadline);
  CHECK(losses.count == 1);
  bed.runtime.advance(milliseconds{1});  // let go on the turn after the loss
  CHECK(bed.kept().live() == 0);
  CHECK(s.use_count() == 1);
  bed.finish();
}

TEST_CASE("a lease not extended (auto_extend off, or a cap reached) runs out at its deadline, naming why") {
  Bed bed(3, milliseconds{0}, 512);
  Losses off_losses, capped_losses;
  LeaseOptions off;
  off.auto_extend = false;
  auto a = keep(bed, "a", off_losses, off);
  LeaseOptions capped;
  capped.max_extensions = 1;
  auto b = keep(bed, "b", capped_losses, capped);
  bed.runtime.advance(milliseconds{1000});
  bed.turn();
  REQUIRE(bed.inner.sent.size() == 3);  // only b's extension
  bed.yes_all();
  bed.turn();
  CHECK(b->extensions == 1);
  bed.runtime.advance(milliseconds{2000});  // a's deadline
  CHECK(off_losses.count == 1);
  CHECK(off_losses.why.find("auto_extend is off") != std::string::npos);
  bed.runtime.advance(milliseconds{5000});  // b's new deadline: no second extension was sent
  CHECK(bed.inner.sent.size() == 3);
  CHECK(capped_losses.count == 1);
  CHECK(capped_losses.why.find("max_extensions (1) reached") != std::string::npos);
  bed.finish();
}

TEST_CASE("close loses every kept lease ('the client was closed'); one released before is only let go") {
  Bed bed(3, milliseconds{0}, 512);
  Losses la, lb, lc;
  auto a = keep(bed, "a", la);
  auto b = keep(bed, "b", lb);
  auto c = keep(bed, "c", lc);
  LeaseService& keeper = bed.kept();
  keeper.stop(*c);  // released just before the close
  bed.runtime.advance(milliseconds{1000});  // a and b extending, c let go
  CHECK(keeper.live() == 2);
  keeper.close();
  CHECK(la.count == 1);
  CHECK(lb.count == 1);
  CHECK(lc.count == 0);
  CHECK(la.why.find("the client was closed") != std::string::npos);
  bed.finish();  // the round's verdicts (closed) come after the loss: nothing more is told
  bed.runtime.advance(milliseconds{1});  // let go on a later turn
  CHECK(la.count == 1);
  CHECK(keeper.live() == 0);
  CHECK(a.use_count() == 1);
  CHECK(b.use_count() == 1);
}

TEST_CASE("a lease taken after its service closed is lost at once and let go; nothing is sent for it") {
  // An acquire in flight when the client closes may still win: its lease
  // must not be kept extended by a client that is closing.
  Bed bed(3, milliseconds{0}, 512);
  LeaseService& service = bed.kept();
  service.close();
  Losses l;
  auto a = keep(bed, "a", l);
  CHECK(l.count == 1);
  CHECK(l.why.find("the client was closed") != std::string::npos);
  CHECK(service.live() == 1);  // let go on a later turn, never inside keep()
  bed.runtime.advance(milliseconds{1000});
  CHECK(service.live() == 0);
  CHECK(a.use_count() == 1);
  CHECK(bed.inner.sent.empty());
  bed.finish();
}

TEST_CASE("a lease record keeps its names inline up to 64 bytes, on the heap beyond, and the rest only when used") {
  Bed bed(3, milliseconds{0}, 512);
  for (const std::size_t size : {std::size_t{1}, std::size_t{32}, std::size_t{64 - 36}, std::size_t{64 - 35},
                                 std::size_t{1024}}) {
    Lock l;
    l.resource = std::string(size, 'r');
    l.token = std::string(36, 't');
    l.ttl = milliseconds{3000};
    l.validity_deadline = bed.runtime.now() + l.ttl;
    auto s = make_lease(l, {}, {}, nullptr);
    CHECK(s->resource() == l.resource);
    CHECK(s->token() == l.token);
    CHECK(s->cold() == nullptr);  // nothing rare asked for yet
    CHECK(s->fence() == 0);
    CHECK(s->resource_string() == l.resource);
    CHECK(s->token_string() == l.token);
    CHECK(&s->resource_string() == &s->resource_string());  // made once, handed out by reference
    CHECK(s->resources() == std::vector<std::string>{l.resource});
  }
  Lock l;
  l.resource = "r";
  l.token = "t";
  l.fence = 42;
  LeaseOptions o;
  o.acquire.fence = true;
  auto fenced = make_lease(l, o, {}, nullptr);
  REQUIRE(fenced->cold() != nullptr);
  CHECK(fenced->fence() == 42);
  CHECK(fenced->fenced);
  auto multi = make_lease(l, {}, {}, nullptr, {"s", "t"});
  CHECK(multi->multi());
  CHECK(multi->resources() == std::vector<std::string>{"r", "s", "t"});
  bed.finish();
}
