// test_cli_flock.cpp — a shell user's flock(1) and timeout(1) habits, one
// by one: each row is a flock/timeout invocation, its `redlock run` (or
// `acquire`) equivalent, and what must happen, against real redis-servers
// on loopback. docs/cli.md ("From flock(1) and timeout(1)") has the same
// table.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "cli_harness.hpp"
#include "helpers.hpp"
#include "redis_server.hpp"

namespace {

using namespace redlock::test::cli_harness;
using redlock::test::RedisGroup;
using std::chrono::milliseconds;

// Habit — one row of the table.
struct Habit {
  const char* flock;               // what a shell user types with flock(1)/timeout(1)
  std::vector<std::string> args;   // redlock's arguments after "--nodes URLS"; "busy" is held by another
  int status;                      // the exit status expected
  std::string out;                 // stdout, exactly
  std::string err;                 // stderr contains this; "" = stderr is empty
  milliseconds at_least{0};        // the run took at least this long (a wait in seconds, not ms)
};

}  // namespace

TEST_CASE("cli flock habits: flock(1)/timeout(1) invocations and their redlock equivalents") {
  RedisGroup g(3);
  // Another holder of "busy" for the whole test.
  const ProcResult holder = cli({"--no-quarantine", "--nodes", g.url_list(), "acquire", "busy", "--ttl", "50s"});
  REQUIRE(holder.exit_code == 0);

  const std::vector<Habit> table{
      {"flock -n F cmd", {"run", "-n", "busy", "echo", "ran"}, 1, "", "\"busy\" not acquired"},
      {"flock --nonblock F cmd", {"run", "--nonblock", "busy", "echo", "ran"}, 1, "", "\"busy\" not acquired"},
      {"flock -n -E 0 F cmd (skip quietly)", {"run", "-n", "-E", "0", "busy", "echo", "ran"}, 0, "", ""},
      {"flock -n -E 3 F cmd (not quiet)", {"run", "-n", "-E", "3", "busy", "echo", "ran"}, 3, "", "not acquired"},
      {"-q: quiet on a conflict", {"run", "-q", "-n", "busy", "echo", "ran"}, 1, "", ""},
      {"-q with a wait", {"run", "-q", "-w", "200ms", "busy", "echo", "ran"}, 1, "", ""},
      {"acquire -q", {"acquire", "-q", "busy"}, 1, "", ""},
      {"flock -w 1.5 F cmd", {"run", "-w", "1.5", "busy", "echo", "ran"}, 1, "", "not acquired within 1500ms",
       milliseconds{1500}},
      {"flock --timeout 1 F cmd", {"run", "--timeout", "1", "busy", "echo", "ran"}, 1, "", "not acquired within 1s",
       milliseconds{1000}},
      {"flock -w 10 F cmd (free)", {"run", "-w", "10", "free-w", "echo", "ran"}, 0, "ran\n", ""},
      {"flock F cmd -x (no --: options after CMD are its own)",
       {"run", "-w", "5", "free-args", "printf", "%s|%s", "-n", "--ttl"}, 0, "-n|--ttl", ""},
      {"flock F -c 'shell command'", {"run", "free-c", "-c", "echo one; echo two"}, 0, "one\ntwo\n", ""},
      {"flock -c before F", {"run", "-c", "echo \"$REDLOCK_RESOURCE\"", "free-c2"}, 0, "free-c2\n", ""},
      {"flock F -- cmd", {"run", "free-dash", "--", "echo", "--"}, 0, "--\n", ""},
      {"timeout -k 1 ...", {"run", "-k", "1", "--ttl", "30", "free-k", "echo", "ran"}, 0, "ran\n", ""},
      {"timeout -k 1s ...", {"run", "-k", "1s", "free-k2", "echo", "ran"}, 0, "ran\n", ""},
      {"timeout --kill-after=0.5 ...", {"run", "--kill-after=0.5", "free-k3", "echo", "ran"}, 0, "ran\n", ""},
      // Usage errors: the command's own help, not `redlock --help`.
      {"-c and a command", {"run", "free-x", "-c", "true", "echo"}, 2, "",
       "-c and a command: give only one of them"},
      {"no command", {"run", "free-x"}, 2, "", "Run 'redlock run --help' for usage."},
      {"-w 0.0001 (below a millisecond)", {"run", "-w", "0.0001", "free-x", "true"}, 2, "",
       "--wait: \"0.0001\" is not a whole number of milliseconds (the finest unit is 1ms)\n"
       "Run 'redlock run --help' for usage."},
      {"-w -1", {"run", "-w", "-1", "free-x", "true"}, 2, "", "--wait: \"-1\" must not be negative"},
      {"-w nan", {"run", "-w", "nan", "free-x", "true"}, 2, "", "--wait: \"nan\" is not a duration"},
      {"-w inf", {"run", "--timeout", "inf", "free-x", "true"}, 2, "", "--wait: \"inf\" is not a duration"},
      {"-w 1e9 (overflow)", {"run", "-w", "2147484", "free-x", "true"}, 2, "", "--wait: \"2147484\" is out of range"},
      {"acquire --ttl abc", {"acquire", "free-x", "--ttl", "abc"}, 2, "", "Run 'redlock acquire --help' for usage."},
  };
  for (const Habit& h : table) {
    const std::string habit = h.flock;
    CAPTURE(habit);
    std::vector<std::string> args{"--no-quarantine", "--nodes", g.url_list()};
    args.insert(args.end(), h.args.begin(), h.args.end());
    const auto start = std::chrono::steady_clock::now();
    const ProcResult r = cli(args);
    const auto took = std::chrono::steady_clock::now() - start;
    INFO("stdout: " << r.out);
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == h.status);
    CHECK(r.out == h.out);
    if (h.err.empty()) {
      CHECK(r.err.empty());
    } else {
      CHECK(r.err.find(h.err) != std::string::npos);
    }
    CHECK(took >= h.at_least);
  }
}

TEST_CASE("cli flock habits: quiet on a conflict, never on an outage") {
  // No master listens: not a conflict but an outage (69), said even when
  // quiet was asked for.
  const std::string down = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3";
  for (const std::vector<std::string>& quiet : std::vector<std::vector<std::string>>{
           {"run", "-q", "-n", "job", "true"}, {"run", "-n", "-E", "0", "job", "true"}, {"acquire", "-q", "job"}}) {
    std::vector<std::string> args{"--nodes", down};
    args.insert(args.end(), quiet.begin(), quiet.end());
    const std::string invocation = args[2] + " " + args[3] + " " + args[4];
    CAPTURE(invocation);
    const ProcResult r = cli(args);
    CHECK(r.exit_code == 69);
    CHECK((r.out + r.err).find("no quorum") != std::string::npos);  // acquire: its JSON on stdout
  }
}
