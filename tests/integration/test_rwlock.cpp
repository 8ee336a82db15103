// test_rwlock.cpp — read-write locks (AcquireOptions::shared): readers
// share the lock key's mark, each with its own expiry in {R}:readers; a
// writer is any plain lock of the name; a waiting writer's intent in
// {R}:writers stops new readers.
#include <doctest/doctest.h>

#include <fstream>
#include <future>
#include <string>

#include "cli_harness.hpp"
#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace redlock::test::cli_harness;
using namespace std::chrono_literals;

namespace {

std::string key(std::string_view resource, std::string_view suffix) {
  return "redlock:{" + std::string(resource) + "}:" + std::string(suffix);
}

// on_every: `cond(node)` holds on every master of the group, eventually
// (an acquire or release is decided by a majority; the rest land after).
bool on_every(RedisGroup& g, const std::function<bool(const RedisServer&)>& cond) {
  return eventually([&] {
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (!cond(g[i])) return false;
    }
    return true;
  });
}

// readers_everywhere: `n` reader entries of `resource` on every master.
// An acquire is decided by a majority; the rest land after. A test whose
// writer comes next waits for this: a writer's attempt that reached a
// master first would take it there (no mark yet), and the reader's join
// that lands after it would be refused.
bool readers_everywhere(RedisGroup& g, const std::string& resource, long long n) {
  return on_every(g, [&](const RedisServer& s) { return s.command({"ZCARD", key(resource, "readers")}).integer == n; });
}

// held_read: a read lock of `resource` that `c` holds for 20 s, its entry
// on every master.
Lock held_read(Client& c, RedisGroup& g, const std::string& resource) {
  auto reader = c.acquire(resource, {.ttl = 20000ms, .shared = true});
  REQUIRE(reader.ok());
  REQUIRE(readers_everywhere(g, resource, 1));
  return std::move(*reader);
}

}  // namespace

TEST_CASE("readers share a name; a writer waits until the last reader has released, then takes it") {
  RedisGroup g(3);
  auto a = client_for(g);
  auto b = client_for(g);
  auto w = client_for(g);
  auto first = a->acquire("doc", {.ttl = 10000ms, .shared = true});
  REQUIRE_MESSAGE(first.ok(), first.error().to_string());
  auto second = b->acquire("doc", {.ttl = 10000ms, .shared = true});
  REQUIRE_MESSAGE(second.ok(), second.error().to_string());
  CHECK(first->shared);
  CHECK(second->shared);
  CHECK(first->valid());
  // The lock key holds the readers' mark; the readers set each value.
  CHECK(on_every(g, [](const RedisServer& s) {
    return s.command({"GET", key("doc", "lock")}).str == "~readers" &&
           s.command({"ZCARD", key("doc", "readers")}).integer == 2;
  }));

  auto writer = w->acquire("doc", {.ttl = 10000ms});
  REQUIRE_FALSE(writer.ok());
  CHECK(writer.error().code == Errc::held);
  auto released = a->release(*first);
  REQUIRE(released.ok());
  CHECK(released->released);
  writer = w->acquire("doc", {.ttl = 10000ms});
  REQUIRE_FALSE(writer.ok());  // the second reader still holds it
  CHECK(b->release(*second)->released);
  // The last reader's release takes the mark and the set away.
  CHECK(on_every(g, [](const RedisServer& s) { return s.command({"EXISTS", key("doc", "lock"), key("doc", "readers")}).integer == 0; }));
  writer = w->acquire("doc", {.ttl = 10000ms});
  REQUIRE_MESSAGE(writer.ok(), writer.error().to_string());
  CHECK_FALSE(writer->shared);
  CHECK(w->release(*writer)->released);
}

