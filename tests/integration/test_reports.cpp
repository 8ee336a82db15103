// test_reports.cpp — errors say what happened (issue 15), against real
// masters: a release whose DEL ran is reported released even when its
// PUBLISH is refused; `status` shows a master whose lock key is of
// another type as wrong_type, not unreachable; an acquire says WRONGTYPE on
// its first attempt, not "held by another token".
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "cli_harness.hpp"
#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace std::chrono_literals;
namespace harness = redlock::test::cli_harness;

namespace {

// urls_as gives the group's URLs with `user:password@`.
std::vector<std::string> urls_as(RedisGroup& group, const std::string& user_password) {
  std::vector<std::string> urls;
  for (std::size_t i = 0; i < group.size(); ++i) urls.push_back("redis://" + user_password + "@" + group[i].address());
  return urls;
}

// a_list_at makes the lock key of `resource` a list on master `i`.
void a_list_at(RedisGroup& group, std::size_t i, const std::string& resource) {
  REQUIRE(group[i].command({"RPUSH", "redlock:{" + resource + "}:lock", "not-a-lock"}).integer == 1);
}

const std::string kWrongType = "WRONGTYPE: the key redlock:{typed}:lock holds a list, not a lock";

}  // namespace

TEST_CASE("a release whose DEL ran but whose PUBLISH an ACL refuses is reported released") {
  RedisGroup group(3);
  for (std::size_t i = 0; i < group.size(); ++i)
    REQUIRE(group[i].command({"ACL", "SETUSER", "nopub", "on", ">pw", "~*", "&*", "+@all", "-publish"}).str == "OK");
  const std::vector<std::string> urls = urls_as(group, "nopub:pw");
  auto client = client_for(urls);

  // One resource: the library's release.
  auto lock = client->acquire("quiet", {.ttl = 10000ms});
  REQUIRE_MESSAGE(lock.ok(), lock.error().to_string());
  auto released = client->release(*lock);
  REQUIRE(released.ok());
  CHECK(released->released);
  // Decided at the majority: the third master may answer a moment later.
  CHECK(released->released_nodes >= 2);
  for (const NodeOutcome& n : released->nodes) CHECK((n.outcome == Outcome::ok || n.outcome == Outcome::pending));
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{quiet}:lock") == 0; }));

  // Several resources at once: the multi-resource release script.
  auto many = client->acquire_many({"quiet-a", "quiet-b"}, {.ttl = 10000ms});
  REQUIRE_MESSAGE(many.ok(), many.error().to_string());
  auto released_many = client->release_many(*many);
  REQUIRE(released_many.ok());
  CHECK(released_many->released);
  CHECK(released_many->released_nodes >= 2);
  CHECK(eventually([&] { return group.keys_everywhere("redlock:{quiet-*}:lock") == 0; }));

  // The command line says the same: exit 0, "released": true (it waits
  // one node timeout — PatientConfig's 1 s — for the last master: all three count).
  const harness::PatientConfig patient_cli(urls);
  auto again = client->acquire("quiet-cli", {.ttl = 10000ms});
  REQUIRE_MESSAGE(again.ok(), again.error().to_string());
  auto r = harness::cli(patient_cli.op({"release", "quiet-cli", again->token}));
  CHECK(r.exit_code == 0);
  const auto out = harness::json_of(r);
  CHECK(out["released"] == true);
  CHECK(out["released_nodes"] == 3);
  CHECK(group.keys_everywhere("redlock:{quiet-cli}:lock") == 0);
}

