// test_fair.cpp — fair order (AcquireOptions::fair) on real masters: the
// lock goes to waiters in the order they came, across clients; a release
// names the next waiter; a waiter that died costs about the grace; one that
// gives up leaves the queues; the combinations that cannot be fair are
// refused. Docs: docs/design.md, "Fair order".
#include <doctest/doctest.h>
#include <hiredis/hiredis.h>

#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "cli_harness.hpp"
#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using Clock = redlock::BootClock;

namespace {

const std::string queue = "redlock:{fair}:queue";
const std::string expiry = "redlock:{fair}:expiry";
const std::string lock_key = "redlock:{fair}:lock";

bool queued_everywhere(RedisGroup& group, long long n) { return redlock::test::queued_everywhere(group, "fair", n); }

// far_future: a place's stamp that will not lapse during a test — a waiter
// that died just now (its place lapses only fair_life after its last round).
const std::string far_future = "99999999999999";

}  // namespace

TEST_CASE("fair waiters of three clients get the lock in the order they came, each woken by the release before") {
  RedisGroup group(5);
  auto holder = client_for(group);
  std::vector<std::unique_ptr<Client>> clients = clients_for(group, 3, no_polling);
  auto held = holder->acquire("fair", {.ttl = 30000ms, .fair = true});
  REQUIRE(held.ok());
  CHECK(held->token.front() == 'Q');
  // The majority decided; the last SET may still be on its way (a waiter
  // could win that master for a moment and roll back — not queued there).
  REQUIRE(eventually([&] { return group.keys_everywhere(lock_key) == group.size(); }));

  constexpr int waiters = 8;
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::string> errors;
  std::vector<std::jthread> threads;
  for (int w = 0; w < waiters; ++w) {
    Client& client = *clients[static_cast<std::size_t>(w % 3)];
    threads.emplace_back([&, w] {
      Result<Lock> got = client.acquire("fair", {.ttl = 30000ms, .wait = 20000ms, .fair = true});
      std::lock_guard<std::mutex> guard(mu);
      if (!got) {
        errors.push_back("waiter " + std::to_string(w) + ": " + got.error().to_string());
        return;
      }
      order.push_back(w);
      Result<ReleaseResult> r = client.release(*got);
      if (!r || !r->released) errors.push_back("waiter " + std::to_string(w) + " release failed");
    });
    // The next comes once this one has joined the queue on every master.
    REQUIRE(eventually([&] { return queued_everywhere(group, w + 1); }));
  }
  REQUIRE(holder->release(*held).ok());
  for (auto& t : threads) t.join();
  CHECK(errors.empty());
  std::vector<int> arrival(waiters);
  for (int w = 0; w < waiters; ++w) arrival[static_cast<std::size_t>(w)] = w;
  CHECK(order == arrival);
  // Nothing is left: no lock, no queue (the last release found it empty).
  // The last master may answer the last grant and release after the majority.
  CHECK(eventually([&] { return group.keys_everywhere(lock_key) == 0; }));
  CHECK(eventually([&] { return group.keys_everywhere(queue) == 0; }));
}

TEST_CASE("behind a waiter that died in the queue, the next takes the lock after the grace, not before") {
  RedisGroup group(3);
  auto client = client_for(group, [](Options& o) { o.fair_grace = 200ms; });
  // A waiter that joined (ticket 1) and died: nobody will ever speak for it.
  for (std::size_t i = 0; i < group.size(); ++i) {
    REQUIRE(group[i].command({"ZADD", queue, "1", "deaddeaddeaddead"}).integer == 1);
    REQUIRE(group[i].command({"ZADD", expiry, far_future, "deaddeaddeaddead"}).integer == 1);
  }
  const auto start = Clock::now();
  Result<Lock> got = client->acquire("fair", {.ttl = 10000ms, .wait = 10000ms, .fair = true});
  const auto took = Clock::now() - start;
  REQUIRE(got.ok());
  // Its turn began when the lock was first seen free with it at the head;
  // the masters' clocks let it pass only after the grace.
  CHECK(took >= 200ms);
  CHECK(got->attempts >= 2);  // joined (the head's turn starts), checked after the grace
  for (std::size_t i = 0; i < group.size(); ++i) {  // the last master may answer after the majority
    CHECK(eventually([&] { return group[i].command({"ZSCORE", queue, "deaddeaddeaddead"}).type == REDIS_REPLY_NIL; }));
  }
  REQUIRE(client->release(*got).ok());
}

