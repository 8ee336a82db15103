// test_cli_run.cpp — `redlock run`, `redlock status` and `redlock nodes`,
// driving the real binary (REDLOCK_CLI) against real redis-servers on
// loopback. The masters are freshly started, so every invocation that should
// take a lock passes --no-quarantine (the tests of `nodes` show the
// quarantine itself).
#include <doctest/doctest.h>

#include <hiredis/hiredis.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_harness.hpp"
#include "helpers.hpp"
#include "redis_server.hpp"
#include "skewclock.hpp"

namespace {

using namespace redlock::test::cli_harness;
using redlock::test::RedisGroup;
using redlock::test::RedisServer;
using redlock::test::eventually;
using std::chrono::milliseconds;

std::string cli_path() { return program("REDLOCK_CLI"); }

// run_args builds `redlock --no-quarantine --nodes URLS run OPTS... RESOURCE -- sh -c SCRIPT`.
std::vector<std::string> run_args(const RedisGroup& g, std::vector<std::string> opts, const std::string& resource,
                                  const std::string& script) {
  std::vector<std::string> args{"--no-quarantine", "--nodes", g.url_list(), "run"};
  args.insert(args.end(), opts.begin(), opts.end());
  args.push_back(resource);
  args.push_back("--");
  args.push_back("sh");
  args.push_back("-c");
  args.push_back(script);
  return args;
}

// hold_until: a run's script that says "started" and holds until `go` exists.
std::string hold_until(const fs::path& go) {
  return "echo started; while [ ! -e '" + go.string() + "' ]; do sleep 0.02; done";
}

// group_stopped: every process of the group `pgid` is stopped. A member in
// 'D' counts when another member is stopped: a shell that vfork()ed its next
// command waits uninterruptibly for that child, and the child took the stop
// before its exec, so the shell shows 'D', not 'T', for as long as the group
// stays stopped (seen in CI: the check waited 3 s on a shell in 'D').
bool group_stopped(pid_t pgid) {
  int stopped = 0;
  int other = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string content;
    if (!std::getline(stat, content)) continue;  // exited meanwhile
    const auto paren = content.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(content.substr(paren + 2));
    char state = 0;
    long ppid = 0;
    long pgrp = 0;
    fields >> state >> ppid >> pgrp;
    if (pgrp != pgid) continue;
    if (state == 'T') ++stopped;
    else if (state != 'D' && state != 'Z') ++other;
  }
  return stopped > 0 && other == 0;
}

// process_gone waits (up to 5 s) for a SIGKILLed process to be dead.
bool process_gone(pid_t pid) {
  return eventually([pid] { return dead(pid); }, std::chrono::seconds(5));
}

// ---- the command's writes against another owner's acquisition ----------------

// writer is a command that prints its pid, then appends the wall-clock time
// (ns) to `file` every 20 ms until it is killed; with ignore_term, it and
// everything it starts ignore SIGTERM.
std::string writer(const fs::path& file, bool ignore_term = false) {
  return std::string(ignore_term ? "trap '' TERM; " : "") + "echo \"pid=$$\"; while :; do date +%s%N >> '" +
         file.string() + "'; sleep 0.02; done";
}

std::uintmax_t size_of(const fs::path& file) {
  std::error_code ec;
  const auto n = fs::file_size(file, ec);
  return ec ? 0 : n;
}

std::vector<long long> writes_in(const fs::path& file) {
  std::vector<long long> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) out.push_back(std::stoll(line));
  }
  return out;
}

long long unix_ns_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Takeover — when another owner got the lock, and how much the command had
// written by then.
struct Takeover {
  long long at_ns = 0;
  std::uintmax_t size = 0;
};

// take_over: `other` takes `resource` (waiting up to 20 s), as soon as the
// masters let it.
Takeover take_over(redlock::Client& other, const std::string& resource, const fs::path& file) {
  redlock::AcquireOptions ao;
  ao.ttl = milliseconds{30000};
  ao.wait = milliseconds{20000};
  auto lock = other.acquire(resource, ao);
  const Takeover t{unix_ns_now(), size_of(file)};
  REQUIRE_MESSAGE(lock, "the other owner could not take the lock: " << lock.error().to_string());
  return t;
}

// check_nothing_after: the command is dead, and wrote nothing once the
// other owner held the lock (not a byte more, no timestamp at or after it).
void check_nothing_after(const Takeover& t, const fs::path& file, pid_t cmd) {
  CHECK(process_gone(cmd));
  CHECK(size_of(file) == t.size);
  const auto writes = writes_in(file);
  REQUIRE_FALSE(writes.empty());
  CHECK(writes.back() < t.at_ns);
}

// Fifo — a named pipe the test controls: a command's background process
// blocks reading it until open() lets it go, so that the test decides when
// that process exits, without sleeping.
struct Fifo {
  fs::path path;
  explicit Fifo(fs::path p) : path(std::move(p)) { REQUIRE(::mkfifo(path.c_str(), 0600) == 0); }
  // open: "go" to the reader blocked in open(2) or read; false when none is there.
  bool open() const {
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    const bool ok = ::write(fd, "go\n", 3) == 3;
    ::close(fd);
    return ok;
  }
};

// left_behind: a run's script that starts a background process blocked on
// `fifo` (`before` runs in it first), prints sh=PID, bg=PID and the token,
// and exits with `status` at once, leaving the background process in the group.
std::string left_behind(const Fifo& fifo, int status, const std::string& before = "") {
  return "(" + before + "read x < '" + fifo.path.string() + "'; echo bg-done) & echo \"bg=$!\"; echo \"sh=$$\"; "
         "echo \"token=$REDLOCK_TOKEN\"; exit " + std::to_string(status);
}

// extended_from_now: the lock key of `resource` on the first master is
// extended after this call — its expiry (now + PTTL) moves on by more than
// a tenth of a second (a run extends at a third of its TTL) within 5 s.
bool extended_from_now(RedisGroup& g, const std::string& resource) {
  const auto expiry = [&] {
    const long long pttl = g[0].command({"PTTL", key_of(resource)}).integer;
    return pttl < 0 ? std::chrono::steady_clock::time_point{}
                    : std::chrono::steady_clock::now() + milliseconds(pttl);
  };
  const auto first = expiry();
  if (first == std::chrono::steady_clock::time_point{}) return false;
  return eventually([&] { return expiry() > first + milliseconds(100); }, std::chrono::seconds(5));
}

// pid_after reads "MARKER=PID" from a run's stdout.
pid_t pid_after(const Child& run, const std::string& marker) {
  return static_cast<pid_t>(std::stoi(line_after(run.out_so_far(), marker)));
}

}  // namespace

