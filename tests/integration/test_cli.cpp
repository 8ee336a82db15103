// test_cli.cpp — the `redlock` command and the counter_worker example, run as
// real processes (paths from REDLOCK_CLI / REDLOCK_COUNTER_WORKER, set by
// meson) against real redis-servers on loopback.
//
// The masters of each test are freshly started, so they are inside the
// library's restart quarantine (uptime below max_ttl + drift); every
// invocation that should take a lock passes --no-quarantine, and one test
// shows that without it the fresh masters do not count.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_harness.hpp"
#include "redis_server.hpp"

namespace {

using namespace redlock::test::cli_harness;
using redlock::test::RedisGroup;
using redlock::test::RedisServer;


// value_on returns the lock key's value on server s ("" when the key is absent).
std::string value_on(RedisServer& s, const std::string& resource) {
  auto reply = s.command({"GET", key_of(resource)});
  return reply.type == REDIS_REPLY_STRING ? reply.str : std::string();
}

long long pttl_on(RedisServer& s, const std::string& resource) {
  return s.command({"PTTL", key_of(resource)}).integer;
}

// A round is decided by the first majority, and a CLI process exits right
// after: the command to a straggler may never have been sent. So the checks
// on the servers below are about the masters that hold the token (at least
// a majority) or that the JSON says answered ok — not blindly all of them.

// holders returns the servers of g whose lock key holds `token`.
std::vector<RedisServer*> holders(RedisGroup& g, const std::string& resource, const std::string& token) {
  std::vector<RedisServer*> out;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (value_on(g[i], resource) == token) out.push_back(&g[i]);
  return out;
}

// addresses_of lists the servers' addresses.
std::set<std::string> addresses_of(const std::vector<RedisServer*>& servers) {
  std::set<std::string> out;
  for (const RedisServer* s : servers) out.insert(s->address());
  return out;
}

// outcomes_split checks a round in which the masters in `a` should answer
// `want_a` and the others `want_b` ("pending" is always allowed: the round
// may have been decided without them), with at least `at_least` `want_a`.
void outcomes_split(const json& j, const std::set<std::string>& a, const std::string& want_a,
                    const std::string& want_b, std::size_t at_least) {
  REQUIRE(j["nodes"].is_array());
  std::size_t n_want = 0;
  for (const auto& n : j["nodes"]) {
    CAPTURE(n.dump());
    const std::string& want = a.count(n["address"].get<std::string>()) > 0 ? want_a : want_b;
    CHECK((n["outcome"] == want || n["outcome"] == "pending"));
    n_want += n["outcome"] == want_a;
  }
  CHECK(n_want >= at_least);
}

// answered_ok returns the servers of g that the JSON reports as "ok".
std::vector<RedisServer*> answered_ok(RedisGroup& g, const json& j) {
  std::vector<RedisServer*> out;
  for (const auto& n : j["nodes"])
    for (std::size_t i = 0; i < g.size(); ++i)
      if (n["outcome"] == "ok" && n["address"] == g[i].address()) out.push_back(&g[i]);
  return out;
}

std::set<std::string> addresses(RedisGroup& g) {
  std::set<std::string> out;
  for (std::size_t i = 0; i < g.size(); ++i) out.insert(g[i].address());
  return out;
}

// Rounds are decided as soon as the result is certain, so a node whose
// answer had not come in yet is reported "pending". outcomes_are checks that
// every node's outcome is `want` or "pending" and that at least `at_least`
// nodes said `want`.
void outcomes_are(const json& j, const std::string& want, std::size_t at_least) {
  REQUIRE(j["nodes"].is_array());
  std::size_t n_want = 0;
  for (const auto& n : j["nodes"]) {
    CAPTURE(n.dump());
    CHECK((n["outcome"] == want || n["outcome"] == "pending"));
    n_want += n["outcome"] == want;
  }
  CHECK(n_want >= at_least);
}

// is_utf8_name: the name is valid UTF-8 (its JSON then has no _hex field).
bool is_utf8_name(const std::string& s) {
  return json(s).dump(-1, ' ', false, json::error_handler_t::ignore) == json(s).dump(-1, ' ', false, json::error_handler_t::replace);
}

// is_drawn_token: 22 base64url characters, what the library draws (128 bits).
bool is_drawn_token(const std::string& s) {
  return s.size() == 22 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
         });
}

// acquire_ok takes `resource` through the CLI and returns its JSON.
json acquire_ok(RedisGroup& g, const std::string& resource, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"acquire", resource};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = cli(op(args, g));
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  json j = json_of(r);
  REQUIRE(j["acquired"] == true);
  return j;
}

}  // namespace

