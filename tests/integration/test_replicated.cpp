// test_replicated.cpp — a member that is a primary with replicas behind one
// name (NodeAddress::replicated, wait_replicas): a write counts only once
// WAIT says enough replicas have it, and a primary that took another's data
// while connected is seen at the next acquire (docs/design.md §5,
// "Replicated members").
#include <doctest/doctest.h>

#include <string>

#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

// quick_sync: 7.0 waits 5 s before a diskless sync by default.
ServerOptions quick_sync() {
  ServerOptions o;
  o.extra_args = {"--repl-diskless-sync-delay", "0"};
  return o;
}

// member_error: what a round's outcome says of master `i`.
std::string member_error(const Error& error, std::size_t i) {
  return error.nodes.size() > i ? error.nodes[i].error : std::string("(no outcome)");
}

}  // namespace

TEST_CASE("wait_replicas=1: a write counts once a replica has it, not before") {
  // Two members, so the replicated one's vote is always needed.
  RedisServer plain;
  RedisServer primary(quick_sync());
  RedisServer replica(quick_sync());
  REQUIRE(follow(replica, primary));
  auto client = client_for({plain.url(), primary.url() + "?wait_replicas=1&wait_timeout=200"}, patient);
  REQUIRE(ready_everywhere(*client, 2));
  const Result<NodesReport> report = client->nodes();
  REQUIRE(report.ok());
  CHECK(report->nodes[0].replicas == 0);
  CHECK(report->nodes[1].replicas == 1);

  auto lock = client->try_acquire("ledger", 5000ms);
  REQUIRE_MESSAGE(lock.ok(), (lock.ok() ? std::string() : lock.error().to_string()));
  // WAIT answered once the replica had applied the SET: it is there now.
  CHECK(replica.command({"GET", "redlock:{ledger}:lock"}).str == lock->token);

  SUBCASE("a stopped replica: neither an acquire nor an extension counts on that member") {
    replica.pause();
    auto other = client->try_acquire("journal", 5000ms);
    REQUIRE_FALSE(other.ok());  // without WAIT: held on both members
    CHECK(member_error(other.error(), 1).find("written on 0 of 1 replicas within 200 ms") != std::string::npos);
    auto longer = client->extend(*lock, 5000ms);
    CHECK_FALSE(longer.ok());
    replica.resume();
  }
  SUBCASE("a running replica: releases are not waited for, and the next acquire counts") {
    REQUIRE(client->release(*lock).ok());
    CHECK(client->try_acquire("ledger", 5000ms).ok());
  }
}

TEST_CASE("wait_replicas=all: no replica connected, no vote; once one is, its WAIT counts") {
  RedisServer plain;
  RedisServer primary(quick_sync());
  auto client = client_for({plain.url(), primary.url() + "?wait_replicas=all&wait_timeout=200"}, patient);
  REQUIRE(ready_everywhere(*client, 2));
  auto alone = client->try_acquire("ledger", 5000ms);
  REQUIRE_FALSE(alone.ok());
  CHECK(member_error(alone.error(), 1).find("no replica connected") != std::string::npos);
  // A replica attaches: the client learns it from INFO behind its writes.
  RedisServer replica(quick_sync());
  REQUIRE(follow(replica, primary));
  CHECK(eventually([&] { return client->try_acquire("ledger", 5000ms).ok(); }, 5000ms));
  CHECK(replica.command({"EXISTS", "redlock:{ledger}:lock"}).integer == 1);
}

TEST_CASE("replicated=1: a primary resynced from another and promoted again is quarantined at the next acquire, connection kept") {
  RedisGroup plain(2);
  RedisServer primary(quick_sync());
  RedisServer replica(quick_sync());
  REQUIRE(follow(replica, primary));
  const auto tune = [](Options& o) {
    o.quarantine = true;
    o.max_ttl = 3000ms;
    o.default_ttl = 3000ms;
    o.data_check_interval = 60000ms;  // no marker check meets the primary while it is a replica
    patient(o);
  };
  auto client = client_for({plain[0].url(), plain[1].url(), primary.url() + "?replicated=1"}, tune);
  REQUIRE(eventually([&] {
    return plain[0].uptime_seconds() >= 5 && plain[1].uptime_seconds() >= 5 && primary.uptime_seconds() >= 5;
  }, 15000ms));
  REQUIRE(ready_everywhere(*client, 3));
  REQUIRE(client->try_acquire("warmup", 3000ms).ok());  // the replication check has a history to compare with

  // The replica is promoted, the primary follows it and is promoted again:
  // the same process (its connections kept), another history.
  REQUIRE(replica.command({"REPLICAOF", "NO", "ONE"}).type != REDIS_REPLY_ERROR);
  REQUIRE(follow(primary, replica));
  REQUIRE(primary.command({"REPLICAOF", "NO", "ONE"}).type != REDIS_REPLY_ERROR);

  plain[1].pause();
  auto lock = client->try_acquire("ledger", 3000ms);
  plain[1].resume();
  CHECK_FALSE(lock.ok());  // plain[0] and a primary that may have lost locks
  const Result<NodesReport> report = client->nodes();
  REQUIRE(report.ok());
  CHECK(report->nodes[2].quarantined);
}