TEST_CASE("status shows a master whose lock key holds a list as wrong_type, not unreachable") {
  RedisGroup group(3);
  a_list_at(group, 0, "typed");
  const harness::PatientConfig patient_cli(group);  // all three must answer
  auto client = client_for(group, patient);
  auto st = client->status("typed");
  REQUIRE(st.ok());
  CHECK(st->nodes[0].state == NodeHolding::State::wrong_type);
  CHECK(st->nodes[0].error == kWrongType);
  CHECK(st->nodes[1].state == NodeHolding::State::free);
  CHECK(st->free_nodes == 2);
  CHECK_FALSE(st->held);

  auto r = harness::cli(patient_cli.op({"status", "typed", "--json"}));
  CHECK(r.exit_code == 0);  // all three answered
  const auto out = harness::json_of(r);
  CHECK(out["answered"] == 3);
  CHECK(out["nodes"][0]["state"] == "wrong_type");
  CHECK(out["nodes"][0]["error"] == kWrongType);
  CHECK(out["nodes"][0]["fence"].is_null());
  CHECK(out["nodes"][1]["state"] == "free");

  auto human = harness::cli(patient_cli.op({"status", "typed", "--human"}));
  CHECK(human.exit_code == 0);
  CHECK(human.out.find("wrong_type") != std::string::npos);
  CHECK(human.out.find(kWrongType) != std::string::npos);
  CHECK(human.out.find("unreachable") == std::string::npos);

  // A user who may not run TYPE still gets the key named.
  for (std::size_t i = 0; i < group.size(); ++i)
    REQUIRE(group[i].command({"ACL", "SETUSER", "notype", "on", ">pw", "~*", "&*", "+@all", "-type"}).str == "OK");
  auto blind = client_for(urls_as(group, "notype:pw"), patient)->status("typed");
  REQUIRE(blind.ok());
  CHECK(blind->nodes[0].state == NodeHolding::State::wrong_type);
  CHECK(blind->nodes[0].error == "WRONGTYPE: the key redlock:{typed}:lock holds a value of another type, not a lock");
}

TEST_CASE("an acquire on a lock key of another type says WRONGTYPE from its first attempt") {
  RedisGroup group(3);
  for (std::size_t i = 0; i < group.size(); ++i) a_list_at(group, i, "typed");
  auto client = client_for(group, [](Options& o) { o.node_outcomes = true; });
  // Every master runs Redis 7 or later here: the acquire goes out as
  // `SET … NX PX ttl GET`, whose answer tells a list from another holder.
  REQUIRE(group[0].command({"INFO", "server"}).str.find("redis_version:7") != std::string::npos);
  auto lock = client->acquire("typed", {.ttl = 10000ms});
  REQUIRE_FALSE(lock.ok());
  const Error& e = lock.error();
  CHECK(e.attempts == 1);
  REQUIRE(e.nodes.size() == 3);
  // Decided once a majority could no longer say yes: the last may be pending.
  int wrongtype = 0;
  for (const NodeOutcome& n : e.nodes) {
    CHECK(n.outcome != Outcome::held);
    if (n.outcome != Outcome::error) continue;
    CHECK(n.error.starts_with("WRONGTYPE"));
    CHECK(n.error.find("redlock status") != std::string::npos);
    ++wrongtype;
  }
  CHECK(wrongtype >= 2);
  CHECK(e.message.find("held by another") == std::string::npos);
  CHECK(e.message.find("WRONGTYPE") != std::string::npos);

  // One master in three with a list: the lock is taken on the other two.
  // Each outcome is the one its master gave, or pending when the round was
  // decided before that answer.
  RedisGroup mixed(3);
  a_list_at(mixed, 2, "typed");
  const auto tune = [](Options& o) { o.node_outcomes = true; };
  auto taken = client_for(mixed, tune)->acquire("typed", {.ttl = 10000ms});
  REQUIRE_MESSAGE(taken.ok(), taken.error().to_string());
  const auto is = [](const NodeOutcome& n, Outcome o) { return n.outcome == o || n.outcome == Outcome::pending; };
  CHECK(is(taken->nodes[0], Outcome::ok));
  CHECK(is(taken->nodes[1], Outcome::ok));
  CHECK(is(taken->nodes[2], Outcome::error));
  // A second client, while it is held: "held", as before (the GET form
  // answers the holder's value, read as another's).
  auto second = client_for(mixed, tune)->acquire("typed", {.ttl = 10000ms});
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().code == Errc::held);
  CHECK(is(second.error().nodes[0], Outcome::held));
  CHECK(is(second.error().nodes[1], Outcome::held));
  CHECK(is(second.error().nodes[2], Outcome::error));
}
