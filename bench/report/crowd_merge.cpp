// crowd_merge.cpp — bench_crowd_merge: one handoff-crowd run of the
// benchmarks (scripts/bench.sh, bench/CONTRACT.md) from the event files of
// its processes and the masters' INFO before and after.
//
//   bench_crowd_merge --system SYS --label NAME --waiters K
//                     --stats-before FILE --stats-after FILE EVENTS...
//   (bench_crowd_merge --help)
//
// EVENTS: one file per process of the crowd, as the benchmark programs
// write them (CONTRACT.md, "handoff-crowd"). Every process stamps its events
// with CLOCK_MONOTONIC, so the files merge into one history: the
// acquisitions sorted by the time the acquire returned. A holder's time is
// [acquired, release_started]: its release may delete the key (and so let
// the next acquire return) before the release call itself returns, but no
// acquire may return before the previous holder called release. One that
// does is a SAFETY VIOLATION: counted, printed on stderr, exit 3.
//
// The figures (one JSON line on stdout, fields as CONTRACT.md lists them):
//   handoff latency  acquired − the previous holder's released (0 when the
//                    acquire returned while that release call was still
//                    completing: counted as early_handoffs), over the
//                    handoffs whose both acquisitions lie in the window in
//                    which every process ran (the latest start to the
//                    earliest stop): p50_us … p999_us, ops, ops_per_s;
//                    self_handoff_share: of those, the share where the
//                    holder that released got the lock again (it raced the
//                    crowd it had just woken); to_other_p50_us / _p99_us:
//                    the latency of the handoffs to another waiter;
//   commands_per_handoff  calls in INFO commandstats, summed over the
//                    masters, after − before (the runner's own INFO calls
//                    excluded: cmdstat_info is left out), / acquisitions of
//                    the whole run; cmd_<name>_per_handoff per command;
//   master_cpu_us_per_handoff  used_cpu_user + used_cpu_sys, same way;
//   fairness         wait = wait_started → acquired: wait_p50_us,
//                    wait_p99_us, max_wait_us; max_open_wait_us (waits the
//                    stop cut short, to the stop); acquisitions per waiter:
//                    acquisitions_per_waiter_min/_max/_cv (stddev / mean),
//                    starved_waiters (waiters with none).
// Exit 0; 1 on an I/O or input error; 2 on a usage error; 3 on a safety
// violation (the line is still printed).

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "master_stats.hpp"

namespace {

[[noreturn]] void fail(const std::string& msg) {
  std::cerr << "bench_crowd_merge: " << msg << "\n";
  std::exit(1);
}

struct Acquisition {
  long long waiter;  // global: the file's first waiter + the local id
  long long wait_started, acquired, release_started, released;  // ns
};

struct Events {
  std::vector<Acquisition> acquisitions;
  std::vector<long long> open_waits_us;
  long long waiters = 0, processes = 0, errors = 0;
  long long latest_start = 0, earliest_stop = 0;
};

void read_events(const std::string& path, Events& ev) {
  std::ifstream f(path);
  if (!f) fail("cannot read " + path);
  std::string line, kind;
  long long first = ev.waiters, local_waiters = -1;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    std::istringstream in(line);
    in >> kind;
    const std::string where = path + ":" + std::to_string(lineno);
    if (kind == "crowd") {
      std::string system;
      long long pid = 0, start = 0, stop = 0, errors = 0;
      if (!(in >> system >> pid >> local_waiters >> start >> stop >> errors) || local_waiters < 1 || stop < start)
        fail(where + ": bad header '" + line + "'");
      ev.latest_start = ev.processes == 0 ? start : std::max(ev.latest_start, start);
      ev.earliest_stop = ev.processes == 0 ? stop : std::min(ev.earliest_stop, stop);
      ev.waiters += local_waiters;
      ev.errors += errors;
      ++ev.processes;
    } else if (kind == "acq") {
      Acquisition a{};
      if (local_waiters < 0) fail(where + ": an event before the header");
      if (!(in >> a.waiter >> a.wait_started >> a.acquired >> a.release_started >> a.released) || a.waiter < 0 ||
          a.waiter >= local_waiters || a.acquired < a.wait_started || a.release_started < a.acquired ||
          a.released < a.release_started)
        fail(where + ": bad event '" + line + "'");
      a.waiter += first;
      ev.acquisitions.push_back(a);
    } else if (kind == "open") {
      long long waiter = 0, started = 0, ended = 0;
      if (local_waiters < 0) fail(where + ": an event before the header");
      if (!(in >> waiter >> started >> ended) || ended < started) fail(where + ": bad event '" + line + "'");
      ev.open_waits_us.push_back((ended - started) / 1000);
    } else if (!kind.empty()) {
      fail(where + ": unknown line '" + line + "'");
    }
    kind.clear();
  }
  if (local_waiters < 0) fail(path + ": no header line (did the process finish?)");
}

