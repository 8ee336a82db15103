// test_cli_campaign.cpp — `redlock run --campaign NAME -- CMD`, a
// leader-elected command: driving the real binary (REDLOCK_CLI) against
// real redis-servers on loopback (freshly started: --no-quarantine). CMD
// runs only while its redlock leads NAME, with the term in REDLOCK_FENCE;
// a lost leadership stops it, and it starts again when re-elected; CMD's
// own exit ends the run and resigns.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_harness.hpp"
#include "helpers.hpp"
#include "redis_server.hpp"

namespace {

using namespace redlock::test::cli_harness;
using redlock::test::RedisGroup;
using redlock::test::eventually;
using redlock::test::subscribers;
using std::chrono::milliseconds;

std::string cli_path() { return program("REDLOCK_CLI"); }

// campaign_args builds `redlock --no-quarantine --nodes URLS run --campaign
// OPTS... NAME -- sh -c SCRIPT`.
std::vector<std::string> campaign_args(const RedisGroup& g, std::vector<std::string> opts, const std::string& name,
                                       const std::string& script) {
  std::vector<std::string> args{"--no-quarantine", "--nodes", g.url_list(), "run", "--campaign"};
  args.insert(args.end(), opts.begin(), opts.end());
  args.insert(args.end(), {name, "--", "sh", "-c", script});
  return args;
}

// leader_script is a campaign's CMD, `id` naming it: each start counts
// itself in a file of its own and prints "start#N term=T pid=P" (N: its
// Nth start, T: REDLOCK_FENCE, P: its pid), and appends "ID start T NS" to
// `log` (NS: the wall clock in ns); on SIGTERM it appends "ID end NS" and
// exits 0; once `go` exists it exits 4 by itself.
std::string leader_script(const std::string& id, const TempDir& tmp, const fs::path& log, const fs::path& go) {
  const std::string count = (tmp.path / ("count-" + id)).string();
  return "n=$(cat '" + count + "' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '" + count + "'; "
         "echo \"" + id + " start $REDLOCK_FENCE $(date +%s%N)\" >> '" + log.string() + "'; "
         "trap 'echo \"" + id + " end $(date +%s%N)\" >> \"" + log.string() + "\"; exit 0' TERM; "
         "echo \"start#$n term=$REDLOCK_FENCE pid=$$\"; "
         "while [ ! -e '" + go.string() + "' ]; do sleep 0.02; done; exit 4";
}

// field_of: the number after "KEY=" on the line of `out` that starts with `marker`.
long long field_of(const std::string& out, const std::string& marker, const std::string& key) {
  const std::string line = line_after(out, marker);
  const auto at = line.find(key + "=");
  REQUIRE_MESSAGE(at != std::string::npos, "no " << key << "= after " << marker << " in: " << out);
  return std::stoll(line.substr(at + key.size() + 1));
}

// Event — one line of a leader_script log: who, start or end, term, when.
struct Event {
  std::string id, what;
  long long term = 0, ns = 0;
};

std::vector<Event> events_in(const fs::path& log) {
  std::vector<Event> out;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    Event e;
    words >> e.id >> e.what;
    if (e.what == "start") words >> e.term;
    words >> e.ns;
    out.push_back(e);
  }
  return out;
}

// one_at_a_time: in the log, every start comes after the previous
// command's end (no two commands ran at once), and terms grow.
void check_one_at_a_time(const fs::path& log) {
  const std::vector<Event> events = events_in(log);
  std::optional<Event> running;
  long long last_term = 0;
  for (const Event& e : events) {
    CAPTURE(e.id);
    CAPTURE(e.what);
    if (e.what == "start") {
      CHECK_FALSE(running.has_value());
      CHECK(e.term > last_term);
      last_term = e.term;
      running = e;
    } else {
      REQUIRE(running.has_value());
      CHECK(running->id == e.id);
      CHECK(e.ns >= running->ns);
      running.reset();
    }
  }
}

