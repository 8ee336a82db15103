// test_cli_signals.cpp — what each signal does to `redlock run` (docs/cli.md,
// "Signals"), while it waits for the lock and while the command runs; what
// the command starts with (mask, dispositions); and a wait that cannot make
// progress saying so on stderr. The real binary (REDLOCK_CLI) against real
// redis-servers on loopback, started fresh: --no-quarantine throughout.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
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
using std::chrono::milliseconds;

std::string cli_path() { return program("REDLOCK_CLI"); }

// run_args builds `redlock --no-quarantine --nodes NODES run OPTS... RESOURCE -- CMD...`.
std::vector<std::string> run_args(const std::string& nodes, std::vector<std::string> opts, const std::string& resource,
                                  const std::vector<std::string>& command) {
  std::vector<std::string> args{"--no-quarantine", "--nodes", nodes, "run"};
  args.insert(args.end(), opts.begin(), opts.end());
  args.push_back(resource);
  args.push_back("--");
  args.insert(args.end(), command.begin(), command.end());
  return args;
}

std::vector<std::string> sh(const std::string& script) { return {"sh", "-c", script}; }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// refusing: NODES of `n` loopback ports nobody listens on (connection refused).
std::string refusing(int n) {
  std::string nodes;
  for (int i = 0; i < n; ++i)
    nodes += (i > 0 ? "," : "") + std::string("redis://127.0.0.1:") + std::to_string(redlock::test::free_port());
  return nodes;
}

// stderr_child: `redlock ARGS...` with its stderr on the Child's stdout pipe
// (to read it until a marker) and its stdout in `out_file`. The shell execs
// redlock: the Child's pid is redlock's.
Child stderr_child(const fs::path& out_file, const std::vector<std::string>& args) {
  std::vector<std::string> a{"-c", "out=$1; shift; exec \"$@\" 2>&1 >\"$out\"", "sh", out_file.string(), cli_path()};
  a.insert(a.end(), args.begin(), args.end());
  return Child("/bin/sh", a);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The signals a shell job expects to reach its command, each trapped by the
// command (by number: real-time signals have no name in sh).
struct Named {
  int sig;
  const char* name;
};
std::vector<Named> forwarded_signals() {
  return {{SIGINT, "INT"},       {SIGTERM, "TERM"},   {SIGHUP, "HUP"},   {SIGQUIT, "QUIT"},     {SIGUSR1, "USR1"},
          {SIGUSR2, "USR2"},     {SIGALRM, "ALRM"},   {SIGWINCH, "WINCH"}, {SIGURG, "URG"},     {SIGPWR, "PWR"},
          {SIGXCPU, "XCPU"},     {SIGXFSZ, "XFSZ"},   {SIGVTALRM, "VTALRM"}, {SIGPROF, "PROF"}, {SIGIO, "IO"},
          {SIGSTKFLT, "STKFLT"}, {SIGRTMIN, "RTMIN"}, {SIGRTMAX, "RTMAX"}, {SIGCONT, "CONT"}};
}

}  // namespace

TEST_CASE("run: every signal a shell job expects reaches the command's group; redlock lives and releases the lock") {
  RedisGroup g(3);
  for (const Named s : forwarded_signals()) {
    CAPTURE(s.name);
    const std::string resource = std::string("sig-") + s.name;
    Child run(cli_path(), run_args(g.url_list(), {"--json"}, resource,
                                   sh("trap 'echo got-" + std::string(s.name) + "; exit 42' " + std::to_string(s.sig) +
                                      "; echo \"token=$REDLOCK_TOKEN\"; while :; do sleep 0.02; done")));
    REQUIRE(run.wait_for("token="));
    const std::string token = line_after(run.out_so_far(), "token=");
    REQUIRE(holding(g, resource, token) >= 2);
    run.signal(s.sig);
    ProcResult r = run.wait();
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 42);  // the command's status: redlock was not killed
    CHECK(has(r.out, std::string("got-") + s.name));
    const json rep = report_of(r);
    CHECK(rep["child_status"] == 42);
    CHECK(rep["released"] == true);
    CHECK(holding(g, resource, token) == 0);
  }
  SUBCASE("a command that does not catch it dies of it: 128+N, and the lock is released") {
    for (int sig : {SIGUSR1, SIGALRM, SIGQUIT}) {
      CAPTURE(sig);
      Child run(cli_path(), run_args(g.url_list(), {}, "sig-default", sh("echo ready; exec sleep 60")));
      REQUIRE(run.wait_for("ready"));
      run.signal(sig);
      CHECK(run.wait().exit_code == 128 + sig);
      CHECK(eventually([&] { return g.keys_everywhere(key_of("sig-default")) == 0; }));
    }
  }
}

