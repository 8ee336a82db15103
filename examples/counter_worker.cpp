// counter_worker.cpp — one contender of scripts/demo.sh and the integration
// tests: N times, take the lock, increment a counter kept in a separate Redis
// with a non-atomic GET + SET, release. If the lock ever let two holders in,
// increments would be lost (counter < workers × iterations) and the holders'
// logged windows would overlap.
//
//   counter_worker --nodes URLS --counter-url URL --resource NAME --iterations N
//                  [--ttl MS] [--wait MS] [--hold-us N] [--pause-us N] [--log FILE]
//                  [--no-quarantine]
//   counter_worker check LOGFILE...
//   (counter_worker --help, counter_worker check --help)
//
// Each iteration logs "<acquired_ns> <released_ns> <validity_deadline_ns> <pid>"
// (CLOCK_BOOTTIME nanoseconds, the clock of the library's deadlines): acquired right after lock() returned,
// released right before unlock(). `check` reads the logs, takes each line as
// the window [acquired, min(released, deadline)] in which its holder acted as
// owner, and counts the pairs of windows that overlap: it prints
// `windows=N overlaps=M` and exits 1 when M > 0.
#include <CLI/CLI.hpp>
#include <hiredis/hiredis.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "redlock/redlock.hpp"

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
// Lock failures in a row after which the worker gives up (each one already
// waited --wait for the lock).
constexpr int kMaxConsecutiveFailures = 3;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// boot_ns: a redlock::BootClock time point (CLOCK_BOOTTIME, one epoch for
// every process of the machine) in ns.
long long boot_ns(redlock::BootClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

long long parse_count(std::string_view name, std::string_view text, long long min) {
  long long v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || p != text.data() + text.size() || v < min)
    throw UsageError(std::string(name) + ": \"" + std::string(text) + "\" is not a whole number >= " +
                     std::to_string(min));
  return v;
}

// --- the counter Redis (hiredis sync API, as in hiredis 0.14 and 1.x) --------

using ReplyPtr = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

class Counter {
 public:
  explicit Counter(const std::string& url) {
    auto addr = redlock::parse_node_url(url);
    if (!addr) throw UsageError("--counter-url: " + addr.error().message);
    const timeval timeout{2, 0};
    ctx_ = addr->kind == redlock::NodeAddress::Kind::tcp
               ? redisConnectWithTimeout(addr->host.c_str(), addr->port, timeout)
               : redisConnectUnixWithTimeout(addr->path.c_str(), timeout);
    if (ctx_ == nullptr || ctx_->err)
      throw std::runtime_error("counter redis " + addr->display() + ": " +
                               (ctx_ ? ctx_->errstr : "out of memory"));
    redisSetTimeout(ctx_, timeout);
    if (!addr->password.empty()) {
      if (addr->user.empty())
        run({"AUTH", addr->password});
      else
        run({"AUTH", addr->user, addr->password});
    }
    if (addr->db != 0) run({"SELECT", std::to_string(addr->db)});
  }
  ~Counter() { redisFree(ctx_); }
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  long long get() {
    ReplyPtr r = run({"GET", "counter"});
    if (r->type == REDIS_REPLY_NIL) return 0;
    if (r->type != REDIS_REPLY_STRING) throw std::runtime_error("counter redis: GET counter: not a string");
    return parse_count("counter value", std::string_view(r->str, r->len), 0);
  }
  void set(long long v) { run({"SET", "counter", std::to_string(v)}); }

 private:
  ReplyPtr run(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.c_str());
      lens.push_back(a.size());
    }
    auto* raw = static_cast<redisReply*>(
        redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (raw == nullptr) throw std::runtime_error("counter redis: " + args[0] + ": " + ctx_->errstr);
    ReplyPtr reply(raw, &freeReplyObject);
    if (reply->type == REDIS_REPLY_ERROR)
      throw std::runtime_error("counter redis: " + args[0] + ": " + std::string(reply->str, reply->len));
    return reply;
  }
  redisContext* ctx_ = nullptr;
};

// --- worker ------------------------------------------------------------------

struct WorkerArgs {
  std::string nodes, counter_url, resource, log;
  long long iterations = 0;  // required
  long long ttl_ms = 2000, wait_ms = 10000, hold_us = 200;
  // Outside the lock, between iterations. Without it the holder takes the
  // lock again at once and the others (retrying every retry_delay + jitter)
  // rarely get in: the workers would take turns 25 iterations at a time.
  long long pause_us = 5000;
  bool no_quarantine = false;
};