TEST_CASE("behind two waiters that died at the front, the next still gets the lock: one turn each") {
  // Before, the turn key expired 2 x grace after it was set, and a waiter
  // third in line came back later than that: it found no turn, started a
  // new one for the same dead head, and never got past it.
  RedisGroup group(3);
  auto client = client_for(group, [](Options& o) {
    o.fair_grace = 100ms;
    o.wake_safety_net = 60000ms;  // only the turns can explain a grant
  });
  for (std::size_t i = 0; i < group.size(); ++i) {
    REQUIRE(group[i].command({"ZADD", queue, "1", "dead000000000001", "2", "dead000000000002"}).integer == 2);
    REQUIRE(group[i].command({"ZADD", expiry, far_future, "dead000000000001", far_future, "dead000000000002"})
                .integer == 2);
  }
  const auto start = Clock::now();
  Result<Lock> got = client->acquire("fair", {.ttl = 10000ms, .wait = 20000ms, .fair = true});
  REQUIRE(got.ok());
  CHECK(Clock::now() - start >= 200ms);  // a grace per dead waiter, on the masters' clocks
  REQUIRE(client->release(*got).ok());
  // The waiter is queued nowhere: a master that granted took it out; one
  // that answered after the majority (or refused, its turn started later)
  // lets it go with the release. The dead two are gone where the lock was
  // granted — a majority; a master that answered late may keep them (with
  // this test's far-future stamps; real ones lapse within fair_life).
  const std::string me = got->token.substr(1, 16);  // a fair value: 'Q', then its waiter id
  for (std::size_t i = 0; i < group.size(); ++i) {
    CHECK(eventually([&] { return group[i].command({"ZSCORE", queue, me}).type == REDIS_REPLY_NIL; }));
  }
  std::size_t emptied = 0;
  for (std::size_t i = 0; i < group.size(); ++i) emptied += group[i].command({"EXISTS", queue}).integer == 0 ? 1 : 0;
  CHECK(emptied >= 2);
}

TEST_CASE("a fair waiter whose wait runs out leaves every queue") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto waiter = client_for(group);
  auto held = holder->acquire("fair", {.ttl = 30000ms});
  REQUIRE(held.ok());
  Result<Lock> got = waiter->acquire("fair", {.ttl = 10000ms, .wait = 300ms, .fair = true});
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().code == Errc::held);
  CHECK(eventually([&] { return queued_everywhere(group, 0); }));
  CHECK(group.keys_everywhere(queue) == 0);
  REQUIRE(holder->release(*held).ok());
}

TEST_CASE("a fair try-lock (no wait) on a held lock fails at once and touches no queue, joining nor leaving") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto other = client_for(group);
  auto held = holder->acquire("fair", {.ttl = 30000ms});
  REQUIRE(held.ok());
  std::vector<long long> zadd, zrem;
  for (std::size_t i = 0; i < group.size(); ++i) {
    zadd.push_back(command_calls(group[i], "zadd"));
    zrem.push_back(command_calls(group[i], "zrem"));
  }
  Result<Lock> got = other->acquire("fair", {.ttl = 10000ms, .fair = true});
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().code == Errc::held);
  // A leave would go out when the try ends, ahead of anything the client
  // sends next on the same connections: once a later lock's key is on
  // every master, each has run whatever the try left to send.
  REQUIRE(other->acquire("after", {.ttl = 10000ms}).ok());
  REQUIRE(eventually([&] {
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (group[i].command({"EXISTS", "redlock:{after}:lock"}).integer != 1) return false;
    }
    return true;
  }));
  for (std::size_t i = 0; i < group.size(); ++i) {
    CHECK(command_calls(group[i], "zadd") == zadd[i]);  // it never joined
    CHECK(command_calls(group[i], "zrem") == zrem[i]);  // nor left
  }
  CHECK(group.keys_everywhere(queue) == 0);
  REQUIRE(holder->release(*held).ok());
}

TEST_CASE("a release by a holder that was not fair wakes the head of the fair queue") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto waiter = client_for(group, no_polling);
  auto held = holder->acquire("fair", {.ttl = 30000ms});
  REQUIRE(held.ok());
  REQUIRE(eventually([&] { return group.keys_everywhere(lock_key) == group.size(); }));
  std::optional<Result<Lock>> got;
  std::jthread t([&] { got.emplace(waiter->acquire("fair", {.ttl = 30000ms, .wait = 10000ms, .fair = true})); });
  REQUIRE(eventually([&] { return queued_everywhere(group, 1); }));
  REQUIRE(holder->release(*held).ok());
  t.join();
  REQUIRE(got->ok());
  // Where its attempt came before the release's DEL, it is still queued
  // until its own release takes it out.
  REQUIRE(waiter->release(**got).ok());
  CHECK(eventually([&] { return queued_everywhere(group, 0); }));
}