TEST_CASE("run: SIGPIPE and SIGCHLD to redlock are its own: not passed on, and they do not end it") {
  RedisGroup g(3);
  Child run(cli_path(), run_args(g.url_list(), {}, "sig-own",
                                 sh("trap 'echo got-PIPE' PIPE; trap 'echo got-ALRM; exit 7' ALRM; "
                                    "echo ready; while :; do sleep 0.02; done")));
  REQUIRE(run.wait_for("ready"));
  // Of the pending signals redlock reads the lowest-numbered first, so it
  // has taken CHLD and PIPE (17 and 13: sent before) by the time the
  // command exits on ALRM (14): CHLD is read after ALRM only if it is still
  // pending then, and it is never passed on either way.
  run.signal(SIGCHLD);
  run.signal(SIGPIPE);
  run.signal(SIGALRM);
  ProcResult r = run.wait();
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 7);
  CHECK(has(r.out, "got-ALRM"));
  CHECK_FALSE(has(r.out, "got-PIPE"));
  CHECK(eventually([&] { return g.keys_everywhere(key_of("sig-own")) == 0; }));
}

TEST_CASE("run: while waiting, a signal that would end a process cancels the wait with a message; the command is not run") {
  RedisGroup g(3);
  TempDir tmp;
  const auto marker = tmp.path / "ran";
  for (const Named s : forwarded_signals()) {
    if (s.sig == SIGWINCH || s.sig == SIGURG || s.sig == SIGCONT) continue;  // ignored while waiting (below)
    CAPTURE(s.name);
    const std::string resource = std::string("wait-") + s.name;
    REQUIRE(cli(op({"acquire", resource, "--ttl", "30s"}, g)).exit_code == 0);
    Child waiter(cli_path(), run_args(g.url_list(), {}, resource, {"touch", marker.string()}));
    // Waiting once subscribed to the release channel (its signals are
    // blocked long before that).
    REQUIRE(eventually([&] { return subscribers(g[0], channel_of(resource)) == 1; }, std::chrono::seconds(20)));
    waiter.signal(s.sig);
    ProcResult r = waiter.wait();
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 128 + s.sig);
    CHECK(has(r.err, "redlock: run: interrupted by "));
    CHECK(has(r.err, "while waiting for \"" + resource + "\"; the command was not run"));
    // Behind an ordinary holder: nothing said about being stuck.
    CHECK_FALSE(has(r.err, "could not make progress"));
    CHECK_FALSE(has(r.err, "waiting:"));
    CHECK(r.out.empty());
    CHECK_FALSE(fs::exists(marker));
  }
}

