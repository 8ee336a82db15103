// test_safety.cpp — the ways a hostile tester broke mutual exclusion
// (issue 12), each reproduced against real masters: a stale rollback, a
// key collision, data loss without a restart, eviction, one server counted
// twice, commands before a failed handshake, a quarantine that ended early,
// and a client closed during an acquire.
#include <doctest/doctest.h>

#include <sys/time.h>

#include <algorithm>
#include <thread>

#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
using Clock = redlock::BootClock;
using std::chrono::milliseconds;

namespace {

std::string lock_key(const std::string& resource) { return "redlock:{" + resource + "}:lock"; }

}  // namespace

TEST_CASE("a rollback that arrives late deletes nothing a later attempt took: every attempt has its own value") {
  // Attempt 1 fails (another token holds two of three masters for 300 ms)
  // and is rolled back — on master 2, the one that said yes; masters 0
  // and 1 answered "held" and get none. A later attempt wins. Every command
  // master 2 ran is in its slow log; the rollbacks are then delivered once
  // more, verbatim — as bytes from a dropped connection arrive after
  // everything sent on its replacement. With one value for all attempts
  // they deleted the winner's key (two holders); now each names only its
  // own attempt's value.
  RedisGroup group(3);
  for (std::size_t i = 0; i < group.size(); ++i) {
    group[i].command({"CONFIG", "SET", "slowlog-log-slower-than", "0"});
    group[i].command({"CONFIG", "SET", "slowlog-max-len", "10000"});
  }
  for (std::size_t i = 0; i < 2; ++i) group[i].command({"SET", lock_key("stale"), "intruder", "PX", "300"});
  auto client = client_for(group);
  auto lock = client->acquire("stale", {.ttl = 10s, .wait = 5s});
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  REQUIRE(lock->attempts >= 2);

  auto rollbacks_on = [&](std::size_t master) {
    std::vector<std::vector<std::string>> found;
    for (const Reply& entry : group[master].command({"SLOWLOG", "GET", "10000"}).elements) {
      if (entry.elements.size() < 4) continue;
      std::vector<std::string> argv;
      for (const Reply& a : entry.elements[3].elements) argv.push_back(a.str);
      // EVALSHA <release> 1 <key> <value> — a release with no channel: a rollback.
      if (argv.size() == 5 && argv[0] == "EVALSHA" && argv[3] == lock_key("stale")) found.push_back(argv);
    }
    return found;
  };
  // "held by another value" means nothing was written there: no rollback.
  CHECK(rollbacks_on(0).empty());
  CHECK(rollbacks_on(1).empty());
  const auto rollbacks = rollbacks_on(2);
  REQUIRE(rollbacks.size() >= 1);
  for (const auto& argv : rollbacks) {
    CHECK(argv[4] != lock->token);
    group[2].command(argv);  // the late bytes
  }
  for (std::size_t i = 0; i < group.size(); ++i) {
    CHECK(eventually([&] { return group[i].command({"GET", lock_key("stale")}).str == lock->token; }));
  }
  auto other = client_for(group);
  auto second = other->try_acquire("stale");
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == Errc::held);
}

TEST_CASE("no resource name can reach another resource's keys: the fence of `a` is not the lock of `a:fence`") {
  RedisGroup group(3);
  auto client = client_for(group);
  auto plain = client->acquire("a:fence", {.ttl = 20s, .token = "5"});
  REQUIRE_MESSAGE(plain.ok(), plain.error().to_string());
  auto fenced = client->acquire("a", {.ttl = 20s, .fence = true});
  REQUIRE_MESSAGE(fenced.ok(), fenced.error().to_string());
  CHECK(fenced->fence == 1);  // not "5 + 1": no lock value was read as a counter
  for (std::size_t i = 0; i < group.size(); ++i) {  // the last master may answer after the majority
    CHECK(eventually([&] { return group[i].command({"GET", "redlock:{a}:fence"}).str == "1"; }));
    CHECK(group[i].command({"GET", lock_key("a:fence")}).str == "5");
    CHECK(group[i].command({"PTTL", lock_key("a:fence")}).integer > 10000);
  }
  CHECK(client->release(*plain)->released);
  CHECK(client->release(*fenced)->released);
}

