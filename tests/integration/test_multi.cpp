// test_multi.cpp — multi-resource locks: all or none on each master, the
// majority over masters, overlapping sets exclude each other.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

TEST_CASE("acquire_many takes every resource, sorted and once each; extend_many and release_many act on all") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto other = client_for(group);
  auto lock = client->acquire_many({"to", "from", "to"}, {.ttl = 5000ms});
  REQUIRE(lock.ok());
  CHECK(lock->resources == std::vector<std::string>{"from", "to"});
  CHECK(lock->valid());
  for (const char* r : {"from", "to"}) {
    // Decided at the majority: the third master may answer a moment later.
    CHECK(eventually([&] { return group.keys_everywhere("redlock:{" + std::string(r) + "}:lock") == 3; }));
    CHECK_FALSE(other->try_acquire(r).ok());
  }
  auto extended = client->extend_many(*lock, 8000ms);
  REQUIRE(extended.ok());
  CHECK(extended->resources == lock->resources);
  CHECK(eventually([&] {
    return group[0].command({"PTTL", "redlock:{to}:lock"}).integer > 5000 &&
           group[0].command({"PTTL", "redlock:{from}:lock"}).integer > 5000;
  }));
  auto released = client->release_many(*extended);
  REQUIRE(released.ok());
  CHECK(released->released);
  CHECK(eventually([&] { return group.keys_everywhere("redlock:*") == 0; }));
}

TEST_CASE("a multi acquire that meets one held resource sets none of them") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto client = client_for(group);
  auto b = holder->acquire("B", {.ttl = 10000ms});
  REQUIRE_MESSAGE(b.ok(), b.error().to_string());
  auto all = client->acquire_many({"A", "B", "C"}, {.ttl = 5000ms});
  REQUIRE_FALSE(all.ok());
  CHECK(all.error().code == Errc::held);
  CHECK(count_outcome(all.error().nodes, Outcome::held) >= 2);
  // A master that had not yet seen the holder's SET may have taken the set
  // for a moment: the failed attempt's rollback gives it back.
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{A}:lock") == 0 && group.keys_everywhere("redlock:{C}:lock") == 0; }));
  // B stays the holder's on a majority. (On the third master the client's
  // SETs may have come first, the holder's SET then failed there.)
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{B}:lock") >= 2; }));
}

TEST_CASE("two clients locking {A,B} and {B,C} never both hold B") {
  RedisGroup group(5);
  std::atomic<int> holding_b{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> done_ab{0}, done_bc{0};
  auto run = [&](std::vector<std::string> set, std::atomic<int>& done) {
    auto client = client_for(group, [](Options& o) {
      o.retry_delay = 1ms;
      o.retry_jitter = 2ms;
    });
    for (int i = 0; i < 300; ++i) {
      auto lock = client->acquire_many(set, {.ttl = 2000ms, .wait = 5000ms});
      if (!lock.ok()) continue;
      if (holding_b.fetch_add(1) != 0) ++overlaps;
      holding_b.fetch_sub(1);
      CHECK(client->release_many(*lock)->released);
      ++done;
    }
  };
  std::thread ab(run, std::vector<std::string>{"A", "B"}, std::ref(done_ab));
  std::thread bc(run, std::vector<std::string>{"C", "B"}, std::ref(done_bc));
  ab.join();
  bc.join();
  CHECK(overlaps.load() == 0);
  CHECK(done_ab.load() >= 290);
  CHECK(done_bc.load() >= 290);
  CHECK(eventually([&] { return group.keys_everywhere("redlock:*") == 0; }));
}

TEST_CASE("a multi acquire that times out on a majority leaves no partial set once the masters come back") {
  RedisGroup group(5);
  auto client = client_for(group, [](Options& o) {
    o.node_timeout = 100ms;
    o.stall_timeout = 60000ms;
  });
  REQUIRE(client->try_acquire("warm-up").ok());
  for (std::size_t i : {0u, 1u, 2u}) group[i].pause();
  auto lock = client->acquire_many({"X", "Y", "Z"}, {.ttl = 30000ms});
  REQUIRE_FALSE(lock.ok());
  CHECK(lock.error().code == Errc::no_quorum);
  for (std::size_t i : {0u, 1u, 2u}) group[i].resume();
  // Each resumed master runs the late multi_acquire, then the multi_release
  // queued behind it; the TTL (30 s) cannot explain a clean state.
  for (const char* k : {"redlock:{X}:lock", "redlock:{Y}:lock", "redlock:{Z}:lock"}) {
    CHECK(eventually([&] { return group.keys_everywhere(k) == 0; }));
  }
}

TEST_CASE("acquire_many rejects an empty set, a bad resource and fencing") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto empty = client->acquire_many({});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().code == Errc::invalid_argument);
  CHECK(empty.error().message == "resources: empty");
  auto bad = client->acquire_many({"ok", ""});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "resources[0]: empty");  // sorted: "" comes first
  auto fenced = client->acquire_many({"a", "b"}, {.fence = true});
  REQUIRE_FALSE(fenced.ok());
  CHECK(fenced.error().message.find("fence") != std::string::npos);
}
