// fenced_increment — one increment of a counter in a fenced store, made as a
// NON-atomic read-modify-write by the child of `redlock run --fence`
// (scripts/demo.sh runs it in a loop from several workers).
//
//   redlock run --fence RESOURCE -- fenced_increment --store 127.0.0.1:PORT
//       --key KEY --log FILE [--work-ms MS]
//       [--fault-log FILE] [--stall-file PATH [--stall-ms MS]]
//       [--delay-file PATH [--delay-ms MS]]
//
// It reads the fence from REDLOCK_FENCE (and REDLOCK_TOKEN) as `redlock run`
// sets them, reads the value (HMGET), sleeps --work-ms (simulated work,
// default 10), then writes value + 1 through the store's fenced
// check-and-set (redlock::FencedStore::write). Only the lock keeps two of these from
// interleaving; only the fence stops a write that reaches the store after a
// later holder's.
//
// Every write is logged with the time it was ISSUED on CLOCK_MONOTONIC (one
// clock for every process of the machine, the clock of `redlock run --json`'s
// "deadline_mono_us"), so the demo can count writes issued after their own
// lease's deadline without asking the fence.
//
// Two injected faults, each armed by a file that exactly one process claims
// (an atomic rename to PATH.claimed). The claimer writes the pid of a helper
// process into PATH.claimed and the helper holds an exclusive flock(2) on it
// while it lives, so the demo can await it (`flock PATH.claimed true`) and
// stop it by pid. Helpers run in a session of their own, outside CMD's
// process group: `redlock run`'s signals to that group never reach them.
// They log one line each to --fault-log (required with either file).
//
//   --stall-file  the holder stall: after reading, the helper stops our
//                 parent `redlock run` (SIGSTOP: the process that extends
//                 the lease — a whole holder frozen, like a GC pause), keeps
//                 it stopped for --stall-ms (default 3000, past the lease),
//                 then continues it (SIGCONT). We sleep --stall-ms too and
//                 would then write; but redlock's guard ends us (SIGTERM at
//                 D − K − M) before the deadline D, so no write is issued.
//                 The helper watches a pipe only we hold, so it sees the
//                 moment we die (also by SIGKILL), and logs
//                 {"kind":"stall", "worker", "resource", "token", "fence",
//                  "redlock_pid", "cmd_pid", "stall_start_us", "stall_end_us",
//                  "stall_start_mono_us", "stall_end_mono_us",
//                  "cmd_exit_mono_us": when we died, or null if we outlived it}.
//   --delay-file  the delayed write, which no supervisor can stop: after the
//                 work we issue the write in time but hand it to the
//                 "network" — the helper — which delivers it --delay-ms
//                 (default 1500, more than a lease) later. We exit at once
//                 with status 4 (write sent, outcome unknown: the worker
//                 does the increment again); the lock is released, the next
//                 holder writes with a higher fence, and when the delayed
//                 write arrives the store refuses it. The helper logs
//                 {"kind":"delayed_write", "t_us", "t_mono_us" (issued),
//                  "delivered_us", "delivered_mono_us", "delay_ms", "worker",
//                  "resource", "token", "fence", "read", "wrote",
//                  "accepted", "highest", "pid" (the helper's), "cmd_pid"}
//                 ("accepted": null and "error" when the store failed).
//
// Each write of our own appends one JSON line to --log:
//   {"t_us": unix µs just before the write was sent, "t_mono_us": the same
//    on CLOCK_MONOTONIC, "worker": $DEMO_WORKER or null, "resource":
//    $REDLOCK_RESOURCE or null, "token": $REDLOCK_TOKEN, "fence": F,
//    "read": R, "wrote": R+1, "accepted": bool, "highest": H, "pid": …}
// SIGTERM, SIGINT and SIGHUP are held back from the write until its line is
// logged, so an accepted write is always in the log.
// Exit 0 accepted, 3 rejected, 4 handed to the network (delayed), 1 store
// error, 2 usage error (including a missing or invalid REDLOCK_FENCE /
// REDLOCK_TOKEN).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "redlock/fenced_store.hpp"

