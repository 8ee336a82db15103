// test_process.cpp — support/process.hpp: spawn and capture, exit codes,
// deadlines and the kill after them, environment and directory, pipes both
// ways, pause and resume, close-on-exec, and the destructor stopping a child
// (and its group). The children are /bin/sh scripts; a `sleep 60` in one is
// a child that would outlive the test, never a wait of the test's own.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "support/process.hpp"

namespace {

using namespace std::chrono_literals;
using namespace redlock::support;
using Clock = std::chrono::steady_clock;

std::string shell() {
  const char* path = std::getenv("PATH");
  const std::string sh = find_program("sh", path != nullptr ? path : "/usr/bin:/bin");
  REQUIRE_MESSAGE(!sh.empty(), "no sh on PATH");
  return sh;
}

ProcessOptions script(const std::string& text) {
  ProcessOptions o;
  o.argv = {shell(), "-c", text};
  return o;
}

ProcessOptions piped(const std::string& text) {
  ProcessOptions o = script(text);
  o.out = Stream::pipe();
  o.err = Stream::pipe();
  return o;
}

// gone_within: the process PID (not necessarily our child) has ended
// within TIMEOUT, awaited on its pidfd.
bool gone_within(pid_t pid, std::chrono::milliseconds timeout) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // already gone (and reaped)
  pollfd p{fd, POLLIN, 0};
  const int n = ::poll(&p, 1, static_cast<int>(timeout.count()));
  ::close(fd);
  return n == 1;
}

// open_fds: this process's descriptors above 2.
std::vector<std::string> open_fds() {
  std::vector<std::string> fds;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    if (std::stoi(e.path().filename().string()) > 2) fds.push_back(e.path().filename().string());
  }
  return fds;  // (also the listing's own, closed by now: absent in a child too)
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "redlock-process-test-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("run captures stdout and stderr apart and returns the exit status") {
  const ProcessResult r = run(script("printf 'to out\\nsecond'; printf 'to err' >&2; exit 3"), 10s);
  CHECK(r.exit_code == 3);
  CHECK_FALSE(r.timed_out);
  CHECK(r.out == "to out\nsecond");
  CHECK(r.err == "to err");

  CHECK(run(script("exit 0"), 10s).exit_code == 0);
  // Killed by a signal: 128 + its number.
  CHECK(run(script("kill -TERM $$"), 10s).exit_code == 128 + SIGTERM);
}

TEST_CASE("a child past its deadline is killed and reported as timed out") {
  SUBCASE("finish: SIGKILL at the deadline, what it wrote is kept") {
    const auto start = Clock::now();
    const ProcessResult r = run(piped("echo started; exec sleep 60"), 300ms);
    CHECK(r.timed_out);
    CHECK(r.exit_code == 128 + SIGKILL);
    CHECK(r.out == "started\n");
    CHECK(Clock::now() - start < 10s);
  }
  SUBCASE("wait returns nothing at its deadline; the child runs on until stopped") {
    Process p(script("exec sleep 60"));
    CHECK_FALSE(p.wait(50ms).has_value());
    CHECK(p.running());
    CHECK(p.stop() == 128 + SIGTERM);
    CHECK_FALSE(p.running());
    CHECK(p.exit_code() == 128 + SIGTERM);
  }
  SUBCASE("stop: SIGTERM first, SIGKILL after the grace when it is ignored") {
    // An ignored signal stays ignored across exec.
    ProcessOptions o = script("trap '' TERM; echo ready; exec sleep 60");
    o.out = Stream::pipe();
    Process p(std::move(o));
    REQUIRE(p.read_line(10s) == "ready");
    const auto asked = Clock::now();
    CHECK(p.stop(200ms) == 128 + SIGKILL);
    CHECK(Clock::now() - asked >= 200ms);
  }
  SUBCASE("a timed-out child in its own group takes its group with it") {
    ProcessOptions o = piped("sleep 60 & echo $!; wait");
    o.new_process_group = true;
    Process p(std::move(o));
    const std::optional<std::string> grandchild = p.read_line(10s);
    REQUIRE(grandchild.has_value());
    const ProcessResult r2 = p.finish(100ms);
    CHECK(r2.timed_out);
    CHECK(gone_within(std::stoi(*grandchild), 10s));
  }
}