TEST_CASE("run: a command that outlives several TTLs keeps the lock; it is released when the command exits") {
  RedisGroup g(5);
  TempDir tmp;
  const auto go = tmp.path / "go";
  // The command holds until the test creates `go`: the test decides how
  // long the lease must last, and never sleeps.
  Child run(cli_path(), run_args(g, {"--ttl", "900ms", "--json"}, "long-job",
                                 "echo \"token=$REDLOCK_TOKEN\"; echo \"resource=$REDLOCK_RESOURCE\"; "
                                 "while [ ! -e '" + go.string() + "' ]; do sleep 0.02; done; echo done; exit 5"));
  REQUIRE(run.wait_for("resource=long-job"));
  const std::string token = line_after(run.out_so_far(), "token=");
  REQUIRE(token.substr(0, token.find('~')).size() == 22);  // then the owner
  // The TTL leaves the run 600 ms to extend: with 300 ms (200 ms to
  // extend) a CI run under ASan on a loaded machine lost the lease once.
  // Other owners are refused for more than 3 TTLs (2.7 s), checked throughout
  // and at least three times (each check starts two processes: under ASan on
  // a busy machine one check can take longer than a TTL).
  const auto start = std::chrono::steady_clock::now();
  int refusals = 0;
  while (std::chrono::steady_clock::now() - start < milliseconds(2800) || refusals < 3) {
    auto other = cli(op({"acquire", "long-job"}, g));
    REQUIRE(other.exit_code == 1);
    REQUIRE(json_of(other)["code"] == "redlock.held");
    ++refusals;
    auto st = cli(op({"status", "long-job", "--json"}, g));
    REQUIRE(st.exit_code == 0);
    const json s = json_of(st);
    REQUIRE(s["held"] == true);
    REQUIRE(s["token"] == token);
  }
  CHECK(refusals >= 3);
  std::ofstream(go.string()) << "go";
  ProcResult r = run.wait();
  INFO("the run's stderr: ", r.err);  // a lost lease says why
  CHECK(r.exit_code == 5);  // the command's status
  const json rep = report_of(r);
  CHECK(rep["acquired"] == true);
  CHECK(rep["token"] == token);
  CHECK(rep["child_status"] == 5);
  CHECK(rep["exit_status"] == 5);
  CHECK(rep["lost"].is_null());
  CHECK(rep["extensions"].get<int>() >= 3);  // extended at 1/3 of 900 ms over > 2.8 s
  CHECK(rep["released"] == true);
  CHECK(rep["acquired_at_us"].get<long long>() >= rep["started_at_us"].get<long long>());
  CHECK(rep["released_at_us"].get<long long>() > rep["acquired_at_us"].get<long long>());
  {  // deadline_mono_us is deadline_at_us on CLOCK_MONOTONIC (the test's steady_clock)
    const auto us = [](auto d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); };
    const long long mono_now = us(std::chrono::steady_clock::now().time_since_epoch());
    const long long unix_now = us(std::chrono::system_clock::now().time_since_epoch());
    REQUIRE(rep["deadline_mono_us"].is_number_integer());
    const long long mono = rep["deadline_mono_us"].get<long long>();
    CHECK(mono > us(start.time_since_epoch()));  // extended past the refusals loop's start
    CHECK(mono <= mono_now + 900'000);           // at most one TTL ahead
    const long long skew = (mono - mono_now) - (rep["deadline_at_us"].get<long long>() - unix_now);
    CHECK(std::abs(skew) < 50'000);
  }
  CHECK(r.out.find("done") != std::string::npos);
  // Released on the masters: the lock is free at once, not after its TTL.
  CHECK(holding(g, "long-job", token) == 0);
  auto after = cli(op({"acquire", "long-job"}, g));
  CHECK(after.exit_code == 0);
}

TEST_CASE("run --shared: shared runs hold together, an exclusive one waits for all of them (flock -s / -x)") {
  RedisGroup g(3);
  TempDir tmp;
  const auto go = tmp.path / "go";
  Child first(cli_path(), run_args(g, {"--shared", "--json"}, "catalog", hold_until(go)));
  REQUIRE(first.wait_for("started"));
  // Another shared run gets in at once, a try of an exclusive one does not.
  auto second = cli(run_args(g, {"--shared", "--no-wait", "--json"}, "catalog", "true"));
  CHECK(second.exit_code == 0);
  CHECK(report_of(second)["shared"] == true);
  auto writer = cli(run_args(g, {"-x", "--no-wait", "--json"}, "catalog", "true"));
  CHECK(writer.exit_code == 1);
  CHECK(report_of(writer)["acquired"] == false);
  // An exclusive run that waits gets it once the shared one has ended.
  Child waiting(cli_path(), run_args(g, {"--exclusive", "-w", "20s", "--json"}, "catalog", "echo exclusive"));
  std::ofstream(go.string()) << "go";
  ProcResult f = first.wait();
  CHECK(f.exit_code == 0);
  CHECK(report_of(f)["released"] == true);
  ProcResult w = waiting.wait();
  CHECK(w.exit_code == 0);
  CHECK(w.out.find("exclusive") != std::string::npos);
  // What does not go with a shared hold is a usage error, before anything runs.
  for (const std::vector<std::string>& other : {std::vector<std::string>{"--fence"}, {"--permits", "2"}, {"--fair"}, {"-x"}}) {
    std::vector<std::string> opts{"--shared"};
    opts.insert(opts.end(), other.begin(), other.end());
    auto bad = cli(run_args(g, opts, "catalog", "true"));
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("--shared and") != std::string::npos);
  }
}

TEST_CASE("run: a second run fails at once with the conflict code, or waits for the first") {
  RedisGroup g(5);
  TempDir tmp;
  const auto go = tmp.path / "go";
  const auto marker = tmp.path / "second-ran";
  Child first(cli_path(), run_args(g, {"--json"}, "shared", hold_until(go)));
  REQUIRE(first.wait_for("started"));

  SUBCASE("--no-wait: the conflict code, and the command is not run") {
    auto r = cli(run_args(g, {"--no-wait", "--conflict-exit-code", "9", "--json"}, "shared",
                          "touch '" + marker.string() + "'"));
    CHECK(r.exit_code == 9);
    CHECK_FALSE(fs::exists(marker));
    const json rep = report_of(r);
    CHECK(rep["acquired"] == false);
    CHECK(rep["code"] == "redlock.held");
    CHECK(rep["exit_status"] == 9);
    // Without --json: a message naming the resource, and the default code 1.
    auto plain = cli(run_args(g, {"--no-wait"}, "shared", "touch '" + marker.string() + "'"));
    CHECK(plain.exit_code == 1);
    CHECK(plain.err.find("\"shared\" not acquired") != std::string::npos);
    CHECK_FALSE(fs::exists(marker));
  }
  SUBCASE("--wait shorter than the hold: the conflict code after the wait") {
    auto r = cli(run_args(g, {"--wait", "300ms", "--json"}, "shared", "touch '" + marker.string() + "'"));
    CHECK(r.exit_code == 1);
    CHECK_FALSE(fs::exists(marker));
    const json rep = report_of(r);
    CHECK(rep["acquire_us"].get<long long>() >= 300000);
  }
  SUBCASE("waiting: the second runs once the first has released") {
    Child second(cli_path(), run_args(g, {"--wait", "20000ms", "--json"}, "shared", "echo second-running"));
    std::ofstream(go.string()) << "go";
    ProcResult r1 = first.wait();
    ProcResult r2 = second.wait();
    CHECK(r1.exit_code == 0);
    CHECK(r2.exit_code == 0);
    CHECK(r2.out.find("second-running") != std::string::npos);
    const json a = report_of(r1), b = report_of(r2);
    // Mutual exclusion in time: the second acquired after the first released.
    CHECK(b["acquired_at_us"].get<long long>() >= a["released_at_us"].get<long long>());
    CHECK(b["token"] != a["token"]);
    return;
  }
  std::ofstream(go.string()) << "go";
  CHECK(first.wait().exit_code == 0);
}

TEST_CASE("run: a lost lease stops the command with SIGTERM, then SIGKILL, and exits with the lost code") {
  RedisGroup g(5);
  TempDir tmp;
  const std::string resource = "lost-job";

  SUBCASE("the command obeys SIGTERM") {
    // SIGKILL follows SIGTERM --kill-after later: the shell must be
    // scheduled and run its trap within that. With --ttl 600ms that was the
    // default's cap, TTL/3 - 50 = 150 ms, and a loaded machine left the
    // shell unscheduled that long: SIGKILL, no "got-term" (a flake in CI).
    // 900 ms, as in the -s/--signal test (the lease is lost at the first
    // extension, 1 s in: 0.8 s longer than with 600 ms).
    Child run(cli_path(), run_args(g, {"--ttl", "3000ms", "--kill-after", "900ms", "--json"}, resource,
                                   "trap 'echo got-term; exit 0' TERM; echo \"token=$REDLOCK_TOKEN\"; "
                                   "while :; do sleep 0.02; done"));
    REQUIRE(run.wait_for("token="));
    // Another owner takes the key on every master (as after an expiry):
    // the next extension is refused by a majority, so the lease is lost.
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"SET", key_of(resource), "intruder", "PX", "60000"});
    ProcResult r = run.wait();
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 3);
    CHECK(r.out.find("got-term") != std::string::npos);
    const json rep = report_of(r);
    CHECK(rep["lost"].is_string());
    CHECK(rep["lost"].get<std::string>().find("redlock.lost") != std::string::npos);
    CHECK(rep["killed"] == "SIGTERM");
    CHECK(rep["exit_status"] == 3);
    // The intruder's keys are untouched: a lost lease deletes only its own token.
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i].command({"GET", key_of(resource)}).str == "intruder");
  }
  SUBCASE("the command ignores SIGTERM: SIGKILL after --kill-after, for the whole process group") {
    Child run(cli_path(),
              run_args(g, {"--ttl", "900ms", "--kill-after", "200ms", "--lost-exit-code", "77"}, resource,
                       "trap '' TERM; sleep 60 & echo \"grandchild=$!\"; echo \"token=$REDLOCK_TOKEN\"; wait"));
    REQUIRE(run.wait_for("token="));
    const pid_t grandchild = std::stoi(line_after(run.out_so_far(), "grandchild="));
    // Three of five masters stop answering: no extension can reach a
    // majority, and the lease ends at its validity deadline.
    g[0].pause();
    g[1].pause();
    g[2].pause();
    ProcResult r = run.wait();
    g[0].resume();
    g[1].resume();
    g[2].resume();
    CHECK(r.exit_code == 77);
    CHECK(r.err.find("lost the lock on \"lost-job\"") != std::string::npos);
    CHECK(r.err.find("sent SIGKILL") != std::string::npos);
    CHECK(process_gone(grandchild));
  }
}

TEST_CASE("run: SIGINT, SIGTERM and SIGHUP are passed to the command; the lock is released after it exits") {
  RedisGroup g(5);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    CAPTURE(sig);
    Child run(cli_path(), run_args(g, {"--json"}, "signalled",
                                   "trap 'echo got-signal; exit 42' INT TERM HUP; echo \"token=$REDLOCK_TOKEN\"; "
                                   "while :; do sleep 0.02; done"));
    REQUIRE(run.wait_for("token="));
    const std::string token = line_after(run.out_so_far(), "token=");
    REQUIRE(holding(g, "signalled", token) >= 3);
    run.signal(sig);
    ProcResult r = run.wait();
    CHECK(r.exit_code == 42);
    CHECK(r.out.find("got-signal") != std::string::npos);
    const json rep = report_of(r);
    CHECK(rep["child_status"] == 42);
    CHECK(rep["released"] == true);
    CHECK(holding(g, "signalled", token) == 0);
  }
  SUBCASE("a command killed by the forwarded signal: 128+N") {
    Child run(cli_path(), run_args(g, {}, "signalled", "echo ready; exec sleep 60"));
    REQUIRE(run.wait_for("ready"));
    run.signal(SIGTERM);
    CHECK(run.wait().exit_code == 128 + SIGTERM);
    CHECK(eventually([&] { return g.keys_everywhere(key_of("signalled")) == 0; }));  // the last master may answer after the majority
  }
}