int run_worker(const WorkerArgs& a) {
  redlock::Config config;
  auto nodes = redlock::parse_node_list(a.nodes);
  if (!nodes) throw UsageError("--nodes: " + nodes.error().message);
  config.nodes = std::move(*nodes);
  config.options.quarantine = !a.no_quarantine;
  auto created = redlock::Client::create(std::move(config));
  if (!created) throw UsageError(created.error().message);
  auto& client = **created;
  Counter counter(a.counter_url);

  std::ofstream log;
  if (!a.log.empty()) {
    log.open(a.log, std::ios::app);
    if (!log) throw UsageError("--log: cannot open \"" + a.log + "\": " + std::strerror(errno));
  }
  const redlock::AcquireOptions opts{.ttl = std::chrono::milliseconds{a.ttl_ms},
                                     .wait = std::chrono::milliseconds{a.wait_ms},
                                     .token = {}};
  long long done = 0, lock_failures = 0, expired = 0, unlock_failures = 0;
  int in_a_row = 0;
  while (done < a.iterations) {
    auto lock = client.acquire(a.resource, opts);
    const long long acquired_ns = boot_ns(redlock::BootClock::now());
    if (!lock) {
      const auto code = lock.error().code;
      if (code == redlock::Errc::invalid_argument || code == redlock::Errc::config)
        throw UsageError(lock.error().to_string());
      ++lock_failures;
      if (++in_a_row >= kMaxConsecutiveFailures) {
        std::cerr << "counter_worker: giving up after " << in_a_row
                  << " failed lock attempts in a row; last: " << lock.error().to_string() << '\n';
        return kExitFailed;
      }
      continue;
    }
    in_a_row = 0;

    // The critical section: a read-modify-write that loses updates if two
    // holders ever overlap.
    const long long value = counter.get();
    if (a.hold_us > 0) std::this_thread::sleep_for(std::chrono::microseconds{a.hold_us});
    const bool still_valid = lock->valid();  // past the deadline we are not the owner any more
    if (still_valid) counter.set(value + 1);
    const long long released_ns = boot_ns(redlock::BootClock::now());

    if (log) {
      log << acquired_ns << ' ' << released_ns << ' ' << boot_ns(lock->validity_deadline) << ' '
          << getpid() << '\n'
          << std::flush;
    }
    auto released = client.release(*lock);
    if (!released || !released->released) ++unlock_failures;
    if (still_valid)
      ++done;
    else
      ++expired;  // the increment was not made: do this iteration again
    // Work outside the lock, so that the others get their turns.
    if (a.pause_us > 0) std::this_thread::sleep_for(std::chrono::microseconds{a.pause_us});
  }
  std::cout << "counter_worker: pid=" << getpid() << " iterations=" << done
            << " lock_failures=" << lock_failures << " expired=" << expired
            << " unlock_failures=" << unlock_failures << '\n';
  return 0;
}

// --- check -------------------------------------------------------------------

struct Window {
  long long start, end, pid;
};

int run_check(const std::vector<std::string>& files) {
  std::vector<Window> windows;
  for (const std::string& file : files) {
    std::ifstream in(file);
    if (!in) throw UsageError(file + ": cannot open: " + std::strerror(errno));
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      std::istringstream fields(line);
      long long acquired = 0, released = 0, deadline = 0, pid = 0;
      std::string rest;
      if (!(fields >> acquired >> released >> deadline >> pid) || (fields >> rest))
        throw UsageError(file + ":" + std::to_string(n) +
                         ": expected \"<acquired_ns> <released_ns> <validity_deadline_ns> <pid>\", got \"" +
                         line + "\"");
      windows.push_back({acquired, std::min(released, deadline), pid});
    }
  }
  std::sort(windows.begin(), windows.end(),
            [](const Window& x, const Window& y) { return x.start < y.start; });
  long long overlaps = 0;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    // Sorted by start: every later window that starts before this one ends overlaps it.
    for (std::size_t j = i + 1; j < windows.size() && windows[j].start < windows[i].end; ++j) {
      if (windows[j].end <= windows[j].start) continue;  // an empty window holds nothing
      if (++overlaps <= 10)
        std::cerr << "overlap: pid " << windows[i].pid << " [" << windows[i].start << ", "
                  << windows[i].end << "] and pid " << windows[j].pid << " [" << windows[j].start
                  << ", " << windows[j].end << "]\n";
    }
  }
  std::cout << "windows=" << windows.size() << " overlaps=" << overlaps << '\n';
  return overlaps > 0 ? kExitFailed : 0;
}

// --- command line -------------------------------------------------------------

int run(int argc, char** argv) {
  CLI::App app{"counter_worker: take a lock N times and increment a counter under it; `check` finds overlaps.",
               "counter_worker"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  WorkerArgs a;
  const CLI::Range at_least_0(0LL, std::numeric_limits<long long>::max());
  const CLI::Range at_least_1(1LL, std::numeric_limits<long long>::max());
  // Required unless the command is `check`, so checked below: CLI11 would
  // require them of `check` too.
  const std::vector<CLI::Option*> required = {
      app.add_option("--nodes", a.nodes, "The lock's masters")->type_name("URL,URL,..."),
      app.add_option("--counter-url", a.counter_url, "The Redis that keeps the counter")->type_name("URL"),
      app.add_option("--resource", a.resource, "Name of the lock")->type_name("NAME"),
      app.add_option("--iterations", a.iterations, "Increments to make")->type_name("N")->check(at_least_0),
  };
  app.add_option("--ttl", a.ttl_ms, "Lock time-to-live")->type_name("MS")->check(at_least_1)->capture_default_str();
  app.add_option("--wait", a.wait_ms, "How long each acquire may wait for the lock")
      ->type_name("MS")->check(at_least_0)->capture_default_str();
  app.add_option("--hold-us", a.hold_us, "Microseconds between the GET and the SET")
      ->type_name("N")->check(at_least_0)->capture_default_str();
  app.add_option("--pause-us", a.pause_us, "Microseconds outside the lock between iterations")
      ->type_name("N")->check(at_least_0)->capture_default_str();
  app.add_option("--log", a.log, "Append each iteration's hold window here")->type_name("FILE");
  app.add_flag("--no-quarantine", a.no_quarantine, "Count freshly started masters at once");
  std::vector<std::string> logs;
  CLI::App* check = app.add_subcommand("check", "Count the overlapping hold windows in the logs; exit 1 if any");
  check->add_option("LOGFILE", logs, "Logs written by --log")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  if (check->parsed()) return run_check(logs);
  for (const CLI::Option* o : required)
    if (o->count() == 0) throw UsageError(o->get_name() + " is required");
  return run_worker(a);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "counter_worker: " << e.what() << "\nRun with --help for more information.\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "counter_worker: " << e.what() << '\n';
    return kExitFailed;
  }
}