namespace {

constexpr const char* kUsage =
    "usage: fenced_increment --store HOST:PORT --key KEY --log FILE [--work-ms MS]\n"
    "                        [--fault-log FILE] [--stall-file PATH] [--stall-ms MS]\n"
    "                        [--delay-file PATH] [--delay-ms MS]\n"
    "  (run as the child of `redlock run --fence`, which sets REDLOCK_FENCE and REDLOCK_TOKEN)\n";

constexpr int kExitDelayed = 4;

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

// mono_us reads CLOCK_MONOTONIC itself (not through a library clock): the
// demo compares it with other processes' readings of that same clock.
std::int64_t mono_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
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
  redlock::NodeAddress store;
  std::string key, log, fault_log, stall_file, delay_file;
  std::uint64_t work_ms = 10, stall_ms = 3000, delay_ms = 1500;
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
      a.store.host = s.substr(0, colon);
      a.store.port = static_cast<int>(*port);
    } else if (opt == "--key") {
      a.key = val;
    } else if (opt == "--log") {
      a.log = val;
    } else if (opt == "--fault-log") {
      a.fault_log = val;
    } else if (opt == "--stall-file") {
      a.stall_file = val;
    } else if (opt == "--delay-file") {
      a.delay_file = val;
    } else if (opt == "--work-ms" || opt == "--stall-ms" || opt == "--delay-ms") {
      const auto v = whole(val);
      if (!v || *v > 600'000) return opt + ": expected milliseconds from 0 to 600000, got '" + val + "'";
      (opt == "--work-ms" ? a.work_ms : opt == "--stall-ms" ? a.stall_ms : a.delay_ms) = *v;
    } else {
      return "unknown option " + opt;
    }
  }
  if (a.store.host.empty() || a.key.empty() || a.log.empty()) return "--store, --key and --log are required";
  if ((!a.stall_file.empty() || !a.delay_file.empty()) && a.fault_log.empty())
    return "--stall-file and --delay-file need --fault-log (where their helpers log)";
  if (!a.fault_log.empty() && a.fault_log == a.log) return "--fault-log must differ from --log";
  return std::nullopt;
}

void sleep_ms(std::uint64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// The fields every log line shares: who wrote, under which lease.
nlohmann::json holder_fields(std::uint64_t fence) {
  return {{"worker", env_json("DEMO_WORKER", true)},
          {"resource", env_json("REDLOCK_RESOURCE", false)},
          {"token", env_json("REDLOCK_TOKEN", false)},
          {"fence", fence}};
}

// Helper — a process of our own that outlives us, started by claim_helper.
// In the child `is_child` is true and the caller runs the helper's work and
// ends with _exit; in the parent `pid` is the child's (or -1: not started).
struct Helper {
  pid_t pid = -1;
  bool is_child = false;
};

// claim_helper claims the armed file `path` (rename to PATH.claimed: only
// one process succeeds), locks PATH.claimed (flock, exclusive) and forks
// the helper, which keeps the lock until it exits; PATH.claimed gets the
// helper's pid. The child is put in a session of its own (outside CMD's
// process group), with the default signal mask and stdio on /dev/null (it
// outlives the files `redlock run`'s caller gave us).
Helper claim_helper(const std::string& path) {
  Helper h;
  if (path.empty()) return h;
  const std::string claimed = path + ".claimed";
  if (std::rename(path.c_str(), claimed.c_str()) != 0) return h;
  const int fd = ::open(claimed.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0 || ::flock(fd, LOCK_EX) != 0) {
    std::cerr << "fenced_increment: cannot lock " << claimed << ": " << std::strerror(errno) << "\n";
    if (fd >= 0) ::close(fd);
    return h;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::cerr << "fenced_increment: fork: " << std::strerror(errno) << "\n";
    ::close(fd);
    return h;
  }
  if (pid == 0) {  // the helper: keeps fd (and with it the lock) until _exit
    ::setsid();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      for (int std_fd : {0, 1, 2}) ::dup2(null, std_fd);
      if (null > 2) ::close(null);
    }
    h.is_child = true;
    return h;
  }
  const std::string text = std::to_string(pid) + "\n";
  [[maybe_unused]] const ssize_t n = ::write(fd, text.data(), text.size());
  ::close(fd);  // the helper's copy keeps the lock
  h.pid = pid;
  return h;
}