TEST_CASE("a master that lost its data (FLUSHALL, no restart) does not vote until its lost locks expired") {
  RedisGroup group(3);
  const auto tune = [](Options& o) {
    o.quarantine = true;
    o.max_ttl = 1000ms;
    o.default_ttl = 1000ms;
  };
  auto holder = client_for(group, tune);
  auto other = client_for(group, tune);
  // Fresh masters: first the uptime and first-contact quarantine pass.
  REQUIRE(eventually([&] { return holder->nodes()->can_lock() && other->nodes()->can_lock(); }, 10s));
  auto lock = holder->acquire("flushed", {.ttl = 1000ms});
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  // Two of three masters forget the lock; the other client is connected to
  // them all along, with no reconnect to notice anything.
  group[0].command({"FLUSHALL"});
  group[1].command({"FLUSHALL"});
  int refused = 0;
  while (Clock::now() < lock->validity_deadline) {
    auto attempt = other->try_acquire("flushed", 1000ms);
    REQUIRE_FALSE_MESSAGE(attempt.ok(), "a second holder while the first lock is valid");
    ++refused;
  }
  CHECK(refused > 0);
  auto report = other->nodes();
  REQUIRE(report.ok());
  CHECK(report->nodes[0].quarantined);
  CHECK(report->nodes[1].quarantined);
}