TEST_CASE("cli: acquire succeeds and prints every field with its type") {
  RedisGroup g(3);
  auto r = cli(op({"acquire", "report", "--ttl", "5000ms"}, g));
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  json j = json_of(r);

  CHECK(j["acquired"] == true);
  CHECK(j["resource"] == "report");
  REQUIRE(j["token"].is_string());
  // 22 base64url characters, then '~' and the owner (host:pid).
  const std::string token = j["token"].get<std::string>();
  CHECK(is_drawn_token(token.substr(0, token.find('~'))));
  REQUIRE(j["owner"].is_object());
  CHECK(token.ends_with("~" + j["owner"]["host"].get<std::string>() + ":" +
                        std::to_string(j["owner"]["pid"].get<std::uint64_t>())));
  REQUIRE(j["validity_ms"].is_number_integer());
  CHECK(j["validity_ms"].get<long long>() > 0);
  CHECK(j["validity_ms"].get<long long>() <= 5000);
  REQUIRE(j["elapsed_us"].is_number_integer());
  CHECK(j["elapsed_us"].get<long long>() >= 0);
  REQUIRE(j["attempts"].is_number_integer());
  CHECK(j["attempts"].get<int>() >= 1);
  CHECK_FALSE(j.contains("error"));
  CHECK_FALSE(j.contains("code"));

  REQUIRE(j["nodes"].is_array());
  REQUIRE(j["nodes"].size() == 3);
  std::set<std::string> seen;
  for (const auto& n : j["nodes"]) {
    REQUIRE(n["address"].is_string());
    seen.insert(n["address"].get<std::string>());
    CHECK(n["outcome"].is_string());
    CHECK(n["rtt_us"].is_number_integer());
    CHECK(n["error"].is_null());
  }
  CHECK(seen == addresses(g));
  outcomes_are(j, "ok", 2);  // a majority said yes; a third answer may not have been awaited

  // The lock really is there: every master that said ok holds the printed token.
  for (RedisServer* s : answered_ok(g, j)) CHECK(value_on(*s, "report") == j["token"]);
  CHECK(holders(g, "report", j["token"]).size() >= 2);
}

TEST_CASE("cli: acquiring a held resource with --wait 0 exits 1 with outcome held") {
  RedisGroup g(3);
  json first = acquire_ok(g, "report");
  const auto held_by_first = holders(g, "report", first["token"]);
  REQUIRE(held_by_first.size() >= 2);

  auto r = cli(op({"acquire", "report", "--wait", "0"}, g));
  CHECK(r.exit_code == 1);
  json j = json_of(r);
  CHECK(j["acquired"] == false);
  CHECK(j["resource"] == "report");
  CHECK(j["token"].is_null());  // drawn by the library, not reported on failure
  CHECK(j["validity_ms"].is_null());
  CHECK(j["code"] == "redlock.held");
  REQUIRE(j["error"].is_string());
  CHECK(j["error"].get<std::string>().starts_with("redlock.held"));
  CHECK(j["attempts"] == 1);
  REQUIRE(j["nodes"].size() == 3);
  outcomes_split(j, addresses_of(held_by_first), "held", "ok", 2);

  // The holder keeps it.
  for (RedisServer* s : held_by_first) CHECK(value_on(*s, "report") == first["token"]);
}

TEST_CASE("cli: extend works with the holder's token and fails with a foreign one") {
  RedisGroup g(3);
  json lock = acquire_ok(g, "job", {"--ttl", "3000ms"});
  const std::string token = lock["token"];
  const auto held = holders(g, "job", token);
  REQUIRE(held.size() >= 2);

  SUBCASE("the right token moves the expiry") {
    auto r = cli(op({"extend", "job", token, "--ttl", "30000ms"}, g));
    CHECK(r.exit_code == 0);
    json j = json_of(r);
    CHECK(j["extended"] == true);
    CHECK(j["token"] == token);
    CHECK(j["validity_ms"].get<long long>() > 3000);  // more than the original TTL could give
    REQUIRE(j["nodes"].size() == 3);
    outcomes_split(j, addresses_of(held), "ok", "held", 2);
    for (RedisServer* s : answered_ok(g, j)) CHECK(pttl_on(*s, "job") > 3000);
  }
  SUBCASE("a foreign token changes nothing") {
    auto r = cli(op({"extend", "job", "not-the-holder", "--ttl", "30000ms"}, g));
    CHECK(r.exit_code == 1);
    json j = json_of(r);
    CHECK(j["extended"] == false);
    CHECK(j["token"] == "not-the-holder");
    CHECK(j["code"] == "redlock.not_held");
    outcomes_are(j, "held", 2);
    for (RedisServer* s : held) {
      CHECK(value_on(*s, "job") == token);
      CHECK(pttl_on(*s, "job") <= 3000);
    }
  }
}

TEST_CASE("cli: release with a foreign token exits 1 and leaves the lock in place") {
  RedisGroup g(3);
  json lock = acquire_ok(g, "job");
  const auto held = holders(g, "job", lock["token"]);
  REQUIRE(held.size() >= 2);

  auto r = cli(op({"release", "job", "someone-else"}, g));
  CHECK(r.exit_code == 1);
  json j = json_of(r);
  CHECK(j["released"] == false);
  CHECK(j["released_nodes"] == 0);
  CHECK(j["resource"] == "job");
  CHECK(j["token"] == "someone-else");
  CHECK(j["elapsed_us"].is_number_integer());
  CHECK(j["code"] == "redlock.not_held");
  CHECK(j["error"].is_string());
  outcomes_are(j, "held", 2);
  for (RedisServer* s : held) CHECK(value_on(*s, "job") == lock["token"]);
}

TEST_CASE("cli: release with the holder's token deletes the key on every node") {
  RedisGroup g(5);
  json lock = acquire_ok(g, "job");
  // The masters that hold the token now (at least a majority; the acquire
  // does not wait for the last answers).
  std::set<std::string> held;
  for (RedisServer* s : holders(g, "job", lock["token"])) held.insert(s->address());
  REQUIRE(held.size() >= 3);

  auto r = cli(op({"release", "job", lock["token"]}, g));
  CHECK(r.exit_code == 0);
  json j = json_of(r);
  CHECK(j["released"] == true);
  CHECK(j["token"] == lock["token"]);
  CHECK_FALSE(j.contains("error"));
  REQUIRE(j["nodes"].size() == 5);
  // Every holder released it. The release waits only a moment for the last
  // answers once a majority confirmed, so on a loaded machine a holder may
  // be reported "pending"; released_nodes counts the "ok"s.
  outcomes_split(j, held, "ok", "held", 3);
  std::size_t oks = 0;
  for (const auto& n : j["nodes"]) oks += n["outcome"] == "ok";
  CHECK(j["released_nodes"].get<std::size_t>() == oks);
  CHECK(redlock::test::eventually([&] { return g.keys_everywhere(key_of("job")) == 0; }));  // gone from every master (a pending one soon)
}