// run_stall_helper: stop `redlock` for stall_ms, note when the command (the
// only writer of `cmd_alive`) died, continue `redlock`, log. Never returns.
[[noreturn]] void run_stall_helper(const Args& a, pid_t redlock, pid_t cmd, int cmd_alive, std::uint64_t fence) {
  const std::int64_t start_us = unix_us(), start_mono = mono_us();
  ::kill(redlock, SIGSTOP);
  const std::int64_t end_mono = start_mono + static_cast<std::int64_t>(a.stall_ms) * 1000;
  std::optional<std::int64_t> cmd_exit;
  for (std::int64_t now = mono_us(); now < end_mono; now = mono_us()) {
    if (cmd_exit) {
      sleep_ms(static_cast<std::uint64_t>((end_mono - now + 999) / 1000));  // the stall itself: the modelled fault
      continue;
    }
    pollfd p{cmd_alive, POLLIN, 0};
    const int timeout = static_cast<int>((end_mono - now + 999) / 1000);
    if (::poll(&p, 1, timeout) > 0) {
      char c;
      if (::read(cmd_alive, &c, 1) <= 0) cmd_exit = mono_us();  // EOF: its last holder of the pipe died
    }
  }
  nlohmann::json line = holder_fields(fence);
  line["kind"] = "stall";
  line["redlock_pid"] = static_cast<long>(redlock);
  line["cmd_pid"] = static_cast<long>(cmd);
  line["stall_start_us"] = start_us;
  line["stall_start_mono_us"] = start_mono;
  line["stall_end_mono_us"] = mono_us();
  line["stall_end_us"] = unix_us();
  line["cmd_exit_mono_us"] = cmd_exit ? nlohmann::json(*cmd_exit) : nlohmann::json(nullptr);
  // Logged before redlock goes on, so the line exists once its run has ended.
  append_line(a.fault_log, line.dump());
  ::kill(redlock, SIGCONT);
  ::_exit(0);
}

