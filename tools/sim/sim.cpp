// sim.cpp — redlock-sim and redlock-sim-sabotaged: run seeded schedules
// (schedule.hpp) and report. docs/simulation.md explains the output.
//
//   redlock-sim [--seed N] [--schedules K] [--seconds S] [--workload W]
//               [--clients C] [--beyond] [--first] [--verbose]
//               [--trace-commands] [--shrink] [--faults I,J,…]
//               [--sabotage NAME[,NAME]]   (sabotaged build)
//
// Schedule i runs seed N+i, so any schedule replays alone with
// `--seed N+i --schedules 1` and the same other flags. Progress goes to
// stderr; stdout ends with one JSON line. Exit 0: no violation; 1: at
// least one; 2: usage error.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "schedule.hpp"
#include "shrink.hpp"

namespace {

using namespace redlock::sim;
using SteadyClock = std::chrono::steady_clock;

#ifdef REDLOCK_SABOTAGE
constexpr const char* program = "redlock-sim-sabotaged";
#else
constexpr const char* program = "redlock-sim";
#endif

// cpu_seconds: the process's user + system CPU time so far (getrusage):
// on a shared machine the rounds per CPU second say what the simulator
// costs, the wall-clock figure also what the other processes took.
double cpu_seconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  const auto secs = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

std::string json_or_null(bool has, const std::string& value) { return has ? value : "null"; }

std::string join(const std::vector<std::size_t>& v) {
  std::string out;
  for (const std::size_t i : v) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out;
}

// shrink_and_print: the fewest planned faults with which `seed` still shows
// a violation of the same kind, then that schedule's trace and its replay.
void shrink_and_print(std::uint64_t seed, const ScheduleOptions& opt, const ScheduleResult& r,
                      const std::string& replay_flags) {
  const std::string kind = r.violations.front().kind;
  const auto t0 = SteadyClock::now();
  std::vector<std::size_t> all;
  if (opt.restrict_faults) {
    all = opt.only_faults;
  } else {
    for (std::size_t i = 0; i < r.faults_planned; ++i) all.push_back(i);
  }
  const ShrinkResult s = shrink(all, [&](const std::vector<std::size_t>& faults) {
    ScheduleOptions o = opt;
    o.restrict_faults = true;
    o.only_faults = faults;
    const ScheduleResult t = run_schedule(seed, o);
    return std::any_of(t.violations.begin(), t.violations.end(), [&](const Violation& v) { return v.kind == kind; });
  });
  const double secs = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  ScheduleOptions rec = opt;
  rec.record = true;
  rec.restrict_faults = true;
  rec.only_faults = s.kept;
  const ScheduleResult t = run_schedule(seed, rec);
  std::fprintf(stderr, "SHRUNK seed %" PRIu64 ": %zu of %zu planned faults still show %s (%zu runs, %.1f s%s)\n",
               seed, s.kept.size(), all.size(), kind.c_str(), s.runs, secs,
               s.exhausted ? ", budget spent: may shrink further" : "");
  for (const Violation& v : t.violations) {
    std::fprintf(stderr, "  %s at%.3f ms: %s\n", v.kind.c_str(), static_cast<double>(v.at) / 1e6, v.what.c_str());
  }
  std::fprintf(stderr, "%s", t.trace.c_str());
  std::fprintf(stderr, "replay: %s --seed %" PRIu64 " --schedules 1%s --faults '%s'%s\n\n", program, seed,
               replay_flags.c_str(), join(s.kept).c_str(), opt.trace_commands ? " --trace-commands" : "");
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1, schedules = 0, clients = 0;
  double seconds = 0;
  bool first = false, verbose = false, shrink_first = false;
  std::string sabotage, faults;
  ScheduleOptions opt;
  std::string workload = "all";

  CLI::App app{"Deterministic simulation of the redlock client: seeded schedules of faults, each checked "
               "(docs/simulation.md).\nExit status: 0 no violation, 1 at least one, 2 usage error.",
               program};
  app.add_option("--seed", seed, "first seed (schedule i runs seed N+i)")->capture_default_str();
  app.add_option("--schedules", schedules, "how many schedules (default 20 unless --seconds)");
  app.add_option("--seconds", seconds, "run for this long (wall clock)")->check(CLI::PositiveNumber);
  app.add_option("--workload", workload,
                 "plain, fenced, multi, lease, all (one of the four per schedule), leases (several leases per "
                 "client, batched extensions), crowd (several waiters per client: wait lines), fair (fair "
                 "acquires: the masters' queues, and their order in the quiet tail), mixed (leases of "
                 "clients with different max_ttl; failovers, floods, data loss while long holders stop), "
                 "survey (plain, with status and nodes reports checked, and a client closed mid-run) or "
                 "semaphore (plain, on semaphores of 1-3 permits: at most P holders at once), rwlock "
                 "(plain, with readers: a writer overlaps no other holder) or election (campaigns, "
                 "leaders, observers: one leader at a time, terms increasing) or cluster (plain, over two lone "
                 "masters and three Redis Clusters of two shards: slots reassigned without their keys, shard "
                 "failovers)")
      ->check(CLI::IsMember({"plain", "fenced", "multi", "lease", "all", "leases", "crowd", "fair", "mixed", "survey",
                                 "semaphore", "rwlock", "election", "cluster"}))
      ->capture_default_str();
  app.add_option("--clients", clients, "clients per schedule (default 3–6 by the seed)")->check(CLI::Range(1, 64));
  app.add_option("--order-dead", opt.order_dead,
                 "fair workload: in half of the quiet tail's order checks, up to this many queued waiters die")
      ->check(CLI::Range(0, 4))
      ->capture_default_str();
  app.add_flag("--swarm", opt.swarm,
               "each schedule enables a random subset of the fault kinds (always so with --workload all)");
  app.add_flag("--beyond", opt.beyond, "also faults outside the stated assumptions (must show violations)");
  app.add_flag("--first", first, "stop at the first schedule with a violation");
  app.add_flag("--verbose", verbose, "one line per schedule");
  app.add_flag("--trace-commands", opt.trace_commands, "a violation's trace shows every command");
  app.add_flag("--shrink", shrink_first,
               "shrink the first violating schedule to the fewest faults that still show it");
  app.add_option("--faults", faults, "only these planned faults (#k in a trace), comma-separated: a shrunk replay");
#ifdef REDLOCK_SABOTAGE
  app.add_option("--sabotage", sabotage, "broken variant(s), comma-separated (src/sabotage.hpp)")->required();
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\n%s", program, e.what(), app.help().c_str());
    return 2;
  }
  parse_workload(workload, opt.workload);
  if (app.count("--faults") > 0) {
    opt.restrict_faults = true;
    std::size_t pos = 0;
    while (pos < faults.size()) {
      const std::size_t comma = std::min(faults.find(',', pos), faults.size());
      const std::string item = faults.substr(pos, comma - pos);
      std::uint64_t k = 0;
      char* end = nullptr;
      errno = 0;
      k = std::strtoull(item.c_str(), &end, 10);
      if (item.empty() || item[0] == '-' || errno != 0 || *end != '\0') {
        std::fprintf(stderr, "%s: --faults: \"%s\" is not a fault index (want e.g. 3,7,12)\n", program,
                     item.c_str());
        return 2;
      }
      opt.only_faults.push_back(static_cast<std::size_t>(k));
      pos = comma + 1;
    }
  }
  opt.clients = static_cast<int>(clients);
  // The trace hash is read by --verbose only (a violation's replay records,
  // and so hashes, anyway): hashing every command was 3 % of the time.
  opt.hash = verbose;
  // The library reads REDLOCK_SABOTAGE once, at its first use: set it
  // before anything runs (an unknown name aborts there, with a message).
  if (!sabotage.empty()) setenv("REDLOCK_SABOTAGE", sabotage.c_str(), 1);
  if (schedules == 0 && seconds == 0) schedules = 20;