TEST_CASE("run: while waiting, WINCH, URG, CONT, CHLD and PIPE change nothing: the wait goes on and the command runs") {
  RedisGroup g(3);
  TempDir tmp;
  const auto marker = tmp.path / "ran";
  auto held = cli(op({"acquire", "wait-ignored", "--ttl", "30s"}, g));
  REQUIRE(held.exit_code == 0);
  const std::string token = json_of(held)["token"].get<std::string>();
  Child waiter(cli_path(), run_args(g.url_list(), {}, "wait-ignored", {"touch", marker.string()}));
  REQUIRE(eventually([&] { return subscribers(g[0], channel_of("wait-ignored")) == 1; }, std::chrono::seconds(20)));
  for (int sig : {SIGWINCH, SIGURG, SIGCONT, SIGCHLD, SIGPIPE}) waiter.signal(sig);
  // Then a signal that does end the wait, to show the ones before it were
  // taken and ignored: the waiter is cancelled by it, not by them.
  waiter.signal(SIGUSR2);
  ProcResult r = waiter.wait();
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 128 + SIGUSR2);
  CHECK(has(r.err, "interrupted by SIGUSR2"));
  CHECK_FALSE(fs::exists(marker));
  // And without the cancelling signal, the wait ends with the lock and the command runs.
  Child second(cli_path(), run_args(g.url_list(), {}, "wait-ignored", {"touch", marker.string()}));
  REQUIRE(eventually([&] { return subscribers(g[0], channel_of("wait-ignored")) == 1; }, std::chrono::seconds(20)));
  for (int sig : {SIGWINCH, SIGURG, SIGCONT, SIGCHLD, SIGPIPE}) second.signal(sig);
  REQUIRE(cli(op({"release", "wait-ignored", token}, g)).exit_code == 0);
  ProcResult ok = second.wait();
  INFO("stderr: " << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(fs::exists(marker));
}

TEST_CASE("run: the command starts with no signal blocked, and ignores only what redlock's caller ignored") {
  RedisGroup g(3);
  TempDir tmp;
  const auto out = tmp.path / "out";
  const auto err = tmp.path / "err";
  std::vector<std::string> args{cli_path()};
  for (auto& a : run_args(g.url_list(), {}, "mask", {"grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"}))
    args.push_back(a);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // redlock started as by a caller that blocked some signals and ignored
  // SIGHUP (nohup): only async-signal-safe calls between fork and exec.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    for (int s = 1; s < NSIG; ++s) ::signal(s, SIG_DFL);
    ::signal(SIGHUP, SIG_IGN);
    sigset_t blocked;
    sigemptyset(&blocked);
    for (int s : {SIGUSR1, SIGTERM, SIGALRM, SIGPIPE, SIGINT}) sigaddset(&blocked, s);
    ::sigprocmask(SIG_SETMASK, &blocked, nullptr);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0) ::_exit(120);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(argv[0], argv.data());
    ::_exit(121);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  const std::string text = read_file(out);
  INFO("stdout: " << text << "\nstderr: " << read_file(err));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const auto mask_of = [&](const std::string& field) {
    const std::string hex = line_after(text, field + ":\t");
    REQUIRE_FALSE(hex.empty());
    return std::stoull(hex, nullptr, 16);
  };
  CHECK(mask_of("SigBlk") == 0);
  // SIGHUP (bit 0) only. Signals 32 and 33 are the C library's own
  // (glibc's posix_spawn leaves them ignored; the program's C library
  // takes them back at its start).
  CHECK((mask_of("SigIgn") & ~0x180000000ULL) == 0x1ULL);
}

// ---- a wait that cannot make progress ----------------------------------------

TEST_CASE("run: a wait on masters that refuse connections says so at once, and why when interrupted; never on stdout") {
  TempDir tmp;
  const auto marker = tmp.path / "ran";
  const auto out = tmp.path / "stdout";
  const std::string nodes = refusing(3);
  Child run = stderr_child(out, run_args(nodes, {}, "stuck", {"touch", marker.string()}));
  // Said after the first failed round, without waiting for anything else.
  REQUIRE(run.wait_for("redlock: run: waiting: 0 of 3 masters answered, 2 needed ("));
  REQUIRE(run.wait_for("\n"));
  CHECK(has(run.out_so_far(), "127.0.0.1:"));
  run.signal(SIGINT);
  ProcResult r = run.wait();
  INFO("stderr: " << r.out);
  CHECK(r.exit_code == 128 + SIGINT);
  CHECK(has(r.out, "interrupted by SIGINT while waiting for \"stuck\"; the command was not run; "
                   "the wait could not make progress: 0 of 3 masters answered, 2 needed ("));
  CHECK(read_file(out).empty());
  CHECK_FALSE(fs::exists(marker));
}