bench::MasterStats read_stats(const std::string& path) {
  bench::MasterStats s;
  if (std::string why = bench::read_master_stats(path, s); !why.empty()) fail(why);
  return s;
}

long long nearest_rank(const std::vector<long long>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  std::string s = buf;
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string system, label, before_path, after_path;
  long long expected_waiters = 0;
  std::vector<std::string> event_files;
  CLI::App app{"bench_crowd_merge: merge the event files of one handoff-crowd run into handoffs, and count the "
               "masters' commands and CPU per handoff; prints one JSON line (bench/CONTRACT.md).",
               "bench_crowd_merge"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--system", system, "The system that ran")->required();
  app.add_option("--label", label, "The scenario name to report, e.g. handoff-crowd-64")->required();
  app.add_option("--waiters", expected_waiters, "Waiters of the whole crowd (the files must add up to it)")
      ->type_name("K")
      ->check(CLI::Range(1LL, 10'000'000LL))
      ->required();
  app.add_option("--stats-before", before_path, "INFO commandstats + cpu of every master, before")
      ->type_name("FILE")
      ->required();
  app.add_option("--stats-after", after_path, "The same, after")->type_name("FILE")->required();
  app.add_option("events", event_files, "One event file per process")
      ->type_name("EVENTS...")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::cerr << "bench_crowd_merge: ";
    return app.exit(e) == 0 ? 0 : 2;
  }

  Events ev;
  for (const auto& f : event_files) read_events(f, ev);
  if (ev.waiters != expected_waiters) {
    fail("the event files hold " + std::to_string(ev.waiters) + " waiters, not the " +
         std::to_string(expected_waiters) + " of --waiters");
  }
  const bench::MasterStats before = read_stats(before_path), after = read_stats(after_path);
  if (before.masters != after.masters) fail("the stats files name different numbers of masters");

  auto& acq = ev.acquisitions;
  std::sort(acq.begin(), acq.end(), [](const Acquisition& a, const Acquisition& b) { return a.acquired < b.acquired; });
  std::vector<long long> handoffs_us, to_other_us;
  long long violations = 0, early = 0, to_self = 0;
  for (std::size_t i = 1; i < acq.size(); ++i) {
    const Acquisition &prev = acq[i - 1], &cur = acq[i];
    if (cur.acquired < prev.release_started) {
      if (++violations <= 10) {
        std::cerr << "bench_crowd_merge: SAFETY VIOLATION in " << label << ": waiter " << cur.waiter
                  << " acquired at " << cur.acquired << " ns, " << (prev.release_started - cur.acquired) / 1000
                  << " µs before waiter " << prev.waiter << " (holding since " << prev.acquired
                  << " ns) started its release\n";
      }
      continue;
    }
    long long gap = cur.acquired - prev.released;
    if (gap < 0) {
      ++early;
      gap = 0;
    }
    if (prev.acquired >= ev.latest_start && cur.acquired <= ev.earliest_stop) {
      handoffs_us.push_back(gap / 1000);
      if (cur.waiter == prev.waiter) ++to_self;
      else to_other_us.push_back(gap / 1000);
    }
  }
  std::sort(handoffs_us.begin(), handoffs_us.end());
  std::sort(to_other_us.begin(), to_other_us.end());

  const auto n_acq = static_cast<double>(acq.size());
  const double per = n_acq > 0 ? 1.0 / n_acq : 0.0;
  const std::map<std::string, long long> delta = bench::command_deltas(before, after);
  long long commands = 0;
  for (const auto& [name, d] : delta) commands += d;

  std::vector<long long> waits;
  std::vector<long long> per_waiter(static_cast<std::size_t>(ev.waiters), 0);
  for (const auto& a : acq) {
    waits.push_back((a.acquired - a.wait_started) / 1000);
    ++per_waiter[static_cast<std::size_t>(a.waiter)];
  }
  std::sort(waits.begin(), waits.end());
  const double mean = n_acq / static_cast<double>(ev.waiters);
  double var = 0;
  for (long long c : per_waiter) var += (static_cast<double>(c) - mean) * (static_cast<double>(c) - mean);
  const double cv = mean > 0 ? std::sqrt(var / static_cast<double>(ev.waiters)) / mean : 0.0;

  const double window_s = static_cast<double>(ev.earliest_stop - ev.latest_start) / 1e9;
  std::ostringstream o;
  o << "{\"system\": \"" << system << "\", \"scenario\": \"" << label << "\", \"waiters\": " << ev.waiters
    << ", \"processes\": " << ev.processes << ", \"ops\": " << handoffs_us.size() << ", \"seconds\": " << num(window_s)
    << ", \"ops_per_s\": " << num(window_s > 0 ? static_cast<double>(handoffs_us.size()) / window_s : 0);
  for (auto [name, p] : {std::pair{"p50_us", 50.0}, {"p90_us", 90.0}, {"p99_us", 99.0}, {"p999_us", 99.9}}) {
    o << ", \"" << name << "\": ";
    if (handoffs_us.empty()) o << "null";
    else o << nearest_rank(handoffs_us, p);
  }
  o << ", \"self_handoff_share\": "
    << num(handoffs_us.empty() ? 0 : static_cast<double>(to_self) / static_cast<double>(handoffs_us.size()))
    << ", \"to_other_p50_us\": " << nearest_rank(to_other_us, 50) << ", \"to_other_p99_us\": "
    << nearest_rank(to_other_us, 99);
  o << ", \"acquisitions\": " << acq.size() << ", \"early_handoffs\": " << early
    << ", \"commands_per_handoff\": " << num(static_cast<double>(commands) * per);
  for (const auto& [name, d] : delta) o << ", \"cmd_" << name << "_per_handoff\": " << num(static_cast<double>(d) * per);
  o << ", \"master_cpu_us_per_handoff\": " << num((after.cpu_seconds - before.cpu_seconds) * 1e6 * per)
    << ", \"wait_p50_us\": " << nearest_rank(waits, 50) << ", \"wait_p99_us\": " << nearest_rank(waits, 99)
    << ", \"max_wait_us\": " << (waits.empty() ? 0 : waits.back()) << ", \"max_open_wait_us\": "
    << (ev.open_waits_us.empty() ? 0 : *std::max_element(ev.open_waits_us.begin(), ev.open_waits_us.end()))
    << ", \"acquisitions_per_waiter_min\": " << *std::min_element(per_waiter.begin(), per_waiter.end())
    << ", \"acquisitions_per_waiter_max\": " << *std::max_element(per_waiter.begin(), per_waiter.end())
    << ", \"acquisitions_per_waiter_cv\": " << num(cv) << ", \"starved_waiters\": "
    << std::count(per_waiter.begin(), per_waiter.end(), 0) << ", \"safety_violations\": " << violations
    << ", \"errors\": " << ev.errors << "}";
  std::cout << o.str() << std::endl;
  if (violations > 0) {
    std::cerr << "bench_crowd_merge: " << label << ": " << violations
              << " SAFETY VIOLATION(S): two holders at once (see above)\n";
    return 3;
  }
  if (acq.empty()) fail(label + ": no acquisition at all");
  return 0;
}
