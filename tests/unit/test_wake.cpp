// test_wake.cpp — release notifications (src/wake.hpp) on fake Wires and
// manual time: subscribe, confirm, wake, resubscribe after a lost
// connection, unsubscribe, close.
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "fake_wire.hpp"
#include "test_runtime.hpp"
#include "wake.hpp"

using namespace redlock;
using namespace redlock::detail;
using namespace redlock::test;
using std::chrono::milliseconds;

namespace {

struct Listener final : WakeListener {
  std::vector<Why> wakes;
  std::vector<std::string> messages;  // what each wake carried
  void on_wake(Why why, std::string_view message) override {
    wakes.push_back(why);
    messages.emplace_back(message);
  }
};

struct Bed {
  ManualRuntime runtime;
  FakeWireFactory wires;
  Options options;
  std::vector<NodeAddress> nodes = std::vector<NodeAddress>(1);
  Bed() { nodes[0].host = "10.0.0.1"; }
  FakeWire& wire() {
    REQUIRE(wires.live != nullptr);
    return *wires.live;
  }
  // up: the current connection's transport comes up and its first writes go out.
  FakeWire& up() {
    FakeWire& w = wire();
    w.connected();
    w.flush();
    return w;
  }
};

const std::string anchor = "redlock:wake-anchor";

}  // namespace

TEST_CASE("a watch subscribes, is confirmed, and a message wakes the watchers") {
  Bed bed;
  WakeHub hub(bed.runtime, bed.wires, bed.nodes, bed.options);
  Listener first, second;
  CHECK(hub.watch("ch", &first) == WatchState::pending);
  FakeWire& w = bed.up();
  REQUIRE(w.sent.size() == 2);
  CHECK(w.sent[0] == Command{"SUBSCRIBE", anchor});
  CHECK(w.sent[1] == Command{"SUBSCRIBE", "ch"});
  w.answer(strings({"subscribe", anchor, "1"}));
  CHECK(first.wakes.empty());
  w.answer(strings({"subscribe", "ch", "2"}));
  CHECK(first.wakes == std::vector{WakeListener::Why::subscribed});
  CHECK(hub.watch("ch", &second) == WatchState::ready);
  w.answer(strings({"message", "ch", "token"}));
  CHECK(first.wakes.back() == WakeListener::Why::released);
  CHECK(second.wakes == std::vector{WakeListener::Why::released});
  CHECK(second.messages.back() == "token");  // what was published reaches the watcher (fair turns name waiters)

  // The connection goes: after the backoff a new one subscribes again,
  // and the watchers are told they may have missed a release.
  w.lose("connection reset by peer");
  CHECK(bed.wires.live == nullptr);
  bed.runtime.advance(bed.options.reconnect_min);
  REQUIRE(bed.wires.connects == 2);
  FakeWire& again = bed.up();
  REQUIRE(again.sent.size() == 1);
  CHECK(again.sent[0] == Command{"SUBSCRIBE", anchor, "ch"});
  again.answer(strings({"subscribe", anchor, "1"}));
  again.answer(strings({"subscribe", "ch", "2"}));
  CHECK(first.wakes.back() == WakeListener::Why::resubscribed);
  CHECK(second.wakes.back() == WakeListener::Why::resubscribed);

  hub.unwatch("ch", &first);
  again.flush();
  CHECK(again.sent.size() == 1);  // someone still watches
  hub.unwatch("ch", &second);
  again.flush();
  CHECK(again.sent.size() == 1);  // nobody watches: it lingers (WakeHub::linger)
  bed.runtime.advance(WakeHub::linger - milliseconds{1});
  again.flush();
  CHECK(again.sent.size() == 1);
  bed.runtime.advance(milliseconds{1});
  again.flush();
  REQUIRE(again.sent.size() == 2);
  CHECK(again.sent[1] == Command{"UNSUBSCRIBE", "ch"});

  int closed = 0;
  hub.close([&] { ++closed; });
  CHECK(closed == 0);  // never on the caller's stack
  CHECK(bed.wires.live == nullptr);
  bed.runtime.advance(milliseconds{0});
  CHECK(closed == 1);
  CHECK(bed.runtime.armed() == 0);
}

