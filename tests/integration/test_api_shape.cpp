// test_api_shape.cpp — one shape for every operation: each Client member
// has its _async future form, Client and AsyncClient take the same
// arguments, Lock and MultiLock have the same members, and LeaseOptions
// carries an AcquireOptions whole. An operation completes at the majority:
// what the last master holds is checked with eventually().
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <optional>

#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

// get waits for a future with a bound: a hung operation fails the test.
template <class T>
T get(std::future<T> f) {
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  return f.get();
}

}  // namespace

TEST_CASE("every Client operation has a future form that does what the blocking one does") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto other = client_for(group);

  Result<Lock> one = get(client->try_acquire_async("solo", 2000ms));
  REQUIRE(one.ok());
  CHECK(one->ttl == 2000ms);
  CHECK(other->try_acquire("solo").error().code == Errc::held);
  Result<ResourceStatus> st = get(client->status_async("solo"));
  REQUIRE(st.ok());
  CHECK(st->held);
  CHECK(st->token == one->token);
  Result<NodesReport> nodes = get(client->nodes_async());
  REQUIRE(nodes.ok());
  CHECK(nodes->can_lock());
  Result<ReleaseResult> freed = get(client->release_async(*one));
  REQUIRE(freed.ok());
  CHECK(freed->released);

  Result<MultiLock> many = get(client->acquire_many_async({"m2", "m1"}, {.ttl = 2000ms}));
  REQUIRE(many.ok());
  CHECK(many->resources == std::vector<std::string>{"m1", "m2"});
  Result<MultiLock> longer = get(client->extend_many_async(*many, 5000ms));
  REQUIRE(longer.ok());
  CHECK(longer->ttl == 5000ms);
  Result<ReleaseResult> all = get(client->release_many_async(*longer));
  REQUIRE(all.ok());
  CHECK(all->released);
  CHECK(eventually([&] { return holding(group, "m1", many->token) == 0; }));

  Result<MultiLock> again = client->acquire_many({"m1", "m2"}, {.ttl = 2000ms});
  REQUIRE(again.ok());
  Result<ReleaseResult> by_names = get(client->release_many_async({"m2", "m1"}, again->token));
  REQUIRE(by_names.ok());
  CHECK(by_names->released);

  Result<Lease> lease = get(client->lock_async("leased", {.acquire = {.ttl = 2000ms}}));
  REQUIRE(lease.ok());
  CHECK(lease->valid());
  CHECK(eventually([&] { return holding(group, "leased", lease->token()) == group.size(); }));
  Result<Lease> both = get(client->lock_many_async({"lb", "la"}, {.acquire = {.ttl = 2000ms, .fence = true}}));
  REQUIRE(both.ok());
  CHECK(both->resources() == std::vector<std::string>{"la", "lb"});
  CHECK(both->fence() > 0);
  const std::string both_token = both->token();
  REQUIRE(both->release().ok());
  CHECK(eventually([&] { return holding(group, "la", both_token) == 0; }));
  Result<Lease> refused = get(client->lock_many_async({"x", "y"}, {.reentrant = true}));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::invalid_argument);
}

TEST_CASE("lock_async of a reentrant owner re-enters the held lease at once") {
  RedisGroup group(3);
  auto client = client_for(group);
  const LeaseOptions opts{.acquire = {.ttl = 2000ms}, .reentrant = true, .owner = "job-1"};
  Result<Lease> first = get(client->lock_async("row", opts));
  REQUIRE(first.ok());
  std::future<Result<Lease>> second = client->lock_async("row", opts);
  REQUIRE(second.wait_for(0s) == std::future_status::ready);  // no network round
  Result<Lease> inner = second.get();
  REQUIRE(inner.ok());
  CHECK(inner->token() == first->token());
  CHECK(first->holds() == 2);
}

TEST_CASE("Client::release_many takes a MultiLock or resources and a token; MultiLock has remaining() as Lock does") {
  RedisGroup group(3);
  auto client = client_for(group);
  Result<MultiLock> many = client->acquire_many({"b", "a"}, {.ttl = 5000ms});
  REQUIRE(many.ok());
  CHECK(many->remaining() > 4000ms);
  CHECK(many->remaining() <= 5000ms);
  CHECK(many->valid());
  Result<ReleaseResult> r = client->release_many({"a", "b"}, many->token);
  REQUIRE(r.ok());
  CHECK(r->released);
  CHECK(eventually([&] { return holding(group, "a", many->token) == 0; }));
  CHECK(eventually([&] { return holding(group, "b", many->token) == 0; }));
  MultiLock past = *many;
  past.validity_deadline = BootClock::now() - 1ms;
  CHECK(past.remaining() == 0ms);
}

