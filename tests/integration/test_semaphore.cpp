// test_semaphore.cpp — counting semaphores (AcquireOptions::permits): P slot
// locks, each master choosing the slot, votes counted per permit.
#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <fstream>
#include <optional>
#include <set>
#include <thread>

#include "cli_harness.hpp"
#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace redlock::test::cli_harness;
using namespace std::chrono_literals;

namespace {

std::string permit_key(std::string_view resource, std::uint32_t permit) {
  return "redlock:{" + std::string(resource) + "}:permit" + std::to_string(permit) + ":lock";
}

}  // namespace

TEST_CASE("a semaphore of 2 permits admits two holders, a third only once one releases") {
  RedisGroup group(3);
  auto a = client_for(group);
  auto b = client_for(group);
  auto c = client_for(group);
  auto first = a->acquire("jobs", {.ttl = 10000ms, .permits = 2});
  REQUIRE_MESSAGE(first.ok(), first.error().to_string());
  auto second = b->acquire("jobs", {.ttl = 10000ms, .permits = 2});
  REQUIRE_MESSAGE(second.ok(), second.error().to_string());
  REQUIRE(first->permit.has_value());
  REQUIRE(second->permit.has_value());
  CHECK(*first->permit != *second->permit);
  CHECK(*first->permit < 2);
  CHECK(*second->permit < 2);
  CHECK(first->valid());
  // The permit is an ordinary lock key holding the holder's value.
  CHECK(eventually([&] { return group[0].command({"GET", permit_key("jobs", *first->permit)}).str == first->token; }));
  CHECK(group[0].command({"GET", "redlock:{jobs}:permits"}).str == "2");

  auto third = c->acquire("jobs", {.ttl = 10000ms, .permits = 2});
  REQUIRE_FALSE(third.ok());
  CHECK(third.error().code == Errc::held);
  CHECK(third.error().message.find("every permit held") != std::string::npos);

  // A permit is extended and released as a lock is.
  auto extended = a->extend(*first, 20000ms);
  REQUIRE_MESSAGE(extended.ok(), extended.error().to_string());
  CHECK(extended->permit == first->permit);
  CHECK(group[0].command({"PTTL", permit_key("jobs", *first->permit)}).integer > 10000);
  auto released = b->release(*second);
  REQUIRE(released.ok());
  CHECK(released->released);
  auto again = c->acquire("jobs", {.ttl = 10000ms, .permits = 2});
  REQUIRE_MESSAGE(again.ok(), again.error().to_string());
  CHECK(again->permit == second->permit);
  CHECK(a->release(*extended)->released);
  CHECK(c->release(*again)->released);
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{jobs}:permit[0-9]*") == 0; }));
}

TEST_CASE("a semaphore's permits number is every client's: another number is refused, naming both") {
  RedisGroup group(3);
  auto a = client_for(group);
  auto b = client_for(group);
  auto held = a->acquire("pool", {.ttl = 10000ms, .permits = 3});
  REQUIRE(held.ok());
  auto other = b->acquire("pool", {.ttl = 10000ms, .wait = 5000ms, .permits = 2});
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code == Errc::invalid_argument);
  // At the first attempt, not after the wait.
  CHECK(other.error().attempts == 1);
  CHECK(other.error().to_string().find("has 3 permits; this client asked for 2") != std::string::npos);
  auto too_many = b->acquire("pool", {.permits = 101});
  REQUIRE_FALSE(too_many.ok());
  CHECK(too_many.error().code == Errc::invalid_argument);
  CHECK(too_many.error().message.find("permits: 101 (at most 100)") != std::string::npos);
  auto fair = b->acquire("pool", {.fence = true, .fair = true, .permits = 3});
  REQUIRE_FALSE(fair.ok());
  CHECK(fair.error().code == Errc::invalid_argument);
  // A fair waiter is told the same, at its first attempt.
  auto fair_other = b->acquire("pool", {.ttl = 10000ms, .wait = 5000ms, .fair = true, .permits = 2});
  REQUIRE_FALSE(fair_other.ok());
  CHECK(fair_other.error().code == Errc::invalid_argument);
  CHECK(fair_other.error().attempts == 1);
  CHECK(fair_other.error().to_string().find("has 3 permits; this client asked for 2") != std::string::npos);
}

