// test_mutex.cpp — redlock::Mutex: a client and a resource as a standard
// Lockable, under std::scoped_lock, std::unique_lock and std::lock. A lock
// and a release complete at the majority: what the last master holds is
// checked with eventually().
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "../support/child.hpp"
#include "helpers.hpp"
#include "redlock/mutex.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

TEST_CASE("std::scoped_lock holds the lease for its scope and releases it at the end") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto other = client_for(group);
  Mutex m(*client, "scoped", {.acquire = {.ttl = 2000ms}});
  std::string token;
  {
    std::scoped_lock guard(m);
    REQUIRE(m.lease().valid());
    token = m.lease().token();
    CHECK(eventually([&] { return holding(group, "scoped", token) == group.size(); }));
    CHECK(other->try_acquire("scoped").error().code == Errc::held);
    CHECK_FALSE(m.stop_token().stop_requested());
  }
  CHECK(m.lease().empty());
  CHECK(eventually([&] { return holding(group, "scoped", token) == 0; }));
  CHECK_FALSE(m.last_error().has_value());
  auto after = other->try_acquire("scoped");
  CHECK(after.ok());
}

TEST_CASE("try_lock and try_lock_for fail, saying why, while another client holds the lock; lock() waits for it") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto other = client_for(group);
  auto held = other->acquire("contended", {.ttl = 5000ms});
  REQUIRE(held.ok());
  Mutex m(*client, "contended", {.acquire = {.ttl = 2000ms, .wait = 200ms}});

  std::unique_lock<Mutex> tried(m, std::try_to_lock);
  CHECK_FALSE(tried.owns_lock());
  REQUIRE(m.last_error().has_value());
  CHECK(m.last_error()->code == Errc::held);

  const auto start = std::chrono::steady_clock::now();
  std::unique_lock<Mutex> timed(m, 300ms);
  CHECK_FALSE(timed.owns_lock());
  CHECK(std::chrono::steady_clock::now() - start >= 250ms);
  CHECK(m.last_error()->code == Errc::held);

  // lock() keeps waiting (rounds of acquire.wait, 200 ms) until the holder
  // lets go.
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    std::scoped_lock guard(m);
    got = true;
  });
  // Proving a wait that does not end: three rounds' time, and it has not
  // given up (it cannot return without the lock; an abort would end us).
  std::this_thread::sleep_for(650ms);
  CHECK_FALSE(got.load());
  REQUIRE(other->release(*held).ok());
  waiter.join();
  CHECK(got.load());
}

TEST_CASE("threads of one process share a Mutex as they would a std::mutex") {
  RedisGroup group(3);
  auto client = client_for(group);
  Mutex m(*client, "shared", {.acquire = {.ttl = 2000ms, .wait = 5000ms}});
  int inside = 0, most = 0, total = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 3; ++k) {
        std::scoped_lock guard(m);
        most = std::max(most, ++inside);
        ++total;
        --inside;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(total == 12);
  CHECK(most == 1);
}

TEST_CASE("std::scoped_lock takes two Mutexes without deadlock (std::lock's try_lock and lock)") {
  RedisGroup group(3);
  auto client = client_for(group);
  Mutex from(*client, "account-a", {.acquire = {.ttl = 2000ms, .wait = 2000ms}});
  Mutex to(*client, "account-b", {.acquire = {.ttl = 2000ms, .wait = 2000ms}});
  Mutex from2(*client, "account-a", {.acquire = {.ttl = 2000ms, .wait = 2000ms}});
  Mutex to2(*client, "account-b", {.acquire = {.ttl = 2000ms, .wait = 2000ms}});
  std::atomic<int> done{0};
  std::thread one([&] {
    for (int i = 0; i < 3; ++i) {
      std::scoped_lock both(from, to);
      CHECK((from.lease().valid() && to.lease().valid()));
    }
    ++done;
  });
  std::thread two([&] {
    for (int i = 0; i < 3; ++i) {
      std::scoped_lock both(to2, from2);  // the other order
      CHECK((from2.lease().valid() && to2.lease().valid()));
    }
    ++done;
  });
  one.join();
  two.join();
  CHECK(done.load() == 2);
}

TEST_CASE("lock() on a failure no retry can cure aborts with one line naming it; try_lock reports it") {
  RedisGroup group(3);
  auto client = client_for(group);
  Mutex bad(*client, "misused", {.extend_at = 1.5});
  CHECK_FALSE(bad.try_lock());
  REQUIRE(bad.last_error().has_value());
  CHECK(bad.last_error()->code == Errc::invalid_argument);
  // In a child: the options are refused before the client's loop is asked,
  // so the child (without the loop thread) can run lock().
  const Died d = run_in_child([&] { bad.lock(); });
  REQUIRE(d.forked);
  CHECK(d.aborted);
  CHECK(d.stderr_text.find("redlock: Mutex::lock() of misused cannot succeed") == 0);
  CHECK(d.stderr_text.find("redlock.invalid_argument: extend_at") != std::string::npos);
  CHECK(d.stderr_text.find('\n') == d.stderr_text.size() - 1);

  Mutex recursive(*client, "recursive", {.reentrant = true});
  CHECK_FALSE(recursive.try_lock());
  CHECK(recursive.last_error()->code == Errc::invalid_argument);
}

TEST_CASE("a Mutex whose lease is lost while held says so: the stop token, then unlock's error") {
  RedisGroup group(3);
  auto client = client_for(group);
  Mutex m(*client, "lost-mutex", {.acquire = {.ttl = 300ms}});
  {
    std::scoped_lock guard(m);
    for (std::size_t i = 0; i < group.size(); ++i) group[i].command({"DEL", "redlock:{lost-mutex}:lock"});
    REQUIRE(eventually([&] { return m.stop_token().stop_requested(); }, 3000ms));
  }
  REQUIRE(m.last_error().has_value());
  CHECK(m.last_error()->code == Errc::lost);
}