// run_delay_helper: the network holding one write for delay_ms, then
// delivering it; logs the store's verdict. Never returns.
[[noreturn]] void run_delay_helper(const Args& a, pid_t cmd, std::uint64_t fence, std::uint64_t read,
                                   std::int64_t issued_us, std::int64_t issued_mono) {
  sleep_ms(a.delay_ms);  // the modelled network delay
  auto store = redlock::FencedStore::connect(a.store);
  const auto w = store ? (*store)->write(a.key, fence, std::to_string(read + 1))
                       : redlock::Result<redlock::FencedWrite>(store.error());
  const std::int64_t delivered_us = unix_us(), delivered_mono = mono_us();
  nlohmann::json line = holder_fields(fence);
  line["kind"] = "delayed_write";
  line["t_us"] = issued_us;
  line["t_mono_us"] = issued_mono;
  line["delivered_us"] = delivered_us;
  line["delivered_mono_us"] = delivered_mono;
  line["delay_ms"] = a.delay_ms;
  line["read"] = read;
  line["wrote"] = read + 1;
  line["pid"] = static_cast<long>(getpid());
  line["cmd_pid"] = static_cast<long>(cmd);
  if (w) {
    line["accepted"] = w->accepted;
    line["highest"] = w->highest;
  } else {
    line["accepted"] = nullptr;
    line["error"] = w.error().to_string();
  }
  ::_exit(append_line(a.fault_log, line.dump()) ? 0 : 1);
}

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

  auto connected = redlock::FencedStore::connect(a.store);
  if (!connected) {
    std::cerr << "fenced_increment: " << connected.error().to_string() << "\n";
    return 1;
  }
  redlock::FencedStore& store = **connected;
  const auto before = store.read(a.key);
  if (!before) {
    std::cerr << "fenced_increment: " << before.error().to_string() << "\n";
    return 1;
  }
  const auto read = whole(before->value.c_str());
  if (!before->value.empty() && !read) {
    std::cerr << "fenced_increment: the value in " << a.key << " is not a counter: '" << before->value << "'\n";
    return 1;
  }
  const std::uint64_t value = read.value_or(0);

  // The stall: our parent `redlock run` (never init, should we have been
  // started some other way) is stopped by a helper while we "work" past
  // the lease; the guard must end us before we write.
  const pid_t parent = getppid(), self = getpid();
  int alive_pipe[2] = {-1, -1};
  if (!a.stall_file.empty() && parent > 1 && ::pipe(alive_pipe) == 0) {
    const Helper h = claim_helper(a.stall_file);
    if (h.is_child) {
      ::close(alive_pipe[1]);  // only the command holds the write end
      run_stall_helper(a, parent, self, alive_pipe[0], *fence);
    }
    ::close(alive_pipe[0]);
    if (h.pid > 0) {
      sleep_ms(a.stall_ms);  // killed meanwhile, if the guard works
    } else {
      ::close(alive_pipe[1]);
      alive_pipe[1] = -1;
      sleep_ms(a.work_ms);
    }
  } else {
    sleep_ms(a.work_ms);
  }

  // The delayed write: issued now, within the lease, delivered by the
  // helper later; we do not know its outcome.
  if (!a.delay_file.empty()) {
    const std::int64_t issued_us = unix_us(), issued_mono = mono_us();
    const Helper h = claim_helper(a.delay_file);
    if (h.is_child) {
      if (alive_pipe[1] >= 0) ::close(alive_pipe[1]);  // the stall helper waits for the command, not for us
      run_delay_helper(a, self, *fence, value, issued_us, issued_mono);
    }
    if (h.pid > 0) {
      std::cerr << "fenced_increment: write of " << value + 1 << " with fence " << *fence
                << " handed to the network (delivered in " << a.delay_ms << " ms by pid " << h.pid
                << "); its outcome is unknown\n";
      return kExitDelayed;
    }
  }

  // A write that the store accepted must reach the log, or the demo's
  // worker would repeat an increment that happened: a SIGTERM from
  // `redlock run` (lease lost) waits until the line is written.
  sigset_t deferred, previous;
  sigemptyset(&deferred);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&deferred, sig);
  sigprocmask(SIG_BLOCK, &deferred, &previous);
  const std::int64_t t = unix_us(), t_mono = mono_us();
  const auto w = store.write(a.key, *fence, std::to_string(value + 1));
  int rc = 0;
  if (!w) {
    std::cerr << "fenced_increment: " << w.error().to_string() << "\n";
    rc = 1;
  } else {
    nlohmann::json line = holder_fields(*fence);
    line["t_us"] = t;
    line["t_mono_us"] = t_mono;
    line["read"] = value;
    line["wrote"] = value + 1;
    line["accepted"] = w->accepted;
    line["highest"] = w->highest;
    line["pid"] = static_cast<long>(getpid());
    if (!append_line(a.log, line.dump())) {
      std::cerr << "fenced_increment: cannot append to " << a.log << ": " << std::strerror(errno) << "\n";
      rc = 1;
    } else {
      rc = w->accepted ? 0 : 3;
    }
  }
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  return rc;
}