TEST_CASE("cli: acquire with the token already held refreshes the lock") {
  RedisGroup g(3);
  acquire_ok(g, "job", {"--ttl", "2000ms", "--token", "host1-job42"});
  const auto held = holders(g, "job", "host1-job42");
  REQUIRE(held.size() >= 2);
  for (RedisServer* s : held) REQUIRE(pttl_on(*s, "job") <= 2000);

  // The same token again: the masters that hold it say ok (not held).
  json j = acquire_ok(g, "job", {"--ttl", "30000ms", "--token", "host1-job42"});
  CHECK(j["token"] == "host1-job42");
  outcomes_are(j, "ok", 2);
  for (RedisServer* s : answered_ok(g, j)) {
    CHECK(value_on(*s, "job") == "host1-job42");
    CHECK(pttl_on(*s, "job") > 2000);
  }
}

TEST_CASE("cli: acquire --fair takes a fair lock (its token starts with Q), released by its token") {
  RedisGroup g(3);
  json j = acquire_ok(g, "fair-job", {"--ttl", "5s", "--wait", "1s", "--fair"});
  const std::string token = j["token"].get<std::string>();
  CHECK(token.front() == 'Q');
  CHECK(holders(g, "fair-job", token).size() >= 2);
  auto r = cli(op({"release", "fair-job", token}, g));
  CHECK(r.exit_code == 0);
  CHECK(redlock::test::eventually([&] { return g.keys_everywhere("redlock:{fair-job}:*") == 0; }));  // the last master may answer after the majority
}

TEST_CASE("cli: usage errors exit 2 and name the argument") {
  RedisGroup g(3);
  TempDir tmp;
  const std::string nodes = g.url_list();
  struct Case {
    const char* what;
    std::vector<std::string> args;
    std::vector<std::string> stderr_names;  // each must appear in the message
  };
  const std::vector<Case> cases = {
      {"no nodes", {"acquire", "job"}, {"--nodes", "REDLOCK_NODES", "REDLOCK_CONFIG"}},
      {"bad URL in --nodes", {"acquire", "job", "--nodes", nodes + ",redis://127.0.0.1:99999"},
       {"--nodes", "99999"}},
      {"--ttl abc", {"acquire", "job", "--nodes", nodes, "--ttl", "abc"}, {"--ttl", "\"abc\""}},
      {"--ttl 0", {"acquire", "job", "--nodes", nodes, "--ttl", "0"}, {"--ttl", "greater than 0"}},
      {"--ttl above max_ttl", {"acquire", "job", "--nodes", nodes, "--ttl", "999999ms"}, {"--ttl", "max_ttl"}},
      {"duplicate node", {"acquire", "job", "--nodes", nodes + "," + g.urls()[0]}, {"--nodes", "the same server"}},
      {"--wait -1", {"acquire", "job", "--nodes", nodes, "--wait", "-1"}, {"--wait"}},
      {"missing RESOURCE", {"acquire", "--nodes", nodes}, {"RESOURCE"}},
      {"missing TOKEN", {"release", "job", "--nodes", nodes}, {"TOKEN"}},
      {"extend without --ttl", {"extend", "job", "tok", "--nodes", nodes}, {"--ttl"}},
      {"unknown subcommand", {"frob", "job", "--nodes", nodes}, {"frob"}},
      {"unknown option", {"acquire", "job", "--nodes", nodes, "--frob"}, {"--frob"}},
      {"no subcommand", {"--nodes", nodes}, {"acquire"}},
      {"bad --token", {"acquire", "job", "--nodes", nodes, "--token", "bad token!"}, {"--token", "bad token!"}},
      {"empty --token", {"acquire", "job", "--nodes", nodes, "--token", ""}, {"--token", "\"\" must be 1-128"}},
      {"empty TOKEN", {"release", "job", "", "--nodes", nodes}, {"TOKEN", "\"\" must be 1-128"}},
      {"--ttl with a bad unit", {"acquire", "job", "--nodes", nodes, "--ttl", "3x"}, {"--ttl", "unknown unit \"x\""}},
      {"--wait past INT_MAX ms", {"acquire", "job", "--nodes", nodes, "--wait", "600h"}, {"--wait", "\"600h\"", "out of range"}},
      {"--ttl 90s above max_ttl", {"acquire", "job", "--nodes", nodes, "--ttl", "90s"}, {"--ttl", "90s", "max_ttl"}},
      {"--fair with --token", {"acquire", "job", "--nodes", nodes, "--fair", "--token", "host1-job42"},
       {"--fair", "--token", "give only one of them"}},
      {"token too long", {"release", "job", std::string(129, 'a'), "--nodes", nodes}, {"TOKEN"}},
      {"unreadable --config", {"acquire", "job", "--config", (tmp.path / "missing.json").string()},
       {"--config", "missing.json"}},
      {"invalid --config", {"acquire", "job", "--config", tmp.write("bad.json", R"({"nodes": []})").string()},
       {"--config", "nodes"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    check_usage_error(c.args, c.stderr_names);
  }
  // No lock key reached the servers. (The duplicate-node case has to
  // connect to see the duplicate: a handshake that got that far may have
  // written the data-loss marker, `redlock-marker`, which is no lock.)
  CHECK(g.keys_everywhere("redlock:*") == 0);
}

TEST_CASE("cli: --help on the command and on each subcommand shows examples") {
  for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
           {"--help"}, {"acquire", "--help"}, {"extend", "--help"}, {"release", "--help"}}) {
    CAPTURE(args[0]);
    auto r = cli(args);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("Example") != std::string::npos);
    CHECK(r.out.find("redlock " + (args.size() > 1 ? args[0] : std::string("acquire"))) != std::string::npos);
  }
}