TEST_CASE("wait returns at the child's exit, not at its deadline") {
  Process p(script("exit 7"));
  const auto start = Clock::now();
  CHECK(p.wait(30s) == 7);
  CHECK(Clock::now() - start < 10s);
  CHECK(p.wait() == 7);  // known from now on
  CHECK(p.kill() == 7);  // nothing left to kill
}

TEST_CASE("environment: additions on top of ours, or a whole one") {
  ::setenv("REDLOCK_PROCESS_TEST_INHERITED", "inherited", 1);
  ProcessOptions added = piped("printf '%s|%s' \"$REDLOCK_PROCESS_TEST_INHERITED\" \"$REDLOCK_PROCESS_TEST\"");
  added.env_set = {{"REDLOCK_PROCESS_TEST", "a b=c"}};
  CHECK(run(std::move(added), 10s).out == "inherited|a b=c");

  ProcessOptions whole = piped("printf '%s|%s|%s' \"${REDLOCK_PROCESS_TEST_INHERITED-unset}\" \"$ONLY\" \"$OVER\"");
  whole.env = Environment{{"ONLY", "1"}, {"OVER", "old"}};
  whole.env_set = {{"OVER", "new"}};
  CHECK(run(std::move(whole), 10s).out == "unset|1|new");
  ::unsetenv("REDLOCK_PROCESS_TEST_INHERITED");

  CHECK(current_environment().count("PATH") == 1);
}

TEST_CASE("cwd, stdout and stderr to a file, stdin from a file or /dev/null") {
  TempDir dir;
  ProcessOptions o = script("pwd; echo oops >&2");
  o.cwd = dir.path.string();
  o.out = Stream::file((dir.path / "log").string());
  o.err = Stream::file((dir.path / "log").string());
  CHECK(Process(std::move(o)).wait(10s) == 0);
  std::ifstream log(dir.path / "log");
  std::stringstream text;
  text << log.rdbuf();
  CHECK(text.str() == std::filesystem::canonical(dir.path).string() + "\noops\n");

  ProcessOptions from_file = piped("cat");
  from_file.in = Stream::file((dir.path / "log").string());
  CHECK(run(std::move(from_file), 10s).out == text.str());
  CHECK(run(piped("cat"), 10s).out.empty());  // stdin is /dev/null by default
}

TEST_CASE("pipes both ways: lines in, lines out, output awaited by content") {
  ProcessOptions o = piped("echo one; echo two; while read line; do echo \"got $line\"; done; echo bye >&2");
  o.in = Stream::pipe();
  Process p(std::move(o));
  CHECK(p.wait_for_output("two\n", 10s));
  CHECK(p.output() == "one\ntwo\n");
  CHECK(p.read_line(10s) == "one");
  CHECK(p.output() == "two\n");
  p.write_input("hello\n");
  CHECK(p.read_line(10s) == "two");
  CHECK(p.read_line(10s) == "got hello");
  CHECK_FALSE(p.read_line(50ms).has_value());  // nothing more yet
  CHECK_FALSE(p.output_ended());
  p.write_input("last\n");
  p.close_input();
  const ProcessResult r = p.finish(10s);
  CHECK(r.out == "got last\n");
  CHECK(r.err == "bye\n");
  CHECK(r.exit_code == 0);
}

TEST_CASE("writing to a child that closed its stdin throws EPIPE; no SIGPIPE ends us") {
  ProcessOptions o = script("exec 0<&-; echo closed");
  o.in = Stream::pipe();
  o.out = Stream::pipe();
  Process p(std::move(o));
  REQUIRE(p.read_line(10s) == "closed");
  REQUIRE(p.wait(10s) == 0);
  try {
    p.write_input("anyone?\n");
    FAIL("no exception");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == EPIPE);
  }
  sigset_t pending;
  sigpending(&pending);
  CHECK(sigismember(&pending, SIGPIPE) == 0);
}

