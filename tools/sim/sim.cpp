// sim.cpp — redlock-sim and redlock-sim-sabotaged: run seeded schedules
// (schedule.hpp) and report. docs/simulation.md explains the output.
//
//   redlock-sim [--seed N] [--schedules K] [--seconds S] [--workload W]
//               [--clients C] [--beyond] [--first] [--verbose]
//               [--trace-commands] [--sabotage NAME[,NAME]]   (sabotaged build)
//
// Schedule i runs seed N+i, so any schedule replays alone with
// `--seed N+i --schedules 1` and the same other flags. Progress goes to
// stderr; stdout ends with one JSON line. Exit 0: no violation; 1: at
// least one; 2: usage error.
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "schedule.hpp"

namespace {

using namespace redlock::sim;
using SteadyClock = std::chrono::steady_clock;

#ifdef REDLOCK_SABOTAGE
constexpr const char* program = "redlock-sim-sabotaged";
#else
constexpr const char* program = "redlock-sim";
#endif

int usage(const char* why) {
  std::fprintf(stderr,
               "%s: %s\n"
               "usage: %s [--seed N] [--schedules K] [--seconds S] [--workload plain|fenced|multi|lease|all]\n"
               "       [--clients C] [--beyond] [--first] [--verbose] [--trace-commands]%s\n",
               program, why, program,
#ifdef REDLOCK_SABOTAGE
               " [--sabotage NAME[,NAME]]"
#else
               ""
#endif
  );
  return 2;
}

bool parse_u64(const char* text, std::uint64_t& out) {
  char* end = nullptr;
  errno = 0;
  out = std::strtoull(text, &end, 10);
  return errno == 0 && end != text && *end == '\0' && text[0] != '-';
}

std::string json_or_null(bool has, const std::string& value) { return has ? value : "null"; }

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1, schedules = 0, clients = 0;
  double seconds = 0;
  bool first = false, verbose = false;
  std::string sabotage;
  ScheduleOptions opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--seed" || a == "--schedules" || a == "--clients") {
      const char* v = value();
      std::uint64_t n = 0;
      if (v == nullptr || !parse_u64(v, n)) return usage((a + " needs a non-negative integer").c_str());
      (a == "--seed" ? seed : a == "--schedules" ? schedules : clients) = n;
    } else if (a == "--seconds") {
      const char* v = value();
      char* end = nullptr;
      if (v != nullptr) seconds = std::strtod(v, &end);
      if (v == nullptr || end == v || *end != '\0' || !(seconds > 0)) return usage("--seconds needs a positive number");
    } else if (a == "--workload") {
      const char* v = value();
      if (v == nullptr || !parse_workload(v, opt.workload)) return usage("--workload: plain, fenced, multi, lease or all");
    } else if (a == "--beyond") {
      opt.beyond = true;
    } else if (a == "--first") {
      first = true;
    } else if (a == "--verbose") {
      verbose = true;
    } else if (a == "--trace-commands") {
      opt.trace_commands = true;
#ifdef REDLOCK_SABOTAGE
    } else if (a == "--sabotage") {
      const char* v = value();
      if (v == nullptr || *v == '\0') return usage("--sabotage needs a name");
      sabotage = v;
#endif
    } else if (a == "--help" || a == "-h") {
      usage("help");
      return 0;
    } else {
      return usage(("unknown argument " + a).c_str());
    }
  }
  if (clients > 64) return usage("--clients: at most 64");
  opt.clients = static_cast<int>(clients);
  // The library reads REDLOCK_SABOTAGE once, at its first use: set it
  // before anything runs (an unknown name aborts there, with a message).
  if (!sabotage.empty()) setenv("REDLOCK_SABOTAGE", sabotage.c_str(), 1);
  if (schedules == 0 && seconds == 0) schedules = 20;

  std::string replay_flags = std::string(" --workload ") + workload_name(opt.workload);
  if (clients > 0) replay_flags += " --clients " + std::to_string(clients);
  if (opt.beyond) replay_flags += " --beyond";
  if (!sabotage.empty()) replay_flags += " --sabotage " + sabotage;

  const auto t0 = SteadyClock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(SteadyClock::now() - t0).count(); };
  std::uint64_t done = 0, rounds = 0, violations = 0, commands = 0, wakes = 0, first_seed = 0, reported = 0;
  double first_at = -1, last_progress = 0;
  for (std::uint64_t i = 0; schedules == 0 || i < schedules; ++i) {
    if (seconds > 0 && elapsed() >= seconds) break;
    const std::uint64_t s = seed + i;
    const ScheduleResult r = run_schedule(s, opt);
    ++done;
    rounds += r.rounds;
    commands += r.commands;
    wakes += r.wakes;
    if (verbose) {
      std::fprintf(stderr, "seed %" PRIu64 ": %s, %zu masters, %zu clients, %" PRIu64 " rounds, %" PRIu64
                   " grants, %s, %zu violations, trace %016" PRIx64 "\n",
                   s, workload_name(r.workload), r.masters, r.clients, r.rounds, r.grants,
                   r.wake_ups ? ("wake-ups (" + std::to_string(r.wakes) + " delivered)").c_str() : "polling",
                   r.violations.size(), r.trace_hash);
    }
    if (!r.violations.empty()) {
      violations += r.violations.size();
      if (first_at < 0) {
        first_at = elapsed();
        first_seed = s;
      }
      if (reported++ < 3) {
        // Replay with a trace: the same seed gives the same schedule.
        ScheduleOptions rec = opt;
        rec.record = true;
        const ScheduleResult t = run_schedule(s, rec);
        std::fprintf(stderr, "\nVIOLATION seed %" PRIu64 " (%s, %zu masters, %zu clients), trace %016" PRIx64 "%s\n",
                     s, workload_name(r.workload), r.masters, r.clients, r.trace_hash,
                     t.trace_hash == r.trace_hash ? "" : " (REPLAY DIFFERS: nondeterminism)");
        for (const Violation& v : r.violations) {
          std::fprintf(stderr, "  %s at%.3f ms: %s\n", v.kind.c_str(), static_cast<double>(v.at) / 1e6,
                       v.what.c_str());
        }
        std::fprintf(stderr, "%s", t.trace.c_str());
        std::fprintf(stderr, "replay: %s --seed %" PRIu64 " --schedules 1%s%s\n\n", program, s, replay_flags.c_str(),
                     opt.trace_commands ? " --trace-commands" : "");
      }
      if (first) break;
    }
    if (!verbose && elapsed() - last_progress >= 2.0) {
      last_progress = elapsed();
      std::fprintf(stderr, "%.0f s: %" PRIu64 " schedules, %" PRIu64 " rounds (%.0f/s), %" PRIu64 " violations\n",
                   last_progress, done, rounds, static_cast<double>(rounds) / last_progress, violations);
    }
  }
  const double secs = elapsed();
  const bool found = violations > 0;
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.3f", first_at);
  std::printf("{\"schedules\":%" PRIu64 ",\"rounds\":%" PRIu64 ",\"rounds_per_s\":%.0f,\"violations\":%" PRIu64
              ",\"first_violation_seed\":%s,\"seconds_to_first_violation\":%s,\"seconds\":%.3f,"
              "\"schedules_per_s\":%.2f,\"commands\":%" PRIu64 ",\"wake_ups_delivered\":%" PRIu64 ",\"seed\":%" PRIu64 ",\"workload\":\"%s\"}\n",
              done, rounds, secs > 0 ? static_cast<double>(rounds) / secs : 0.0, violations,
              json_or_null(found, std::to_string(first_seed)).c_str(), json_or_null(found, buf).c_str(), secs,
              secs > 0 ? static_cast<double>(done) / secs : 0.0, commands, wakes, seed, workload_name(opt.workload));
  return found ? 1 : 0;
}
