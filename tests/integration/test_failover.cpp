// test_failover.cpp — masters that are not what they were: a replica
// promoted behind the same address after its primary died with a lock it
// had not replicated, a primary resynced from its promoted replica and
// promoted again, a replica behind a member's address, and a data loss
// seen by a client whose max_ttl is smaller than another client's
// (docs/design.md, "Data loss", "Failover").
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>

#include "cli_harness.hpp"
#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// tune: the quarantine that matters here is the one for data loss: with
// max_ttl 3 s, a server that reports an uptime of 5 s (at least 4 s) is
// out of its restart quarantine for a client that meets it then.
void tune(Options& o) {
  o.quarantine = true;
  o.max_ttl = 3000ms;
  o.default_ttl = 3000ms;
  patient(o);
}

// quarantined_for: how long `client` still keeps master `i` out (0 ms: it counts).
milliseconds quarantined_for(Client& client, std::size_t i) {
  const Result<NodesReport> report = client.nodes();
  REQUIRE(report.ok());
  return report->nodes.at(i).quarantine_left;
}

// reaches_all: `client` has met every one of its masters.
bool reaches_all(Client& client) {
  return eventually([&] {
    const Result<NodesReport> report = client.nodes();
    return report.ok() && std::all_of(report->nodes.begin(), report->nodes.end(),
                                      [](const NodeHealth& h) { return h.reachable; });
  }, 5000ms);
}

// sees_quarantined: `client` reaches master `i` and keeps it out.
bool sees_quarantined(Client& client, std::size_t i) {
  return eventually([&] {
    const Result<NodesReport> report = client.nodes();
    return report.ok() && report->nodes.at(i).reachable && report->nodes.at(i).quarantined;
  }, 5000ms);
}

// point: make `link` name `target` (atomically: a new link renamed over it).
void point(const fs::path& link, const fs::path& target) {
  const fs::path next = link.string() + ".next";
  fs::remove(next);
  fs::create_symlink(target, next);
  fs::rename(next, link);
}

}  // namespace

TEST_CASE("a replica promoted behind the same address after its primary died with an unreplicated lock sits out the quarantine") {
  // Two plain masters, and a third reached by one name (a unix socket path,
  // a link) that leads first to a primary, then to its promoted replica —
  // as a managed service's DNS name does.
  RedisGroup plain(2);
  ServerOptions with_socket;
  with_socket.unix_socket = true;
  RedisServer primary(with_socket);
  RedisServer replica(with_socket);
  REQUIRE(replica.command({"REPLICAOF", "127.0.0.1", std::to_string(primary.port())}).type != REDIS_REPLY_ERROR);
  const cli_harness::TempDir dir;
  const fs::path name = dir.path / "master.sock";
  point(name, primary.unix_path());
  const std::vector<std::string> urls = {plain[0].url(), plain[1].url(), "unix://" + name.string()};

  auto holder = client_for(urls, tune);  // its first contact writes the markers
  REQUIRE(eventually([&] {
    return plain[0].uptime_seconds() >= 5 && plain[1].uptime_seconds() >= 5 && primary.uptime_seconds() >= 5 &&
           replica.uptime_seconds() >= 5;
  }, 15000ms));
  REQUIRE(ready_everywhere(*holder, 3));
  // The replica has the primary's marker (and its server's run id).
  REQUIRE(eventually([&] { return replica.command({"EXISTS", "redlock-marker"}).integer == 1; }, 5000ms));

  // The lock lands on plain[0] and the primary only (plain[1] is paused: a
  // bare majority), and never reaches the replica: its link is cut first
  // (it follows a primary that is not there, and keeps its data).
  REQUIRE(replica.command({"REPLICAOF", "127.0.0.1", std::to_string(free_port())}).type != REDIS_REPLY_ERROR);
  plain[1].pause();
  auto lock = holder->try_acquire("ledger", 3000ms);
  plain[1].resume();
  REQUIRE(lock.ok());
  // The failover: the primary dies, the replica is promoted, the name
  // leads to it.
  primary.kill();
  REQUIRE(replica.command({"REPLICAOF", "NO", "ONE"}).type != REDIS_REPLY_ERROR);
  point(name, replica.unix_path());
  CHECK(replica.command({"EXISTS", "redlock:{ledger}:lock"}).integer == 0);  // lost with the primary

  // A client that never met the primary: the promoted replica is another
  // server than the one that wrote its marker.
  auto other = client_for(urls, tune);
  REQUIRE(reaches_all(*other));
  CHECK(quarantined_for(*other, 0) == 0ms);
  CHECK(quarantined_for(*other, 1) == 0ms);
  CHECK(quarantined_for(*other, 2) > 2000ms);
  auto second = other->try_acquire("ledger", 3000ms);
  CHECK_FALSE(second.ok());  // without the check: held on plain[1] and the replica while `lock` is valid
  CHECK(lock->valid());
  // The holder's own client reconnects to the name and sees another run id.
  CHECK(sees_quarantined(*holder, 2));
}