// reports_of: every run report (JSON line with "command": "run") on stderr, in order.
std::vector<json> reports_of(const ProcResult& r) {
  std::vector<json> out;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("command", "") == "run") out.push_back(j);
  }
  return out;
}


// check_no_leader: `redlock leader NAME` says there is none (exit 1).
void check_no_leader(const RedisGroup& g, const std::string& name) {
  auto r = cli(op({"leader", name}, g));
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("no leader") != std::string::npos);
}

}  // namespace

TEST_CASE("run --campaign: one of two runs the command; when its redlock is killed, the other starts it with a higher term") {
  RedisGroup g(3);
  TempDir tmp;
  const auto log = tmp.path / "log";
  const auto go = tmp.path / "go";
  const std::string name = "elect";
  Child a(cli_path(), campaign_args(g, {"--ttl", "1s", "--identity", "A"}, name, leader_script("A", tmp, log, go)));
  REQUIRE(a.wait_for("start#1"));
  const long long term_a = field_of(a.out_so_far(), "start#1", "term");
  const GroupReaper a_cmd{static_cast<pid_t>(field_of(a.out_so_far(), "start#1", "pid"))};
  Child b(cli_path(), campaign_args(g, {"--ttl", "1s", "--identity", "B"}, name, leader_script("B", tmp, log, go)));
  // B campaigns: it waits on the election's lock, subscribed to its release
  // channel (the leader is not).
  REQUIRE(eventually([&] { return subscribers(g[0], channel_of(name)) == 1; }, std::chrono::seconds(20)));
  auto client = redlock::test::client_for(g);
  {
    auto led = client->leader(name);
    REQUIRE(led);
    REQUIRE(led->leader);
    CHECK(led->leader->identity == "A");
    CHECK(led->leader->term == static_cast<std::uint64_t>(term_a));
  }
  CHECK(events_in(log).size() == 1);  // only A's command started

  const auto killed_at = std::chrono::steady_clock::now();
  a.signal(SIGKILL);
  // A's guard ends A's command at once; B is elected once A's lock runs
  // out, about a TTL (1 s) after the kill.
  CHECK(eventually([&] { return dead(a_cmd.pgid); }, milliseconds(1500)));
  REQUIRE(b.wait_for("start#1", std::chrono::seconds(10)));
  const auto took = std::chrono::steady_clock::now() - killed_at;
  CHECK(took < std::chrono::seconds(4));
  const long long term_b = field_of(b.out_so_far(), "start#1", "term");
  CHECK(term_b > term_a);
  {
    auto led = client->leader(name);
    REQUIRE(led);
    REQUIRE(led->leader);
    CHECK(led->leader->identity == "B");
    CHECK(led->leader->term == static_cast<std::uint64_t>(term_b));
  }
  std::ofstream(go.string()) << "go";
  ProcResult rb = b.wait();
  INFO("B's stderr: " << rb.err);
  CHECK(rb.exit_code == 4);
  CHECK(a.wait().exit_code == 128 + SIGKILL);
  check_one_at_a_time(log);
  const auto events = events_in(log);
  REQUIRE(events.size() == 3);  // A start, A end (the guard's SIGTERM), B start
  CHECK(events[1].id == "A");
  CHECK(events[1].what == "end");
  check_no_leader(g, name);
}

