// crowd_merge.cpp — bench_crowd_merge: one handoff-crowd run of the
// benchmarks (scripts/bench.sh, bench/CONTRACT.md) from the event files of
// its processes and the masters' INFO before and after.
//
//   bench_crowd_merge --system SYS --label NAME --waiters K
//                     --stats-before FILE --stats-after FILE
//                     [--order-margin-us M] EVENTS...
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
//   order            over the same handoffs: a handoff is an ORDER
//                    INVERSION when, at the moment the winner's acquire
//                    returned (its `acquired`), another waiter was still
//                    waiting (its wait_started < that moment < its own
//                    acquired, or the end of a wait the stop cut short)
//                    that had started waiting at least M µs (--order-margin-us,
//                    default 1000) BEFORE the winner started its wait
//                    (arrival(other) ≤ arrival(winner) − M, arrival = its
//                    wait_started, or the window start if that is later).
//                    Such a waiter was overtaken. The margin leaves out near
//                    ties: waits begun within one enqueue round of each other,
//                    whose order the masters see may differ from the clocks'.
//                    The clamp to the window start does the same for the
//                    crowd's first waits: all K begin as the processes start
//                    (a few ms apart), their first rounds overlap and tie
//                    (a fair queue orders equal tickets by waiter id), so
//                    they are taken as arriving together; a later arrival
//                    that passes one still waiting is an inversion all the
//                    same.
//                    order_inversions = handoffs with at least one overtaken
//                    waiter; order_inversion_share = order_inversions / ops;
//                    order_overtaken_per_handoff = overtaken waiters summed
//                    over those handoffs / ops (how far out of order);
//                    order_margin_us = M. Fair order: ~0 (a head that does
//                    not come within Options::fair_grace loses its place: an
//                    inversion by design); the default mode: its barging
//                    (a releaser or a waiter that just retried takes the lock
//                    ahead of older waiters). One sweep over the waits in
//                    time order, each counted handoff scanning the K
//                    waiters: O(n log n + handoffs · K);
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
  long long attempts = -1;  // the acquire's attempts, when the system wrote them
};

// A wait the stop cut short (an "open" line): the waiter, when it began and ended (ns).
struct OpenWait {
  long long waiter, started, ended;
};

