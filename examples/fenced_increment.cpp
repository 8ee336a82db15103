// fenced_increment — one increment of a counter in a fenced store, made as a
// NON-atomic read-modify-write by the child of `redlock run --fence`
// (scripts/demo.sh runs it in a loop from several workers).
//
//   redlock run --fence RESOURCE -- fenced_increment --store 127.0.0.1:PORT
//       --key KEY --log FILE [--work-ms MS] [--stall-file PATH --stall-ms MS]
//
// It reads the fence from REDLOCK_FENCE (and REDLOCK_TOKEN) as `redlock run`
// sets them, reads the value (HMGET), sleeps --work-ms (simulated work,
// default 10), then writes value + 1 through the store's fenced
// check-and-set (FencedStore::write). Only the lock keeps two of these from
// interleaving; only the fence stops a holder whose lease ran out.
//
// Stall, the fencing demonstration: after reading, if --stall-file exists
// the process claims it (rename to PATH.claimed; only the one whose rename
// succeeds stalls), stops its parent with SIGSTOP (the `redlock run` that
// extends the lease — as if the whole host paused), sleeps --stall-ms
// (default 3000, longer than the lease), writes — which the store must
// refuse, since another worker took the lock meanwhile with a higher fence
// — and resumes the parent with SIGCONT before exiting.
//
// Each write appends one JSON line to --log:
//   {"t_us": unix µs just before the write was sent, "worker": $DEMO_WORKER
//    or null, "resource": $REDLOCK_RESOURCE or null, "fence": F, "read": R,
//    "wrote": R+1, "accepted": bool, "highest": H, "pid": …, "stalled": bool}
// and a stalled write also "stall_start_us" and "stall_end_us".
// SIGTERM, SIGINT and SIGHUP are held back from the write until its line is
// logged, so an accepted write is always in the log.
// Exit 0 accepted, 3 rejected, 1 store error, 2 usage error (including a
// missing or invalid REDLOCK_FENCE / REDLOCK_TOKEN).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "fenced_store.hpp"