TEST_CASE("run --campaign: a lost leadership stops the command; it starts again, with a higher term, when re-elected") {
  TempDir tmp;
  const auto log = tmp.path / "log";
  const auto go = tmp.path / "go";
  const std::string name = "deposed";

  SUBCASE("another owner took the lock: the next extension is refused") {
    RedisGroup g(3);
    Child run(cli_path(), campaign_args(g, {"--ttl", "2s", "--kill-after", "300ms", "--json"}, name,
                                        leader_script("X", tmp, log, go)));
    REQUIRE(run.wait_for("start#1"));
    const long long term1 = field_of(run.out_so_far(), "start#1", "term");
    // Another owner holds the key everywhere for 1.5 s (as after an
    // expiry): the leader is deposed at its next extension, and elected
    // again once that owner's key runs out.
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"SET", key_of(name), "intruder", "PX", "1500"});
    REQUIRE(run.wait_for("start#2", std::chrono::seconds(15)));
    const long long term2 = field_of(run.out_so_far(), "start#2", "term");
    CHECK(term2 > term1);
    auto client = redlock::test::client_for(g);
    auto led = client->leader(name);
    REQUIRE(led);
    REQUIRE(led->leader);
    CHECK(led->leader->term == static_cast<std::uint64_t>(term2));
    std::ofstream(go.string()) << "go";
    ProcResult r = run.wait();
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 4);
    const std::vector<json> reports = reports_of(r);
    REQUIRE(reports.size() == 2);  // one line per term
    CHECK(reports[0]["campaign"] == true);
    CHECK(reports[0]["term"] == term1);
    CHECK(reports[0]["deposed"].is_string());
    CHECK(reports[0]["killed"] == "SIGTERM");
    CHECK(reports[0]["child_status"] == 0);  // its trap: exit 0
    CHECK(reports[0]["exit_status"].is_null());  // the run went on
    CHECK(reports[1]["term"] == term2);
    CHECK(reports[1]["deposed"].is_null());
    CHECK(reports[1]["child_status"] == 4);
    CHECK(reports[1]["resigned"] == true);
    CHECK(reports[1]["exit_status"] == 4);
    check_one_at_a_time(log);
    CHECK(events_in(log).size() == 3);  // start, end (SIGTERM), start
    check_no_leader(g, name);
  }
  SUBCASE("a command that ignores SIGTERM is killed; the guard stays, and the next term starts it again") {
    RedisGroup g(3);
    // Its first start ignores SIGTERM (SIGKILL --kill-after later, from
    // redlock and its guard alike); its second exits 4 at once.
    const std::string count = (tmp.path / "count").string();
    Child run(cli_path(), campaign_args(g, {"--ttl", "2s", "--kill-after", "300ms"}, name,
                                        "n=$(cat '" + count + "' 2>/dev/null || echo 0); n=$((n + 1)); echo $n > '" +
                                            count + "'; echo \"start#$n term=$REDLOCK_FENCE\"; [ $n -ge 2 ] && exit 4; "
                                            "trap '' TERM; while :; do sleep 0.02; done"));
    REQUIRE(run.wait_for("start#1"));
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"SET", key_of(name), "intruder", "PX", "1500"});
    ProcResult r = run.wait();
    INFO("stderr: " << r.err);
    CHECK(r.err.find("sent SIGKILL") != std::string::npos);
    CHECK(r.out.find("start#2") != std::string::npos);
    CHECK(r.exit_code == 4);
    check_no_leader(g, name);
  }
  SUBCASE("after a SIGTERM passed on to the command, a lost leadership ends the run: no new campaign") {
    RedisGroup g(3);
    // The command takes SIGTERM without exiting: the run goes on after it.
    Child run(cli_path(), campaign_args(g, {"--ttl", "2s", "--kill-after", "300ms"}, name,
                                        "trap 'echo got-term' TERM; echo \"term=$REDLOCK_FENCE\"; "
                                        "while :; do sleep 0.02; done"));
    REQUIRE(run.wait_for("term="));
    run.signal(SIGTERM);
    REQUIRE(run.wait_for("got-term"));
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"SET", key_of(name), "intruder", "PX", "1500"});
    // Deposed: SIGTERM (taken), SIGKILL --kill-after later; then no campaign.
    ProcResult r = run.wait();
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 128 + SIGTERM);
    CHECK(r.err.find("sent SIGKILL") != std::string::npos);
    CHECK(r.err.find("campaigning again") == std::string::npos);
    CHECK(r.out.find("term=", r.out.find("term=") + 1) == std::string::npos);  // one term only
  }
  SUBCASE("lost after the command exited by itself (what it left in its group held on): the lost code, no campaign") {
    RedisGroup g(3);
    Child run(cli_path(), campaign_args(g, {"--ttl", "2s", "--json"}, name,
                                        "sleep 60 & echo \"pid=$$\"; exit 0"));
    REQUIRE(run.wait_for("pid="));
    const GroupReaper cmd{static_cast<pid_t>(std::stoi(line_after(run.out_so_far(), "pid=")))};
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"SET", key_of(name), "intruder", "PX", "1500"});
    ProcResult r = run.wait();
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 3);
    const json rep = report_of(r);
    CHECK(rep["child_status"] == 0);
    CHECK(rep["deposed"].is_string());
    CHECK(rep["exit_status"] == 3);
    CHECK(reports_of(r).size() == 1);  // no second term
    CHECK(eventually([&] { return ::kill(-cmd.pgid, 0) != 0; }));  // what it left was killed
  }
  SUBCASE("three of five masters stop answering: not extended in time") {
    RedisGroup g(5);
    Child run(cli_path(), campaign_args(g, {"--ttl", "1s", "--kill-after", "200ms"}, name,
                                        leader_script("X", tmp, log, go)));
    REQUIRE(run.wait_for("start#1"));
    const long long term1 = field_of(run.out_so_far(), "start#1", "term");
    g[0].pause();
    g[1].pause();
    g[2].pause();
    // The command is stopped before the leadership's deadline passes.
    const bool stopped = eventually([&] { return events_in(log).size() == 2; }, std::chrono::seconds(5));
    g[0].resume();
    g[1].resume();
    g[2].resume();
    REQUIRE(stopped);
    REQUIRE(run.wait_for("start#2", std::chrono::seconds(20)));
    CHECK(field_of(run.out_so_far(), "start#2", "term") > term1);
    run.signal(SIGTERM);  // passed on: the command's trap exits 0
    ProcResult r = run.wait();
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("lost the leadership of \"deposed\"") != std::string::npos);
    CHECK(r.err.find("campaigning again") != std::string::npos);
    check_one_at_a_time(log);
    check_no_leader(g, name);
  }
}