TEST_CASE("AsyncClient takes the same arguments: try_acquire, release of a Lock, release_many of a MultiLock") {
  RedisGroup group(3);
  AsyncBed bed(group);
  AsyncClient& c = *bed.client;
  std::optional<Result<ReleaseResult>> single, multi;
  c.try_acquire("t", 2000ms, [&](Result<Lock> lock) {
    REQUIRE(lock.ok());
    CHECK(lock->ttl == 2000ms);
    c.release(*lock, [&](Result<ReleaseResult> r) {
      single = std::move(r);
      c.acquire_many({"q", "p"}, {.ttl = 2000ms}, [&](Result<MultiLock> m) {
        REQUIRE(m.ok());
        c.release_many(*m, [&](Result<ReleaseResult> r2) {
          multi = std::move(r2);
          c.close();
        });
      });
    });
  });
  bed.run();
  REQUIRE(single.has_value());
  REQUIRE(single->ok());
  CHECK((*single)->released);
  REQUIRE(multi.has_value());
  REQUIRE(multi->ok());
  CHECK((*multi)->released);
  CHECK(bed.closed_clean());
}

TEST_CASE("LeaseOptions::acquire is the acquire's options whole: a given token is the lease's") {
  RedisGroup group(3);
  auto client = client_for(group);
  Result<Lease> lease = client->lock("given", {.acquire = {.ttl = 2000ms, .token = "my-own-token"}});
  REQUIRE(lease.ok());
  CHECK(lease->token() == "my-own-token");
  CHECK(eventually([&] { return holding(group, "given", "my-own-token") == group.size(); }));
  REQUIRE(lease->release().ok());
  CHECK(eventually([&] { return holding(group, "given", "my-own-token") == 0; }));

  // A reentrant lock() that names another token than the held lease's is refused.
  const LeaseOptions outer{.acquire = {.ttl = 2000ms}, .reentrant = true, .owner = "o"};
  Result<Lease> held = client->lock("held", outer);
  REQUIRE(held.ok());
  LeaseOptions other_token = outer;
  other_token.acquire.token = "not-the-lease-token";
  Result<Lease> refused = client->lock("held", other_token);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::invalid_argument);
  CHECK(refused.error().message.find("token") != std::string::npos);
  LeaseOptions same_token = outer;
  same_token.acquire.token = held->token();
  Result<Lease> joined = client->lock("held", same_token);
  REQUIRE(joined.ok());
  CHECK(held->holds() == 2);

  // acquire.cancel ends a waiting lock().
  auto other = client_for(group);
  std::stop_source stop;
  stop.request_stop();
  Result<Lease> cancelled = other->lock("held", {.acquire = {.ttl = 2000ms, .wait = 5000ms, .cancel = stop.get_token()}});
  REQUIRE_FALSE(cancelled.ok());
  CHECK(cancelled.error().code == Errc::cancelled);
}

TEST_CASE("Lease::release_async: the release as a future, with release()'s results") {
  RedisGroup group(3);
  auto client = client_for(group);
  Result<Lease> lease = client->lock("async-release", {.acquire = {.ttl = 2000ms}});
  REQUIRE(lease.ok());
  const std::string token = lease->token();
  std::future<Result<ReleaseResult>> f = lease->release_async();
  CHECK(lease->empty());
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  Result<ReleaseResult> r = f.get();
  REQUIRE(r.ok());
  CHECK(r->released);
  CHECK(eventually([&] { return holding(group, "async-release", token) == 0; }));
  Result<ReleaseResult> again = lease->release_async().get();
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == Errc::not_held);

  // A lease lost before its release: the future says lost, as release() does.
  Result<Lease> doomed = client->lock("async-lost", {.acquire = {.ttl = 300ms}});
  REQUIRE(doomed.ok());
  for (std::size_t i = 0; i < group.size(); ++i) group[i].command({"DEL", "redlock:{async-lost}:lock"});
  REQUIRE(eventually([&] { return doomed->lost().has_value(); }, 3000ms));
  Result<ReleaseResult> lost = doomed->release_async().get();
  REQUIRE_FALSE(lost.ok());
  CHECK(lost.error().code == Errc::lost);
}