TEST_CASE("cli: REDLOCK_NODES is used when --nodes is absent, and --nodes wins over it") {
  RedisGroup g(3);
  SUBCASE("from the environment") {
    auto r = cli({"--no-quarantine", "acquire", "env-job"}, {{"REDLOCK_NODES", g.url_list()}});
    CHECK(r.exit_code == 0);
    json j = json_of(r);
    CHECK(j["acquired"] == true);
    std::set<std::string> seen;
    for (const auto& n : j["nodes"]) seen.insert(n["address"].get<std::string>());
    CHECK(seen == addresses(g));
    CHECK(g.keys_everywhere(key_of("env-job")) >= 2);  // on a majority
  }
  SUBCASE("--nodes first") {
    // The environment names a node that does not exist; --nodes is used instead.
    const std::string dead = "redis://127.0.0.1:" + std::to_string(redlock::test::free_port());
    auto r = cli(op({"acquire", "cli-job"}, g), {{"REDLOCK_NODES", dead}});
    CHECK(r.exit_code == 0);
    CHECK(json_of(r)["nodes"].size() == 3);
    CHECK(g.keys_everywhere(key_of("cli-job")) >= 2);
  }
}

TEST_CASE("cli: --config supplies nodes and options; with --nodes, its options apply to those nodes") {
  RedisGroup g(3);
  TempDir tmp;
  json cfg = {{"nodes", g.urls()}, {"prefix", "cfg:"}, {"quarantine", false}};
  const std::string file = tmp.write("redlock.json", cfg.dump()).string();

  SUBCASE("--config alone") {
    auto r = cli({"acquire", "job", "--config", file});
    CHECK(r.exit_code == 0);
    CHECK(json_of(r)["acquired"] == true);
    CHECK(g.keys_everywhere("cfg:{job}:lock") >= 2);  // on a majority, with the file's prefix
  }
  SUBCASE("--config with --nodes") {
    RedisGroup other(3);
    auto r = cli({"acquire", "job", "--config", file, "--nodes", other.url_list()});
    CHECK(r.exit_code == 0);
    CHECK(other.keys_everywhere("cfg:{job}:lock") >= 2);  // --nodes' nodes, the file's prefix
    CHECK(g.keys_everywhere() == 0);
  }
}

TEST_CASE("cli: acquire with 3 of 5 masters down exits 69 (no quorum) and marks them error") {
  RedisGroup g(5);
  std::set<std::string> dead;
  for (std::size_t i = 0; i < 3; ++i) {
    dead.insert(g[i].address());
    g[i].kill();
  }
  auto r = cli(op({"acquire", "job", "--wait", "0"}, g));
  CHECK(r.exit_code == 69);
  json j = json_of(r);
  CHECK(j["acquired"] == false);
  CHECK(j["code"] == "redlock.no_quorum");
  REQUIRE(j["nodes"].size() == 5);
  for (const auto& n : j["nodes"]) {
    CAPTURE(n.dump());
    if (dead.count(n["address"].get<std::string>()) > 0) {
      // The round fails only once all three have failed, so each was seen.
      CHECK(n["outcome"] == "error");
      CHECK(n["error"].is_string());
    } else {
      CHECK((n["outcome"] == "ok" || n["outcome"] == "pending"));
    }
  }
}

TEST_CASE("cli: a failed acquire leaves no key on the masters that said yes") {
  // Another owner holds each resource on masters 0 and 1; master 2 is free,
  // so it says yes to our attempt, which fails (held) and must delete the key
  // on master 2 again before the process exits. Repeated, so that a race
  // between that rollback and the client's shutdown cannot hide.
  RedisGroup g(3);
  constexpr int kRuns = 100;
  for (int i = 0; i < kRuns; ++i) {
    const std::string resource = "rollback-" + std::to_string(i);
    for (std::size_t k = 0; k < 2; ++k) g[k].command({"SET", key_of(resource), "other-owner", "PX", "60000"});
    auto r = cli(op({"acquire", resource, "--wait", "0"}, g));
    REQUIRE(r.exit_code == 1);
    CHECK(json_of(r)["code"] == "redlock.held");
  }
  CHECK(g[2].keys("redlock:{rollback-*").size() == 0);
}

TEST_CASE("cli: without --no-quarantine freshly started masters do not count (69), and a wait says why") {
  RedisGroup g(3);
  auto r = cli({"acquire", "job", "--nodes", g.url_list()});
  CHECK(r.exit_code == 69);
  json j = json_of(r);
  CHECK(j["acquired"] == false);
  outcomes_are(j, "quarantined", 2);
  CHECK(r.err.empty());  // no wait, nothing to explain: the JSON says it

  // Waiting: one line on stderr says why, with the time left (about 61 s).
  auto waited = cli({"acquire", "job", "-w", "300ms", "--nodes", g.url_list()});
  INFO("stderr: " << waited.err);
  CHECK(waited.exit_code == 69);
  const std::string note = "redlock: acquire: waiting: 3 of 3 masters are in restart quarantine for another ";
  const auto at = waited.err.find(note);
  REQUIRE(at != std::string::npos);
  CHECK(waited.err.find(note, at + 1) == std::string::npos);  // once
  const long long seconds = std::stoll(waited.err.substr(at + note.size()));
  CHECK(seconds > 30);
  CHECK(seconds <= 61);
  CHECK(waited.err.find(" s (see redlock nodes)\n") != std::string::npos);
  CHECK(json_of(waited)["attempts"].get<int>() >= 2);
}

