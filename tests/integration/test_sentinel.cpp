// test_sentinel.cpp — a member behind Sentinel (redis+sentinel://s1,s2/NAME):
// the client locks through the primary the sentinels name, follows a
// failover they announce, and judges every new primary before it counts
// (docs/design.md §5, "Sentinel members"). Real servers and sentinels on
// loopback (support/redis_sentinel.hpp).
#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <thread>

#include "cli_harness.hpp"
#include "helpers.hpp"
#include "redis_sentinel.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;

namespace {

// primary_of: the primary the client's sentinel member (index i) follows
// now, "" when none ("127.0.0.1:port").
std::string primary_of(Client& client, std::size_t i) {
  const Result<NodesReport> report = client.nodes();
  return report.ok() && report->nodes.size() > i ? report->nodes[i].primary : std::string();
}

bool usable(Client& client, std::size_t i) {
  const Result<NodesReport> report = client.nodes();
  return report.ok() && report->nodes.size() > i && report->nodes[i].reachable && !report->nodes[i].quarantined;
}

// quarantined_now: member i is up and sits out its quarantine.
bool quarantined_now(Client& client, std::size_t i) {
  const Result<NodesReport> report = client.nodes();
  return report.ok() && report->nodes.size() > i && report->nodes[i].reachable && report->nodes[i].quarantined;
}

std::string lock_key(const std::string& resource) { return "redlock:{" + resource + "}:lock"; }

}  // namespace

TEST_CASE("a sentinel member locks through the named primary and follows a failover; the new primary is judged before it counts") {
  SentinelBed bed;
  RedisGroup plain(2);
  const auto tune = [](Options& o) {
    o.quarantine = true;
    o.max_ttl = 3000ms;
    o.default_ttl = 3000ms;
    patient(o);
  };
  auto client = client_for({plain[0].url(), plain[1].url(), bed.url()}, tune);
  // Started moments ago, every server (and the marker this client writes)
  // would rightly sit out the quarantine (max_ttl plus drift): wait it out.
  REQUIRE(eventually([&] { return usable(*client, 0) && usable(*client, 1) && usable(*client, 2); }, 15000ms));
  CHECK(primary_of(*client, 2) == bed.server(0).address());

  auto lock = client->try_acquire("ledger", 3000ms);
  REQUIRE_MESSAGE(lock.ok(), (lock.ok() ? std::string() : lock.error().to_string()));
  // (The round may be decided by the lone masters before the sentinel
  // member's checks answer: its SET landed all the same.)
  CHECK(eventually([&] { return bed.server(0).command({"GET", lock_key("ledger")}).str == lock->token; }));
  // no_second_holder: a client that never met the old primary does not
  // count the new one (its marker was written by another server): while
  // the lock is valid nobody else takes it, and the new primary never
  // votes yes for it.
  const auto no_second_holder = [&](const Lock& held) {
    auto other = client_for({plain[0].url(), plain[1].url(), bed.url()}, tune);
    REQUIRE(eventually([&] {
      const Result<NodesReport> report = other->nodes();
      return report.ok() && report->nodes[0].reachable && report->nodes[1].reachable && report->nodes[2].reachable;
    }, 5000ms));
    const bool was_valid = held.valid();
    auto second = other->try_acquire("ledger", 3000ms);
    if (was_valid) CHECK_FALSE(second.ok());
    const std::vector<NodeOutcome>& nodes = second.ok() ? second->nodes : second.error().nodes;
    REQUIRE(nodes.size() == 3);
    CHECK(nodes[2].outcome != Outcome::ok);  // held (the key was replicated), else quarantined
  };

  SUBCASE("a failover the sentinels announce: the client follows it, and quarantines the server it finds there") {
    REQUIRE(bed.fail_over() == 1);
    REQUIRE(eventually([&] { return primary_of(*client, 2) == bed.server(1).address(); }, 5000ms));
    // Another server (its run id) with another history: it may lack locks
    // written after its last sync, so it sits out its quarantine.
    CHECK(eventually([&] { return quarantined_now(*client, 2); }, 5000ms));
    no_second_holder(*lock);
    // The holder keeps it on the majority that did not move.
    if (lock->valid()) CHECK(client->extend(*lock, 3000ms).ok());
  }
  SUBCASE("the primary killed: the sentinels promote the replica and the client follows") {
    REQUIRE(bed.kill_primary() == 1);
    REQUIRE(eventually([&] { return primary_of(*client, 2) == bed.server(1).address(); }, 10000ms));
    CHECK(eventually([&] { return quarantined_now(*client, 2); }, 5000ms));
    no_second_holder(*lock);
  }
}