TEST_CASE("run: a signal while waiting cancels the wait; the command is not run") {
  RedisGroup g(3);
  TempDir tmp;
  const auto marker = tmp.path / "ran";
  auto held = cli(op({"acquire", "busy", "--ttl", "30000ms"}, g));
  REQUIRE(held.exit_code == 0);
  Child waiter(cli_path(), run_args(g, {"--json"}, "busy", "touch '" + marker.string() + "'"));
  // The waiter is waiting once it has subscribed to the release channel
  // (its signals are blocked long before that).
  CHECK(eventually(
      [&] { return subscribers(g[0], channel_of("busy")) == 1; },
      std::chrono::seconds(20)));
  waiter.signal(SIGTERM);
  ProcResult r = waiter.wait();
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK_FALSE(fs::exists(marker));
  CHECK(report_of(r)["acquired"] == false);
}

TEST_CASE("run: a command that cannot be run exits 127 / 126 and leaves no lock behind") {
  RedisGroup g(3);
  TempDir tmp;
  std::vector<std::string> args{"--no-quarantine", "--nodes", g.url_list(), "run", "nocmd", "--",
                                "/nonexistent/command-xyz"};
  auto r = cli(args);
  CHECK(r.exit_code == 127);
  CHECK(r.err.find("command-xyz") != std::string::npos);
  const auto script = tmp.write("not-executable.sh", "#!/bin/sh\necho hi\n");
  args.back() = script.string();
  auto r2 = cli(args);
  CHECK(r2.exit_code == 126);
  CHECK(eventually([&] { return g.keys_everywhere(key_of("nocmd")) == 0; }));  // the last master may answer after the majority
}

TEST_CASE("run: --fence exports an increasing REDLOCK_FENCE") {
  RedisGroup g(3);
  long long last = 0;
  for (int i = 0; i < 3; ++i) {
    auto r = cli(run_args(g, {"--fence"}, "fenced", "echo \"fence=$REDLOCK_FENCE\""));
    REQUIRE(r.exit_code == 0);
    const long long fence = std::stoll(line_after(r.out, "fence="));
    CHECK(fence > last);
    last = fence;
  }
  auto r = cli(run_args(g, {}, "fenced", "echo \"fence=${REDLOCK_FENCE-unset}\""));
  CHECK(line_after(r.out, "fence=") == "unset");
}

TEST_CASE("run: --fair runs the waiting commands in the order their runs started, across processes") {
  RedisGroup g(5);
  TempDir tmp;
  const auto go = tmp.path / "go";
  const auto order = tmp.path / "order";
  Child holder(cli_path(), run_args(g, {"--fair"}, "fair-run", hold_until(go)));
  REQUIRE(holder.wait_for("started"));
  std::vector<std::unique_ptr<Child>> waiters;
  const std::vector<std::string> names{"w1", "w2", "w3", "w4"};
  for (std::size_t i = 0; i < names.size(); ++i) {
    waiters.push_back(std::make_unique<Child>(
        cli_path(), run_args(g, {"--fair", "--wait", "20s", "--json"}, "fair-run",
                             "echo " + names[i] + " >> '" + order.string() + "'; sleep 0.05")));
    // The next starts once this one has joined the queue on every master.
    REQUIRE(eventually([&] { return queued_everywhere(g, "fair-run", static_cast<long long>(i + 1)); },
                       std::chrono::seconds(10)));
  }
  std::ofstream(go.string()) << "go";
  CHECK(holder.wait().exit_code == 0);
  std::vector<long long> acquired;
  for (auto& w : waiters) {
    ProcResult r = w->wait();
    CHECK(r.exit_code == 0);
    const json rep = report_of(r);
    CHECK(rep["token"].get<std::string>().front() == 'Q');
    acquired.push_back(rep["acquired_at_us"].get<long long>());
  }
  std::ifstream in(order);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str() == "w1\nw2\nw3\nw4\n");
  CHECK(std::is_sorted(acquired.begin(), acquired.end()));
  // Nothing is left: no lock, no queue.
  CHECK(eventually([&] { return g.keys_everywhere("redlock:{fair-run}:*") == 0; }));
}

// Found by chaos crowd-64-fair: with two waiters that cannot come at the
// head of the queue, a live waiter behind them never got the free lock (a
// turn key that expired after 2 x grace was set again, for the same dead
// head, by a waiter that came back later than that). Here: two `run
// --fair` killed in the queue, then a live one with --wait 5s gets the lock
// a few graces after the holder's release.
TEST_CASE("run: --fair behind two waiters killed in the queue, a live waiter still gets the lock") {
  RedisGroup g(5);
  TempDir tmp;
  const auto go = tmp.path / "go";
  Child holder(cli_path(), run_args(g, {"--fair"}, "fair-dead", hold_until(go)));
  REQUIRE(holder.wait_for("started"));
  for (long long k = 1; k <= 2; ++k) {
    Child dead(cli_path(), run_args(g, {"--fair", "--wait", "60s"}, "fair-dead", "true"));
    REQUIRE(eventually([&] { return queued_everywhere(g, "fair-dead", k); }, std::chrono::seconds(10)));
    dead.signal(SIGKILL);
    dead.wait();
  }
  Child live(cli_path(), run_args(g, {"--fair", "--wait", "5s", "--json"}, "fair-dead", "echo live-ran"));
  REQUIRE(eventually([&] { return queued_everywhere(g, "fair-dead", 3); }, std::chrono::seconds(10)));
  std::ofstream(go.string()) << "go";
  CHECK(holder.wait().exit_code == 0);
  ProcResult r = live.wait();
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("live-ran") != std::string::npos);
}

TEST_CASE("run: --fair with --fence is a usage error naming both; nothing is run or locked") {
  RedisGroup g(3);
  TempDir tmp;
  const auto marker = tmp.path / "ran";
  check_usage_error(run_args(g, {"--fair", "--fence"}, "fair-fence", "touch '" + marker.string() + "'"),
                    {"--fair", "--fence", "give only one of them"});
  check_usage_error({"--nodes", g.url_list(), "run", "--fence", "--wait", "5s", "--fair", "job", "--", "true"},
                    {"--fair", "--fence"});
  CHECK_FALSE(fs::exists(marker));
  CHECK(g.keys_everywhere("redlock:*") == 0);
}

TEST_CASE("status: free, held by a majority, and unknown when too few masters answer") {
  RedisGroup g(5);
  // Every running master must answer (PatientConfig). Killed masters refuse at once.
  const PatientConfig patient(g);
  auto status = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"status", "report"});
    return cli(patient.op(args));
  };
  auto free_r = status({"--json"});
  CHECK(free_r.exit_code == 0);
  json f = json_of(free_r);
  CHECK(f["held"] == false);
  CHECK(f["free_nodes"] == 5);
  CHECK(f["quorum"] == 3);
  CHECK(f["token"].is_null());

  const json lock = json_of(cli(op({"acquire", "report", "--ttl", "30000ms"}, g)));
  const std::string token = lock["token"];
  // A stray key with another token on one master: the majority still agrees.
  // The acquire needed only a majority: on a loaded machine a master whose
  // handshake was still running got no SET. The stray goes to such a master
  // if there is one (else the last), so that the majority stays ours.
  std::size_t stray = g.size() - 1;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (g[i].command({"GET", key_of("report")}).str != token) stray = i;
  }
  g[stray].command({"SET", key_of("report"), "stray-token", "PX", "30000"});
  auto held_r = status({"--json"});
  CHECK(held_r.exit_code == 0);
  json h = json_of(held_r);
  CHECK(h["held"] == true);
  CHECK(h["token"] == token);
  CHECK(h["agreeing"].get<int>() >= 3);
  CHECK(h["ttl_ms"].get<long long>() > 20000);
  REQUIRE(h["nodes"].size() == 5);
  for (const auto& n : h["nodes"]) {
    CAPTURE(n.dump());
    CHECK((n["state"] == "held" || n["state"] == "free"));
  }
  CHECK(h["nodes"][stray]["token"] == "stray-token");

  // The human table names the shortened token and every master.
  auto human = status({});
  CHECK(human.exit_code == 0);
  CHECK(human.out.find("(token " + token.substr(0, 8)) != std::string::npos);
  CHECK(human.out.find("is held by ") != std::string::npos);
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(human.out.find(g[i].address()) != std::string::npos);

  // Two masters down: still known (3 answered).
  g[0].kill();
  g[1].kill();
  auto two_down = status({"--json"});
  CHECK(two_down.exit_code == 0);
  json d = json_of(two_down);
  CHECK(d["nodes"][0]["state"] == "unreachable");
  CHECK(d["nodes"][0]["error"].is_string());
  // A third down: too few answers to tell.
  g[2].kill();
  auto three_down = status({});
  CHECK(three_down.exit_code == 1);
  CHECK(three_down.out.find("unknown") != std::string::npos);
}

