// test_acquire.cpp — the lock against five real masters: the happy path,
// contention, foreign tokens, expiry, and mutual exclusion under threads.
#include <doctest/doctest.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

TEST_CASE("acquire, extend and release on five masters") {
  RedisGroup group(5);
  auto client = client_for(group);
  AcquireOptions opts;
  opts.ttl = 5000ms;
  auto lock = client->acquire("report", opts);
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  CHECK(lock->nodes.size() == 5);
  // Decided by the first three; a straggler may still be pending then.
  CHECK(count_outcome(lock->nodes, Outcome::ok) >= 3);
  CHECK(count_outcome(lock->nodes, Outcome::ok) + count_outcome(lock->nodes, Outcome::pending) == 5);
  CHECK(lock->validity <= 5000ms - 52ms);
  CHECK(lock->valid());
  for (std::size_t i = 0; i < group.size(); ++i) {
    // A node still pending at the decision gets the key a moment later.
    CHECK(eventually([&] { return group[i].command({"GET", "redlock:{report}:lock"}).str == lock->token; }));
    auto pttl = group[i].command({"PTTL", "redlock:{report}:lock"}).integer;
    CHECK(pttl > 4000);
    CHECK(pttl <= 5000);
  }

  auto extended = client->extend(*lock, 20000ms);
  REQUIRE_MESSAGE(extended.ok(), extended.error().to_string());
  CHECK(extended->validity > 19000ms);
  CHECK(group[2].command({"PTTL", "redlock:{report}:lock"}).integer > 19000);

  // An extend with a shorter TTL never shortens the key's life on a master:
  // the holder still counts on the longer validity until the answer comes.
  auto shorter = client->extend(*extended, 1000ms);
  REQUIRE_MESSAGE(shorter.ok(), shorter.error().to_string());
  CHECK(shorter->validity <= 1000ms);
  for (std::size_t i = 0; i < group.size(); ++i) {
    CHECK(eventually([&] { return group[i].command({"PTTL", "redlock:{report}:lock"}).integer > 15000; }));
  }

  auto released = client->release(*extended);
  REQUIRE(released.ok());
  CHECK(released->released);
  // Exactly 5 unless a straggler took longer than release_settle (a loaded
  // machine); the exact count is proven on the fake transport.
  CHECK(released->released_nodes >= 3);
  CHECK(eventually([&] { return group.keys_everywhere("redlock:*") == 0; }));
}

TEST_CASE("a lock held elsewhere reports held; a foreign token can neither extend nor release") {
  RedisGroup group(3);
  auto a = client_for(group);
  auto b = client_for(group);
  // a's lock on every master first: a majority decides an acquire, and on a
  // loaded machine the third master's SET may land late, or not be sent
  // (a master judged not answering) — then b would rightly take that one.
  REQUIRE(ready_everywhere(*a, group.size()));
  Result<Lock> lock = make_error(Errc::internal, "not tried");
  REQUIRE(eventually([&] {
    lock = a->acquire("row-17");
    if (!lock.ok()) return false;
    if (eventually([&] { return holding(group, "row-17", lock->token) == group.size(); }, 1000ms)) return true;
    (void)a->release(*lock);
    return false;
  }, 10000ms));

  auto second = b->try_acquire("row-17");
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == Errc::held);
  // Decided at the second `held`; the third may still be pending then.
  CHECK(count_outcome(second.error().nodes, Outcome::held) >= 2);
  CHECK(count_outcome(second.error().nodes, Outcome::held) + count_outcome(second.error().nodes, Outcome::pending) == 3);
  // A first attempt is a plain SET NX PX, whose refusal carries no TTL; a
  // retry (or a given token) runs the script, which reports the holder's.
  for (const NodeOutcome& n : second.error().nodes) {
    if (n.outcome == Outcome::held) CHECK(n.holder_ttl == -1ms);
  }
  AcquireOptions with_token;
  with_token.token = "b-token";
  auto third = b->acquire("row-17", with_token);
  REQUIRE_FALSE(third.ok());
  CHECK(third.error().code == Errc::held);
  CHECK(count_outcome(third.error().nodes, Outcome::held) >= 2);
  for (const NodeOutcome& n : third.error().nodes) {
    if (n.outcome == Outcome::held) CHECK(n.holder_ttl > 9000ms);
  }

  Lock forged = *lock;
  forged.token = "0123456789abcdef0123456789abcdef";
  auto ext = b->extend(forged, 10000ms);
  REQUIRE_FALSE(ext.ok());
  CHECK(ext.error().code == Errc::not_held);
  auto rel = b->release(forged);
  REQUIRE(rel.ok());
  CHECK_FALSE(rel->released);
  CHECK(rel->released_nodes == 0);
  for (std::size_t i = 0; i < group.size(); ++i) {
    CHECK(group[i].command({"GET", "redlock:{row-17}:lock"}).str == lock->token);
  }
  // The failed acquire of b released nothing of a's.
  CHECK(a->release(*lock)->released_nodes >= 2);
}