namespace {

// FairSeat — a fair waiter for a permit on a thread of its own: it holds
// what it got until told to give it back.
struct FairSeat {
  Client& client;
  std::optional<Result<Lock>> got;
  std::mutex mu;
  std::condition_variable cv;
  bool give_back = false;
  std::jthread thread;

  FairSeat(Client& c, std::string resource, AcquireOptions opts) : client(c) {
    // (the thread is the last member: it is joined first, after release())
    thread = std::jthread([this, resource = std::move(resource), opts] {
      Result<Lock> r = client.acquire(resource, opts);
      std::unique_lock<std::mutex> lock(mu);
      got.emplace(std::move(r));
      cv.notify_all();
      cv.wait(lock, [&] { return give_back; });
      if (got->ok()) (void)client.release(**got);
    });
  }
  bool granted() {
    std::lock_guard<std::mutex> lock(mu);
    return got.has_value() && got->ok();
  }
  bool ended() {
    std::lock_guard<std::mutex> lock(mu);
    return got.has_value();
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    give_back = true;
    cv.notify_all();
  }
  ~FairSeat() { release(); }
};


}  // namespace

TEST_CASE("fair permits: waiters get permits in the order they came, one per freed permit; a try does not pass them") {
  RedisGroup group(5);
  auto holder = client_for(group);
  std::vector<std::unique_ptr<Client>> clients = clients_for(group, 3, no_polling);
  const AcquireOptions fair{.ttl = 30000ms, .wait = 20000ms, .fair = true, .permits = 2};
  auto h1 = holder->acquire("pool", {.ttl = 30000ms, .fair = true, .permits = 2});
  auto h2 = holder->acquire("pool", {.ttl = 30000ms, .fair = true, .permits = 2});
  REQUIRE_MESSAGE(h1.ok(), h1.error().to_string());
  REQUIRE_MESSAGE(h2.ok(), h2.error().to_string());
  CHECK(h1->token.front() == 'Q');
  REQUIRE(eventually([&] { return group.keys_everywhere("redlock:{pool}:permit[01]:lock") == 2 * group.size(); }));

  constexpr int waiters = 5;
  std::vector<std::unique_ptr<FairSeat>> seats;
  for (int w = 0; w < waiters; ++w) {
    seats.push_back(std::make_unique<FairSeat>(*clients[static_cast<std::size_t>(w % 3)], "pool", fair));
    // The next comes once this one has joined the queue on every master.
    REQUIRE(eventually([&] { return permits_queued_everywhere(group, "pool", w + 1); }));
  }
  // A try while waiters queue and every permit is held: fails at once,
  // joins nothing.
  auto try_now = holder->acquire("pool", {.ttl = 30000ms, .fair = true, .permits = 2});
  REQUIRE_FALSE(try_now.ok());
  CHECK(try_now.error().code == Errc::held);
  CHECK(permits_queued_everywhere(group, "pool", waiters));
  // status shows the semaphore's queue: its length and its head, in the
  // library and in `redlock status`.
  auto st = holder->status("pool");
  REQUIRE(st.ok());
  CHECK(st->permits == 2);
  CHECK(st->queued == static_cast<std::size_t>(waiters));
  CHECK(st->queue_head.size() == 16);
  auto human = cli(op({"status", "pool"}, group));
  CHECK(human.exit_code == 0);
  INFO(human.out);
  CHECK(human.out.find("is a semaphore of 2 permits: 2 held by a majority") != std::string::npos);
  CHECK(human.out.find("fair queue: 5 waiting (head ") != std::string::npos);

  // Each freed permit goes to the first waiter still waiting, and to no
  // one behind it.
  const auto only_granted = [&](int upto) {
    for (int w = 0; w < waiters; ++w) {
      if (seats[static_cast<std::size_t>(w)]->granted() != (w < upto)) return false;
    }
    return true;
  };
  REQUIRE(holder->release(*h1)->released);
  REQUIRE(eventually([&] { return seats[0]->granted(); }));
  CHECK(only_granted(1));
  REQUIRE(holder->release(*h2)->released);
  REQUIRE(eventually([&] { return seats[1]->granted(); }));
  CHECK(only_granted(2));
  for (int w = 0; w + 2 < waiters; ++w) {
    seats[static_cast<std::size_t>(w)]->release();
    REQUIRE(eventually([&] { return seats[static_cast<std::size_t>(w + 2)]->granted(); }));
    CHECK(seats[static_cast<std::size_t>(w)]->ended());
  }
  // Never more than two held at once, each a permit of its own.
  std::set<std::uint32_t> held;
  for (int w = waiters - 2; w < waiters; ++w) held.insert(*(*seats[static_cast<std::size_t>(w)]->got)->permit);
  CHECK(held == std::set<std::uint32_t>{0, 1});
  for (auto& seat : seats) seat->release();
  seats.clear();
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{pool}:permits:queue") == 0; }));
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{pool}:permit[0-9]*") == 0; }));
}