TEST_CASE("a master whose eviction policy may drop lock keys does not count, and says why") {
  RedisGroup group(3);
  group[0].command({"CONFIG", "SET", "maxmemory", "100mb"});
  group[0].command({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
  auto client = client_for(group);
  REQUIRE(client->try_acquire("warm-up").ok());
  // With master 1 gone, master 0 would make the majority: it must not.
  group[1].kill();
  auto lock = client->try_acquire("evictable");
  REQUIRE_FALSE(lock.ok());
  CHECK(lock.error().nodes[0].outcome == Outcome::quarantined);
  CHECK(lock.error().nodes[0].error.find("maxmemory-policy allkeys-lru") != std::string::npos);
  auto report = client->nodes();
  REQUIRE(report.ok());
  CHECK(report->nodes[0].quarantined);
  CHECK(report->nodes[0].excluded.find("may evict lock keys") != std::string::npos);
  CHECK(report->usable() == 1);

  auto accepting = client_for(group, [](Options& o) { o.accept_eviction = true; });
  auto taken = accepting->try_acquire("evictable-accepted");
  REQUIRE_MESSAGE(taken.ok(), taken.error().to_string());
  CHECK(taken->nodes[0].outcome == Outcome::ok);
}

TEST_CASE("one server, one vote: two spellings of one master are one master") {
  RedisGroup group(3);
  // 127.0.0.1 and localhost reach the same server: a client over these
  // three "masters" has two servers, and the second spelling never counts.
  const std::string same = "redis://localhost:" + std::to_string(group[0].port());
  auto client = client_for({group.urls()[0], same, group.urls()[1]});
  REQUIRE(eventually([&] { return client->nodes()->nodes[1].excluded.size() > 0; }));
  auto lock = client->try_acquire("twice");
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  CHECK(lock->nodes[1].outcome == Outcome::error);  // nothing is sent to it but releases
  CHECK(lock->nodes[1].error.find("the same server as 127.0.0.1:" + std::to_string(group[0].port())) !=
        std::string::npos);
  // With node 1 (master 2) gone, one server would be a "majority" of two
  // votes: refused.
  group[1].kill();
  auto second = client->try_acquire("twice-2");
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == Errc::no_quorum);
}

TEST_CASE("nothing of an operation reaches a master before its handshake succeeded") {
  RedisServer server;
  const std::string base = "127.0.0.1:" + std::to_string(server.port());
  std::string url;
  std::string why;
  SUBCASE("AUTH refused (the server has no password)") {
    url = "redis://:not-needed@" + base;
    why = "AUTH";
  }
  SUBCASE("a user that may not run INFO") {
    server.command({"ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info"});
    url = "redis://noinfo:pw@" + base;
    why = "INFO";
  }
  SUBCASE("a db number out of range") {
    url = "redis://" + base + "/99";
    why = "DB index is out of range";
  }
  {
    auto client = client_for({url});
    auto lock = client->try_acquire("early");
    REQUIRE_FALSE(lock.ok());
    CHECK(lock.error().nodes[0].outcome == Outcome::error);
    CHECK_MESSAGE(lock.error().to_string().find(why) != std::string::npos, lock.error().to_string());
  }  // closing the client writes whatever was still queued
  CHECK(server.keys("redlock:*").empty());
}

TEST_CASE("the restart quarantine never ends early: an uptime of U s counts as U - 1") {
  // Redis's uptime_in_seconds is a difference of whole wall-clock seconds:
  // started 0.1 s before a second turns, a master reads 1 at 0.1 s of true
  // uptime. That reading once shortened the quarantine by up to a second.
  // Waits for wall-clock moments (not events): the server starts at about
  // .95 of a second, the client connects just after the second turned.
  const auto wall_ms = [] {
    timeval tv{};
    gettimeofday(&tv, nullptr);
    return tv.tv_usec / 1000;
  };
  std::this_thread::sleep_for(std::chrono::milliseconds{(1950 - wall_ms()) % 1000});
  const auto started = Clock::now();
  RedisServer server;
  std::this_thread::sleep_for(std::chrono::milliseconds{(1030 - wall_ms()) % 1000});
  auto client = client_for({server.url()}, [](Options& o) {
    o.quarantine = true;
    o.max_ttl = 3000ms;
    o.default_ttl = 1000ms;
  });
  const auto period = 3000ms + 30ms + 2ms;  // max_ttl + ceil(max_ttl · 1 %) + 2 ms
  REQUIRE(eventually([&] { return client->nodes()->nodes[0].uptime.count() >= 0; }));
  const auto before = Clock::now();
  auto report = client->nodes();
  REQUIRE(report.ok());
  MESSAGE("uptime read " << report->nodes[0].uptime.count() << " s at "
                         << std::chrono::duration_cast<std::chrono::milliseconds>(before - started).count()
                         << " ms after the start");
  WARN(report->nodes[0].uptime.count() == 1);  // the boundary case was hit
  CHECK(report->nodes[0].quarantined);
  CHECK(before + report->nodes[0].quarantine_left >= started + period);
}

TEST_CASE("closing a client during an acquire rolls back what the attempt took") {
  // Two of five masters run the SET at once; three are paused, so the round
  // is undecided (2 yes, 3 unanswered) when the client closes.
  RedisGroup group(5);
  for (std::size_t i = 2; i < 5; ++i) group[i].pause();
  {
    auto client = client_for(group, [](Options& o) {
      o.node_timeout = 2000ms;
      o.stall_timeout = 10000ms;
    });
    auto pending = client->acquire_async("closing", {.ttl = 30s});
    REQUIRE(eventually([&] {
      return group[0].command({"EXISTS", lock_key("closing")}).integer == 1 &&
             group[1].command({"EXISTS", lock_key("closing")}).integer == 1;
    }));
  }  // the client closes here, the acquire still on its way
  for (std::size_t i = 2; i < 5; ++i) group[i].resume();
  // Rolled back everywhere: on the paused masters the rollback was queued
  // behind the SET, so both run when they resume.
  CHECK(eventually([&] { return group.keys_everywhere("redlock:*") == 0; }, 5s));
}

TEST_CASE("clients with different max_ttl do not shorten each other's quarantine") {
  // A holds locks of up to 10 s; B's own max_ttl is 1 s. A master that
  // just restarted may have lost one of A's locks: B must keep it out for
  // A's period, which A declared in the master's marker.
  RedisServer server;
  const auto quarantined = [&](milliseconds max_ttl) {
    return client_for({server.url()}, [max_ttl](Options& o) {
      o.quarantine = true;
      o.max_ttl = max_ttl;
      o.default_ttl = std::min(max_ttl, milliseconds{1000});
    });
  };
  auto a = quarantined(10000ms);
  REQUIRE(eventually([&] { return a->nodes()->nodes[0].uptime.count() >= 0; }));
  auto b = quarantined(1000ms);
  REQUIRE(eventually([&] { return b->nodes()->nodes[0].uptime.count() >= 0; }));
  const auto left = b->nodes()->nodes[0].quarantine_left;
  CHECK_MESSAGE(left > 5000ms, "B's quarantine: " << left.count() << " ms");
  // B's own period would have been 1.012 s.
}