TEST_CASE("a data loss seen by a client with a smaller max_ttl: it sits out the largest quarantine another master declares") {
  RedisGroup group(3);
  // A: max_ttl 20 s, holding a 15 s lock on every master.
  auto a = client_for(group, [](Options& o) {
    o.max_ttl = 20000ms;
    o.default_ttl = 15000ms;
  });
  REQUIRE(ready_everywhere(*a, 3));
  auto lock = a->try_acquire("report", 15000ms);
  REQUIRE(lock.ok());
  REQUIRE(eventually([&] { return holding(group, "report", lock->token) == 3; }));
  // Two masters lose everything, the marker (and A's declaration) too.
  group[0].command({"FLUSHALL"});
  group[1].command({"FLUSHALL"});
  // B: max_ttl 3 s, quarantine on, meets the masters now. The third still
  // declares A's 20.2 s: the two that lost their data sit out that long.
  auto b = client_for(group, [](Options& o) {
    o.quarantine = true;
    o.max_ttl = 3000ms;
    o.default_ttl = 3000ms;
    patient(o);
  });
  REQUIRE(reaches_all(*b));
  CHECK(quarantined_for(*b, 0) > 15000ms);
  CHECK(quarantined_for(*b, 1) > 15000ms);
  CHECK_FALSE(b->try_acquire("report", 3000ms).ok());
  // And B's own marker checks write the larger declaration back.
  REQUIRE(eventually([&] {
    const Reply r = group[0].command({"GET", "redlock-marker"});
    return r.type == REDIS_REPLY_STRING && r.str.find(" 20202 ") != std::string::npos;
  }, 5000ms));
}

TEST_CASE("a primary demoted, resynced from its promoted replica and promoted again (same run id, same marker) sits out the quarantine") {
  RedisGroup plain(2);
  ServerOptions quick_sync;  // 7.0 waits 5 s before a diskless sync by default
  quick_sync.extra_args = {"--repl-diskless-sync-delay", "0"};
  RedisServer primary(quick_sync);
  RedisServer replica(quick_sync);
  REQUIRE(follow(replica, primary));
  const std::vector<std::string> urls = {plain[0].url(), plain[1].url(), primary.url()};
  auto holder = client_for(urls, tune);  // its first contact writes the markers
  REQUIRE(eventually([&] {
    return plain[0].uptime_seconds() >= 5 && plain[1].uptime_seconds() >= 5 && primary.uptime_seconds() >= 5;
  }, 15000ms));
  REQUIRE(ready_everywhere(*holder, 3));
  // The replica has the primary's marker (with its run id and replid: one script wrote them).
  REQUIRE(eventually([&] { return replica.command({"EXISTS", "redlock-marker"}).integer == 1; }, 5000ms));
  const std::string run_id = info_field(primary, "server", "run_id");

  // The replica is promoted (a failover the holder's client does not see:
  // it goes on with the primary). The lock lands on plain[0] and the
  // primary only (plain[1] paused: a bare majority).
  REQUIRE(replica.command({"REPLICAOF", "NO", "ONE"}).type != REDIS_REPLY_ERROR);
  plain[1].pause();
  auto lock = holder->try_acquire("ledger", 3000ms);
  plain[1].resume();
  REQUIRE(lock.ok());
  // The SET that plain[1] got while paused runs when it resumes: take it
  // away, as if it had been lost on the way (the lock needs no more).
  eventually([&] { return plain[1].command({"EXISTS", "redlock:{ledger}:lock"}).integer == 1; }, 1000ms);
  plain[1].command({"DEL", "redlock:{ledger}:lock"});
  // The old primary is made a replica of the new one, takes its data (the
  // lock is gone, the marker is its own old one), and is promoted again.
  REQUIRE(follow(primary, replica));
  CHECK(primary.command({"EXISTS", "redlock:{ledger}:lock"}).integer == 0);
  REQUIRE(primary.command({"REPLICAOF", "NO", "ONE"}).type != REDIS_REPLY_ERROR);
  REQUIRE(info_field(primary, "server", "run_id") == run_id);  // the same process

  // A client that never met it: the marker's replid is another history.
  auto other = client_for(urls, tune);
  REQUIRE(reaches_all(*other));
  CHECK(quarantined_for(*other, 2) > 2000ms);
  auto second = other->try_acquire("ledger", 3000ms);
  CHECK_FALSE(second.ok());  // without the check: held on plain[1] and the old primary while `lock` is valid
  CHECK(lock->valid());
  CHECK(sees_quarantined(*holder, 2));
}

TEST_CASE("a replica behind a member's address never votes, even one that takes writes") {
  RedisGroup plain(2);
  RedisServer primary;
  ServerOptions writable;  // replica-read-only no: its writes are lost at the next sync
  writable.extra_args = {"--replica-read-only", "no"};
  RedisServer replica(writable);
  REQUIRE(follow(replica, primary));
  auto client = client_for({plain[0].url(), plain[1].url(), replica.url()}, patient);
  REQUIRE(eventually([&] {  // the replica met: a voter, or refused
    const Result<NodesReport> report = client->nodes();
    return report.ok() && report->nodes[0].reachable && (report->nodes[2].reachable || !report->nodes[2].error.empty());
  }, 5000ms));
  plain[1].pause();
  auto lock = client->try_acquire("ledger", 3000ms);  // without the check: plain[0] and the replica
  plain[1].resume();
  CHECK_FALSE(lock.ok());
  CHECK(replica.command({"EXISTS", "redlock:{ledger}:lock"}).integer == 0);
  const Result<NodesReport> report = client->nodes();
  REQUIRE(report.ok());
  CHECK(report->nodes[2].error.find("is a replica (role:slave)") != std::string::npos);
}