TEST_CASE("status: the fair queue, its length and head — shown only when a master has one") {
  using namespace std::chrono_literals;
  RedisGroup g(3);
  const PatientConfig patient(g);  // every master must answer
  // No queue: no line, no QUEUE column; queued 0 and no head in JSON.
  auto none = cli(patient.op({"status", "deploy"}));
  CHECK(none.exit_code == 0);
  CHECK(none.out.find("fair queue") == std::string::npos);
  CHECK(none.out.find("QUEUE") == std::string::npos);
  json nj = json_of(cli(patient.op({"status", "deploy", "--json"})));
  CHECK(nj["queued"] == 0);
  CHECK(nj["queue_head"].is_null());
  for (const auto& n : nj["nodes"]) {
    CAPTURE(n.dump());
    CHECK(n["queued"] == 0);
    CHECK(n["queue_head"].is_null());
  }

  // A holder and two fair waiters (library clients that only a release wakes).
  auto holder = redlock::test::client_for(g);
  auto first = redlock::test::client_for(g, redlock::test::no_polling);
  auto second = redlock::test::client_for(g, redlock::test::no_polling);
  auto held = holder->acquire("deploy", {.ttl = 30000ms, .fair = true});
  REQUIRE(held.ok());
  REQUIRE(eventually([&] { return g.keys_everywhere(key_of("deploy")) == g.size(); }));
  std::optional<redlock::Result<redlock::Lock>> got1, got2;
  const redlock::AcquireOptions wait_fair{.ttl = 30000ms, .wait = 20000ms, .fair = true};
  std::jthread t1([&] { got1.emplace(first->acquire("deploy", wait_fair)); });
  REQUIRE(eventually([&] { return redlock::test::queued_everywhere(g, "deploy", 1); }));
  std::jthread t2([&] { got2.emplace(second->acquire("deploy", wait_fair)); });
  REQUIRE(eventually([&] { return redlock::test::queued_everywhere(g, "deploy", 2); }));

  json j = json_of(cli(patient.op({"status", "deploy", "--json"})));
  CHECK(j["held"] == true);
  CHECK(j["queued"] == 2);
  REQUIRE(j["queue_head"].is_string());
  const std::string head = j["queue_head"];
  CHECK(head.size() == 16);
  for (const auto& n : j["nodes"]) {
    CAPTURE(n.dump());
    CHECK(n["queued"] == 2);
    CHECK(n["queue_head"] == head);
  }
  auto human = cli(patient.op({"status", "deploy"}));
  CHECK(human.exit_code == 0);
  CHECK(human.out.find("fair queue: 2 waiting (head " + head.substr(0, 8) + "\u2026)\n") != std::string::npos);
  CHECK(human.out.find("QUEUE") != std::string::npos);
  CHECK(human.out.find("2, head " + head.substr(0, 8)) != std::string::npos);

  // The head was the first waiter: it takes the lock next (characters 1–16
  // of a fair token are its waiter id).
  REQUIRE(holder->release(*held).ok());
  t1.join();
  REQUIRE(got1->ok());
  CHECK((*got1)->token.substr(1, 16) == head);
  REQUIRE(first->release(**got1).ok());
  t2.join();
  REQUIRE(got2->ok());
  REQUIRE(second->release(**got2).ok());
  REQUIRE(eventually([&] { return redlock::test::queued_everywhere(g, "deploy", 0); }));
  auto after = cli(patient.op({"status", "deploy"}));
  CHECK(after.out.find("fair queue") == std::string::npos);

  // A queue on one master only: not a majority's, still shown.
  g[2].command({"ZADD", "redlock:{deploy}:queue", "1", "0123abcd4567ef01"});
  g[2].command({"ZADD", "redlock:{deploy}:expiry", "99999999999999", "0123abcd4567ef01"});  // a live place
  auto minority = cli(patient.op({"status", "deploy"}));
  CHECK(minority.out.find("fair queue: none on a majority; up to 1 waiting on 1 of 3 masters\n") !=
        std::string::npos);
  json mj = json_of(cli(patient.op({"status", "deploy", "--json"})));
  CHECK(mj["queued"] == 0);
  CHECK(mj["queue_head"].is_null());
  CHECK(mj["nodes"][2]["queued"] == 1);
  CHECK(mj["nodes"][2]["queue_head"] == "0123abcd4567ef01");
}

TEST_CASE("nodes: reachability, version, run id, uptime and quarantine of each master") {
  RedisGroup g(3);
  const PatientConfig patient(g);  // every running master must answer
  auto ok = cli(patient.op({"nodes", "--json"}));
  CHECK(ok.exit_code == 0);
  json j = json_of(ok);
  CHECK(j["can_lock"] == true);
  CHECK(j["usable"] == 3);
  REQUIRE(j["nodes"].size() == 3);
  for (const auto& n : j["nodes"]) {
    CAPTURE(n.dump());
    CHECK(n["reachable"] == true);
    CHECK(n["rtt_us"].get<long long>() > 0);
    CHECK(n["version"].get<std::string>().find('.') != std::string::npos);
    CHECK(n["run_id"].get<std::string>().size() == 40);
    CHECK(n["uptime_s"].get<long long>() >= 0);
    CHECK(n["quarantined"] == false);
  }

  // Without --no-quarantine, freshly started masters sit out.
  auto fresh = cli({"nodes", "--json", "--config", patient.file.string()});
  CHECK(fresh.exit_code == 1);
  json q = json_of(fresh);
  CHECK(q["can_lock"] == false);
  for (const auto& n : q["nodes"]) {
    CHECK(n["quarantined"] == true);
    CHECK(n["quarantine_left_ms"].get<long long>() > 0);
    CHECK(n["quarantine_until"].is_string());
  }
  auto fresh_human = cli({"nodes", "--config", patient.file.string()});
  CHECK(fresh_human.out.find("NO lock can be taken") != std::string::npos);

  // One master down: reported, with why; a majority is still usable.
  g[1].kill();
  auto one_down = cli(patient.op({"nodes"}));
  CHECK(one_down.exit_code == 0);
  CHECK(one_down.out.find("down") != std::string::npos);
  CHECK(one_down.out.find("2 of 3 masters usable") != std::string::npos);
  json d = json_of(cli(patient.op({"nodes", "--json"})));
  CHECK(d["nodes"][1]["reachable"] == false);
  CHECK(d["nodes"][1]["error"].is_string());
  g[2].kill();
  CHECK(cli(patient.op({"nodes"})).exit_code == 1);
}