TEST_CASE("a writer keeps readers out; they get in once it has released") {
  RedisGroup g(3);
  auto w = client_for(g);
  auto r = client_for(g);
  auto writer = w->acquire("table", {.ttl = 10000ms});
  REQUIRE(writer.ok());
  // The writer's acquire was decided by a majority: a master's SET may land
  // just after — after a reader's mark, if the reader came first there
  // (then that master never holds the writer's key). Wait for it first.
  CHECK(on_every(g, [&](const RedisServer& s) { return s.command({"GET", key("table", "lock")}).str == writer->token; }));
  auto reader = r->acquire("table", {.ttl = 10000ms, .shared = true});
  REQUIRE_FALSE(reader.ok());
  CHECK(reader.error().code == Errc::held);
  CHECK(reader.error().to_string().find("held by a writer, or a writer waits") != std::string::npos);
  // Nothing of the refused reader stays behind.
  CHECK(g[0].command({"EXISTS", key("table", "readers")}).integer == 0);
  // A reader that waits is let in by the writer's release.
  auto waiting = std::async(std::launch::async, [&] { return r->acquire("table", {.ttl = 10000ms, .wait = 10000ms, .shared = true}); });
  CHECK(w->release(*writer)->released);
  auto in = waiting.get();
  REQUIRE_MESSAGE(in.ok(), in.error().to_string());
  CHECK(in->shared);
  CHECK(r->release(*in)->released);
}

TEST_CASE("each reader has its own expiry: the mark lives exactly as long as the latest reader") {
  RedisGroup g(3);
  auto a = client_for(g);
  auto b = client_for(g);
  auto long_one = a->acquire("log", {.ttl = 20000ms, .shared = true});
  REQUIRE(long_one.ok());
  auto short_one = b->acquire("log", {.ttl = 3000ms, .shared = true});
  REQUIRE(short_one.ok());
  CHECK(on_every(g, [](const RedisServer& s) { return s.command({"PTTL", key("log", "lock")}).integer > 15000; }));
  // The long reader leaves: the mark now covers the short one only.
  CHECK(a->release(*long_one)->released);
  CHECK(on_every(g, [](const RedisServer& s) {
    const long long pttl = s.command({"PTTL", key("log", "lock")}).integer;
    return pttl > 0 && pttl <= 3000 && s.command({"PTTL", key("log", "readers")}).integer <= 3000;
  }));
  // An extension moves this reader's end and the mark with it.
  auto extended = b->extend(*short_one, 30000ms);
  REQUIRE_MESSAGE(extended.ok(), extended.error().to_string());
  CHECK(extended->shared);
  CHECK(on_every(g, [](const RedisServer& s) { return s.command({"PTTL", key("log", "lock")}).integer > 25000; }));
  // A reader entry gone (here: by hand, on every master) is not extended,
  // nor released: extend never recreates it.
  for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"ZREM", key("log", "readers"), extended->token});
  auto again = b->extend(*extended, 30000ms);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == Errc::not_held);
  auto gone = b->release(*extended);
  REQUIRE(gone.ok());
  CHECK_FALSE(gone->released);
}

TEST_CASE("a dead reader's entry goes when the next reader joins; an earlier reader's release keeps the mark") {
  RedisGroup g(3);
  auto a = client_for(g);
  auto b = client_for(g);
  auto first = a->acquire("pile", {.ttl = 20000ms, .shared = true});
  REQUIRE(first.ok());
  // A reader that died long ago: its entry's end is in the past.
  for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"ZADD", key("pile", "readers"), "1", "dead"});
  auto second = b->acquire("pile", {.ttl = 3000ms, .shared = true});
  REQUIRE(second.ok());
  CHECK(on_every(g, [](const RedisServer& s) {
    return s.command({"ZSCORE", key("pile", "readers"), "dead"}).type == REDIS_REPLY_NIL &&
           s.command({"ZCARD", key("pile", "readers")}).integer == 2;
  }));
  // The short reader leaves: the long one's end still holds the mark.
  CHECK(b->release(*second)->released);
  CHECK(on_every(g, [](const RedisServer& s) { return s.command({"PTTL", key("pile", "lock")}).integer > 15000; }));
  CHECK(a->release(*first)->released);
  CHECK(on_every(g, [](const RedisServer& s) {
    return s.command({"EXISTS", key("pile", "lock"), key("pile", "readers")}).integer == 0;
  }));
}