namespace {

constexpr const char* kUsage =
    "usage: fenced_increment --store HOST:PORT --key KEY --log FILE [--work-ms MS]\n"
    "                        [--stall-file PATH] [--stall-ms MS]\n"
    "  (run as the child of `redlock run --fence`, which sets REDLOCK_FENCE and REDLOCK_TOKEN)\n";

int usage(const std::string& why) {
  std::cerr << "fenced_increment: " << why << "\n" << kUsage;
  return 2;
}

// whole parses a non-negative decimal integer that fits in 64 bits.
std::optional<std::uint64_t> whole(const char* s) {
  if (s == nullptr || *s == '\0') return std::nullopt;
  std::uint64_t v = 0;
  for (const char* p = s; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return std::nullopt;
    const auto d = static_cast<std::uint64_t>(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::int64_t unix_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// env_json is an environment variable as JSON: null when unset or empty,
// a number when `numeric` and it is one, else the text.
nlohmann::json env_json(const char* name, bool numeric) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return nullptr;
  if (auto n = whole(v); numeric && n) return *n;
  return v;
}

// append_line adds one line to `path` with a single O_APPEND write, so
// concurrent writers never interleave within a line.
bool append_line(const std::string& path, const std::string& line) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const std::string text = line + "\n";
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  return ::close(fd) == 0 && ok;
}

struct Args {
  std::string host, key, log, stall_file;
  int port = 0;
  std::uint64_t work_ms = 10, stall_ms = 3000;
};

std::optional<std::string> parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    if (opt == "-h" || opt == "--help") return std::string();
    if (i + 1 >= argc) return opt + ": missing value";
    const char* val = argv[++i];
    if (opt == "--store") {
      const std::string s = val;
      const auto colon = s.rfind(':');
      const auto port = colon == std::string::npos ? std::nullopt : whole(s.c_str() + colon + 1);
      if (!port || *port == 0 || *port > 65535 || colon == 0) return "--store: expected HOST:PORT, got '" + s + "'";
      a.host = s.substr(0, colon);
      a.port = static_cast<int>(*port);
    } else if (opt == "--key") {
      a.key = val;
    } else if (opt == "--log") {
      a.log = val;
    } else if (opt == "--stall-file") {
      a.stall_file = val;
    } else if (opt == "--work-ms" || opt == "--stall-ms") {
      const auto v = whole(val);
      if (!v || *v > 600'000) return opt + ": expected milliseconds from 0 to 600000, got '" + val + "'";
      (opt == "--work-ms" ? a.work_ms : a.stall_ms) = *v;
    } else {
      return "unknown option " + opt;
    }
  }
  if (a.host.empty() || a.key.empty() || a.log.empty()) return "--store, --key and --log are required";
  return std::nullopt;
}

// claim_stall: true for the one process that renames the armed stall file.
bool claim_stall(const std::string& path) {
  if (path.empty()) return false;
  return std::rename(path.c_str(), (path + ".claimed").c_str()) == 0;
}

void sleep_ms(std::uint64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (auto why = parse_args(argc, argv, a)) {
    if (why->empty()) {
      std::cout << kUsage;
      return 0;
    }
    return usage(*why);
  }
  const char* fence_text = std::getenv("REDLOCK_FENCE");
  const auto fence = whole(fence_text);
  if (!fence || *fence == 0)
    return usage(fence_text == nullptr ? "REDLOCK_FENCE is not set (run me under `redlock run --fence`)"
                                       : std::string("REDLOCK_FENCE is not a positive integer: '") + fence_text + "'");
  const char* token = std::getenv("REDLOCK_TOKEN");
  if (token == nullptr || *token == '\0') return usage("REDLOCK_TOKEN is not set (run me under `redlock run --fence`)");

  redlock::examples::FencedStore store(a.host, a.port, a.key);
  const auto before = store.read();
  if (!before.error.empty()) {
    std::cerr << "fenced_increment: " << before.error << "\n";
    return 1;
  }
  const auto read = whole(before.value.c_str());
  if (!before.value.empty() && !read) {
    std::cerr << "fenced_increment: the value in " << a.key << " is not a counter: '" << before.value << "'\n";
    return 1;
  }
  const std::uint64_t value = read.value_or(0);

  // A stalled holder stops its `redlock run` parent (never init, should we
  // have been started some other way) so its lease is no longer extended.
  const pid_t parent = getppid();
  const bool stalled = claim_stall(a.stall_file);
  std::int64_t stall_start = 0;
  if (stalled) {
    stall_start = unix_us();
    if (parent > 1) ::kill(parent, SIGSTOP);
    sleep_ms(a.stall_ms);
  } else {
    sleep_ms(a.work_ms);
  }

  // A write that the store accepted must reach the log, or the demo's
  // worker would repeat an increment that happened: a SIGTERM from
  // `redlock run` (lease lost) waits until the line is written.
  sigset_t deferred, previous;
  sigemptyset(&deferred);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&deferred, sig);
  sigprocmask(SIG_BLOCK, &deferred, &previous);
  const std::int64_t t = unix_us();
  const auto w = store.write(*fence, std::to_string(value + 1));
  const std::int64_t stall_end = unix_us();
  int rc = 0;
  if (!w.error.empty()) {
    std::cerr << "fenced_increment: " << w.error << "\n";
    rc = 1;
  } else {
    nlohmann::json line = {{"t_us", t},          {"worker", env_json("DEMO_WORKER", true)},
                           {"resource", env_json("REDLOCK_RESOURCE", false)},
                           {"fence", *fence},    {"read", value},
                           {"wrote", value + 1}, {"accepted", w.accepted},
                           {"highest", w.highest}, {"pid", static_cast<long>(getpid())},
                           {"stalled", stalled}};
    if (stalled) {
      line["stall_start_us"] = stall_start;
      line["stall_end_us"] = stall_end;
    }
    if (!append_line(a.log, line.dump())) {
      std::cerr << "fenced_increment: cannot append to " << a.log << ": " << std::strerror(errno) << "\n";
      rc = 1;
    } else {
      rc = w.accepted ? 0 : 3;
    }
  }
  if (stalled && parent > 1) ::kill(parent, SIGCONT);
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  return rc;
}