TEST_CASE("sentinels are asked in turn: one down or not monitoring the name is skipped, and none says why") {
  SentinelOptions opts;
  opts.sentinels = 2;
  SentinelBed bed(opts);
  RedisServer lone;
  SUBCASE("the first sentinel down: the second names the primary") {
    bed.kill_sentinel(0);
    auto client = client_for({bed.url()});
    REQUIRE(eventually([&] { return usable(*client, 0); }, 5000ms));
    CHECK(primary_of(*client, 0) == bed.server(0).address());
    CHECK(client->try_acquire("ledger", 3000ms).ok());
    CHECK(bed.server(0).command({"EXISTS", lock_key("ledger")}).integer == 1);
  }
  SUBCASE("a name no sentinel monitors: the member is down, and its error says so") {
    std::string url = bed.url();
    url = url.substr(0, url.rfind('/')) + "/nosuch";
    auto client = client_for({lone.url(), url});
    std::string error;
    CHECK(eventually([&] {
      const Result<NodesReport> report = client->nodes();
      error = report.ok() ? report->nodes[1].error : std::string();
      return error.find("does not monitor that name") != std::string::npos;
    }, 5000ms));
    CAPTURE(error);
    CHECK(error.starts_with("no primary named by the sentinels within "));
    CHECK(primary_of(*client, 1).empty());
  }
}

TEST_CASE("a waiter on a sentinel member is woken by a release on the primary it follows") {
  SentinelBed bed;
  auto holder = client_for({bed.url()});
  auto waiter = client_for({bed.url()}, no_polling);
  REQUIRE(eventually([&] { return usable(*holder, 0) && usable(*waiter, 0); }, 5000ms));
  auto lock = holder->acquire("ledger", {.ttl = 60000ms});
  REQUIRE(lock.ok());
  std::optional<Result<Lock>> got;
  std::thread t([&] { got.emplace(waiter->acquire("ledger", {.ttl = 60000ms, .wait = 10000ms})); });
  REQUIRE(eventually([&] { return subscribers(bed.server(0), "redlock:{ledger}:released") >= 1; }, 5000ms));
  REQUIRE(holder->release(*lock).ok());
  t.join();
  REQUIRE(got.has_value());
  CHECK(got->ok());
}

TEST_CASE("cli: a sentinel member in --nodes: a first round counts it, and `nodes` names the primary it follows") {
  using namespace redlock::test::cli_harness;
  SentinelBed bed;
  RedisServer lone;
  // Two members: the round needs both votes, so a process's first round
  // (its member's primary not yet asked for) must wait for the answer.
  const std::string nodes = lone.url() + "," + bed.url();
  auto acquired = cli({"--no-quarantine", "--json", "acquire", "nightly", "--ttl", "30s", "--nodes", nodes});
  REQUIRE(acquired.exit_code == 0);
  const json lock = json_of(acquired);
  CHECK(bed.server(0).command({"GET", lock_key("nightly")}).str == lock["token"].get<std::string>());
  auto report = cli({"--no-quarantine", "--json", "nodes", "--nodes", nodes});
  CHECK(report.exit_code == 0);
  const json j = json_of(report);
  REQUIRE(j["nodes"].size() == 2);
  CHECK(j["nodes"][1]["address"] == bed.url());
  CHECK(j["nodes"][1]["primary"] == bed.server(0).address());
  CHECK(j["nodes"][1]["reachable"] == true);
  CHECK(j["nodes"][0]["primary"].is_null());
  auto human = cli({"--no-quarantine", "nodes", "--nodes", nodes});
  CHECK(human.out.find(bed.url() + " -> " + bed.server(0).address()) != std::string::npos);
}