TEST_CASE("run, status, nodes: usage errors exit 2 and name the argument") {
  RedisGroup g(3);
  const std::string nodes = g.url_list();
  struct Case {
    const char* what;
    std::vector<std::string> args;
    std::vector<std::string> names;
  };
  const std::vector<Case> cases = {
      // Without "--" CMD starts at the first word after RESOURCE: the
      // --nodes after it is CMD's, so redlock has no nodes.
      {"run without --: options after CMD are CMD's", {"run", "job", "./report.sh", "--nodes", nodes},
       {"no nodes", "Run 'redlock run --help' for usage."}},
      {"run without a command", {"--nodes", nodes, "run", "job"}, {"no command given", "-c 'STRING'"}},
      {"--signal FOO", {"--nodes", nodes, "run", "-s", "FOO", "job", "--", "true"}, {"--signal", "\"FOO\""}},
      {"--signal STOP", {"--nodes", nodes, "run", "--signal", "STOP", "job", "--", "true"}, {"--signal", "SIGSTOP"}},
      {"--wait 5x", {"--nodes", nodes, "run", "-w", "5x", "job", "--", "true"}, {"--wait", "unknown unit"}},
      {"--unavailable-exit-code -1", {"--nodes", nodes, "run", "--unavailable-exit-code", "-1", "job", "--", "true"},
       {"--unavailable-exit-code"}},
      {"--report in a missing directory", {"--nodes", nodes, "run", "--report", "/nonexistent-dir/r", "job", "--", "true"},
       {"--report", "/nonexistent-dir/r"}},
      {"run with nothing after --", {"--nodes", nodes, "run", "job", "--"}, {"command"}},
      {"run without RESOURCE", {"--nodes", nodes, "run", "--", "true"}, {"RESOURCE"}},
      {"--wait and --no-wait", {"--nodes", nodes, "run", "--wait", "5ms", "--no-wait", "job", "--", "true"},
       {"--no-wait"}},
      {"--conflict-exit-code 300", {"--nodes", nodes, "run", "--conflict-exit-code", "300", "job", "--", "true"},
       {"--conflict-exit-code", "300"}},
      {"--lost-exit-code x", {"--nodes", nodes, "run", "--lost-exit-code", "x", "job", "--", "true"},
       {"--lost-exit-code", "\"x\""}},
      {"--kill-after -1", {"--nodes", nodes, "run", "--kill-after", "-1", "job", "--", "true"}, {"--kill-after"}},
      {"--kill-after beyond TTL/3 - margin",
       {"--nodes", nodes, "run", "--ttl", "1000ms", "--kill-after", "284ms", "job", "--", "true"},
       {"--kill-after", "284ms", "at most TTL/3 - 50 = 283 ms"}},
      {"--ttl abc", {"--nodes", nodes, "run", "--ttl", "abc", "job", "--", "true"}, {"--ttl", "\"abc\""}},
      {"--max-hold 0", {"--nodes", nodes, "run", "--max-hold", "0", "job", "--", "true"}, {"--max-hold"}},
      {"run unknown option", {"--nodes", nodes, "run", "--frob", "job", "--", "true"}, {"--frob"}},
      {"status without RESOURCE", {"status", "--nodes", nodes}, {"RESOURCE"}},
      {"status with two resources", {"status", "a", "b", "--nodes", nodes}, {"\"b\""}},
      {"nodes with an argument", {"nodes", "extra", "--nodes", nodes}, {"\"extra\""}},
      {"--json and --human", {"nodes", "--json", "--human", "--nodes", nodes}, {"--human"}},
      {"status without nodes", {"status", "job"}, {"REDLOCK_NODES"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    check_usage_error(c.args, c.names);
  }
  CHECK(g.keys_everywhere() == 0);
}

TEST_CASE("run, status, nodes: --help shows the options and examples") {
  for (const std::string cmd : {"run", "status", "nodes"}) {
    CAPTURE(cmd);
    auto r = cli({cmd, "--help"});
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("Examples") != std::string::npos);
    CHECK(r.out.find("redlock " + cmd) != std::string::npos);
  }
  auto run_help = cli({"run", "--help"});
  for (const char* opt : {"--ttl", "-w,--wait", "-n,--no-wait", "--fence", "--fair", "-E,--conflict-exit-code",
                          "--unavailable-exit-code", "--lost-exit-code", "-s,--signal", "--kill-after", "--report",
                          "--foreground", "REDLOCK_FENCE", "Exit status", "(69)", "125"})
    CHECK(run_help.out.find(opt) != std::string::npos);
  CHECK(run_help.out.find("Usage: redlock run [OPTIONS] RESOURCE [--] CMD [ARGS...]") != std::string::npos);
  for (const char* opt : {"-k,--kill-after", "-w,--wait,--timeout", "-n,--no-wait,--nonblock", "-c,--command STRING",
                          "-q,--quiet", "seconds unless a unit is given"})
    CHECK(run_help.out.find(opt) != std::string::npos);
}

TEST_CASE("run: a redlock frozen past its lease reports it lost, even when the command exits meanwhile") {
  RedisGroup g(3);
  TempDir tmp;
  const auto go = tmp.path / "go";
  // TTL 1000: the guard's SIGTERM (kill-after 283 + 50 ms before the
  // deadline) comes well after the command has seen `go`.
  Child run(cli_path(), run_args(g, {"--ttl", "1000ms", "--json"}, "frozen",
                                 "echo \"token=$REDLOCK_TOKEN\"; while [ ! -e '" + go.string() +
                                     "' ]; do sleep 0.01; done"));
  REQUIRE(run.wait_for("token="));
  run.signal(SIGSTOP);  // the whole holder stops extending (a VM pause, say)
  std::ofstream(go.string()) << "go";  // the command finishes while redlock is frozen
  // Wait until the lease has run out on every master.
  REQUIRE(eventually([&] { return g.keys_everywhere(key_of("frozen")) == 0; }, std::chrono::seconds(20)));
  run.signal(SIGCONT);
  ProcResult r = run.wait();
  CHECK(r.exit_code == 3);
  const json rep = report_of(r);
  CHECK(rep["lost"].is_string());
  CHECK(rep["child_status"] == 0);
}

// A suspended machine (a laptop's lid, a VM's snapshot): CLOCK_MONOTONIC
// stops, the masters' clocks do not, and the lock expires meanwhile. The
// skewclock shim moves redlock's CLOCK_BOOTTIME ahead of CLOCK_MONOTONIC by
// the time "slept" (suspend_ms); these masters never saw the time pass, so
// the key is still theirs: only the client's own clock can tell.
TEST_CASE("run: a suspend longer than the lease loses it at the next timer, though no master saw the time pass") {
  RedisGroup g(3);
  TempDir tmp;
  skewclock::Control clock((tmp.path / "run.skew").string());
  clock.set({});
  std::string asan = std::getenv("ASAN_OPTIONS") != nullptr ? std::getenv("ASAN_OPTIONS") : "";
  const EnvVars env = {{"LD_PRELOAD", program("REDLOCK_SKEWCLOCK")},
                       {"SKEWCLOCK_FILE", clock.path()},
                       // Every clock read sees the suspend, in redlock and in
                       // its guard alike, as with a real one. (Polled apart,
                       // the guard once saw it first and killed CMD while
                       // redlock still read the old time: "not lost".)
                       {"SKEWCLOCK_POLL_MS", "0"},
                       // The shim comes before a sanitized build's runtime.
                       {"ASAN_OPTIONS", asan + (asan.empty() ? "" : ":") + "verify_asan_link_order=0"}};
  Child run(cli_path(),
            run_args(g, {"--ttl", "3000ms", "--kill-after", "900ms", "--json"}, "suspended",
                     "unset LD_PRELOAD SKEWCLOCK_FILE; "
                     "echo \"token=$REDLOCK_TOKEN\"; while :; do sleep 0.02; done"),
            env);
  REQUIRE(run.wait_for("token="));
  // No wait for the shim's acknowledgement: the command's shell writes one
  // too. redlock reads its clock at every timer and applies the change at
  // the first read; if it did not, the bound below fails.
  const auto suspended = std::chrono::steady_clock::now();
  clock.suspend(std::chrono::seconds(10));  // the machine sleeps 10 s "at once"
  ProcResult r = run.wait(std::chrono::seconds(20));
  const auto took = std::chrono::steady_clock::now() - suspended;
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 3);
  const json rep = report_of(r);
  CHECK(rep["lost"].is_string());
  // Past the deadline there is no time left for SIGTERM's grace.
  CHECK(rep["killed"] == "SIGKILL");
  // Lost at the lease's next timer (its extension, a third into the TTL),
  // not at the end of the 3 s TTL the masters still count.
  CHECK(took < std::chrono::milliseconds(2900));
  // The deadline it reports is on the boot clock, 10 s ahead of the
  // monotonic one it also reports.
  CHECK(rep["deadline_boot_us"].get<std::int64_t>() - rep["deadline_mono_us"].get<std::int64_t>() >= 9'990'000);
}

TEST_CASE("run: SIGTSTP stops the command's group with redlock; the guard kills it before another owner can lock") {
  RedisGroup g(3);
  TempDir tmp;
  const auto file = tmp.path / "writes";
  Child run(cli_path(), run_args(g, {"--ttl", "6000ms", "--kill-after", "100ms"}, "tstp", writer(file)));
  REQUIRE(run.wait_for("pid="));
  const GroupReaper cmd{std::stoi(line_after(run.out_so_far(), "pid="))};
  REQUIRE(eventually([&] { return writes_in(file).size() >= 2; }));
  run.signal(SIGTSTP);
  // As a shell's job: redlock and its command both stop (SIGTERM is due
  // only kill-after + 50 ms before the deadline, at least 3.8 s away: room
  // to see the stop on a loaded machine — with 3 s, one CI run saw the
  // command only once the guard had killed it).
  CHECK(eventually([&] { return state_of(run.pid()) == 'T'; }));
  CHECK_MESSAGE(eventually([&] { return group_stopped(cmd.pgid); }),
                "the command's state: '" << state_of(cmd.pgid) << "', " << writes_in(file).size() << " writes");
  // The lease runs out; by then the guard has killed the stopped command.
  auto other = redlock::test::client_for(g);
  const Takeover t = take_over(*other, "tstp", file);
  CHECK(dead(cmd.pgid));
  check_nothing_after(t, file, cmd.pgid);
  // Continued, redlock finds its lease lost and its command gone.
  run.signal(SIGCONT);
  ProcResult r = run.wait();
  CHECK(r.exit_code == 3);
}

TEST_CASE("run: a SIGSTOPped redlock cannot extend; its guard kills the command before another owner can lock") {
  RedisGroup g(3);
  TempDir tmp;
  const auto file = tmp.path / "writes";
  Child run(cli_path(), run_args(g, {"--ttl", "1500ms"}, "stopped", writer(file)));
  REQUIRE(run.wait_for("pid="));
  const GroupReaper cmd{std::stoi(line_after(run.out_so_far(), "pid="))};
  REQUIRE(eventually([&] { return writes_in(file).size() >= 2; }));
  run.signal(SIGSTOP);
  REQUIRE(eventually([&] { return state_of(run.pid()) == 'T'; }));
  auto other = redlock::test::client_for(g);
  const Takeover t = take_over(*other, "stopped", file);
  CHECK(dead(cmd.pgid));  // already when the other owner got the lock
  check_nothing_after(t, file, cmd.pgid);
  run.signal(SIGCONT);
  CHECK(run.wait().exit_code == 3);
}