TEST_CASE("a fair lock is released by its token alone, from another client, and the waiter leaves the queues") {
  RedisGroup group(3);
  auto a = client_for(group);
  auto b = client_for(group);
  auto got = a->acquire("fair", {.ttl = 30000ms, .fair = true});
  REQUIRE(got.ok());
  // Where a fair acquire won without a master, its waiter may still be
  // queued there: the release takes it out. (The majority decided; the
  // third SET may still be on its way.)
  REQUIRE(eventually([&] { return group.keys_everywhere(lock_key) == 3; }));
  REQUIRE(group[2].command({"DEL", lock_key}).integer == 1);
  REQUIRE(group[2].command({"ZADD", queue, "7", got->token.substr(1, 16)}).integer == 1);
  auto r = b->release("fair", got->token);
  REQUIRE(r.ok());
  CHECK(r->released);
  CHECK(group.keys_everywhere(queue) == 0);
  CHECK(group.keys_everywhere(lock_key) == 0);
}

TEST_CASE("fair is refused with a caller's token, with fencing and for several resources") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto with_token = client->acquire("fair", {.token = "mine", .fair = true});
  REQUIRE_FALSE(with_token.ok());
  CHECK(with_token.error().code == Errc::invalid_argument);
  CHECK(with_token.error().message.find("fair") != std::string::npos);
  auto fenced = client->acquire("fair", {.fence = true, .fair = true});
  REQUIRE_FALSE(fenced.ok());
  CHECK(fenced.error().code == Errc::invalid_argument);
  auto many = client->acquire_many({"a", "b"}, {.fair = true});
  REQUIRE_FALSE(many.ok());
  CHECK(many.error().code == Errc::invalid_argument);
  CHECK(many.error().message.find("one resource") != std::string::npos);
  CHECK(group.keys_everywhere("redlock:{*") == 0);  // nothing was sent
}

TEST_CASE("a fair lease waits in the queue, is extended by its watchdog, and its release names the next waiter") {
  RedisGroup group(3);
  auto a = client_for(group);
  auto b = client_for(group, no_polling);
  LeaseOptions first;
  first.acquire.ttl = 2000ms;
  first.acquire.fair = true;
  auto held = a->lock("fair", first);
  REQUIRE(held.ok());
  CHECK(held->token().front() == 'Q');
  REQUIRE(eventually([&] { return group.keys_everywhere(lock_key) == group.size(); }));
  std::optional<Result<Lease>> next;
  std::jthread t([&] {
    LeaseOptions o;
    o.acquire.ttl = 2000ms;
    o.acquire.wait = 20000ms;
    o.acquire.fair = true;
    next.emplace(b->lock("fair", o));
  });
  REQUIRE(eventually([&] { return queued_everywhere(group, 1); }));
  // Held past its TTL by the watchdog, while the waiter sleeps in the queue.
  REQUIRE(eventually([&] { return held->extensions() >= 2; }, std::chrono::seconds(10)));
  CHECK(queued_everywhere(group, 1));
  REQUIRE(held->release().ok());
  t.join();
  REQUIRE(next->ok());
  REQUIRE((**next).release().ok());
  CHECK(eventually([&] { return queued_everywhere(group, 0); }));
  CHECK(group.keys_everywhere(lock_key) == 0);
}