TEST_CASE("cli: acquire, extend and release tell held (1) from no quorum of reachable masters (69)") {
  RedisGroup g(3);
  json lock = acquire_ok(g, "job", {"--ttl", "30s"});
  const std::string token = lock["token"];
  // Held elsewhere / not ours: 1.
  CHECK(cli(op({"acquire", "job"}, g)).exit_code == 1);
  CHECK(cli(op({"extend", "job", "not-the-holder", "--ttl", "30s"}, g)).exit_code == 1);
  auto foreign = cli(op({"release", "job", "not-the-holder"}, g));
  CHECK(foreign.exit_code == 1);
  CHECK(json_of(foreign)["code"] == "redlock.not_held");
  // Every master down: 69, whatever the command.
  for (std::size_t i = 0; i < g.size(); ++i) g[i].kill();
  auto acquire = cli(op({"acquire", "job"}, g));
  CHECK(acquire.exit_code == 69);
  CHECK(json_of(acquire)["code"] == "redlock.no_quorum");
  auto extend = cli(op({"extend", "job", token, "--ttl", "30s"}, g));
  CHECK(extend.exit_code == 69);
  CHECK(json_of(extend)["extended"] == false);
  auto release = cli(op({"release", "job", token}, g));
  CHECK(release.exit_code == 69);
  CHECK(json_of(release)["code"] == "redlock.no_quorum");
  CHECK(cli(op({"acquire", "job", "--human"}, g)).exit_code == 69);
}

TEST_CASE("cli: durations take units; a plain number is milliseconds") {
  RedisGroup g(3);
  json a = acquire_ok(g, "units", {"--ttl", "30s"});
  CHECK(a["validity_ms"].get<long long>() > 20000);
  CHECK(a["validity_ms"].get<long long>() <= 30000);
  for (RedisServer* s : answered_ok(g, a)) {
    CHECK(pttl_on(*s, "units") > 20000);
    CHECK(pttl_on(*s, "units") <= 30000);
  }
  auto e = cli(op({"extend", "units", a["token"], "--ttl", "0.75m"}, g));
  REQUIRE(e.exit_code == 0);
  for (RedisServer* s : answered_ok(g, json_of(e))) CHECK(pttl_on(*s, "units") > 30000);
  json plain = acquire_ok(g, "plain", {"--ttl", "1500ms"});
  CHECK(plain["validity_ms"].get<long long>() <= 1500);
  CHECK(plain["validity_ms"].get<long long>() > 500);
}

TEST_CASE("cli: REDLOCK_CONFIG names a config file; --config wins over it, and a node list over its nodes") {
  RedisGroup g(3);
  TempDir tmp;
  json cfg = {{"nodes", g.urls()}, {"prefix", "envcfg:"}, {"quarantine", false}};
  const std::string file = tmp.write("redlock.json", cfg.dump()).string();

  SUBCASE("REDLOCK_CONFIG alone: its nodes and options") {
    auto r = cli({"acquire", "job"}, {{"REDLOCK_CONFIG", file}});
    CHECK(r.exit_code == 0);
    CHECK(g.keys_everywhere("envcfg:{job}:lock") >= 2);
  }
  SUBCASE("--config wins over REDLOCK_CONFIG") {
    json other = {{"nodes", g.urls()}, {"prefix", "flagcfg:"}, {"quarantine", false}};
    const std::string flag_file = tmp.write("flag.json", other.dump()).string();
    auto r = cli({"acquire", "job", "--config", flag_file}, {{"REDLOCK_CONFIG", (tmp.path / "missing.json").string()}});
    CHECK(r.exit_code == 0);
    CHECK(g.keys_everywhere("flagcfg:{job}:lock") >= 2);
    CHECK(g.keys_everywhere("envcfg:*") == 0);
  }
  SUBCASE("REDLOCK_NODES' nodes with REDLOCK_CONFIG's options") {
    RedisGroup other(3);
    auto r = cli({"acquire", "job"}, {{"REDLOCK_CONFIG", file}, {"REDLOCK_NODES", other.url_list()}});
    CHECK(r.exit_code == 0);
    CHECK(other.keys_everywhere("envcfg:{job}:lock") >= 2);
    CHECK(g.keys_everywhere("envcfg:*") == 0);
  }
  SUBCASE("a bad REDLOCK_CONFIG is a usage error naming it") {
    auto r = cli({"acquire", "job"}, {{"REDLOCK_CONFIG", (tmp.path / "missing.json").string()}});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("REDLOCK_CONFIG") != std::string::npos);
    CHECK(r.err.find("missing.json") != std::string::npos);
  }
}