TEST_CASE("fair permits: two permits freed together reach the first two waiters at once, the second named by the first's take") {
  RedisGroup group(3);
  auto holder = client_for(group);
  // The grace is longer than the waits: the second waiter cannot be moved
  // by a turn running out, nor by polling — only by being named.
  const auto tune = [](Options& o) {
    no_polling(o);
    o.fair_grace = 30000ms;
  };
  auto a = client_for(group, tune);
  auto b = client_for(group, tune);
  const AcquireOptions fair{.ttl = 30000ms, .wait = 60000ms, .fair = true, .permits = 2};
  auto h1 = holder->acquire("twin", {.ttl = 30000ms, .permits = 2});
  auto h2 = holder->acquire("twin", {.ttl = 30000ms, .permits = 2});
  REQUIRE(h1.ok());
  REQUIRE(h2.ok());
  REQUIRE(eventually([&] { return group.keys_everywhere("redlock:{twin}:permit[01]:lock") == 2 * group.size(); }));
  FairSeat first(*a, "twin", fair);
  REQUIRE(eventually([&] { return permits_queued_everywhere(group, "twin", 1); }));
  FairSeat second(*b, "twin", fair);
  REQUIRE(eventually([&] { return permits_queued_everywhere(group, "twin", 2); }));
  // Both permits go at once, before either waiter moves; then a release by
  // a holder that was not fair names nobody: the head (rank 0) tries. It
  // takes one permit; where the other is still free, that take names the
  // second waiter as the new head — nothing else would before its grace,
  // its safety net or the holder's TTL, all 30 s or more away.
  for (std::size_t m = 0; m < group.size(); ++m) {
    group[m].command({"DEL", "redlock:{twin}:permit0:lock", "redlock:{twin}:permit1:lock"});
  }
  for (std::size_t m = 0; m < group.size(); ++m) {
    group[m].command({"PUBLISH", "redlock:{twin}:permits:released", h1->token});
  }
  REQUIRE(eventually([&] { return first.granted(); }));
  CHECK(eventually([&] { return second.granted(); }, 5000ms));
  if (first.granted() && second.granted()) CHECK((*first.got)->permit != (*second.got)->permit);
  first.release();
  second.release();
}