TEST_CASE("status shows the fair queue: its length on every master and its head, the first waiter") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto first = client_for(group, no_polling);
  auto second = client_for(group, no_polling);
  auto looker = client_for(group, patient);  // every master must answer

  // Nobody queues: no queue on any master, none at the resource level.
  auto free_st = looker->status("fair");
  REQUIRE(free_st.ok());
  CHECK(free_st->queued == 0);
  CHECK(free_st->queue_head.empty());
  for (const NodeHolding& n : free_st->nodes) {
    CHECK(n.queued == 0);
    CHECK(n.queue_head.empty());
  }

  auto held = holder->acquire("fair", {.ttl = 30000ms, .fair = true});
  REQUIRE(held.ok());
  REQUIRE(eventually([&] { return group.keys_everywhere(lock_key) == group.size(); }));
  auto held_st = looker->status("fair");  // held, still nobody waiting
  REQUIRE(held_st.ok());
  CHECK(held_st->held);
  CHECK(held_st->queued == 0);
  CHECK(held_st->queue_head.empty());

  std::optional<Result<Lock>> got1, got2;
  const AcquireOptions wait_fair{.ttl = 30000ms, .wait = 20000ms, .fair = true};
  std::jthread t1([&] { got1.emplace(first->acquire("fair", wait_fair)); });
  REQUIRE(eventually([&] { return queued_everywhere(group, 1); }));
  std::jthread t2([&] { got2.emplace(second->acquire("fair", wait_fair)); });
  REQUIRE(eventually([&] { return queued_everywhere(group, 2); }));

  auto st = looker->status("fair");
  REQUIRE(st.ok());
  CHECK(st->held);
  CHECK(st->token == held->token);
  CHECK(st->queued == 2);
  REQUIRE(st->queue_head.size() == 16);
  for (const NodeHolding& n : st->nodes) {
    CAPTURE(n.address);
    CHECK(n.state == NodeHolding::State::held);
    CHECK(n.queued == 2);
    CHECK(n.queue_head == st->queue_head);
  }

  // The head is the first waiter: the lock goes to it next, under a fair
  // token whose characters 1–16 are its waiter id (src/token.hpp).
  REQUIRE(holder->release(*held).ok());
  t1.join();
  REQUIRE(got1->ok());
  CHECK((*got1)->token.substr(1, 16) == st->queue_head);
  REQUIRE(first->release(**got1).ok());
  t2.join();
  REQUIRE(got2->ok());
  CHECK((*got2)->token.substr(1, 16) != st->queue_head);
  REQUIRE(second->release(**got2).ok());
  REQUIRE(eventually([&] { return queued_everywhere(group, 0); }));
  auto after = looker->status("fair");
  REQUIRE(after.ok());
  CHECK(after->queued == 0);
  CHECK(after->queue_head.empty());
}

TEST_CASE("status names a fair queue that holds no sorted set as wrong_type") {
  RedisGroup group(3);
  auto looker = client_for(group);
  REQUIRE(group[1].command({"SET", queue, "not a queue"}).type == REDIS_REPLY_STATUS);
  auto st = looker->status("fair");
  REQUIRE(st.ok());
  CHECK(st->nodes[0].state == NodeHolding::State::free);
  CHECK(st->nodes[1].state == NodeHolding::State::wrong_type);
  CHECK(st->nodes[1].error == "WRONGTYPE: the key " + queue + " holds a string, not a fair queue");
  CHECK(st->queued == 0);
}

// A waiter killed (SIGKILL: no leave) while it waited without end: its place
// lapses within fair_life of its last round — 2 × max(wake_safety_net,
// 4 × fair_grace) + 2 × node_timeout, 2.1 s with the defaults — however
// long it meant to wait, and the queue's keys expire with it. Before, the
// queue lived for the wait + the TTL (2^31 ms for `run --fair` without
// --wait): status counted the dead waiter, and every fair try was refused
// on the free lock for that long.
TEST_CASE("a fair waiter killed while it waits lapses within fair_life: status drops it, a fair try takes the free lock") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto looker = client_for(group, patient);  // every master must answer
  auto held = holder->acquire("fair", {.ttl = 5000ms});
  REQUIRE(held.ok());
  REQUIRE(eventually([&] { return group.keys_everywhere(lock_key) == group.size(); }));
  cli_harness::Child waiter(cli_harness::program("REDLOCK_CLI"),
                            {"--no-quarantine", "--nodes", group.url_list(), "run", "--fair", "fair", "--", "true"});
  REQUIRE(eventually([&] { return queued_everywhere(group, 1); }, std::chrono::seconds(10)));
  waiter.signal(SIGKILL);
  const auto killed = Clock::now();
  waiter.wait();
  for (std::size_t i = 0; i < group.size(); ++i) {  // a bounded life, not 2^31 ms
    CHECK(group[i].command({"PTTL", queue}).integer <= 2100);
    CHECK(group[i].command({"PTTL", expiry}).integer <= 2100);
  }
  // While the lock is still held, status stops counting the dead waiter
  // once its place lapsed; its keys are gone then too.
  REQUIRE(eventually(
      [&] {
        auto st = looker->status("fair");
        return st.ok() && st->held && st->queued == 0 && st->queue_head.empty();
      },
      std::chrono::seconds(4)));
  CHECK(Clock::now() - killed < 2100ms + 500ms);
  CHECK(eventually([&] { return group.keys_everywhere(queue) + group.keys_everywhere(expiry) == 0; }, 500ms));
  // The holder's TTL runs out (no release: nobody is named, no turn starts);
  // a fair try then takes the free lock.
  REQUIRE(eventually([&] { return group.keys_everywhere(lock_key) == 0; }, std::chrono::seconds(5)));
  Result<Lock> tried = holder->acquire("fair", {.ttl = 10000ms, .fair = true});
  REQUIRE(tried.ok());
  REQUIRE(holder->release(*tried).ok());
}