  std::string replay_flags = std::string(" --workload ") + workload_name(opt.workload);
  if (clients > 0) replay_flags += " --clients " + std::to_string(clients);
  if (opt.beyond) replay_flags += " --beyond";
  if (opt.swarm) replay_flags += " --swarm";
  if (opt.order_dead != 2) replay_flags += " --order-dead " + std::to_string(opt.order_dead);
  if (!sabotage.empty()) replay_flags += " --sabotage " + sabotage;
  const std::string faults_flag = opt.restrict_faults ? " --faults '" + join(opt.only_faults) + "'" : "";

  const auto t0 = SteadyClock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(SteadyClock::now() - t0).count(); };
  std::uint64_t done = 0, rounds = 0, violations = 0, commands = 0, wakes = 0, first_seed = 0, reported = 0;
  std::uint64_t batches = 0, batch_keys = 0, batches_mixed = 0, queued = 0, queued_won = 0;
  std::uint64_t fair_acquires = 0, fair_grants = 0, order_checked = 0, order_schedules = 0, unsolicited = 0;
  std::uint64_t statuses = 0, node_reports = 0, closes = 0, closed_out = 0;
  std::uint64_t campaigns = 0, elections = 0, proclaims = 0, readings = 0;
  double first_at = -1, last_progress = 0;
  for (std::uint64_t i = 0; schedules == 0 || i < schedules; ++i) {
    if (seconds > 0 && elapsed() >= seconds) break;
    const std::uint64_t s = seed + i;
    const ScheduleResult r = run_schedule(s, opt);
    ++done;
    rounds += r.rounds;
    commands += r.commands;
    wakes += r.wakes;
    batches += r.extend_batches;
    batch_keys += r.extend_batch_keys;
    batches_mixed += r.extend_batches_mixed;
    queued += r.queued;
    queued_won += r.queued_won;
    fair_acquires += r.fair_acquires;
    fair_grants += r.fair_grants;
    order_checked += r.order_checked;
    order_schedules += r.order_checked > 0;
    unsolicited += r.unsolicited;
    statuses += r.statuses;
    node_reports += r.node_reports;
    closes += r.closes;
    closed_out += r.closed_out;
    campaigns += r.campaigns;
    elections += r.elections;
    proclaims += r.proclaims;
    readings += r.readings;
    if (verbose) {
      std::string counts;
      if (r.workload == Workload::leases) {
        counts = ", " + std::to_string(r.extend_batches) + " extend batches (" + std::to_string(r.extend_batch_keys) +
                 " keys, " + std::to_string(r.extend_batches_mixed) + " mixed)";
      }
      if (r.workload == Workload::crowd) {
        counts = ", " + std::to_string(r.queued) + " acquires queued in line (" + std::to_string(r.queued_won) +
                 " granted in turn)";
      }
      if (r.workload == Workload::mixed) counts = ", " + std::to_string(r.unsolicited) + " unsolicited replies read";
      if (r.workload == Workload::survey) {
        counts = ", " + std::to_string(r.statuses) + " status and " + std::to_string(r.node_reports) +
                 " nodes reports, " + std::to_string(r.closes) + " closed with " + std::to_string(r.closed_out) +
                 " callbacks out";
      }
      if (r.workload == Workload::semaphore) {
        counts = ", " + std::to_string(r.fair_acquires) + " fair acquires (" + std::to_string(r.fair_grants) +
                 " granted)";
      }
      if (r.workload == Workload::election) {
        counts = ", " + std::to_string(r.campaigns) + " campaigns (" + std::to_string(r.elections) + " elected), " +
                 std::to_string(r.proclaims) + " proclaims, " + std::to_string(r.readings) + " observer readings";
      }
      if (r.workload == Workload::fair) {
        counts = ", " + std::to_string(r.fair_acquires) + " fair acquires (" + std::to_string(r.fair_grants) +
                 " granted), " + std::to_string(r.order_checked) + " waiters in the order check";
      }
      std::fprintf(stderr, "seed %" PRIu64 ": %s, %zu masters, %zu clients, %" PRIu64 " rounds, %" PRIu64
                   " grants, %zu faults, %s%s, %zu violations, trace %016" PRIx64 "%s%s\n",
                   s, workload_name(r.workload), r.masters, r.clients, r.rounds, r.grants, r.faults_planned,
                   r.wake_ups ? ("wake-ups (" + std::to_string(r.wakes) + " delivered)").c_str() : "polling",
                   counts.c_str(), r.violations.size(), r.trace_hash, r.swarm.empty() ? "" : ", swarm: ",
                   r.swarm.c_str());
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
        // Without the first run's hash, its violations are what the
        // replay must show again.
        const bool same = opt.hash ? t.trace_hash == r.trace_hash
                                   : std::equal(t.violations.begin(), t.violations.end(), r.violations.begin(),
                                                r.violations.end(), [](const Violation& a, const Violation& b) {
                                                  return a.kind == b.kind && a.at == b.at && a.what == b.what;
                                                });
        std::fprintf(stderr, "\nVIOLATION seed %" PRIu64 " (%s, %zu masters, %zu clients), trace %016" PRIx64 "%s\n",
                     s, workload_name(r.workload), r.masters, r.clients, t.trace_hash,
                     same ? "" : " (REPLAY DIFFERS: nondeterminism)");
        if (!r.swarm.empty()) std::fprintf(stderr, "  swarm: %s\n", r.swarm.c_str());
        for (const Violation& v : r.violations) {
          std::fprintf(stderr, "  %s at%.3f ms: %s\n", v.kind.c_str(), static_cast<double>(v.at) / 1e6,
                       v.what.c_str());
        }
        std::fprintf(stderr, "%s", t.trace.c_str());
        std::fprintf(stderr, "replay: %s --seed %" PRIu64 " --schedules 1%s%s%s\n\n", program, s, replay_flags.c_str(),
                     faults_flag.c_str(), opt.trace_commands ? " --trace-commands" : "");
        if (shrink_first && reported == 1) shrink_and_print(s, opt, r, replay_flags);
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
  const double cpu = cpu_seconds();
  const bool found = violations > 0;
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.3f", first_at);
  // leases: how many extend_batch calls the masters ran (batching happened).
  std::string counts_json;
  if (opt.workload == Workload::leases) {
    counts_json = ",\"extend_batches\":" + std::to_string(batches) + ",\"extend_batch_keys\":" +
                  std::to_string(batch_keys) + ",\"extend_batches_mixed\":" + std::to_string(batches_mixed);
  }
  // crowd: how many acquires queued behind a waiter of their client (lines
  // formed), and how many of them the line moved on to.
  if (opt.workload == Workload::crowd) {
    counts_json = ",\"queued\":" + std::to_string(queued) + ",\"queued_won\":" + std::to_string(queued_won);
  }
  // fair: fair acquires and grants; waiters (and schedules) whose grant
  // order the quiet tail checked.
  if (opt.workload == Workload::fair) {
    counts_json = ",\"fair_acquires\":" + std::to_string(fair_acquires) + ",\"fair_grants\":" +
                  std::to_string(fair_grants) + ",\"order_checked\":" + std::to_string(order_checked) +
                  ",\"order_schedules\":" + std::to_string(order_schedules);
  }
  // mixed: the floods' unsolicited replies that reached a client.
  if (opt.workload == Workload::mixed) counts_json = ",\"unsolicited\":" + std::to_string(unsolicited);
  // survey: reports checked; clients closed, and the callbacks they still
  // owed at the close (each came exactly once).
  if (opt.workload == Workload::survey) {
    counts_json = ",\"statuses\":" + std::to_string(statuses) + ",\"node_reports\":" + std::to_string(node_reports) +
                  ",\"closes\":" + std::to_string(closes) + ",\"closed_out\":" + std::to_string(closed_out);
  }
  // election: campaigns and terms; proclaims that reached a majority; the
  // readings observers were told.
  if (opt.workload == Workload::election) {
    counts_json = ",\"campaigns\":" + std::to_string(campaigns) + ",\"elections\":" + std::to_string(elections) +
                  ",\"proclaims\":" + std::to_string(proclaims) + ",\"readings\":" + std::to_string(readings);
  }
  std::printf("{\"schedules\":%" PRIu64 ",\"rounds\":%" PRIu64 ",\"rounds_per_s\":%.0f,\"rounds_per_cpu_s\":%.0f,\"violations\":%" PRIu64
              ",\"first_violation_seed\":%s,\"seconds_to_first_violation\":%s,\"seconds\":%.3f,"
              "\"schedules_per_s\":%.2f,\"commands\":%" PRIu64 ",\"wake_ups_delivered\":%" PRIu64 ",\"seed\":%" PRIu64 ",\"workload\":\"%s\"%s}\n",
              done, rounds, secs > 0 ? static_cast<double>(rounds) / secs : 0.0,
              cpu > 0 ? static_cast<double>(rounds) / cpu : 0.0, violations,
              json_or_null(found, std::to_string(first_seed)).c_str(), json_or_null(found, buf).c_str(), secs,
              secs > 0 ? static_cast<double>(done) / secs : 0.0, commands, wakes, seed, workload_name(opt.workload),
              counts_json.c_str());
  return found ? 1 : 0;
}