TEST_CASE("cli: a resource or token that starts with '-' is given after \"--\" or as --resource=-NAME") {
  RedisGroup g(3);
  // Options before the "--": after it every word is a positional.
  const auto dashed = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--no-quarantine", "--nodes", g.url_list()});
    return args;
  };
  auto a = cli(dashed({"acquire", "--ttl", "30s", "--", "-dash"}));
  REQUIRE(a.exit_code == 0);
  const json j = json_of(a);
  CHECK(j["resource"] == "-dash");
  CHECK(holders(g, "-dash", j["token"]).size() >= 2);
  auto st = cli(op({"status", "--json", "--resource=-dash"}, g));
  CHECK(st.exit_code == 0);
  CHECK(json_of(st)["token"] == j["token"]);
  // A token of one's own that starts with "-" too.
  auto own = cli(dashed({"acquire", "--token=-mine", "--", "-other"}));
  REQUIRE(own.exit_code == 0);
  auto rel = cli(dashed({"release", "--", "-other", "-mine"}));
  CHECK(rel.exit_code == 0);
  CHECK(json_of(rel)["released"] == true);
  CHECK(redlock::test::eventually([&] { return g.keys_everywhere(key_of("-other")) == 0; }));  // the last master may answer after the majority
}

// Names of any bytes (NUL aside: argv cannot carry it), with the form the
// text output quotes them in (docs/cli.md, "Names and other bytes in the
// output"): not UTF-8, a terminal's escape sequence, quotes and backslashes,
// the longest name the library takes.
struct OddName {
  const char* what;
  std::string bytes;
  std::string quoted;  // as the human text shows it
};

std::vector<OddName> odd_names() {
  return {
      {"latin-1", "caf\xe9", R"("caf\xe9")"},
      {"no UTF-8 at all", "\xff\xfe", R"("\xff\xfe")"},
      {"newline and an escape sequence", "line\nbreak\x1b[31mred\x7f", R"("line\x0abreak\x1b[31mred\x7f")"},
      {"C1 control, quotes, backslash", "a\xc2\x9b" "2J\"q\\z", R"("a\xc2\x9b2J\"q\\z")"},
      {"1024 bytes, none UTF-8", std::string(1024, '\x80'), ""},
  };
}

TEST_CASE("cli: a name of any bytes: acquire, status and release print it escaped, and its token releases it") {
  RedisGroup g(3);
  for (const OddName& n : odd_names()) {
    CAPTURE(n.what);
    // acquire: the JSON parses, gives the exact name back, and the token is on the masters.
    auto a = cli(op({"acquire", n.bytes, "--ttl", "30s"}, g));
    REQUIRE(a.exit_code == 0);
    const json j = json_of(a);
    CHECK(j["acquired"] == true);
    CHECK(name_in(j, "resource") == n.bytes);
    CHECK(j.contains("resource_hex") == !is_utf8_name(n.bytes));
    const std::string token = j["token"].get<std::string>();
    CHECK(holders(g, n.bytes, token).size() >= 2);

    // status, both forms: held by that token, the name escaped in the text.
    auto st = cli(op({"status", n.bytes, "--json"}, g));
    CHECK(st.exit_code == 0);
    const json sj = json_of(st);
    CHECK(sj["held"] == true);
    CHECK(sj["token"] == token);
    CHECK(name_in(sj, "resource") == n.bytes);
    auto human = cli(op({"status", n.bytes}, g));
    CHECK(human.exit_code == 0);
    CHECK_FALSE(has_control_bytes(human.out));
    if (!n.quoted.empty()) CHECK(human.out.starts_with(n.quoted + " is held by "));

    // acquire --human while it is held: refused, said in text without control bytes.
    auto again = cli(op({"acquire", n.bytes, "--human"}, g));
    CHECK(again.exit_code == 1);
    CHECK_FALSE(has_control_bytes(again.out));
    if (!n.quoted.empty()) CHECK(again.out.starts_with("not acquired " + n.quoted + ": "));

    // release with the printed token, in text: released everywhere.
    auto rel = cli(op({"release", n.bytes, token, "--human"}, g));
    CHECK(rel.exit_code == 0);
    CHECK_FALSE(has_control_bytes(rel.out));
    if (!n.quoted.empty()) CHECK(rel.out.starts_with("released " + n.quoted + " on "));
    CHECK(redlock::test::eventually([&] { return g.keys_everywhere(key_of(n.bytes)) == 0; }));

    // release again, JSON: not held, the name given back exactly.
    auto gone = cli(op({"release", n.bytes, token}, g));
    CHECK(gone.exit_code == 1);
    CHECK(name_in(json_of(gone), "resource") == n.bytes);
  }
}

TEST_CASE("cli: what the masters hold is printed escaped too: a foreign token of any bytes, a WRONGTYPE naming the key") {
  RedisGroup g(3);
  const std::string name = "caf\xe9";
  // Someone else's value at the lock key: not UTF-8, with a screen-clearing sequence.
  for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"SET", key_of(name), "\xff\x1b[2J", "PX", "60000"});
  auto st = cli(op({"status", name, "--json"}, g));
  CHECK(st.exit_code == 0);
  const json j = json_of(st);
  CHECK(j["held"] == true);
  CHECK(j["token"] == R"(\xff\x1b[2J)");
  CHECK(j["nodes"][0]["token"] == R"(\xff\x1b[2J)");
  auto human = cli(op({"status", name}, g));
  CHECK(human.exit_code == 0);
  CHECK_FALSE(has_control_bytes(human.out));
  CHECK(human.out.find(R"("caf\xe9" is held by \xff\x1b[2J on 3 of 3)") != std::string::npos);
  // extend with our own token: refused (not ours), the name given back exactly.
  auto ext = cli(op({"extend", name, "mine", "--ttl", "30s"}, g));
  CHECK(ext.exit_code == 1);
  CHECK(name_in(json_of(ext), "resource") == name);
  // A list at the key: WRONGTYPE, whose text names the key with the name's bytes.
  for (std::size_t i = 0; i < g.size(); ++i) {
    g[i].command({"DEL", key_of(name)});
    g[i].command({"RPUSH", key_of(name), "x"});
  }
  auto wrong = cli(op({"status", name}, g));
  CHECK(wrong.exit_code == 0);
  CHECK_FALSE(has_control_bytes(wrong.out));
  CHECK(wrong.out.find("wrong_type") != std::string::npos);
  auto wrong_json = cli(op({"status", name, "--json"}, g));
  CHECK(wrong_json.exit_code == 0);
  CHECK(json_of(wrong_json)["nodes"][0]["state"] == "wrong_type");
  auto refused = cli(op({"acquire", name, "--human"}, g));
  CHECK_FALSE(has_control_bytes(refused.out));
  CHECK(refused.out.starts_with(R"(not acquired "caf\xe9": )"));
}