TEST_CASE("run: the lock is held, and extended, until the last process of the command's group exits") {
  RedisGroup g(3);
  TempDir tmp;
  const Fifo fifo(tmp.path / "fifo");
  Child run(cli_path(), run_args(g, {"--ttl", "1000ms", "--json"}, "left-behind", left_behind(fifo, 5)));
  REQUIRE(run.wait_for("token="));
  const GroupReaper reaper{pid_after(run, "sh=")};
  const pid_t sh = reaper.pgid, bg = pid_after(run, "bg=");
  const std::string token = line_after(run.out_so_far(), "token=");
  // CMD itself (sh) is gone; its background process is not.
  REQUIRE(process_gone(sh));
  REQUIRE_FALSE(dead(bg));
  // Still extended after CMD's exit.
  CHECK(extended_from_now(g, "left-behind"));
  // Held: another client cannot take it, status shows the run's token.
  auto other = cli(op({"acquire", "left-behind", "--ttl", "30s"}, g));
  CHECK(other.exit_code == 1);
  auto st = cli(op({"status", "left-behind", "--json"}, g));
  CHECK(st.exit_code == 0);
  CHECK(json_of(st)["held"] == true);
  CHECK(json_of(st)["token"] == token);
  CHECK_FALSE(dead(run.pid()));
  // The background process exits: the lock is released, run exits with CMD's status.
  const long long let_go_us = unix_ns_now() / 1000;
  REQUIRE(fifo.open());
  ProcResult r = run.wait();
  CHECK(r.exit_code == 5);
  CHECK(r.out.find("bg-done") != std::string::npos);
  const json rep = report_of(r);
  CHECK(rep["child_status"] == 5);
  CHECK(rep["released"] == true);
  CHECK(rep["released_at_us"].get<long long>() >= let_go_us);
  CHECK(rep["extensions"].get<long long>() >= 1);
  CHECK(holding(g, "left-behind", token) == 0);
  CHECK(cli(op({"acquire", "left-behind", "--ttl", "30s"}, g)).exit_code == 0);
}

TEST_CASE("run: a signal to redlock, or a lost lease, ends what the command left behind too") {
  RedisGroup g(5);
  TempDir tmp;
  const Fifo fifo(tmp.path / "fifo");
  SUBCASE("SIGTERM: passed on to the group; then released, with CMD's status") {
    Child run(cli_path(), run_args(g, {}, "left-signalled", left_behind(fifo, 0)));
    REQUIRE(run.wait_for("token="));
    const GroupReaper reaper{pid_after(run, "sh=")};
    const pid_t bg = pid_after(run, "bg=");
    REQUIRE(process_gone(reaper.pgid));
    REQUIRE_FALSE(dead(bg));
    CHECK(extended_from_now(g, "left-signalled"));
    CHECK_FALSE(dead(run.pid()));
    run.signal(SIGTERM);
    ProcResult r = run.wait();
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("the lock is held until it is empty") != std::string::npos);
    CHECK(process_gone(bg));
    CHECK(eventually([&] { return g.keys_everywhere(key_of("left-signalled")) == 0; }));
  }
  SUBCASE("a lost lease: SIGKILL to what is left once CMD has exited (SIGTERM ignored), exit 3") {
    Child run(cli_path(),
              run_args(g, {"--ttl", "3000ms", "--json"}, "left-lost", left_behind(fifo, 0, "trap '' TERM; ")));
    REQUIRE(run.wait_for("token="));
    const GroupReaper reaper{pid_after(run, "sh=")};
    const pid_t bg = pid_after(run, "bg=");
    REQUIRE(process_gone(reaper.pgid));
    REQUIRE_FALSE(dead(bg));
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"SET", key_of("left-lost"), "intruder", "PX", "60000"});
    ProcResult r = run.wait();
    CHECK(r.exit_code == 3);
    CHECK(process_gone(bg));
    const json rep = report_of(r);
    CHECK(rep["lost"].is_string());
    CHECK(rep["child_status"] == 0);
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i].command({"GET", key_of("left-lost")}).str == "intruder");
  }
}

TEST_CASE("run: a SIGSTOPped redlock's guard kills what the command left behind before another owner can lock") {
  RedisGroup g(3);
  TempDir tmp;
  const auto file = tmp.path / "writes";
  // CMD starts the writer in the background and exits at once.
  Child run(cli_path(), run_args(g, {"--ttl", "1500ms"}, "left-stopped",
                                 "(" + writer(file) + ") & echo \"bg=$!\"; echo \"sh=$$\"; exit 0"));
  REQUIRE(run.wait_for("sh="));
  const GroupReaper reaper{pid_after(run, "sh=")};
  const pid_t bg = pid_after(run, "bg=");
  REQUIRE(process_gone(reaper.pgid));
  REQUIRE(eventually([&] { return writes_in(file).size() >= 2; }));
  run.signal(SIGSTOP);
  REQUIRE(eventually([&] { return state_of(run.pid()) == 'T'; }));
  auto other = redlock::test::client_for(g);
  const Takeover t = take_over(*other, "left-stopped", file);
  CHECK(dead(bg));  // already when the other owner got the lock
  check_nothing_after(t, file, bg);
  run.signal(SIGCONT);
  CHECK(run.wait().exit_code == 3);
}

TEST_CASE("run: a SIGKILLed redlock leaves nothing running: its guard ends the command's group at once") {
  RedisGroup g(3);
  TempDir tmp;
  const auto file = tmp.path / "writes";
  // The command ignores SIGTERM: SIGKILL follows --kill-after (300 ms) later.
  Child run(cli_path(), run_args(g, {"--ttl", "3000ms", "--kill-after", "300ms"}, "killed", writer(file, true)));
  REQUIRE(run.wait_for("pid="));
  const GroupReaper cmd{std::stoi(line_after(run.out_so_far(), "pid="))};
  REQUIRE(eventually([&] { return writes_in(file).size() >= 2; }));
  const auto killed_at = std::chrono::steady_clock::now();
  run.signal(SIGKILL);
  // Gone long before the 3 s lease could pass to anyone.
  CHECK(eventually([&] { return dead(cmd.pgid); }, milliseconds(1500)));
  CHECK(std::chrono::steady_clock::now() - killed_at < milliseconds(1500));
  auto other = redlock::test::client_for(g);
  const Takeover t = take_over(*other, "killed", file);
  check_nothing_after(t, file, cmd.pgid);
  CHECK(run.wait().exit_code == 128 + SIGKILL);
}

TEST_CASE("run: a lost lease SIGKILLs a command that ignores SIGTERM before the validity deadline") {
  RedisGroup g(5);
  TempDir tmp;
  const auto file = tmp.path / "writes";
  const std::string resource = "unreachable";
  Child run(cli_path(), run_args(g, {"--ttl", "3000ms", "--kill-after", "900ms"}, resource, writer(file, true)));
  REQUIRE(run.wait_for("pid="));
  const GroupReaper cmd{std::stoi(line_after(run.out_so_far(), "pid="))};
  auto other = redlock::test::client_for(g, [](redlock::Options& o) {
    o.node_timeout = milliseconds{5000};
    o.connect_timeout = milliseconds{5000};
    o.stall_timeout = milliseconds{6000};
  });
  REQUIRE(other->status(resource));  // connected to every master before the pause
  // Just after an extension (the key's PTTL jumps up), three of five masters
  // stop serving anyone for 3.1 s: no extension can succeed, so the lease's
  // deadline is about 2.97 s away, and their keys expire (at most 3 s after
  // the pause) before they serve again.
  long long last = g[0].command({"PTTL", key_of(resource)}).integer;
  REQUIRE(eventually([&] {
    const long long now = g[0].command({"PTTL", key_of(resource)}).integer;
    const bool extended = now > last;
    last = now;
    return extended;
  }));
  for (std::size_t i = 0; i < 3; ++i) REQUIRE(g[i].command({"CLIENT", "PAUSE", "3100", "ALL"}).str == "OK");
  // With 5 s node and connect timeouts the other owner's first round waits for the
  // paused masters and succeeds the moment they serve again.
  const Takeover t = take_over(*other, resource, file);
  ProcResult r = run.wait();
  INFO("redlock stderr: " << r.err);
  // redlock (and its guard) sent SIGKILL 50 ms before the deadline, not
  // SIGTERM at it and SIGKILL 900 ms later.
  check_nothing_after(t, file, cmd.pgid);
  CHECK(r.exit_code == 3);
  CHECK(r.err.find("sent SIGKILL") != std::string::npos);
}