// A queue left by a waiter of a version without stamps (the state the
// killed waiter above left before: its place kept for 2^31 ms) heals at
// once: a place without a stamp has lapsed. Status counts it apart, as
// `lapsed`; the first fair script takes it out.
TEST_CASE("a queued waiter without a stamp has lapsed: status counts it apart, and a fair try takes the free lock") {
  RedisGroup group(3);
  auto client = client_for(group, patient);
  for (std::size_t i = 0; i < group.size(); ++i) {
    REQUIRE(group[i].command({"ZADD", queue, "1", "deaddeaddeaddead"}).integer == 1);
    REQUIRE(group[i].command({"PEXPIRE", queue, "2147483647"}).integer == 1);
  }
  auto st = client->status("fair");
  REQUIRE(st.ok());
  CHECK_FALSE(st->held);
  CHECK(st->queued == 0);
  CHECK(st->queue_head.empty());
  CHECK(st->lapsed == 1);
  for (const NodeHolding& n : st->nodes) {
    CAPTURE(n.address);
    CHECK(n.state == NodeHolding::State::free);
    CHECK(n.queued == 0);
    CHECK(n.lapsed == 1);
  }
  Result<Lock> tried = client->acquire("fair", {.ttl = 10000ms, .fair = true});
  REQUIRE(tried.ok());
  for (std::size_t i = 0; i < group.size(); ++i) {  // the last master may answer after the majority
    CHECK(eventually([&] { return group[i].command({"EXISTS", queue}).integer == 0; }));
  }
  REQUIRE(client->release(*tried).ok());
  auto after = client->status("fair");
  REQUIRE(after.ok());
  CHECK(after->queued == 0);
  CHECK(after->lapsed == 0);
}

// Live waiters keep their places across many lives: each round stamps its
// place, and no fair waiter sleeps longer than fair_refresh (1 s by
// default) between rounds — not even the fourth, whose safety net by its
// place is 3 s (longer than fair_life, 2.1 s).
TEST_CASE("live fair waiters far back keep their places long beyond fair_life: they refresh them") {
  RedisGroup group(3);
  auto holder = client_for(group);
  auto waiters = client_for(group);
  auto held = holder->acquire("fair", {.ttl = 30000ms});
  REQUIRE(held.ok());
  // The last SET may still be on its way: a waiter could take that master's free key for a moment.
  REQUIRE(eventually([&] { return group.keys_everywhere(lock_key) == group.size(); }));
  constexpr int count = 4;
  std::vector<std::optional<Result<Lock>>> got(count);
  std::vector<std::jthread> threads;
  for (int w = 0; w < count; ++w) {
    threads.emplace_back([&, w] {
      got[static_cast<std::size_t>(w)].emplace(
          waiters->acquire("fair", {.ttl = 10000ms, .wait = 60000ms, .fair = true}));
    });
    REQUIRE(eventually([&] { return queued_everywhere(group, w + 1); }));
  }
  // Every place stays stamped ahead of the master's clock: a waiter that
  // slept by its place (the fourth: 3 s) would let its stamp pass.
  auto all_ahead = [&](std::size_t i) {
    const Reply time = group[i].command({"TIME"});
    const long long now = std::stoll(time.elements.at(0).str) * 1000 + std::stoll(time.elements.at(1).str) / 1000;
    const Reply stamps = group[i].command({"ZRANGE", expiry, "0", "-1", "WITHSCORES"});
    if (stamps.elements.size() != 2 * count) return false;
    for (std::size_t k = 1; k < stamps.elements.size(); k += 2) {
      if (std::stoll(stamps.elements[k].str) <= now) return false;
    }
    return true;
  };
  const auto start = Clock::now();
  while (Clock::now() - start < 5000ms) {  // more than two lives
    CHECK(queued_everywhere(group, count));
    for (std::size_t i = 0; i < group.size(); ++i) CHECK(all_ahead(i));
    std::this_thread::sleep_for(100ms);  // sampling the masters while time passes: no event to await
  }
  REQUIRE(holder->release(*held).ok());
  for (int w = 0; w < count; ++w) {
    threads[static_cast<std::size_t>(w)].join();
    REQUIRE(got[static_cast<std::size_t>(w)]->ok());
    REQUIRE(waiters->release(**got[static_cast<std::size_t>(w)]).ok());
  }
}
