// cli_harness.hpp — running the project's programs as real processes in
// the integration tests: spawn with pipes, read output (whole or until a
// marker), signal, reap; stopped by pid (SIGKILL) when a test ends early.
// The processes themselves are support/process.hpp's.
#pragma once

#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "redis_server.hpp"
#include "support/process.hpp"

namespace redlock::test::cli_harness {

using json = nlohmann::json;
namespace fs = std::filesystem;

// ---- child processes --------------------------------------------------------

// state_of is a process's state letter in /proc (R, S, T, Z, ...), or 0 when it is gone.
inline char state_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content;
  if (!std::getline(stat, content)) return 0;
  const auto paren = content.rfind(')');
  return paren != std::string::npos && paren + 2 < content.size() ? content[paren + 2] : 0;
}

// dead: the process is gone, or a zombie nobody reaped yet (it runs no more code).
inline bool dead(pid_t pid) {
  const char state = state_of(pid);
  return state == 0 || state == 'Z';
}

// GroupReaper — SIGKILLs a command's process group when a test ends, unless
// the group is already gone (the code under test may have failed to end it;
// its leader may have exited, leaving others).
struct GroupReaper {
  pid_t pgid = -1;
  ~GroupReaper() {
    if (pgid > 0 && ::kill(-pgid, 0) == 0) ::kill(-pgid, SIGKILL);
  }
};

using ProcResult = support::ProcessResult;
using EnvVars = std::vector<std::pair<std::string, std::string>>;

// Child — one spawned program with stdout and stderr on pipes
// (support::Process). Stopped by pid (SIGKILL) if it is destroyed before
// wait() collected it.
class Child {
 public:
  Child(const std::string& path, const std::vector<std::string>& args, const EnvVars& env = {})
      : process_(options(path, args, env)) {}

  pid_t pid() const noexcept { return process_.pid(); }
  // signal sends `sig` to the child (by pid, while it is ours).
  void signal(int sig) const { process_.signal(sig); }

  // wait_for reads stdout until it contains `text` (true) or the timeout
  // passes / stdout ends (false). What was read stays for wait().
  bool wait_for(const std::string& text, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return process_.wait_for_output(text, timeout);
  }
  const std::string& out_so_far() const noexcept { return process_.output(); }
  // read_line returns the next line of stdout (consumed: wait() no longer
  // has it); nullopt when stdout ended or the timeout passed.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    return process_.read_line(timeout);
  }
  // close_output stops reading stdout: the child's next write fails (EPIPE).
  void close_output() { process_.close_output(); }

  // wait reads stdout and stderr to their end and reaps the child; past the
  // timeout the child is killed (by pid) and the result says timed_out.
  ProcResult wait(std::chrono::seconds timeout = std::chrono::seconds(30)) { return process_.finish(timeout); }

 private:
  // The child's environment: ours without REDLOCK_NODES (so a developer's
  // setting cannot leak in), plus `env`.
  static support::ProcessOptions options(const std::string& path, const std::vector<std::string>& args,
                                         const EnvVars& env) {
    support::ProcessOptions o;
    o.argv = {path};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.env = support::current_environment();
    o.env->erase("REDLOCK_NODES");
    o.env_set = env;
    o.out = support::Stream::pipe();
    o.err = support::Stream::pipe();
    return o;
  }

  support::Process process_;
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

// The names on the masters (src/keys.hpp): {prefix}{{resource}}:lock and :released.
inline std::string key_of(const std::string& resource) { return "redlock:{" + resource + "}:lock"; }
inline std::string channel_of(const std::string& resource) { return "redlock:{" + resource + "}:released"; }

// line_after returns the rest of the stdout line that starts with `marker`.
inline std::string line_after(const std::string& out, const std::string& marker) {
  const auto at = out.find(marker);
  if (at == std::string::npos) return {};
  const auto end = out.find('\n', at);
  return out.substr(at + marker.size(), end == std::string::npos ? std::string::npos : end - at - marker.size());
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

// ---- names with any bytes (docs/cli.md, "Names and other bytes in the output") ----

// unescape reads the CLI's escaped form back: \\ a backslash, \" a quote,
// \xHH a byte; anything else as it is.
inline std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    const char next = s[++i];
    if (next == 'x' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += next;
    }
  }
  return out;
}

// from_hex decodes lowercase or uppercase hex digits to bytes.
inline std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// name_in reads the name a JSON object gives under `key`: the string itself
// when the name is UTF-8, else the escaped form with `key`_hex beside it
// (both checked to say the same bytes).
inline std::string name_in(const json& j, const std::string& key) {
  REQUIRE(j.contains(key));
  REQUIRE(j[key].is_string());
  const std::string text = j[key].get<std::string>();
  if (!j.contains(key + "_hex")) return text;
  const std::string bytes = from_hex(j[key + "_hex"].get<std::string>());
  CHECK(unescape(text) == bytes);
  return bytes;
}

// has_control_bytes: `text` holds a byte that a terminal would act on — C0
// other than the newline that ends a line, DEL, or an 8-bit C1 byte pair.
inline bool has_control_bytes(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xa0) return true;
  }
  return false;
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

// config_file writes a config for `group` with the quarantine off (the
// masters were started moments ago): for the examples, which read
// REDLOCK_CONFIG.
inline std::string config_file(const TempDir& tmp, const RedisGroup& group) {
  json nodes = json::array();
  for (const auto& url : group.urls()) nodes.push_back(url);
  return tmp.write("redlock.json", json{{"nodes", nodes}, {"quarantine", false}}.dump()).string();
}

// PatientConfig — for a check that needs every running master's answer: a
// config file with the group's nodes and the timeouts of helpers.hpp's
// patient() (a fresh process on a loaded machine — CI, ASan — may hear a
// master later than 50 ms after its write). A killed master refuses at once,
// so this costs nothing where a master is down.
struct PatientConfig {
  TempDir dir;
  fs::path file;
  explicit PatientConfig(const std::vector<std::string>& urls) {
    Options o;
    patient(o);
    const json settings{{"node_timeout_ms", o.node_timeout.count()},
                        {"stall_timeout_ms", o.stall_timeout.count()},
                        {"nodes", urls}};
    file = dir.write("redlock.json", settings.dump());
  }
  explicit PatientConfig(const RedisGroup& g) : PatientConfig(g.urls()) {}
  // op: ARGS with --no-quarantine and --config FILE (the nodes come from it).
  std::vector<std::string> op(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--no-quarantine", "--config", file.string()});
    return args;
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