TEST_CASE("a waiting writer's intent stops new readers; it is taken back when the writer ends") {
  RedisGroup g(3);
  auto a = client_for(g);
  auto w = client_for(g);
  auto late = client_for(g);
  auto reader = a->acquire("ledger", {.ttl = 20000ms, .shared = true});
  REQUIRE(reader.ok());
  REQUIRE(readers_everywhere(g, "ledger", 1));
  auto writer = std::async(std::launch::async, [&] { return w->acquire("ledger", {.ttl = 10000ms, .wait = 15000ms}); });
  // Its retry stamps its intent on the masters.
  CHECK(on_every(g, [](const RedisServer& s) { return s.command({"ZCARD", key("ledger", "writers")}).integer == 1; }));
  auto refused = late->acquire("ledger", {.ttl = 10000ms, .shared = true});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == Errc::held);
  // The reader that holds goes on holding: its extension is not refused.
  auto extended = a->extend(*reader, 20000ms);
  REQUIRE_MESSAGE(extended.ok(), extended.error().to_string());
  CHECK(a->release(*extended)->released);
  auto won = writer.get();
  REQUIRE_MESSAGE(won.ok(), won.error().to_string());
  CHECK(on_every(g, [](const RedisServer& s) { return s.command({"EXISTS", key("ledger", "writers")}).integer == 0; }));
  CHECK(w->release(*won)->released);
  auto after = late->acquire("ledger", {.ttl = 10000ms, .shared = true});
  REQUIRE_MESSAGE(after.ok(), after.error().to_string());
  CHECK(late->release(*after)->released);
}

TEST_CASE("a fenced or a fair writer's intent stops new readers too; once it holds, its intent is gone from every master") {
  for (const bool fenced : {true, false}) {
    CAPTURE(fenced);
    RedisGroup g(3);
    auto a = client_for(g);
    // Its intent would lapse 2 × 10 s + 2 node timeouts after its last
    // round: long after this test, unless the writer takes it back.
    auto w = client_for(g, [](Options& o) { o.wake_safety_net = 10000ms; });
    auto late = client_for(g);
    Lock reader = held_read(*a, g, "books");
    const AcquireOptions wo{.ttl = 10000ms, .wait = 15000ms, .fence = fenced, .fair = !fenced};
    auto writer = std::async(std::launch::async, [&] { return w->acquire("books", wo); });
    // Its retry is preceded by its intent alone, stamped where the readers
    // hold: no new reader joins.
    CHECK(on_every(g, [](const RedisServer& s) { return s.command({"ZCARD", key("books", "writers")}).integer == 1; }));
    auto refused = late->acquire("books", {.ttl = 10000ms, .shared = true});
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == Errc::held);
    CHECK(a->release(reader)->released);
    auto won = writer.get();
    REQUIRE_MESSAGE(won.ok(), won.error().to_string());
    CHECK((won->fence > 0) == fenced);
    if (!fenced) CHECK(won->token.front() == 'Q');  // a fair token (a drawn one may start with Q too)
    // Its win took nothing back: the leave does, on every master.
    CHECK(on_every(g, [](const RedisServer& s) { return s.command({"EXISTS", key("books", "writers")}).integer == 0; }));
    CHECK(w->release(*won)->released);
    auto after = late->acquire("books", {.ttl = 10000ms, .shared = true});
    REQUIRE_MESSAGE(after.ok(), after.error().to_string());
    CHECK(late->release(*after)->released);
  }
}

TEST_CASE("a writer that gives up takes its intent back, and a waiting reader is let in without its TTL") {
  RedisGroup g(3);
  auto a = client_for(g);
  // The writer's intent lapses 2 × 3 s + 2 node timeouts after its last
  // round: 6.1 s after it started at the soonest.
  auto w = client_for(g, [](Options& o) { o.wake_safety_net = 3000ms; });
  auto r = client_for(g);
  Lock reader = held_read(*a, g, "queue");
  auto writer = std::async(std::launch::async, [&] { return w->acquire("queue", {.ttl = 10000ms, .wait = 1500ms}); });
  CHECK(on_every(g, [](const RedisServer& s) { return s.command({"ZCARD", key("queue", "writers")}).integer == 1; }));
  // A reader that waits behind the intent, for less than the intent would
  // live: it is let in because the writer, giving up, takes it back.
  auto waiting = std::async(std::launch::async, [&] { return r->acquire("queue", {.ttl = 10000ms, .wait = 4000ms, .shared = true}); });
  auto gave_up = writer.get();
  REQUIRE_FALSE(gave_up.ok());
  CHECK(gave_up.error().code == Errc::held);
  auto in = waiting.get();
  REQUIRE_MESSAGE(in.ok(), in.error().to_string());
  CHECK(on_every(g, [](const RedisServer& s) { return s.command({"EXISTS", key("queue", "writers")}).integer == 0; }));
  CHECK(r->release(*in)->released);
  CHECK(a->release(reader)->released);
}

