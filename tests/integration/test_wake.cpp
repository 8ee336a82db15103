// test_wake.cpp — waiting without polling: release notifications over
// pub/sub, the holder's TTL, and the safety net.
#include <doctest/doctest.h>

#include <atomic>
#include <optional>
#include <stop_token>
#include <thread>

#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using Clock = redlock::BootClock;

TEST_CASE("a waiter that would not poll again for a minute gets the lock as soon as the holder releases") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto waiter = client_for(group, no_polling);
  auto lock = holder->acquire("report", {.ttl = 30000ms});
  REQUIRE(lock.ok());
  std::optional<Result<Lock>> got;
  std::thread t([&] { got.emplace(waiter->acquire("report", {.ttl = 30000ms, .wait = 5000ms})); });
  // Release once the waiter listens on every master.
  REQUIRE(eventually([&] { return listening(group, "redlock:{report}:released"); }));
  const auto released_at = Clock::now();
  REQUIRE(holder->release(*lock)->released);
  t.join();
  REQUIRE(got.has_value());
  REQUIRE(got->ok());
  CHECK(Clock::now() - released_at < 5000ms);  // the waiter's wait, not its 60 s retry delay
  CHECK((*got)->attempts >= 2);
  // The waiter left the channel once it had the lock.
  CHECK(eventually([&] { return subscribers(group[0], "redlock:{report}:released") == 0; }));
}

TEST_CASE("a holder that dies without releasing: the waiter gets the lock once its TTL has passed, not polling") {
  RedisGroup group(3);
  auto waiter = client_for(group, [](Options& o) {
    no_polling(o);
    o.wake_safety_net = 500ms;
  });
  Clock::time_point taken;
  {
    auto holder = client_for(group);
    auto lock = holder->acquire("job", {.ttl = 1000ms});
    REQUIRE(lock.ok());
    taken = Clock::now();
  }  // the holder's client is gone; its key stays until the TTL
  auto got = waiter->acquire("job", {.ttl = 1000ms, .wait = 5000ms});
  const auto waited = Clock::now() - taken;
  REQUIRE(got.ok());
  CHECK(waited >= 1000ms - 30ms);           // not before the TTL (less the drift allowance)
  CHECK(waited <= 1000ms + 500ms + 200ms);  // TTL + the safety net, with room for a slow build
}

TEST_CASE("a subscriber connection killed while waiting: the waiter resubscribes and still gets the lock") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto waiter = client_for(group, no_polling);
  auto lock = holder->acquire("row", {.ttl = 30000ms});
  REQUIRE(lock.ok());
  std::optional<Result<Lock>> got;
  std::thread t([&] { got.emplace(waiter->acquire("row", {.ttl = 30000ms, .wait = 8000ms})); });
  REQUIRE(eventually([&] { return listening(group, "redlock:{row}:released"); }));
  for (std::size_t i = 0; i < group.size(); ++i) {
    CHECK(group[i].command({"CLIENT", "KILL", "TYPE", "pubsub"}).integer >= 1);
  }
  // The subscribers come back on their own and subscribe again.
  REQUIRE(eventually([&] { return listening(group, "redlock:{row}:released"); }, 5000ms));
  REQUIRE(holder->release(*lock)->released);
  t.join();
  REQUIRE(got.has_value());
  CHECK(got->ok());
}

TEST_CASE("wake_ups off: a waiter polls; released early, the lock is taken only at its next poll") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto waiter = client_for(group, [](Options& o) {
    no_polling(o);
    o.wake_ups = false;
  });
  auto lock = holder->acquire("off", {.ttl = 30000ms});
  REQUIRE(lock.ok());
  // The majority decided; the holder's last SET may still be on its way to
  // master 0 (under ASan it was: counted as the waiter's, the release came
  // before the waiter's first attempt, which then won).
  REQUIRE(eventually([&] { return group.keys_everywhere("redlock:{off}:lock") == group.size(); }));
  const long long sets_before = command_calls(group[0], "set");
  const auto started = Clock::now();
  std::optional<Result<Lock>> got;
  std::thread t([&] { got.emplace(waiter->acquire("off", {.ttl = 30000ms, .wait = 1000ms})); });
  // Release right after the waiter's first attempt reached a master.
  REQUIRE(eventually([&] { return command_calls(group[0], "set") > sets_before; }));
  REQUIRE(holder->release(*lock)->released);
  t.join();
  REQUIRE(got.has_value());
  REQUIRE(got->ok());
  // Its next poll: retry_delay is a minute, so the last retry at the end of
  // its wait — nothing woke it at the release.
  CHECK(Clock::now() - started >= 1000ms);
  CHECK((*got)->attempts == 2);
  CHECK(subscribers(group[0], "redlock:{off}:released") == 0);
}

TEST_CASE("a waiting acquire cancelled from another thread ends at once with cancelled and stops listening") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto waiter = client_for(group, no_polling);
  auto lock = holder->acquire("cancel-me", {.ttl = 30000ms});
  REQUIRE(lock.ok());
  std::stop_source stop;
  std::optional<Result<Lock>> got;
  std::thread t([&] {
    got.emplace(waiter->acquire("cancel-me", {.ttl = 30000ms, .wait = 20000ms, .cancel = stop.get_token()}));
  });
  REQUIRE(eventually([&] { return listening(group, "redlock:{cancel-me}:released"); }));
  const auto cancelled_at = Clock::now();
  stop.request_stop();
  t.join();
  REQUIRE(got.has_value());
  REQUIRE_FALSE(got->ok());
  CHECK(got->error().code == Errc::cancelled);
  CHECK(Clock::now() - cancelled_at < 2000ms);  // not its 20 s wait
  CHECK(eventually([&] { return subscribers(group[0], "redlock:{cancel-me}:released") == 0; }));
  // The holder was never disturbed.
  CHECK(holder->release(*lock)->released);
  // A token already requested cancels before the first attempt ends.
  auto again = waiter->acquire("cancel-me", {.wait = 5000ms, .cancel = stop.get_token()});
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == Errc::cancelled);
  // Its attempt took the free lock and was given back (asynchronously).
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{cancel-me}:lock") == 0; }));
}