TEST_CASE("run --campaign: the command's own exit ends the run with its status, and the leadership is resigned") {
  RedisGroup g(3);
  SUBCASE("it exits") {
    auto r = cli(campaign_args(g, {"--json", "--value", "10.0.0.7:8080"}, "once",
                               "'" + cli_path() + "' --no-quarantine --nodes " + g.url_list() +
                                   " leader once; echo \"term=$REDLOCK_FENCE\"; exit 7"));
    CHECK(r.exit_code == 7);
    // While it ran, it led: the record named it, with its value.
    CHECK(r.out.find("\"once\": led by") != std::string::npos);
    CHECK(r.out.find("value \"10.0.0.7:8080\"") != std::string::npos);
    const json rep = report_of(r);
    CHECK(rep["elected"] == true);
    CHECK(rep["term"] == std::stoll(line_after(r.out, "term=")));
    CHECK(rep["child_status"] == 7);
    CHECK(rep["resigned"] == true);
    CHECK(rep["exit_status"] == 7);
    check_no_leader(g, "once");
  }
  SUBCASE("a signal to redlock is passed on; the command's status is redlock's") {
    Child run(cli_path(), campaign_args(g, {}, "signalled",
                                        "trap 'exit 42' TERM; echo ready; while :; do sleep 0.02; done"));
    REQUIRE(run.wait_for("ready"));
    run.signal(SIGTERM);
    CHECK(run.wait().exit_code == 42);
    check_no_leader(g, "signalled");
  }
  SUBCASE("a resignation that fails turns the command's 0 into 125, and says so") {
    // The test takes DEL away from the masters' default user (the one
    // redlock uses), then the command exits 0: the resignation's scripts
    // are refused.
    TempDir tmp;
    const auto go = tmp.path / "go";
    Child run(cli_path(), campaign_args(g, {"--json"}, "unresigned",
                                        "echo ready; while [ ! -e '" + go.string() + "' ]; do sleep 0.02; done"));
    REQUIRE(run.wait_for("ready"));
    for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(g[i].command({"ACL", "SETUSER", "default", "-del"}).str == "OK");
    std::ofstream(go.string()) << "go";
    ProcResult r = run.wait();
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"ACL", "SETUSER", "default", "+del"});
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 125);
    CHECK(r.err.find("the leadership of \"unresigned\" was not resigned") != std::string::npos);
    const json rep = report_of(r);
    CHECK(rep["child_status"] == 0);
    CHECK(rep["resigned"] == false);
    CHECK(rep["resign_error"].is_string());
    CHECK(rep["exit_status"] == 125);
  }
  SUBCASE("a command that cannot be run: 127, resigned") {
    auto r = cli({"--no-quarantine", "--nodes", g.url_list(), "run", "--campaign", "nocmd", "--",
                  "/nonexistent/command-xyz"});
    CHECK(r.exit_code == 127);
    CHECK(r.err.find("command-xyz") != std::string::npos);
    check_no_leader(g, "nocmd");
  }
}