TEST_CASE("masters that pick different permits: the permit a majority gave wins, the others are cleaned up") {
  RedisGroup group(3);
  // Master 0 has permit 1 taken by someone else, master 2 permit 0: each
  // gives the attempt the other permit; master 1 whichever comes first.
  group[0].command({"SET", permit_key("split", 1), "someone", "PX", "60000"});
  group[2].command({"SET", permit_key("split", 0), "someone", "PX", "60000"});
  auto client = client_for(group);
  auto got = client->acquire("split", {.ttl = 10000ms, .permits = 2});
  REQUIRE_MESSAGE(got.ok(), got.error().to_string());
  REQUIRE(got->permit.has_value());
  const std::uint32_t other = 1 - *got->permit;
  // Our value stays only on the permit won; where a master gave us the
  // other one, the cleanup took it back.
  CHECK(eventually([&] {
    for (std::size_t m = 0; m < 3; ++m) {
      if (group[m].command({"GET", permit_key("split", other)}).str == got->token) return false;
    }
    return true;
  }));
  std::size_t on_won = 0;
  for (std::size_t m = 0; m < 3; ++m) on_won += group[m].command({"GET", permit_key("split", *got->permit)}).str == got->token;
  CHECK(on_won >= 2);
}

TEST_CASE("a waiter on a full semaphore is woken by a release, not by polling") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto waiter = client_for(group, no_polling);
  auto held = holder->acquire("one", {.ttl = 30000ms, .permits = 1});
  REQUIRE(held.ok());
  std::optional<Result<Lock>> got;
  std::thread waiting([&] { got.emplace(waiter->acquire("one", {.ttl = 5000ms, .wait = 5000ms, .permits = 1})); });
  // The semaphore's one channel, for every permit.
  REQUIRE(eventually([&] { return listening(group, "redlock:{one}:permits:released"); }));
  REQUIRE(holder->release(*held)->released);
  waiting.join();
  REQUIRE(got.has_value());
  REQUIRE_MESSAGE(got->ok(), got->error().to_string());  // within its wait, not its minute between polls
  CHECK((*got)->permit == std::optional<std::uint32_t>(0));
  CHECK(eventually([&] { return subscribers(group[0], "redlock:{one}:permits:released") == 0; }));
}