TEST_CASE("cli: bytes that are not UTF-8 in an argument are a usage error that shows them escaped") {
  RedisGroup g(3);
  check_usage_error(op({"acquire", "job", "--ttl", "5\xff"}, g), {"--ttl", R"("5\xff")"});
  check_usage_error(op({"acquire", "job", "--token", "t\x1b[0m"}, g), {"--token", R"("t\x1b[0m")"});
  check_usage_error(op({"acquire", std::string(1025, '\xe9')}, g), {"1025 bytes"});
  auto r = cli(op({"acquire", "job", "--ttl", "\x1b]0;title\x07"}, g));
  CHECK(r.exit_code == 2);
  CHECK_FALSE(has_control_bytes(r.err));
}

TEST_CASE("counter_worker: 4 workers x 25 iterations lose no increment and never overlap") {
  RedisGroup g(5);
  RedisServer counter;
  TempDir tmp;
  const std::string worker = program("REDLOCK_COUNTER_WORKER");
  constexpr int kWorkers = 4, kIterations = 25;

  std::vector<std::unique_ptr<Child>> workers;
  std::vector<std::string> logs;
  for (int w = 0; w < kWorkers; ++w) {
    logs.push_back((tmp.path / ("worker" + std::to_string(w) + ".log")).string());
    workers.push_back(std::make_unique<Child>(
        worker, std::vector<std::string>{"--nodes", g.url_list(), "--counter-url", counter.url(),
                                         "--resource", "counter-test", "--iterations",
                                         std::to_string(kIterations), "--log", logs.back(),
                                         "--no-quarantine"}));
  }
  for (auto& w : workers) {
    auto r = w->wait(std::chrono::seconds(120));
    INFO("worker stdout: " << r.out << "\nworker stderr: " << r.err);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 0);
  }

  auto value = counter.command({"GET", "counter"});
  REQUIRE(value.type == REDIS_REPLY_STRING);
  CHECK(value.str == std::to_string(kWorkers * kIterations));

  // The workers really contended: in time order, the lock changed hands
  // between processes many times (not one worker after the other).
  std::vector<std::pair<long long, long long>> acquired_by;  // (acquired_ns, pid)
  for (const auto& log : logs) {
    std::ifstream in(log);
    long long acquired = 0, released = 0, deadline = 0, pid = 0;
    while (in >> acquired >> released >> deadline >> pid) acquired_by.emplace_back(acquired, pid);
  }
  CHECK(acquired_by.size() == static_cast<std::size_t>(kWorkers * kIterations));
  std::sort(acquired_by.begin(), acquired_by.end());
  int handovers = 0;
  for (std::size_t i = 1; i < acquired_by.size(); ++i)
    handovers += acquired_by[i].second != acquired_by[i - 1].second;
  CHECK(handovers >= 10);

  std::vector<std::string> check_args{"check"};
  check_args.insert(check_args.end(), logs.begin(), logs.end());
  auto r = Child(worker, check_args).wait();
  INFO("check stdout: " << r.out << "\ncheck stderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("overlaps=0") != std::string::npos);
  CHECK(r.out.find("windows=") != std::string::npos);
}

TEST_CASE("counter_worker check: overlapping windows are found and fail the check") {
  TempDir tmp;
  const std::string worker = program("REDLOCK_COUNTER_WORKER");
  // Windows [100, min(200, 300)] and [150, min(400, 500)] overlap; [250, …] starts
  // after the first ended but inside the second; [600, min(700, 650)] is alone.
  const auto a = tmp.write("a.log", "100 200 300 1\n600 700 650 1\n");
  const auto b = tmp.write("b.log", "150 400 500 2\n250 260 900 3\n");
  auto r = Child(worker, {"check", a.string(), b.string()}).wait();
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("windows=4 overlaps=2") != std::string::npos);

  // A window cut short by its validity deadline does not overlap a later one.
  const auto c = tmp.write("c.log", "100 900 200 1\n300 400 1000 2\n");
  auto ok = Child(worker, {"check", c.string()}).wait();
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("windows=2 overlaps=0") != std::string::npos);

  // A malformed line is a usage error naming the file and line.
  const auto bad = tmp.write("bad.log", "100 200 300 1\nnot a line\n");
  auto usage = Child(worker, {"check", bad.string()}).wait();
  CHECK(usage.exit_code == 2);
  CHECK(usage.err.find("bad.log:2") != std::string::npos);

  // So is a check without logs.
  auto none = Child(worker, {"check"}).wait();
  CHECK(none.exit_code == 2);
  CHECK(none.err.find("LOGFILE is required") != std::string::npos);
}