TEST_CASE("an intent whose time has passed stops no reader; a writer's value is never taken for the mark") {
  RedisGroup g(3);
  auto r = client_for(g);
  // A writer that died: its intent's lapse is in the past on every master.
  for (std::size_t i = 0; i < g.size(); ++i) {
    g[i].command({"ZADD", key("old", "writers"), "1", "deadbeefdeadbeef"});
  }
  auto in = r->acquire("old", {.ttl = 10000ms, .shared = true});
  REQUIRE_MESSAGE(in.ok(), in.error().to_string());
  // The reader read the last intent and went past it: it leaves the set
  // to its own expiry (write_acquire always gives it one).
  CHECK(on_every(g, [](const RedisServer& s) { return s.command({"ZCARD", key("old", "readers")}).integer == 1; }));
  CHECK(r->release(*in)->released);
  // The mark is no token: a caller cannot hand it in as one.
  auto forged = r->release("old", "~readers");
  REQUIRE_FALSE(forged.ok());
  CHECK(forged.error().code == Errc::invalid_argument);
}

TEST_CASE("a read lock as a Lease: its watchdog extends the reader's own entry; its release lets a writer in") {
  RedisGroup g(3);
  auto r = client_for(g);
  auto w = client_for(g);
  LeaseOptions opts;
  opts.acquire.ttl = 600ms;
  opts.acquire.shared = true;
  auto lease = r->lock("feed", opts);
  REQUIRE_MESSAGE(lease.ok(), lease.error().to_string());
  CHECK(lease->shared());
  const std::string token(lease->token());
  const auto end_of = [&](const RedisServer& s) {
    const std::string score = s.command({"ZSCORE", key("feed", "readers"), token}).str;
    return score.empty() ? 0LL : std::stoll(score);
  };
  // The entry's end moves on (extended at a third of 600 ms), and the
  // mark with it: several TTLs pass and the reader still holds.
  // (Taken by a majority: master 0's entry may land just after.)
  REQUIRE(eventually([&] { return end_of(g[0]) > 0; }));
  const long long first = end_of(g[0]);
  CHECK(eventually([&] { return end_of(g[0]) > first + 1200; }, 5000ms));
  CHECK(lease->valid());
  CHECK(g[0].command({"GET", key("feed", "lock")}).str == "~readers");
  CHECK_FALSE(w->acquire("feed", {.ttl = 5000ms}).ok());
  auto released = lease->release();
  REQUIRE_MESSAGE(released.ok(), released.error().to_string());
  CHECK(released->released);
  auto writer = w->acquire("feed", {.ttl = 5000ms});
  REQUIRE_MESSAGE(writer.ok(), writer.error().to_string());
  CHECK(w->release(*writer)->released);
}

TEST_CASE("shared: what does not go with a read lock is refused, naming it") {
  RedisGroup g(3);
  auto c = client_for(g);
  const auto refused = [&](AcquireOptions opts, std::string_view words) {
    opts.shared = true;
    auto r = c->acquire("x", std::move(opts));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == Errc::invalid_argument);
    CHECK_MESSAGE(r.error().message.find(words) != std::string::npos, r.error().message);
  };
  refused({.token = "mine"}, "shared: needs a value drawn by the library");
  refused({.fence = true}, "shared: not with fence");
  refused({.fair = true}, "shared: not with fair");
  refused({.permits = 2}, "shared: not with permits");
  auto many = c->acquire_many({"x", "y"}, {.shared = true});
  REQUIRE_FALSE(many.ok());
  CHECK(many.error().message.find("shared: one resource only") != std::string::npos);
  LeaseOptions reentrant;
  reentrant.acquire.shared = true;
  reentrant.reentrant = true;
  auto lease = c->lock("x", reentrant);
  REQUIRE_FALSE(lease.ok());
  CHECK(lease.error().message.find("acquire.shared: not with reentrant") != std::string::npos);
  // A held lock is a reader's or a permit, never both.
  Lock odd;
  odd.resource = "x";
  odd.token = "abc";
  odd.shared = true;
  odd.permit = 1;
  auto bad = c->release(odd);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("shared: a read lock has no permit") != std::string::npos);
}