TEST_CASE("run: held exits with the conflict code; no quorum of reachable masters with 69 or --unavailable-exit-code") {
  RedisGroup g(3);
  TempDir tmp;
  const auto marker = tmp.path / "ran";
  const std::string touch = "touch '" + marker.string() + "'";
  REQUIRE(cli(op({"acquire", "busy", "--ttl", "30s"}, g)).exit_code == 0);
  // Held: 1, or -E's code (cron's "skip quietly").
  auto held = cli(run_args(g, {"-n"}, "busy", touch));
  CHECK(held.exit_code == 1);
  auto skip = cli(run_args(g, {"-n", "-E", "0", "--json"}, "busy", touch));
  CHECK(skip.exit_code == 0);
  CHECK(report_of(skip)["unavailable"] == false);
  CHECK(report_of(skip)["code"] == "redlock.held");
  // Every master down: not a conflict, even with -E 0.
  for (std::size_t i = 0; i < g.size(); ++i) g[i].kill();
  auto down = cli(run_args(g, {"-n", "-E", "0", "--json"}, "busy", touch));
  CHECK(down.exit_code == 69);
  const json rep = report_of(down);
  CHECK(rep["unavailable"] == true);
  CHECK(rep["code"] == "redlock.no_quorum");
  CHECK(rep["exit_status"] == 69);
  auto custom = cli(run_args(g, {"--no-wait", "--conflict-exit-code", "0", "--unavailable-exit-code", "75"}, "busy", touch));
  CHECK(custom.exit_code == 75);
  CHECK(custom.err.find("no quorum of usable masters") != std::string::npos);
  // A bounded wait ends the same way (the masters stay down).
  CHECK(cli(run_args(g, {"-w", "200ms", "-E", "0"}, "busy", touch)).exit_code == 69);
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("run: waiting on masters in restart quarantine says why, once") {
  RedisGroup g(3);
  TempDir tmp;
  const auto marker = tmp.path / "ran";
  // Fresh masters, no --no-quarantine: they sit out about 61 s.
  auto r = cli({"--nodes", g.url_list(), "run", "--wait", "0.5s", "fresh", "--", "touch", marker.string()});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 69);
  CHECK_FALSE(fs::exists(marker));
  const std::string note = "redlock: run: waiting: 3 of 3 masters are in restart quarantine for another ";
  const auto at = r.err.find(note);
  REQUIRE(at != std::string::npos);
  CHECK(r.err.find(note, at + 1) == std::string::npos);
  CHECK(r.err.find("(see redlock nodes)", at) != std::string::npos);
  // --no-wait does not wait: no note, the failure says why.
  auto once = cli({"--nodes", g.url_list(), "run", "-n", "fresh", "--", "true"});
  CHECK(once.exit_code == 69);
  CHECK(once.err.find("waiting:") == std::string::npos);
  CHECK(once.err.find("quarantined") != std::string::npos);
}

TEST_CASE("run: --report FILE gets the JSON report (appended, one line per run), not stderr") {
  RedisGroup g(3);
  TempDir tmp;
  const auto file = tmp.path / "runs.jsonl";
  auto first = cli(run_args(g, {"--report", file.string()}, "reported", "echo out; echo err >&2; exit 4"));
  CHECK(first.exit_code == 4);
  CHECK(first.out == "out\n");
  CHECK(first.err == "err\n");  // the command's own stderr only
  auto second = cli(run_args(g, {"--report", file.string(), "--json"}, "reported", "true"));
  CHECK(second.exit_code == 0);
  CHECK(second.err.empty());
  std::ifstream in(file);
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  REQUIRE(lines.size() == 2);
  CHECK(lines[0]["command"] == "run");
  CHECK(lines[0]["resource"] == "reported");
  CHECK(lines[0]["acquired"] == true);
  CHECK(lines[0]["child_status"] == 4);
  CHECK(lines[0]["exit_status"] == 4);
  CHECK(lines[0]["released"] == true);
  CHECK(lines[1]["exit_status"] == 0);
  CHECK(lines[1]["token"] != lines[0]["token"]);
  // Not acquired: reported there too.
  REQUIRE(cli(op({"acquire", "reported", "--ttl", "30s"}, g)).exit_code == 0);
  auto held = cli(run_args(g, {"--report", file.string(), "-n"}, "reported", "true"));
  CHECK(held.exit_code == 1);
  std::ifstream again(file);
  std::string line, last;
  int n = 0;
  while (std::getline(again, line)) last = line, ++n;
  CHECK(n == 3);
  CHECK(json::parse(last)["acquired"] == false);
  CHECK(json::parse(last)["code"] == "redlock.held");
}

TEST_CASE("run: a name of any bytes: --json and --report give it back exactly, with the command's status") {
  RedisGroup g(3);
  TempDir tmp;
  const auto file = tmp.path / "runs.jsonl";
  const auto seen = tmp.path / "seen";
  for (const std::string& name : {std::string("caf\xe9"), std::string("\xff\xfe"), std::string("l\ni\x1b[31mne")}) {
    CAPTURE(json(name).dump(-1, ' ', true, json::error_handler_t::replace));
    // --json: the report on stderr parses and names the resource; CMD's status is kept.
    auto r = cli(run_args(g, {"--json"}, name, "printf %s \"$REDLOCK_RESOURCE\" > '" + seen.string() + "'; exit 7"));
    CHECK(r.exit_code == 7);
    const json rep = report_of(r);
    CHECK(name_in(rep, "resource") == name);
    CHECK(rep["child_status"] == 7);
    CHECK(rep["released"] == true);
    std::ifstream in(seen, std::ios::binary);
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == name);  // REDLOCK_RESOURCE: the bytes themselves
    // --report FILE: the line appended parses too.
    auto ok = cli(run_args(g, {"--report", file.string()}, name, "true"));
    CHECK(ok.exit_code == 0);
    CHECK_FALSE(has_control_bytes(ok.err));
    std::ifstream lines(file);
    std::string line, last;
    while (std::getline(lines, line)) last = line;
    const json j = json::parse(last, nullptr, false);
    REQUIRE(j.is_object());
    CHECK(name_in(j, "resource") == name);
    CHECK(j["exit_status"] == 0);
    // Not acquired (held by another): the message names it escaped.
    auto held = cli(op({"acquire", name, "--ttl", "30s"}, g));
    REQUIRE(held.exit_code == 0);
    auto refused = cli(run_args(g, {"-n"}, name, "true"));
    CHECK(refused.exit_code == 1);
    CHECK_FALSE(has_control_bytes(refused.err));
    CHECK(refused.err.find(" not acquired: ") != std::string::npos);
    auto refused_json = cli(run_args(g, {"-n", "--json"}, name, "true"));
    CHECK(refused_json.exit_code == 1);
    CHECK(name_in(report_of(refused_json), "resource") == name);
    CHECK(cli(op({"release", name, json_of(held)["token"].get<std::string>()}, g)).exit_code == 0);
  }
}

TEST_CASE("run: a lost lease on a name that is not UTF-8 still ends the command and exits with the lost code") {
  RedisGroup g(5);
  const std::string resource = "lost-caf\xe9";
  for (const bool as_json : {false, true}) {
    CAPTURE(as_json);
    std::vector<std::string> opts{"--ttl", "3000ms", "--kill-after", "900ms"};
    if (as_json) opts.push_back("--json");
    Child run(cli_path(), run_args(g, opts, resource,
                                   "trap 'echo got-term; exit 0' TERM; echo \"pid=$$\"; "
                                   "while :; do sleep 0.02; done"));
    REQUIRE(run.wait_for("pid="));
    const pid_t pid = std::stoi(line_after(run.out_so_far(), "pid="));
    GroupReaper reaper{pid};
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"SET", key_of(resource), "intruder", "PX", "60000"});
    ProcResult r = run.wait();
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 3);
    CHECK(r.out.find("got-term") != std::string::npos);
    CHECK(process_gone(pid));
    CHECK_FALSE(has_control_bytes(r.err));
    if (as_json) {
      const json rep = report_of(r);
      CHECK(name_in(rep, "resource") == resource);
      CHECK(rep["lost"].is_string());
      CHECK(rep["exit_status"] == 3);
    } else {
      CHECK(r.err.find(R"(lost the lock on "lost-caf\xe9")") != std::string::npos);
    }
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"DEL", key_of(resource)});
  }
}

TEST_CASE("run: -s/--signal picks the signal that ends the command when the lease is lost") {
  RedisGroup g(5);
  const std::string resource = "signal-job";
  struct Case {
    const char* signal;
    const char* script;  // what the command does
    int child_signal;    // how it ended (0: exited)
    const char* killed;  // the report's "killed"
  };
  const std::vector<Case> cases = {
      {"USR1", "trap 'echo got-usr1; exit 0' USR1 TERM", 0, "SIGUSR1"},
      {"15", "trap 'echo got-term; exit 0' TERM", 0, "SIGTERM"},
      // KILL at once: not SIGTERM first and SIGKILL --kill-after (900 ms) later.
      {"KILL", "trap '' TERM", SIGKILL, "SIGKILL"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.signal);
    Child run(cli_path(), run_args(g, {"--ttl", "3s", "--kill-after", "900ms", "-s", c.signal, "--json"}, resource,
                                   std::string(c.script) + "; echo \"token=$REDLOCK_TOKEN\"; while :; do sleep 0.02; done"));
    REQUIRE(run.wait_for("token="));
    // Another owner takes the key everywhere: the next extension is refused.
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"SET", key_of(resource), "intruder", "PX", "60000"});
    ProcResult r = run.wait();
    for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"DEL", key_of(resource)});
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 3);
    const json rep = report_of(r);
    CHECK(rep["killed"] == c.killed);
    if (c.child_signal == 0) {
      CHECK(rep["child_status"] == 0);
      CHECK(r.out.find(std::string("got-") + (c.signal == std::string("USR1") ? "usr1" : "term")) != std::string::npos);
    } else {
      CHECK(rep["child_signal"] == c.child_signal);
    }
  }
}