struct Events {
  std::vector<Acquisition> acquisitions;
  std::vector<OpenWait> open_waits;
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
      if (long long attempts = 0; in >> attempts) {
        if (attempts < 1) fail(where + ": bad attempts in '" + line + "'");
        a.attempts = attempts;
      }
      a.waiter += first;
      ev.acquisitions.push_back(a);
    } else if (kind == "open") {
      long long waiter = 0, started = 0, ended = 0;
      if (local_waiters < 0) fail(where + ": an event before the header");
      if (!(in >> waiter >> started >> ended) || waiter < 0 || waiter >= local_waiters || ended < started)
        fail(where + ": bad event '" + line + "'");
      ev.open_waits.push_back({waiter + first, started, ended});
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

// Order: see the header ("order"). counted[i]: acquisition i (sorted by
// acquired) is the winner of a handoff in the measuring window.
struct Order {
  long long inversions = 0, overtaken = 0;
};

Order order_inversions(const Events& ev, const std::vector<char>& counted, long long margin_ns) {
  struct Edge {
    long long at;
    int kind;  // 0: a wait begins, 1: it ends (ends after begins at the same ns)
    long long waiter, started;
    long long acq;  // the acquisition index of an end, -1 for an open wait's
  };
  // A wait's place in arrival order: when it began, but no earlier than the
  // window start (the crowd's first K waits, begun as the processes started
  // a few ms apart, are ties; see the header).
  const auto arrival = [&ev](long long started) { return std::max(started, ev.latest_start); };
  std::vector<Edge> edges;
  edges.reserve(2 * (ev.acquisitions.size() + ev.open_waits.size()));
  for (std::size_t i = 0; i < ev.acquisitions.size(); ++i) {
    const Acquisition& a = ev.acquisitions[i];
    edges.push_back({a.wait_started, 0, a.waiter, a.wait_started, -1});
    edges.push_back({a.acquired, 1, a.waiter, a.wait_started, static_cast<long long>(i)});
  }
  for (const OpenWait& o : ev.open_waits) {
    edges.push_back({o.started, 0, o.waiter, o.started, -1});
    edges.push_back({o.ended, 1, o.waiter, o.started, -1});
  }
  std::sort(edges.begin(), edges.end(),
            [](const Edge& x, const Edge& y) { return x.at != y.at ? x.at < y.at : x.kind < y.kind; });
  constexpr long long idle = -1;  // not waiting (times are CLOCK_MONOTONIC: never negative)
  std::vector<long long> waiting_since(static_cast<std::size_t>(ev.waiters), idle);
  Order o;
  for (const Edge& e : edges) {
    const auto w = static_cast<std::size_t>(e.waiter);
    if (e.kind == 0) {
      waiting_since[w] = e.started;
      continue;
    }
    if (e.acq >= 0 && counted[static_cast<std::size_t>(e.acq)]) {
      const long long before = arrival(e.started) - margin_ns;
      long long overtaken = 0;
      for (std::size_t x = 0; x < waiting_since.size(); ++x) {
        if (x != w && waiting_since[x] != idle && arrival(waiting_since[x]) <= before) ++overtaken;
      }
      if (overtaken > 0) ++o.inversions;
      o.overtaken += overtaken;
    }
    if (waiting_since[w] == e.started) waiting_since[w] = idle;
  }
  return o;
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
  long long expected_waiters = 0, order_margin_us = 1000;
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
  app.add_option("--order-margin-us", order_margin_us,
                 "Order: a waiter counts as overtaken only if it began waiting at least this long before the winner")
      ->type_name("M")
      ->check(CLI::Range(0LL, 60'000'000LL))
      ->capture_default_str();
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
  std::vector<char> counted(acq.size(), 0);  // the winners of the handoffs in the window
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
      counted[i] = 1;
      if (cur.waiter == prev.waiter) ++to_self;
      else to_other_us.push_back(gap / 1000);
    }
  }
  std::sort(handoffs_us.begin(), handoffs_us.end());
  std::sort(to_other_us.begin(), to_other_us.end());
  const Order order = order_inversions(ev, counted, order_margin_us * 1000);
  const double per_handoff = handoffs_us.empty() ? 0.0 : 1.0 / static_cast<double>(handoffs_us.size());

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

  long long max_open_wait_us = 0;
  for (const OpenWait& w : ev.open_waits) max_open_wait_us = std::max(max_open_wait_us, (w.ended - w.started) / 1000);
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
  o << ", \"order_inversions\": " << order.inversions << ", \"order_inversion_share\": "
    << num(static_cast<double>(order.inversions) * per_handoff) << ", \"order_overtaken_per_handoff\": "
    << num(static_cast<double>(order.overtaken) * per_handoff) << ", \"order_margin_us\": " << order_margin_us;
  o << ", \"acquisitions\": " << acq.size() << ", \"early_handoffs\": " << early
    << ", \"commands_per_handoff\": " << num(static_cast<double>(commands) * per);
  for (const auto& [name, d] : delta) o << ", \"cmd_" << name << "_per_handoff\": " << num(static_cast<double>(d) * per);
  // Attempts, where every acquisition has them: a wait begins where its
  // first attempt found the lock held; failed are the ones after that.
  if (!acq.empty() && std::all_of(acq.begin(), acq.end(), [](const Acquisition& a) { return a.attempts >= 1; })) {
    long long attempts = 0, failed = 0;
    for (const auto& a : acq) {
      attempts += a.attempts;
      failed += std::max(a.attempts - 2, 0LL);
    }
    o << ", \"attempts_per_handoff\": " << num(static_cast<double>(attempts) * per)
      << ", \"failed_attempts_per_handoff\": " << num(static_cast<double>(failed) * per);
  }
  o << ", \"master_cpu_us_per_handoff\": " << num((after.cpu_seconds - before.cpu_seconds) * 1e6 * per)
    << ", \"wait_p50_us\": " << nearest_rank(waits, 50) << ", \"wait_p99_us\": " << nearest_rank(waits, 99)
    << ", \"max_wait_us\": " << (waits.empty() ? 0 : waits.back()) << ", \"max_open_wait_us\": " << max_open_wait_us
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