TEST_CASE("status shows readers and the writers waiting on them; `redlock status` prints them") {
  RedisGroup g(3);
  auto a = client_for(g);
  auto b = client_for(g);
  auto w = client_for(g);
  auto r1 = a->acquire("shelf", {.ttl = 20000ms, .shared = true});
  auto r2 = b->acquire("shelf", {.ttl = 10000ms, .shared = true});
  REQUIRE(r1.ok());
  REQUIRE(r2.ok());
  REQUIRE(readers_everywhere(g, "shelf", 2));
  AcquireOptions write;
  write.ttl = 10000ms;
  write.wait = 15000ms;
  auto writer = w->acquire_async("shelf", write);
  REQUIRE(on_every(g, [](const RedisServer& s) { return s.command({"ZCARD", key("shelf", "writers")}).integer == 1; }));

  auto st = a->status("shelf");
  REQUIRE_MESSAGE(st.ok(), st.error().to_string());
  CHECK(st->shared);
  CHECK_FALSE(st->held);
  CHECK(st->token.empty());
  CHECK(st->readers == 2);
  CHECK(st->writers_waiting == 1);
  CHECK(st->ttl > 15000ms);  // the latest reader's end
  for (const NodeHolding& n : st->nodes) {
    CHECK(n.state == NodeHolding::State::shared);
    CHECK(n.readers == 2);
    CHECK(n.writers_waiting == 1);
  }

  auto json_out = cli(op({"status", "shelf", "--json"}, g));
  CHECK(json_out.exit_code == 0);
  const json j = json_of(json_out);
  CHECK(j["shared"] == true);
  CHECK(j["held"] == false);
  CHECK(j["readers"] == 2);
  CHECK(j["writers_waiting"] == 1);
  CHECK(j["token"].is_null());
  CHECK(j["nodes"][0]["state"] == "shared");
  CHECK(j["nodes"][0]["readers"] == 2);
  auto human = cli(op({"status", "shelf"}, g));
  CHECK(human.exit_code == 0);
  INFO(human.out);
  CHECK(human.out.find("\"shelf\" is held by readers (2 on a majority) on 3 of 3 masters") != std::string::npos);
  CHECK(human.out.find("writers waiting: 1 on a majority") != std::string::npos);
  CHECK(human.out.find("2, 1 writer waiting") != std::string::npos);
  CHECK(human.out.find("~readers") == std::string::npos);

  // The stats tell the read locks' acquires apart; the writer's are a lock's.
  CHECK(a->stats().read_lock_acquire_rounds.ok == 1);
  CHECK(w->stats().read_lock_acquire_rounds.ok + w->stats().read_lock_acquire_rounds.held == 0);
  CHECK(w->stats().acquire_rounds.held >= 1);
  // The readers leave: the writer holds it, alone.
  CHECK(a->release(*r1)->released);
  CHECK(b->release(*r2)->released);
  auto won = writer.get();
  REQUIRE_MESSAGE(won.ok(), won.error().to_string());
  REQUIRE(on_every(g, [](const RedisServer& s) { return s.command({"EXISTS", key("shelf", "writers")}).integer == 0; }));
  auto after = a->status("shelf");
  REQUIRE(after.ok());
  CHECK(after->held);
  CHECK_FALSE(after->shared);
  CHECK(after->token == won->token);
  CHECK(after->readers == 0);
  CHECK(after->writers_waiting == 0);
  CHECK(w->release(*won)->released);
}

TEST_CASE("examples/rwlock_catalog: readers read together, a writer never with anyone") {
  RedisGroup group(5);
  TempDir tmp;
  Child example(program("REDLOCK_RWLOCK_EXAMPLE"), {"4", "2"}, {{"REDLOCK_CONFIG", config_file(tmp, group)}});
  ProcResult r = example.wait(std::chrono::seconds(60));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("a writer met another holder 0 times") != std::string::npos);
  CHECK(group.keys_everywhere("redlock:{catalog}:*") == 0);
}