TEST_CASE("run --campaign: -n and -w bound the first election; a signal while campaigning ends the wait") {
  RedisGroup g(3);
  TempDir tmp;
  const auto log = tmp.path / "log";
  const auto go = tmp.path / "go";
  const auto marker = tmp.path / "ran";
  const std::string name = "busy-election";
  Child leader(cli_path(), campaign_args(g, {"--identity", "L"}, name, leader_script("L", tmp, log, go)));
  REQUIRE(leader.wait_for("start#1"));
  const std::string touch = "touch '" + marker.string() + "'";

  auto r = cli(campaign_args(g, {"-n"}, name, touch));
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("not elected") != std::string::npos);
  auto quiet = cli(campaign_args(g, {"-n", "-E", "0"}, name, touch));
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.err.empty());
  const auto before = std::chrono::steady_clock::now();
  auto waited = cli(campaign_args(g, {"-w", "300ms", "--json"}, name, touch));
  CHECK(waited.exit_code == 1);
  CHECK(std::chrono::steady_clock::now() - before >= milliseconds(300));
  const json rep = report_of(waited);
  CHECK(rep["elected"] == false);
  CHECK(rep["code"] == "redlock.held");
  CHECK(rep["exit_status"] == 1);

  Child waiter(cli_path(), campaign_args(g, {}, name, touch));
  REQUIRE(eventually([&] { return subscribers(g[0], channel_of(name)) == 1; }, std::chrono::seconds(20)));
  waiter.signal(SIGINT);
  ProcResult w = waiter.wait();
  CHECK(w.exit_code == 128 + SIGINT);
  CHECK(w.err.find("interrupted by SIGINT while campaigning") != std::string::npos);
  CHECK_FALSE(fs::exists(marker));

  std::ofstream(go.string()) << "go";
  CHECK(leader.wait().exit_code == 4);
}

TEST_CASE("run --campaign: options that make no sense with it are usage errors naming them") {
  const std::string nodes = "redis://127.0.0.1:1";
  const auto run = [&](std::vector<std::string> opts) {
    std::vector<std::string> args{"--nodes", nodes, "run"};
    args.insert(args.end(), opts.begin(), opts.end());
    args.insert(args.end(), {"job", "--", "true"});
    return args;
  };
  check_usage_error(run({"--campaign", "--permits", "2"}), {"--campaign", "--permits"});
  check_usage_error(run({"--campaign", "--shared"}), {"--campaign", "--shared"});
  check_usage_error(run({"--campaign", "--fair"}), {"--campaign", "--fair"});
  check_usage_error(run({"--campaign", "--max-hold", "5s"}), {"--campaign", "--max-hold"});
  check_usage_error(run({"--identity", "me"}), {"--identity", "--campaign"});
  check_usage_error(run({"--value", "addr"}), {"--value", "--campaign"});
  check_usage_error(run({"--campaign", "-n", "-w", "1"}), {"--wait", "--no-wait"});
  check_usage_error(run({"--campaign", "--ttl", "3s", "--kill-after", "2s"}), {"--kill-after"});
}