TEST_CASE("an expired lock cannot be extended") {
  RedisGroup group(3);
  auto client = client_for(group);
  AcquireOptions opts;
  opts.ttl = 150ms;
  auto lock = client->acquire("short", opts);
  REQUIRE(lock.ok());
  REQUIRE(eventually([&] { return group.keys_everywhere("redlock:{short}:lock") == 0; }));
  auto ext = client->extend(*lock, 1000ms);
  REQUIRE_FALSE(ext.ok());
  CHECK(ext.error().code == Errc::not_held);
  CHECK(group.keys_everywhere("redlock:*") == 0);  // extend never recreates a missing key
}

TEST_CASE("acquiring again with our own token refreshes the lock instead of blocking on it") {
  RedisGroup group(3);
  auto client = client_for(group);
  AcquireOptions opts;
  opts.ttl = 2000ms;
  opts.token = "my-own-token";
  auto first = client->acquire("refresh", opts);
  REQUIRE(first.ok());
  opts.ttl = 30000ms;
  auto again = client->acquire("refresh", opts);
  REQUIRE_MESSAGE(again.ok(), again.error().to_string());
  // A majority decided the refresh: the third master's answer may still be
  // on its way.
  REQUIRE(eventually([&] { return group[1].command({"PTTL", "redlock:{refresh}:lock"}).integer > 20000; }));
  CHECK(group[1].command({"GET", "redlock:{refresh}:lock"}).str == "my-own-token");
}

TEST_CASE("threads contending for one lock increment a shared counter exactly") {
  RedisGroup group(5);
  RedisServer counter;
  auto shared = client_for(group);
  auto other = client_for(group);
  constexpr int kThreads = 6, kRounds = 30;
  std::atomic<int> inside{0}, overlaps{0}, failures{0};
  auto worker = [&](Client& client) {
    redisContext* c = redisConnect("127.0.0.1", counter.port());
    for (int i = 0; i < kRounds; ++i) {
      AcquireOptions opts;
      opts.ttl = 5000ms;
      opts.wait = 20000ms;
      auto lock = client.acquire("counter", opts);
      if (!lock) {
        ++failures;
        continue;
      }
      if (inside.fetch_add(1) != 0) ++overlaps;
      auto* r = static_cast<redisReply*>(redisCommand(c, "GET counter"));
      long long v = r->type == REDIS_REPLY_STRING ? std::stoll(r->str) : 0;
      freeReplyObject(r);
      freeReplyObject(redisCommand(c, "SET counter %lld", v + 1));
      inside.fetch_sub(1);
      CHECK(lock->valid());
      auto rel = client.release(*lock);
      CHECK(rel.ok());
    }
    redisFree(c);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, std::ref(t % 2 == 0 ? *shared : *other));
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(overlaps == 0);
  CHECK(counter.command({"GET", "counter"}).str == std::to_string(kThreads * kRounds));
  CHECK(eventually([&] { return group.keys_everywhere("redlock:*") == 0; }));  // the last release may land after its majority
}