TEST_CASE("cli: nodes --watch --json prints one JSON line per refresh until SIGTERM, then exits 0") {
  RedisGroup g(3);
  std::vector<std::string> addresses;
  for (std::size_t i = 0; i < g.size(); ++i) addresses.push_back(g[i].address());
  const PatientConfig patient(g);  // every refresh must hear all three
  Child watch(program("REDLOCK_CLI"), patient.op({"nodes", "--watch", "--interval", "100ms", "--json"}));
  for (int refresh = 0; refresh < 3; ++refresh) {
    const std::optional<std::string> line = watch.read_line();
    REQUIRE_MESSAGE(line.has_value(), "refresh " << refresh << " printed no line");
    const json j = json::parse(*line, nullptr, false);
    REQUIRE_MESSAGE(j.is_object(), "not one JSON object: " << *line);
    REQUIRE(j["nodes"].size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(j["nodes"][i]["address"] == addresses[i]);
      CHECK(j["nodes"][i]["reachable"] == true);
    }
    CHECK(j["usable"] == 3);
    CHECK(j["can_lock"] == true);
  }
  watch.signal(SIGTERM);
  const auto r = watch.wait();
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
}

TEST_CASE("cli: nodes --watch ends with 0 on SIGINT, and when its reader closes stdout; tables apart by a blank line") {
  RedisGroup g(3);
  Child human(program("REDLOCK_CLI"), op({"nodes", "--watch", "--interval", "100ms", "--human"}, g));
  // Not a terminal: no screen clearing; each table after a blank line.
  REQUIRE(human.wait_for("locks can be taken\n\nEvery 100ms: redlock nodes"));
  human.signal(SIGINT);
  const auto r = human.wait();
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.starts_with("Every 100ms: redlock nodes    "));
  CHECK(r.out.find("\033[") == std::string::npos);
  CHECK(r.out.find("3 of 3 masters usable") != std::string::npos);

  Child json_lines(program("REDLOCK_CLI"), op({"nodes", "--watch", "--interval", "100ms", "--json"}, g));
  REQUIRE(json_lines.read_line().has_value());
  json_lines.close_output();  // like `| head -1`
  const auto closed = json_lines.wait();
  CHECK_FALSE(closed.timed_out);
  CHECK(closed.exit_code == 0);
}

TEST_CASE("cli: acquire whose stdout is closed releases the lock it could not print, and says so") {
  // `redlock acquire job | head -c0`: the reader is gone before the token
  // is written. SIGPIPE used to kill redlock there, with the lock taken on
  // a majority and its token shown to nobody, until its TTL (60 s here).
  RedisGroup g(3);
  Child acquire(program("REDLOCK_CLI"), op({"acquire", "closed-out", "--ttl", "60s"}, g));
  acquire.close_output();  // long before it has connected and taken the lock
  const auto r = acquire.wait();
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("the lock was released") != std::string::npos);
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(value_on(g[i], "closed-out").empty());
}

TEST_CASE("cli: every lock names its owner: status shows host:pid:label, run passes it as REDLOCK_OWNER") {
  RedisGroup g(3);
  // The command, while run holds the lock, prints REDLOCK_OWNER and what
  // status says (as JSON); $0 is the redlock binary.
  const std::string nodes = g.url_list();
  auto r = cli({"--owner", "nightly/db", "run", "job", "--no-quarantine", "--nodes", nodes, "--", "sh", "-c",
                "printf 'owner=%s\\n' \"$REDLOCK_OWNER\"; exec \"$0\" status job --json --no-quarantine --nodes \"$1\"",
                program("REDLOCK_CLI"), nodes});
  REQUIRE(r.exit_code == 0);
  const std::string owner = line_after(r.out, "owner=");
  const auto at = r.out.find('{');
  REQUIRE(at != std::string::npos);
  const json status = json::parse(r.out.substr(at), nullptr, false);
  REQUIRE(status.is_object());
  CHECK(status["held"] == true);
  const std::string token = status["token"].get<std::string>();
  // The value on the masters is the token, '~', then the owner run named.
  CHECK(token.ends_with("~" + owner));
  const json& who = status["owner"];
  REQUIRE(who.is_object());
  CHECK(who["label"] == "nightly/db");
  CHECK(who["pid"].get<std::uint64_t>() > 0);
  CHECK(owner == who["host"].get<std::string>() + ":" + std::to_string(who["pid"].get<std::uint64_t>()) + ":nightly/db");
  for (const json& n : status["nodes"]) {
    if (n["state"] == "held") CHECK(n["owner"] == who);
  }

  // The human form names the owner; a lock taken with a caller's token names none.
  json lock = acquire_ok(g, "other", {"--owner", "cron"});
  auto human = cli(op({"status", "other", "--human"}, g));
  CHECK(human.out.find("is held by ") != std::string::npos);
  CHECK(human.out.find(":cron (token ") != std::string::npos);
  CHECK(cli(op({"release", "other", lock["token"]}, g)).exit_code == 0);
  acquire_ok(g, "given", {"--token", "host1-job42"});
  json plain = json_of(cli(op({"status", "given", "--json"}, g)));
  CHECK(plain["token"] == "host1-job42");
  CHECK(plain["owner"].is_null());
}

TEST_CASE("cli: --owner takes printable ASCII without blanks; anything else is a usage error before connecting") {
  check_usage_error({"--owner", "two words", "acquire", "job", "--nodes", "redis://127.0.0.1:1"}, {"--owner"});
  check_usage_error({"--owner", std::string(65, 'x'), "acquire", "job", "--nodes", "redis://127.0.0.1:1"}, {"--owner"});
  check_usage_error({"--owner", "a\x1b[2Jb", "acquire", "job", "--nodes", "redis://127.0.0.1:1"}, {"--owner"});
}
