// test_multi.cpp — multi-resource locks: all or none on each master, the
// majority over masters, overlapping sets exclude each other.
#include <doctest/doctest.h>

#include <atomic>
#include <optional>
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

TEST_CASE("a waiter on several resources is woken by the release of one of them, not by polling") {
  RedisGroup group(3);
  auto holder = client_for(group);
  // Polls and the safety net far apart: only a notification retries soon.
  // The waiter's pub/sub connections, as its observer hears them come up.
  struct Subscribed final : Observer {
    std::atomic<int> ready{0};
    void on_connection(const ConnectionEvent& e) override {
      if (e.subscriber && e.to == ConnectionState::ready) ++ready;
    }
  };
  auto subscribed = std::make_shared<Subscribed>();
  auto waiter = client_for(group, [&](Options& o) {
    o.retry_delay = 5000ms;
    o.retry_jitter = 0ms;
    o.wake_safety_net = 5000ms;
    o.observer = subscribed;
  });
  auto b = holder->acquire("B", {.ttl = 10000ms});
  REQUIRE(b.ok());
  std::optional<Result<MultiLock>> got;
  std::thread waiting([&] { got.emplace(waiter->acquire_many({"A", "B"}, {.ttl = 5000ms, .wait = 8000ms})); });
  // Its first attempt met the holder, and it listens: a subscriber is up,
  // and a server confirms the anchor only after it registered every
  // channel of the same SUBSCRIBE (the waiter's two among them).
  REQUIRE(eventually([&] { return waiter->stats().acquire_rounds.held >= 1 && subscribed->ready >= 1; }));
  REQUIRE(holder->release(*b).ok());
  waiting.join();
  REQUIRE(got.has_value());
  REQUIRE_MESSAGE(got->ok(), got->error().to_string());
  CHECK(got->value().resources == std::vector<std::string>{"A", "B"});
  const Stats s = waiter->stats();
  CHECK(s.wake_ups >= 1);              // B's release woke it
  CHECK(s.acquire_rounds.ok == 1);
  CHECK(s.acquire_latency.count == 1);
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
  REQUIRE(ready_everywhere(*client, group.size()));
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

TEST_CASE("acquire_many rejects an empty set and a bad resource") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto empty = client->acquire_many({});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().code == Errc::invalid_argument);
  CHECK(empty.error().message == "resources: empty");
  auto bad = client->acquire_many({"ok", ""});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message == "resources[0]: empty");  // sorted: "" comes first
}

TEST_CASE("a fenced multi-resource lock: one fence above every earlier fence of each resource, and above it after") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto fenced = [&](const char* r) {
    auto lock = client->acquire(r, {.ttl = 5000ms, .fence = true});
    REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
    const std::uint64_t f = lock->fence;
    REQUIRE(client->release(*lock).ok());
    return f;
  };
  CHECK(fenced("a") == 1);
  CHECK(fenced("a") == 2);
  CHECK(fenced("a") == 3);
  CHECK(fenced("b") == 1);
  auto both = client->acquire_many({"b", "a"}, {.ttl = 5000ms, .fence = true});
  REQUIRE_MESSAGE(both.ok(), both.error().to_string());
  CHECK(both->fence == 4);  // above a's 3 and b's 1
  // Both counters were raised to it on a majority before it was handed out.
  for (const char* key : {"redlock:{a}:fence", "redlock:{b}:fence"}) {
    int raised = 0;
    for (std::size_t i = 0; i < group.size(); ++i) raised += group[i].command({"GET", key}).str == "4" ? 1 : 0;
    CHECK(raised >= 2);
  }
  // An extension keeps it; the next holder of either resource gets more.
  auto extended = client->extend_many(*both, 6000ms);
  REQUIRE(extended.ok());
  CHECK(extended->fence == 4);
  REQUIRE(client->release_many(*extended).ok());
  CHECK(fenced("b") == 5);
  // A lease too.
  auto lease = client->lock_many({"a", "c"}, {.acquire = {.ttl = 2000ms, .fence = true}});
  REQUIRE(lease.ok());
  CHECK(lease->fence() == 5);  // above a's 4; c had none
}

TEST_CASE("lock_many: one lease on several resources, extended together, released together") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto other = client_for(group);
  auto lease = client->lock_many({"to", "from"}, {.acquire = {.ttl = 300ms}});
  REQUIRE_MESSAGE(lease.ok(), lease.error().to_string());
  CHECK(lease->resources() == std::vector<std::string>{"from", "to"});
  CHECK(lease->resource() == "from");
  // Extended well past its 300 ms TTL, every resource still ours.
  REQUIRE(eventually([&] { return lease->extensions() >= 3; }));
  CHECK(lease->valid());
  CHECK_FALSE(other->try_acquire("from").ok());
  CHECK_FALSE(other->try_acquire("to").ok());
  CHECK(group[0].command({"PTTL", "redlock:{to}:lock"}).integer > 0);
  auto released = lease->release();
  REQUIRE(released.ok());
  CHECK(released->released);
  CHECK(other->try_acquire("from").ok());
  CHECK(other->try_acquire("to").ok());
}

TEST_CASE("lock_many: lost when a majority is gone; reentrant is refused") {
  RedisGroup group(3);
  auto client = client_for(group);
  std::atomic<bool> lost{false};
  LeaseOptions opts{.acquire = {.ttl = 300ms}};
  opts.on_lost = [&](const Error& e) { lost = e.code == Errc::lost; };
  auto lease = client->lock_many({"a", "b"}, std::move(opts));
  REQUIRE(lease.ok());
  group[0].pause();
  group[1].pause();
  CHECK(eventually([&] { return lost.load(); }));
  CHECK(lease->stop_token().stop_requested());
  group[0].resume();
  group[1].resume();

  auto reentrant = client->lock_many({"a", "b"}, {.reentrant = true});
  REQUIRE_FALSE(reentrant.ok());
  CHECK(reentrant.error().message.find("reentrant") != std::string::npos);
}

TEST_CASE("AsyncClient::lock_many: an AsyncLease on several resources") {
  RedisGroup group(3);
  auto other = client_for(group);
  AsyncBed bed(group);
  AsyncClient& c = *bed.client;
  std::optional<AsyncLease> lease;
  bool released = false;
  c.lock_many({"y", "x", "y"}, {.acquire = {.ttl = 2000ms}}, [&](Result<AsyncLease> r) {
    REQUIRE_MESSAGE(r.ok(), r.error().to_string());
    lease.emplace(std::move(*r));
    CHECK(lease->resources() == std::vector<std::string>{"x", "y"});
    CHECK_FALSE(other->try_acquire("y").ok());
    lease->release([&](Result<ReleaseResult> rel) {
      released = rel.ok() && rel->released;
      c.close();
    });
  });
  bed.run();
  CHECK(released);
  CHECK(other->try_acquire("x").ok());
  CHECK(other->try_acquire("y").ok());
  CHECK(bed.closed_clean());
}
