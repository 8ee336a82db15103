// cli_harness.hpp — running the project's programs as real processes in
// the integration tests: spawn with pipes, read output (whole or until a
// marker), signal, reap; stopped by pid (SIGKILL) when a test ends early.
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "redis_server.hpp"

extern char** environ;

namespace redlock::test::cli_harness {

using json = nlohmann::json;
namespace fs = std::filesystem;

// ---- child processes --------------------------------------------------------

struct ProcResult {
  int exit_code = -1;  // 128 + signal when killed by a signal
  std::string out, err;
  bool timed_out = false;
};

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// Child — one spawned program with stdout and stderr on pipes. Stopped by
// pid (SIGKILL) if it is destroyed before wait() collected it.
class Child {
 public:
  Child(const std::string& path, const std::vector<std::string>& args, const EnvVars& env = {}) {
    int out[2], err[2];
    REQUIRE(pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(pipe2(err, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);

    std::vector<std::string> argv_s{path};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);

    // The child's environment: ours without REDLOCK_NODES (so a developer's
    // setting cannot leak in) and without the names set here, plus `env`.
    std::vector<std::string> env_s;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string_view kv(*e);
      std::string_view name = kv.substr(0, kv.find('='));
      bool overridden = name == "REDLOCK_NODES";
      for (const auto& [k, v] : env) overridden = overridden || name == k;
      if (!overridden) env_s.emplace_back(kv);
    }
    for (const auto& [k, v] : env) env_s.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);

    const int rc = posix_spawn(&pid_, path.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    if (rc != 0) {
      pid_ = -1;
      FAIL("cannot start " << path << ": " << std::strerror(rc));
    }
  }

  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const noexcept { return pid_; }
  // signal sends `sig` to the child (by pid, while it is ours).
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }

  // wait_for reads stdout until it contains `text` (true) or the timeout
  // passes / stdout ends (false). What was read stays for wait().
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (out_.find(text) == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || out_fd_ < 0) return false;
      pollfd fd{out_fd_, POLLIN, 0};
      const int n = ::poll(&fd, 1, static_cast<int>(left.count()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) continue;
      char buf[4096];
      const ssize_t got = ::read(out_fd_, buf, sizeof buf);
      if (got > 0) {
        out_.append(buf, static_cast<std::size_t>(got));
      } else if (got == 0) {
        return out_.find(text) != std::string::npos;
      }
    }
    return true;
  }
  const std::string& out_so_far() const noexcept { return out_; }

  // wait reads stdout and stderr to their end and reaps the child; past the
  // timeout the child is killed (by pid) and the result says timed_out.
  ProcResult wait(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    ProcResult r;
    r.out = std::move(out_);
    out_.clear();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string* sinks[2] = {&r.out, &r.err};
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ::kill(pid_, SIGKILL);
        r.timed_out = true;
        break;
      }
      const int n = ::poll(fds, 2, static_cast<int>(left.count()));
      if (n < 0 && errno == EINTR) continue;
      REQUIRE(n >= 0);
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        char buf[4096];
        const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
        if (got > 0) {
          sinks[i]->append(buf, static_cast<std::size_t>(got));
        } else if (got == 0 || errno != EINTR) {
          fds[i].fd = -1;  // EOF (or a read error): this stream is done
        }
      }
    }
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return r;
  }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  std::string out_;  // stdout read by wait_for
};

inline std::string program(const char* env_name) {
  const char* p = std::getenv(env_name);
  REQUIRE_MESSAGE(p != nullptr, env_name << " is not set: run these tests with `meson test` "
                                             "(it sets the path of the built binary)");
  return p;
}

// cli runs `redlock ARGS...` to completion.
inline ProcResult cli(const std::vector<std::string>& args, const EnvVars& env = {}) {
  ProcResult r = Child(program("REDLOCK_CLI"), args, env).wait();
  INFO("redlock stdout: " << r.out);
  INFO("redlock stderr: " << r.err);
  REQUIRE_FALSE(r.timed_out);
  return r;
}

// json_of parses the one JSON object a run printed on stdout.
inline json json_of(const ProcResult& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  json j = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  REQUIRE_MESSAGE(j.is_object(), "stdout is not one JSON object");
  return j;
}

// report_of parses run's --json line: the last line of stderr that is a JSON object.
inline json report_of(const ProcResult& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  std::istringstream lines(r.err);
  json found;
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("command", "") == "run") found = j;
  }
  REQUIRE_MESSAGE(found.is_object(), "no run report on stderr");
  return found;
}

// Shorthands: an operation against a group, with --no-quarantine (fresh masters).
inline std::vector<std::string> op(std::vector<std::string> args, const RedisGroup& g) {
  args.insert(args.begin(), "--no-quarantine");
  args.push_back("--nodes");
  args.push_back(g.url_list());
  return args;
}

// TempDir — a private directory removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "redlock-cli-test-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name) << text;
    return path / name;
  }
};

// check_usage_error runs `redlock ARGS...` and checks the usage-error
// contract: exit 2, nothing on stdout, a message on stderr naming each of
// `names`.
inline void check_usage_error(const std::vector<std::string>& args, const std::vector<std::string>& names) {
  auto r = cli(args);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.starts_with("redlock: "));
  for (const auto& name : names) CHECK(r.err.find(name) != std::string::npos);
}

}  // namespace redlock::test::cli_harness