TEST_CASE("pause stops the child, resume lets it run; stop ends a paused one too") {
  Process p(script("exec sleep 60"));
  CHECK(p.pause());
  CHECK(p.stopped());
  CHECK(p.pause());  // already stopped: returns at once
  CHECK(p.running());
  CHECK(p.resume());
  CHECK_FALSE(p.stopped());
  CHECK(p.pause());
  CHECK(p.stop(5s) == 128 + SIGTERM);  // SIGCONT follows SIGTERM
  CHECK_FALSE(p.pause());
  CHECK_FALSE(p.resume());
}

TEST_CASE("the destructor kills a running child, and a group's members too") {
  pid_t pid = -1;
  {
    Process p(script("exec sleep 60"));
    pid = p.pid();
    CHECK(p.running());
  }
  const int rc = ::kill(pid, 0);
  const int error = errno;
  CHECK(rc == -1);  // killed and reaped: no such process
  CHECK(error == ESRCH);

  std::string grandchild;
  {
    ProcessOptions o = script("sleep 60 & echo $!; wait");
    o.out = Stream::pipe();
    o.new_process_group = true;
    Process p(std::move(o));
    grandchild = p.read_line(10s).value_or("");
    REQUIRE_FALSE(grandchild.empty());
  }
  CHECK(gone_within(std::stoi(grandchild), 10s));

  // A stopped child dies as well.
  {
    Process p(script("exec sleep 60"));
    pid = p.pid();
    REQUIRE(p.pause());
  }
  CHECK(::kill(pid, 0) == -1);
}

TEST_CASE("descriptors: nothing of ours leaks into a child") {
  // One without O_CLOEXEC, and another Process's pipes, open meanwhile.
  int leaky[2];
  REQUIRE(::pipe(leaky) == 0);
  Process other(piped("exec sleep 60"));
  const std::vector<std::string> ours = open_fds();
  REQUIRE(ours.size() >= 4);  // leaky[0], leaky[1] and other's two pipes at least
  ProcessOptions o = piped("for n in \"$@\"; do [ -e /proc/$$/fd/$n ] && echo \"$n\"; done; exit 0");
  o.argv.push_back("sh");  // $0
  o.argv.insert(o.argv.end(), ours.begin(), ours.end());
  const ProcessResult r = run(std::move(o), 10s);
  CHECK(r.exit_code == 0);
  CHECK_MESSAGE(r.out.empty(), "inherited descriptors: " << r.out);
  ::close(leaky[0]);
  ::close(leaky[1]);
}

TEST_CASE("failures to start throw, naming the program") {
  ProcessOptions missing;
  missing.argv = {"/nonexistent/redlock-no-such-program"};
  try {
    Process p(std::move(missing));
    FAIL("no exception");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == ENOENT);
    CHECK(std::string(e.what()).find("/nonexistent/redlock-no-such-program") != std::string::npos);
  }
  ProcessOptions bad_dir = script("true");
  bad_dir.cwd = "/nonexistent/redlock-no-such-dir";
  CHECK_THROWS_AS(Process(std::move(bad_dir)), std::system_error);
  CHECK_THROWS_AS(Process(ProcessOptions{}), std::invalid_argument);
}

TEST_CASE("find_program searches the list in order and skips what is not an executable file") {
  TempDir dir;
  std::filesystem::create_directory(dir.path / "prog");  // a directory of that name
  const std::string first = (dir.path / "first").string();
  std::filesystem::create_directories(first);
  std::ofstream(first + "/prog") << "#!/bin/sh\n";
  std::filesystem::permissions(first + "/prog", std::filesystem::perms::owner_all);
  CHECK(find_program("prog", dir.path.string() + ":" + first) == first + "/prog");
  CHECK(find_program("no-such-program", dir.path.string()).empty());
  CHECK_FALSE(find_program("sh", "/usr/bin:/bin").empty());
}