TEST_CASE("run: a failed final release is reported on stderr and in the report, and exits 125") {
  RedisGroup g(3);
  TempDir tmp;
  const auto go = tmp.path / "go";
  const auto file = tmp.path / "report.jsonl";
  const std::string resource = "unreleased";
  // The command holds until the test has taken DEL away from the masters'
  // default user (the one redlock uses): the release script is then refused.
  Child run(cli_path(), run_args(g, {"--ttl", "30s", "--report", file.string()}, resource,
                                 "echo \"token=$REDLOCK_TOKEN\"; while [ ! -e '" + go.string() + "' ]; do sleep 0.02; done"));
  REQUIRE(run.wait_for("token="));
  const std::string token = line_after(run.out_so_far(), "token=");
  for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(g[i].command({"ACL", "SETUSER", "default", "-del"}).str == "OK");
  std::ofstream(go.string()) << "go";
  ProcResult r = run.wait();
  for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"ACL", "SETUSER", "default", "+del"});
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 125);  // the command succeeded; its lock was not released
  CHECK(r.err.find("the lock on \"unreleased\" was not released") != std::string::npos);
  CHECK(r.err.find("exit status 125") != std::string::npos);
  std::ifstream in(file);
  std::string line;
  REQUIRE(std::getline(in, line));
  const json rep = json::parse(line);
  CHECK(rep["child_status"] == 0);
  CHECK(rep["released"] == false);
  REQUIRE(rep["release_error"].is_string());
  CHECK(rep["release_error"].get<std::string>().find("released on 0 of 3") != std::string::npos);
  CHECK(rep["exit_status"] == 125);
  CHECK(holding(g, resource, token) >= 2);  // the key really stayed

  // A command that failed keeps its own status; the release failure is still said.
  for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"DEL", key_of(resource)});
  std::filesystem::remove(go);
  Child failing(cli_path(), run_args(g, {"--ttl", "30s", "--json"}, resource,
                                     "echo ready; while [ ! -e '" + go.string() + "' ]; do sleep 0.02; done; exit 7"));
  REQUIRE(failing.wait_for("ready"));
  for (std::size_t i = 0; i < g.size(); ++i) REQUIRE(g[i].command({"ACL", "SETUSER", "default", "-del"}).str == "OK");
  std::ofstream(go.string()) << "go";
  ProcResult f = failing.wait();
  for (std::size_t i = 0; i < g.size(); ++i) g[i].command({"ACL", "SETUSER", "default", "+del"});
  CHECK(f.exit_code == 7);
  CHECK(f.err.find("was not released") != std::string::npos);
  CHECK(report_of(f)["released"] == false);
  CHECK(report_of(f)["release_error"].is_string());
}

TEST_CASE("run: a lock gone before its release (deleted by hand) exits 125 and says it was no longer held") {
  RedisGroup g(3);
  TempDir tmp;
  const auto go = tmp.path / "go";
  Child run(cli_path(), run_args(g, {"--ttl", "30s", "--json"}, "deleted",
                                 "echo \"token=$REDLOCK_TOKEN\"; while [ ! -e '" + go.string() + "' ]; do sleep 0.02; done"));
  REQUIRE(run.wait_for("token="));
  const std::string token = line_after(run.out_so_far(), "token=");
  // The acquire was decided by a majority: the third master's SET may land
  // later (a loaded machine). Delete only once every master has it — a SET
  // landing after our DEL would be the release's to delete, and it would
  // rightly say released.
  REQUIRE(eventually([&] { return holding(g, "deleted", token) == g.size(); }));
  long long deleted = 0;
  for (std::size_t i = 0; i < g.size(); ++i) deleted += g[i].command({"DEL", key_of("deleted")}).integer;
  REQUIRE(deleted == 3);
  std::ofstream(go.string()) << "go";
  ProcResult r = run.wait();
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("the lock on \"deleted\" was no longer held at its release") != std::string::npos);
  CHECK(r.err.find("stays until its TTL") == std::string::npos);  // nothing of ours stays
  const json rep = report_of(r);
  CHECK(rep["released"] == false);
  CHECK(rep["lost"].is_null());  // the watchdog had not noticed (its next extension was seconds away)
  CHECK(rep["release_error"].get<std::string>().rfind("redlock.not_held: released on 0 of 3", 0) == 0);
}

TEST_CASE("run: --foreground makes the command's group the terminal's foreground group") {
  // script(1) (util-linux's bsdutils, essential in Debian) gives redlock a
  // pseudo-terminal whose foreground group it is.
  REQUIRE_MESSAGE(fs::exists("/usr/bin/script"), "script(1) not installed (apt-get install bsdutils)");
  RedisGroup g(3);
  // The command prints its process group and the terminal's foreground group (/proc/PID/stat fields 5 and 8).
  const std::string probe = "set -- $(cat /proc/$$/stat); echo \"pgrp=$5 tpgid=$8\"";
  auto line_for = [&](const std::vector<std::string>& opts) {
    std::string cmd = "'" + cli_path() + "' --no-quarantine --nodes " + g.url_list() + " run";
    for (const auto& o : opts) cmd += " " + o;
    cmd += " fg-job -- sh -c '" + probe + "'";
    ProcResult r = Child("/usr/bin/script", {"-qec", cmd, "/dev/null"}).wait();
    INFO("script stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 0);
    return line_after(r.out, "pgrp=");
  };
  // {pgrp, tpgid} from "pgrp=N tpgid=M".
  auto groups = [](const std::string& text) {
    const auto t = text.find("tpgid=");
    REQUIRE(t != std::string::npos);
    return std::pair<long long, long long>{std::stoll(text), std::stoll(text.substr(t + 6))};
  };
  const auto fg = groups(line_for({"--foreground"}));
  CHECK(fg.first == fg.second);  // CMD's group has the terminal
  const auto bg = groups(line_for({}));
  CHECK(bg.first != bg.second);  // without --foreground redlock's group keeps it
}

TEST_CASE("run --permits: two commands run at once under a semaphore of 2, a third waits for a permit") {
  RedisGroup g(5);
  TempDir tmp;
  const auto go = tmp.path / "go";
  const std::string script = "echo started $REDLOCK_PERMIT; while [ ! -e '" + go.string() + "' ]; do sleep 0.02; done";
  Child first(cli_path(), run_args(g, {"--permits", "2", "--json"}, "encoders", script));
  Child second(cli_path(), run_args(g, {"--permits", "2", "--json"}, "encoders", script));
  REQUIRE(first.wait_for("started"));
  REQUIRE(second.wait_for("started"));
  // Full: a try is refused with the conflict code, and runs nothing.
  auto full = cli(run_args(g, {"--permits", "2", "--no-wait", "--json"}, "encoders", "echo third-ran"));
  CHECK(full.exit_code == 1);
  CHECK(full.out.find("third-ran") == std::string::npos);
  CHECK(report_of(full)["code"] == "redlock.held");
  // Another number of permits for the name is refused, naming both.
  auto other = cli(run_args(g, {"--permits", "3", "--no-wait"}, "encoders", "echo other-ran"));
  CHECK(other.exit_code == 2);
  CHECK(other.err.find("has 2 permits; this client asked for 3") != std::string::npos);
  // A waiter runs once a permit is released — a fair one here (--fair: in
  // arrival order; a release names it).
  Child third(cli_path(), run_args(g, {"--permits", "2", "--fair", "--wait", "20s", "--json"}, "encoders", "echo third-running"));
  // (Queued on a majority: where a holder's win went without a master, the
  // permit is free there and the waiter takes it, and gives it back, each
  // round — a minority.)
  REQUIRE(eventually([&] { return permits_queued_on_majority(g, "encoders", 1); }));
  std::ofstream(go.string()) << "go";
  ProcResult r1 = first.wait(), r2 = second.wait(), r3 = third.wait();
  CHECK(r1.exit_code == 0);
  CHECK(r2.exit_code == 0);
  CHECK(r3.exit_code == 0);
  CHECK(r3.out.find("third-running") != std::string::npos);
  const json a = report_of(r1), b = report_of(r2), c = report_of(r3);
  CHECK(c["token"].get<std::string>().front() == 'Q');
  CHECK(a["permits"] == 2);
  CHECK(a["permit"] != b["permit"]);
  // Its permit was one of theirs, taken after that one was released.
  const json& freed = c["permit"] == a["permit"] ? a : b;
  CHECK(c["acquired_at_us"].get<long long>() >= freed["released_at_us"].get<long long>());
  CHECK((r1.out.find("started 0") != std::string::npos || r1.out.find("started 1") != std::string::npos));
  // With --fence, CMD gets its permit's fence too.
  auto fenced = cli(run_args(g, {"--permits", "2", "--fence", "--json"}, "encoders",
                             "echo permit=$REDLOCK_PERMIT fence=$REDLOCK_FENCE"));
  CHECK(fenced.exit_code == 0);
  CHECK(fenced.out.find("fence=0") == std::string::npos);
  CHECK(fenced.out.find("fence=1") != std::string::npos);
  // Out of range: a usage error before anything is connected.
  CHECK(cli(run_args(g, {"--permits", "0"}, "encoders", "true")).exit_code == 2);
  CHECK(cli(run_args(g, {"--permits", "101"}, "encoders", "true")).exit_code == 2);
}