TEST_CASE("async core: callbacks run on the loop and the loop closes with no handle left") {
  RedisGroup group(3);
  uv_loop_t loop;
  uv_loop_init(&loop);
  Config config = config_for(group.urls());
  auto client = AsyncClient::create(&loop, config);
  REQUIRE(client.ok());
  AsyncClient& c = **client;
  bool started = false, acquired = false, released = false, closed = false;
  c.acquire("async", {}, [&](Result<Lock> lock) {
    REQUIRE(lock.ok());
    acquired = true;
    c.release(lock->resource, lock->token, [&](Result<ReleaseResult> r) {
      released = r.ok() && r->released;
      c.close([&] { closed = true; });
    });
  });
  started = true;
  CHECK_FALSE(acquired);  // never on the caller's stack
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(started);
  CHECK(acquired);
  CHECK(released);
  CHECK(closed);
  client->reset();
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("an AsyncClient may be destroyed inside its own on_closed, and in a later close's callback") {
  RedisGroup group(3);
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto made = AsyncClient::create(&loop, config_for(group.urls()));
  REQUIRE(made.ok());
  std::unique_ptr<AsyncClient> client = std::move(*made);
  int told = 0;
  client->close([&] {
    ++told;
    client.reset();  // the client goes while its close is finishing
  });
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(told == 1);
  CHECK(client == nullptr);
  CHECK(uv_loop_close(&loop) == 0);

  // Closed already: a later close() runs its callback at once, inside the call.
  uv_loop_init(&loop);
  made = AsyncClient::create(&loop, config_for(group.urls()));
  REQUIRE(made.ok());
  client = std::move(*made);
  client->close();
  uv_run(&loop, UV_RUN_DEFAULT);
  client->close([&] {
    ++told;
    client.reset();
  });
  CHECK(told == 2);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("operations in flight when the client closes complete with closed") {
  RedisGroup group(3);
  uv_loop_t loop;
  uv_loop_init(&loop);
  Config config = config_for(group.urls());
  auto client = AsyncClient::create(&loop, config);
  REQUIRE(client.ok());
  std::vector<Errc> codes;
  for (int i = 0; i < 3; ++i) {
    (*client)->acquire("r" + std::to_string(i), {}, [&](Result<Lock> r) {
      codes.push_back(r.ok() ? Errc::internal : r.error().code);
    });
  }
  client->reset();  // destroying the client closes it
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(codes == std::vector<Errc>{Errc::closed, Errc::closed, Errc::closed});
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("status and nodes complete with closed when issued after close() or in flight at it") {
  RedisGroup group(3);
  uv_loop_t loop;
  uv_loop_init(&loop);
  auto client = AsyncClient::create(&loop, config_for(group.urls()));
  REQUIRE(client.ok());
  AsyncClient& c = **client;
  std::vector<std::string> order;
  auto code_of = [](const auto& r) { return r.ok() ? std::string("ok") : std::string(errc_name(r.error().code)); };
  c.acquire("looked-at", {}, [&](Result<Lock> lock) {
    REQUIRE(lock.ok());  // the connections are up now
    // In flight when close() comes: their PINGs and scripts are sent.
    c.status("looked-at", [&](Result<ResourceStatus> r) { order.push_back("status in flight: " + code_of(r)); });
    c.nodes([&](Result<NodesReport> r) { order.push_back("nodes in flight: " + code_of(r)); });
    c.close([&] {
      // After the client is fully closed, too.
      c.status("looked-at", [&](Result<ResourceStatus> r) { order.push_back("status after on_closed: " + code_of(r)); });
    });
    // After close(), before it is done.
    c.status("looked-at", [&](Result<ResourceStatus> r) { order.push_back("status after close: " + code_of(r)); });
    c.nodes([&](Result<NodesReport> r) { order.push_back("nodes after close: " + code_of(r)); });
    CHECK(order.empty());  // never on the caller's stack
  });
  uv_run(&loop, UV_RUN_DEFAULT);
  std::sort(order.begin(), order.end());
  CHECK(order == std::vector<std::string>{"nodes after close: redlock.closed", "nodes in flight: redlock.closed",
                                          "status after close: redlock.closed",
                                          "status after on_closed: redlock.closed",
                                          "status in flight: redlock.closed"});
  client->reset();
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("replies that arrived during a stalled loop turn are not timeouts") {
  // The loop is blocked for 4 node timeouts right after the acquire is sent
  // (a slow callback elsewhere in the program). The masters answer within a
  // millisecond; libuv then runs its timers before polling, so without
  // reading the socket first every node would read `timeout`.
  RedisGroup group(3);
  uv_loop_t loop;
  uv_loop_init(&loop);
  Config config = config_for(group.urls());
  config.options.node_timeout = std::chrono::milliseconds{20};
  auto client = AsyncClient::create(&loop, config);
  REQUIRE(client.ok());
  AsyncClient& c = **client;
  std::optional<Result<Lock>> warm, got;
  // Warm up until every master has finished its handshake and said yes: a
  // majority answers the first acquire, a master still in its handshake
  // would hold the stalled acquire unwritten, and on a loaded machine a
  // fresh master may miss the 20 ms deadline a few times first.
  uv_timer_t pause;
  uv_timer_init(&loop, &pause);
  const auto warm_until = std::chrono::steady_clock::now() + std::chrono::seconds{20};
  for (int round = 0; !warm || !warm->ok() || count_outcome(warm->value().nodes, Outcome::ok) != 3; ++round) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < warm_until, "the masters never all said yes");
    bool paused = false;  // let late replies in before the next try
    pause.data = &paused;
    uv_timer_start(&pause, [](uv_timer_t* t) { *static_cast<bool*>(t->data) = true; }, round == 0 ? 0 : 10, 0);
    while (!paused) uv_run(&loop, UV_RUN_ONCE);
    warm.reset();
    c.acquire("warm-up-" + std::to_string(round), {}, [&](Result<Lock> r) { warm.emplace(std::move(r)); });
    while (!warm) uv_run(&loop, UV_RUN_ONCE);
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&pause), nullptr);

  // Every master has run the vote check (the GET behind the SET) once its
  // GET count grew: its replies were then written to our sockets, since a
  // master writes a loop iteration's replies before it answers INFO.
  auto gets = [&](std::size_t i) { return command_calls(group[i], "get"); };
  std::vector<long long> before;
  for (std::size_t i = 0; i < group.size(); ++i) before.push_back(gets(i));

  c.acquire("stalled", {}, [&](Result<Lock> r) { got.emplace(std::move(r)); });
  uv_run(&loop, UV_RUN_NOWAIT);  // one turn: the commands are written
  // The stall: at least 4 node timeouts, and until every master answered
  // (however loaded the machine is).
  const auto stall_end = std::chrono::steady_clock::now() + std::chrono::milliseconds{80};
  for (std::size_t i = 0; i < group.size(); ++i) {
    for (int tries = 0; gets(i) == before[i]; ++tries) {
      REQUIRE_MESSAGE(tries < 2000, "master " << i << " never ran the acquire's vote check");
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
    }
  }
  std::this_thread::sleep_until(stall_end);
  while (!got) uv_run(&loop, UV_RUN_ONCE);
  REQUIRE_MESSAGE(got->ok(), got->error().to_string());
  CHECK(count_outcome(got->value().nodes, Outcome::timeout) == 0);
  c.close();
  uv_run(&loop, UV_RUN_DEFAULT);
  client->reset();
  CHECK(uv_loop_close(&loop) == 0);
}

TEST_CASE("a release publishes the token on {prefix}{resource}:released on every master that released") {
  RedisGroup group(3);
  auto client = client_for(group);
  // One subscriber per master, on a plain blocking hiredis connection.
  std::vector<redisContext*> subscribers;
  for (std::size_t i = 0; i < 3; ++i) {
    redisContext* c = redisConnect("127.0.0.1", group[i].port());
    REQUIRE(c != nullptr);
    REQUIRE(c->err == 0);
    subscribers.push_back(c);
    auto* r = static_cast<redisReply*>(redisCommand(c, "SUBSCRIBE redlock:{report}:released"));
    REQUIRE(r != nullptr);
    freeReplyObject(r);
    const timeval bound{5, 0};
    redisSetTimeout(c, bound);
  }
  auto lock = client->acquire("report");
  REQUIRE(lock.ok());
  auto released = client->release(*lock);
  REQUIRE(released.ok());
  CHECK(released->released);
  for (redisContext* c : subscribers) {
    void* raw = nullptr;
    REQUIRE(redisGetReply(c, &raw) == REDIS_OK);  // bounded by the 5 s timeout
    auto* message = static_cast<redisReply*>(raw);
    REQUIRE(message->type == REDIS_REPLY_ARRAY);
    REQUIRE(message->elements == 3);
    CHECK(std::string(message->element[0]->str) == "message");
    CHECK(std::string(message->element[1]->str) == "redlock:{report}:released");
    CHECK(std::string(message->element[2]->str) == lock->token);
    freeReplyObject(message);
    redisFree(c);
  }
}