TEST_CASE("many clients competing for 3 permits: never more than 3 hold at once") {
  RedisGroup group(5);
  constexpr int clients = 8;
  constexpr std::uint32_t permits = 3;
  std::atomic<int> holding{0};
  std::atomic<int> most{0};
  std::atomic<int> taken{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&] {
      auto client = client_for(group);
      for (int round = 0; round < 10; ++round) {
        auto got = client->acquire("crowd", {.ttl = 5000ms, .wait = 10000ms, .permits = permits});
        if (!got.ok()) continue;
        const int now = ++holding;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        ++taken;
        std::this_thread::sleep_for(2ms);
        --holding;
        (void)client->release(*got);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(most.load() <= static_cast<int>(permits));
  CHECK(most.load() >= 2);  // permits were in fact shared
  CHECK(taken.load() == clients * 10);
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{crowd}:permit[0-9]*") == 0; }));
}

TEST_CASE("a permit as a Lease: its watchdog extends the permit's key; its release frees the permit") {
  RedisGroup group(3);
  auto a = client_for(group);
  auto b = client_for(group);
  auto lease = a->lock("workers", {.acquire = {.ttl = 600ms, .permits = 1}});
  REQUIRE_MESSAGE(lease.ok(), lease.error().to_string());
  REQUIRE(lease->permit() == std::optional<std::uint32_t>(0));
  // Held past two TTLs: extended on the permit's key, not a lock key.
  REQUIRE(eventually([&] { return lease->extensions() >= 3; }, 5s));
  CHECK(lease->valid());
  CHECK(group[0].command({"GET", permit_key("workers", 0)}).str == lease->token());
  CHECK(group.keys_everywhere("redlock:{workers}:lock") == 0);
  CHECK_FALSE(b->acquire("workers", {.permits = 1}).ok());
  REQUIRE(lease->release().ok());
  auto next = b->acquire("workers", {.ttl = 5000ms, .permits = 1});
  REQUIRE_MESSAGE(next.ok(), next.error().to_string());
  CHECK(next->permit == std::optional<std::uint32_t>(0));
  // Each holder takes a permit of its own: not reentrant.
  auto reentrant = a->lock("workers", {.acquire = {.permits = 2}, .reentrant = true});
  REQUIRE_FALSE(reentrant.ok());
  CHECK(reentrant.error().code == Errc::invalid_argument);
}

TEST_CASE("two permits leased by one client, whose extensions fall due together, are both kept") {
  RedisGroup group(3);
  auto client = client_for(group, [](Options& o) { o.extend_batch_window = 200ms; });
  auto first = client->lock("pair", {.acquire = {.ttl = 900ms, .permits = 2}});
  auto second = client->lock("pair", {.acquire = {.ttl = 900ms, .permits = 2}});
  REQUIRE_MESSAGE(first.ok(), first.error().to_string());
  REQUIRE_MESSAGE(second.ok(), second.error().to_string());
  REQUIRE(first->permit().has_value());
  REQUIRE(second->permit().has_value());
  CHECK(*first->permit() != *second->permit());
  REQUIRE(eventually([&] { return first->extensions() >= 3 && second->extensions() >= 3; }, 8s));
  CHECK(first->valid());
  CHECK(second->valid());
  for (const auto* l : {&*first, &*second}) {
    CHECK(group[1].command({"GET", permit_key("pair", *l->permit())}).str == l->token());
  }
}

TEST_CASE("a fenced permit: its fence rises with each holder of that permit, each permit a counter of its own") {
  RedisGroup group(3);
  auto a = client_for(group);
  auto b = client_for(group);
  const AcquireOptions fenced{.ttl = 10000ms, .fence = true, .permits = 2};
  auto first = a->acquire("pool", fenced);
  REQUIRE_MESSAGE(first.ok(), first.error().to_string());
  auto second = b->acquire("pool", fenced);
  REQUIRE_MESSAGE(second.ok(), second.error().to_string());
  REQUIRE(first->permit.has_value());
  REQUIRE(second->permit.has_value());
  CHECK(first->permit != second->permit);
  // Each permit's first holder: fence 1 of that permit's counter.
  CHECK(first->fence == 1);
  CHECK(second->fence == 1);
  const auto counter = [&](std::uint32_t permit) {
    return "redlock:{pool}:permit" + std::to_string(permit) + ":fence";
  };
  CHECK(eventually([&] {
    std::size_t raised = 0;
    for (std::size_t i = 0; i < group.size(); ++i) raised += group[i].command({"GET", counter(*first->permit)}).str == "1";
    return raised >= 2;
  }));
  // The next holder of the first permit gets a fence above its last
  // holder's: a store behind that permit tells a stale writer by it.
  const std::uint32_t freed = *first->permit;
  CHECK(a->release(*first)->released);
  auto third = a->acquire("pool", fenced);
  REQUIRE_MESSAGE(third.ok(), third.error().to_string());
  CHECK(third->permit == freed);
  CHECK(third->fence == 2);
  // Unfenced holders of a permit leave its counter alone; a fenced one
  // after them still rises above the last fenced holder's.
  CHECK(a->release(*third)->released);
  auto plain = a->acquire("pool", {.ttl = 10000ms, .permits = 2});
  REQUIRE(plain.ok());
  CHECK(plain->fence == 0);
  CHECK(a->release(*plain)->released);
  auto fourth = a->acquire("pool", fenced);
  REQUIRE(fourth.ok());
  CHECK(fourth->permit == freed);
  CHECK(fourth->fence == 3);
  CHECK(a->release(*fourth)->released);
  CHECK(b->release(*second)->released);
  // A counter that cannot be a fence is refused, never rounded.
  for (std::size_t i = 0; i < group.size(); ++i) {
    group[i].command({"SET", counter(0), "9007199254740992"});
    group[i].command({"SET", counter(1), "9007199254740992"});
  }
  auto refused = a->acquire("pool", fenced);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().to_string().find("at or above 2^53") != std::string::npos);
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{pool}:permit[0-9]:lock") == 0; }));
}

TEST_CASE("status of a semaphore: its permits, each with its holder as a majority sees it; `redlock status` too") {
  RedisGroup group(3);
  auto a = client_for(group, [](Options& o) { o.owner = "alpha"; });
  auto b = client_for(group, [](Options& o) { o.owner = "beta"; });
  auto first = a->acquire("pool", {.ttl = 20000ms, .permits = 3});
  auto second = b->acquire("pool", {.ttl = 20000ms, .permits = 3});
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  // Every master has both permits (an acquire is decided by a majority).
  REQUIRE(eventually([&] {
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (group[i].command({"GET", permit_key("pool", *first->permit)}).str != first->token ||
          group[i].command({"GET", permit_key("pool", *second->permit)}).str != second->token) {
        return false;
      }
    }
    return true;
  }));

  auto st = a->status("pool");
  REQUIRE_MESSAGE(st.ok(), st.error().to_string());
  CHECK(st->permits == 3);
  REQUIRE(st->permit_status.size() == 3);
  for (std::uint32_t i = 0; i < 3; ++i) {
    const ResourceStatus& p = st->permit_status[i];
    CAPTURE(i);
    if (i == *first->permit || i == *second->permit) {
      const Lock& holder = i == *first->permit ? *first : *second;
      CHECK(p.held);
      CHECK(p.token == holder.token);
      CHECK(p.agreeing == 3);
      CHECK(p.ttl > 15000ms);
      REQUIRE(p.owner.has_value());
      CHECK(p.owner->label == (i == *first->permit ? "alpha" : "beta"));
    } else {
      CHECK_FALSE(p.held);
      CHECK(p.free_nodes == 3);
    }
  }
  CHECK_FALSE(st->held);  // the name's own lock key: a semaphore never uses it
  CHECK(a->stats().permit_acquire_rounds.ok == 1);
  CHECK(a->stats().read_lock_acquire_rounds.ok == 0);

  auto json_out = cli(op({"status", "pool", "--json"}, group));
  CHECK(json_out.exit_code == 0);
  const json j = json_of(json_out);
  CHECK(j["permits"] == 3);
  REQUIRE(j["permit_status"].size() == 3);
  CHECK(j["permit_status"][*first->permit]["token"] == first->token);
  CHECK(j["permit_status"][*first->permit]["held"] == true);
  CHECK(j["permit_status"][*first->permit]["owner"]["label"] == "alpha");
  auto human = cli(op({"status", "pool"}, group));
  CHECK(human.exit_code == 0);
  INFO(human.out);
  CHECK(human.out.find("\"pool\" is a semaphore of 3 permits: 2 held by a majority, 1 free (quorum 2)") !=
        std::string::npos);
  CHECK(human.out.find(":alpha") != std::string::npos);
  CHECK(human.out.find("free on 3") != std::string::npos);

  // A lock that is no semaphore shows no permits; a permits key that lies
  // (more than a semaphore may have, or on a minority) is not believed.
  auto plain = a->status("plain");
  REQUIRE(plain.ok());
  CHECK(plain->permits == 0);
  CHECK(plain->permit_status.empty());
  for (std::size_t i = 0; i < group.size(); ++i) group[i].command({"SET", "redlock:{liar}:permits", "100000"});
  group[0].command({"SET", "redlock:{minority}:permits", "4"});
  for (const char* name : {"liar", "minority"}) {
    auto lied = a->status(name);
    REQUIRE(lied.ok());
    CHECK(lied->permits == 0);
    CHECK(lied->permit_status.empty());
  }
  CHECK(a->release(*first)->released);
  CHECK(b->release(*second)->released);
}

TEST_CASE("examples/semaphore_workers: six workers share two permits, never more than two at once") {
  RedisGroup group(5);
  TempDir tmp;
  Child example(program("REDLOCK_SEMAPHORE_EXAMPLE"), {"2", "6"}, {{"REDLOCK_CONFIG", config_file(tmp, group)}});
  ProcResult r = example.wait(std::chrono::seconds(60));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("at most 2 of 2 permits held at once") != std::string::npos);
  int held = 0;
  for (std::size_t at = r.out.find("holds permit"); at != std::string::npos; at = r.out.find("holds permit", at + 1)) ++held;
  CHECK(held == 6);
}