TEST_CASE("a channel's hearing mark: none until confirmed, moved by every message and confirmation, lingering too") {
  // A waiter skips its check once subscribed only on an unchanged mark
  // (docs/design.md, "Waiting"): whatever could carry or hide a release
  // must move it.
  Bed bed;
  WakeHub hub(bed.runtime, bed.wires, bed.nodes, bed.options);
  Listener l;
  hub.watch("ch", &l);
  CHECK_FALSE(hub.heard("ch").has_value());
  FakeWire& w = bed.up();
  w.answer(strings({"subscribe", anchor, "1"}));
  CHECK_FALSE(hub.heard("ch").has_value());  // the anchor is no confirmation of "ch"
  w.answer(strings({"subscribe", "ch", "2"}));
  const std::optional<std::uint64_t> confirmed = hub.heard("ch");
  REQUIRE(confirmed.has_value());
  CHECK(hub.heard("ch") == confirmed);  // reading it changes nothing
  CHECK_FALSE(hub.heard("other").has_value());

  // Nobody watches (it lingers): a message still moves the mark.
  hub.unwatch("ch", &l);
  w.answer(strings({"message", "ch", "token"}));
  const std::optional<std::uint64_t> after_message = hub.heard("ch");
  REQUIRE(after_message.has_value());
  CHECK(*after_message != *confirmed);
  CHECK(l.wakes == std::vector{WakeListener::Why::subscribed});  // it woke nobody

  // The connection goes: no confirmation left, no mark; confirmed again on
  // the next connection, a mark it never had.
  hub.watch("ch", &l);
  w.lose("connection reset by peer");
  CHECK_FALSE(hub.heard("ch").has_value());
  bed.runtime.advance(bed.options.reconnect_min);
  FakeWire& again = bed.up();
  again.answer(strings({"subscribe", anchor, "1"}));
  again.answer(strings({"subscribe", "ch", "2"}));
  const std::optional<std::uint64_t> resubscribed = hub.heard("ch");
  REQUIRE(resubscribed.has_value());
  CHECK(*resubscribed != *confirmed);
  CHECK(*resubscribed != *after_message);

  // Unsubscribed after its linger: no mark.
  hub.unwatch("ch", &l);
  bed.runtime.advance(WakeHub::linger);
  CHECK_FALSE(hub.heard("ch").has_value());
  hub.close([] {});
  bed.runtime.advance(milliseconds{0});
}

TEST_CASE("a subscriber whose AUTH fails drops the connection and tries again later") {
  Bed bed;
  bed.nodes[0].password = "wrong";
  WakeHub hub(bed.runtime, bed.wires, bed.nodes, bed.options);
  Listener l;
  CHECK(hub.watch("ch", &l) == WatchState::pending);
  FakeWire& w = bed.up();
  CHECK(w.sent[0] == Command{"AUTH", "wrong"});
  w.answer(error("WRONGPASS invalid username-password pair"));
  CHECK(bed.wires.live == nullptr);
  CHECK(l.wakes.empty());
  bed.runtime.advance(bed.options.reconnect_min);
  CHECK(bed.wires.connects == 2);
  int closed = 0;
  hub.close([&] { ++closed; });
  bed.runtime.advance(milliseconds{0});
  CHECK(closed == 1);
}

TEST_CASE("a connect that never completes is abandoned after connect_timeout") {
  Bed bed;
  WakeHub hub(bed.runtime, bed.wires, bed.nodes, bed.options);
  Listener l;
  hub.watch("ch", &l);
  bed.runtime.advance(bed.options.connect_timeout);
  CHECK(bed.wires.live == nullptr);
  CHECK(bed.wires.connects == 1);
  hub.close({});
}

TEST_CASE("a subscriber is ready only once the server confirms its SUBSCRIBE: a silent master costs the connect deadline") {
  Bed bed;
  WakeHub hub(bed.runtime, bed.wires, bed.nodes, bed.options);
  Listener l;
  hub.watch("ch", &l);
  FakeWire& w = bed.up();  // the transport is up; the server never answers
  bed.runtime.advance(bed.options.connect_timeout - milliseconds{1});
  CHECK(bed.wires.live == &w);
  bed.runtime.advance(milliseconds{1});
  CHECK(bed.wires.live == nullptr);
  CHECK(l.wakes.empty());

  // The next connection is confirmed: no deadline runs any more, and the
  // watcher hears it was subscribed.
  bed.runtime.advance(bed.options.reconnect_min);
  REQUIRE(bed.wires.connects == 2);
  FakeWire& again = bed.up();
  again.answer(strings({"subscribe", anchor, "1"}));
  again.answer(strings({"subscribe", "ch", "2"}));
  CHECK(l.wakes == std::vector{WakeListener::Why::resubscribed});
  bed.runtime.advance(bed.options.connect_timeout * 3);
  CHECK(bed.wires.live == &again);
  CHECK(bed.wires.connects == 2);
  hub.close({});
}

TEST_CASE("a SUBSCRIBE the server refuses drops the subscriber's connection") {
  Bed bed;
  WakeHub hub(bed.runtime, bed.wires, bed.nodes, bed.options);
  Listener l;
  hub.watch("ch", &l);
  FakeWire& w = bed.up();
  w.answer(error("NOPERM this user has no permissions to access the 'redlock:wake-anchor' channel"));
  CHECK(bed.wires.live == nullptr);
  CHECK(l.wakes.empty());
  hub.close({});
}

TEST_CASE("a reply that is no pub/sub message ends the subscriber's connection; it reconnects") {
  Bed bed;
  WakeHub hub(bed.runtime, bed.wires, bed.nodes, bed.options);
  Listener l;
  hub.watch("ch", &l);
  FakeWire& w = bed.up();
  w.answer(strings({"subscribe", anchor, "1"}));
  w.answer(strings({"subscribe", "ch", "2"}));
  w.answer(strings({"message", "ch", "token"}));
  REQUIRE(bed.wires.live != nullptr);
  w.answer(status());  // +OK: nothing a subscribed connection is ever sent
  CHECK(bed.wires.live == nullptr);
  bed.runtime.advance(bed.options.reconnect_min);
  CHECK(bed.wires.connects == 2);
  FakeWire& again = bed.up();
  again.answer(strings({"subscribe", anchor, "1"}));
  again.answer(strings({"pong", ""}));  // an array, but no message either
  CHECK(bed.wires.live == nullptr);
  hub.close({});
}