TEST_CASE("acquire: a wait interrupted by INT, TERM or HUP says what it waited for and why it was stuck; holds nothing") {
  TempDir tmp;
  const auto out = tmp.path / "stdout";
  for (const Named s : {Named{SIGINT, "SIGINT"}, Named{SIGTERM, "SIGTERM"}, Named{SIGHUP, "SIGHUP"}}) {
    const int sig = s.sig;
    CAPTURE(s.name);
    Child acquire = stderr_child(out, {"--no-quarantine", "--nodes", refusing(3), "acquire", "stuck", "-w", "1h"});
    REQUIRE(acquire.wait_for("redlock: acquire: waiting: 0 of 3 masters answered, 2 needed ("));
    REQUIRE(acquire.wait_for("\n"));
    acquire.signal(sig);
    ProcResult r = acquire.wait();
    INFO("stderr: " << r.out);
    CHECK(r.exit_code == 128 + sig);
    CHECK(has(r.out, "redlock: acquire: interrupted by " + std::string(s.name) +
                         " while waiting for \"stuck\"; nothing is held; "
                         "the wait could not make progress: 0 of 3 masters answered, 2 needed ("));
    CHECK(read_file(out).empty());  // no token printed
  }
  // Behind an ordinary holder: interrupted, without a word about being stuck.
  RedisGroup g(3);
  REQUIRE(cli(op({"acquire", "busy", "--ttl", "30s"}, g)).exit_code == 0);
  Child waiter(cli_path(), op({"acquire", "busy", "-w", "1h"}, g));
  REQUIRE(eventually([&] { return subscribers(g[0], channel_of("busy")) == 1; }, std::chrono::seconds(20)));
  waiter.signal(SIGINT);
  ProcResult r = waiter.wait();
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 128 + SIGINT);
  CHECK(has(r.err, "interrupted by SIGINT while waiting for \"busy\"; nothing is held\n"));
  CHECK(r.out.empty());
}

TEST_CASE("run: a wait that stays stuck says so again every 10 s") {
  TempDir tmp;
  const auto out = tmp.path / "stdout";
  Child run = stderr_child(out, run_args(refusing(3), {}, "stuck-long", {"true"}));
  REQUIRE(run.wait_for("waiting: 0 of 3 masters answered"));
  REQUIRE(run.wait_for("; waiting for 1", std::chrono::seconds(30)));  // "…; waiting for 10 s"
  run.signal(SIGTERM);
  ProcResult r = run.wait();
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK(read_file(out).empty());
}

TEST_CASE("run and acquire: a bounded wait on refusing masters says so at the start, and ends with 69") {
  const std::string nodes = refusing(3);
  TempDir tmp;
  auto r = cli(run_args(nodes, {"-w", "1500ms"}, "stuck-bounded", {"touch", (tmp.path / "ran").string()}));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 69);
  CHECK(r.out.empty());
  CHECK(has(r.err, "redlock: run: waiting: 0 of 3 masters answered, 2 needed ("));
  CHECK(has(r.err, "not acquired within"));
  // --fair waits in one call: its rounds are seen through the client's observer.
  auto fair = cli(run_args(nodes, {"--fair", "-w", "1500ms"}, "stuck-bounded", {"true"}));
  INFO("fair stderr: " << fair.err);
  CHECK(fair.exit_code == 69);
  CHECK(has(fair.err, "redlock: run: waiting: 0 of 3 masters answered, 2 needed ("));
  auto a = cli({"--no-quarantine", "--nodes", nodes, "--human", "acquire", "stuck-bounded", "-w", "1500ms"});
  INFO("acquire stderr: " << a.err);
  CHECK(a.exit_code == 69);
  CHECK(has(a.err, "redlock: acquire: waiting: 0 of 3 masters answered, 2 needed ("));
  CHECK_FALSE(has(a.out, "waiting:"));
}

TEST_CASE("run: a wait behind an ordinary holder says nothing until it ends") {
  RedisGroup g(3);
  REQUIRE(cli(op({"acquire", "quiet", "--ttl", "30s"}, g)).exit_code == 0);
  auto r = cli(run_args(g.url_list(), {"-w", "1500ms"}, "quiet", {"true"}));
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK_FALSE(has(r.err, "waiting:"));
  CHECK(has(r.err, "\"quiet\" not acquired within"));
}
