// report.cpp — the benchmark report (bench/CONTRACT.md, scripts/bench.sh).
//
//   bench_report --input RESULTS.jsonl [--out-dir DIR] [--samples SYSTEM:SCENARIO=FILE]...
//   (bench_report --help)
//
// RESULTS.jsonl holds the JSON lines of every run of every round, as printed
// by the benchmark programs, optionally with fields added by the runner:
//   "round": r        which round the line belongs to;
//   "label": "name"   the scenario name to report it under (the degraded runs
//                     are the latency scenario under a fault, reported as
//                     "degraded-1-paused" etc.); without it, "scenario";
//   "failed": "why"   the program failed (exit status, no output).
// For every system and scenario the MEDIAN over rounds of each numeric metric
// is taken ("errors", "safety_violations" and "leases_lost" are summed
// instead, as "errors_total", "safety_violations_total" and
// "leases_lost_total"; the failover scenario's per-run maxima, "*_max_ms",
// "failover_per_*_max" and "standby_*_after_kill_max", are the MAXIMUM
// over rounds). Then:
//   stdout               a Markdown table, scenario × metric (the crowd
//                        scenarios of bench_crowd_merge and the leases
//                        scenarios also per command), with the columns
//                        redlock, node-redlock, floor, redlock/node-redlock,
//                        redlock/floor (plain ratios of the medians);
//   DIR/latest.json      {"machine", "generated", "rounds", "results"};
//   DIR/<scenario>-cdf.svg  CDF of the raw samples (--samples files, pooled
//                        over rounds), one curve per system, log x axis in µs;
//   DIR/throughput.svg   ops/s of the throughput scenario per system (median
//                        bar, min–max whisker over rounds).
// DIR defaults to docs/benchmarks. SVGs are drawn with tools/svg and are
// self-contained (no fonts, scripts or external references). Exit 0 on
// success, 1 on an I/O or input error, 2 on a usage error.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "svg.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
namespace svg = redlock::svg;

const std::vector<std::string> kSystems = {"redlock", "node-redlock", "floor"};
const std::vector<std::string> kScenarioOrder = {"latency",           "throughput",        "handoff",
                                                 "memory",            "degraded-1-paused", "degraded-2-paused",
                                                 "degraded-proxy-0ms", "degraded-slow-2ms", "latency-tls",
                                                 "latency-semaphore", "latency-shared", "handoff-semaphore",
                                                 "handoff-crowd-1",   "handoff-crowd-8",   "handoff-crowd-64",
                                                 "handoff-crowd-256", "handoff-crowd-1-fair", "handoff-crowd-8-fair",
                                                 "handoff-crowd-64-fair", "handoff-crowd-256-fair", "leases-100k",
                                                 "leases-100k-unbatched", "leases-100k-spread", "cli-crowd-32",
                                                 "failover", "latency-primaries", "latency-replicated",
                                                 "latency-wait", "latency-cluster"};

// The speed targets of the benchmark issue, each a ratio of two medians of
// one run (or a bound on one). `floor_bound` shows what the floor reaches on
// the same ratio (on a bound: the floor's own value), where the target
// compares against node-redlock or redlock itself: a target below what the
// floor itself reaches is not reachable on this machine.
struct Target {
  std::string name;
  std::string scen_a, sys_a, metric_a;  // numerator
  std::string scen_b, sys_b, metric_b;  // denominator ("" = absolute bound)
  bool at_most;                         // the ratio must be ≤ limit (else ≥)
  double limit;
  bool floor_bound;  // also show the floor's value of the same ratio (of a bound: its value)
};

const std::vector<Target> kTargets = {
    {"latency p50 vs node-redlock", "latency", "redlock", "p50_us", "latency", "node-redlock", "p50_us", true, 0.6, true},
    {"latency p99 vs node-redlock", "latency", "redlock", "p99_us", "latency", "node-redlock", "p99_us", true, 0.3, true},
    {"latency p50 vs the floor", "latency", "redlock", "p50_us", "latency", "floor", "p50_us", true, 1.10, false},
    // Issue 31: the tail at the floor too.
    {"latency p99 vs the floor", "latency", "redlock", "p99_us", "latency", "floor", "p99_us", true, 1.15, false},
    {"2 of 5 paused: p99 vs healthy p99", "degraded-2-paused", "redlock", "p99_us", "latency", "redlock", "p99_us", true,
     1.2, true},
    {"one master 2 ms slow: p50 vs the proxy at 0 ms", "degraded-slow-2ms", "redlock", "p50_us", "degraded-proxy-0ms",
     "redlock", "p50_us", true, 1.10, true},
    {"throughput vs node-redlock", "throughput", "redlock", "ops_per_s", "throughput", "node-redlock", "ops_per_s",
     false, 5.0, false},
    {"throughput vs the floor", "throughput", "redlock", "ops_per_s", "throughput", "floor", "ops_per_s", false, 0.8,
     false},
    {"CPU per pair vs node-redlock", "throughput", "redlock", "cpu_us_per_op", "throughput", "node-redlock",
     "cpu_us_per_op", true, 0.1, false},
    {"bytes per held lock", "memory", "redlock", "bytes_per_lock", "", "", "", true, 256, false},
    // TLS: redlock's own TLS/plain ratio, with the floor's beside it (the
    // crypto's own cost on this machine), and redlock against the TLS floor.
    {"TLS latency p50 vs plain p50", "latency-tls", "redlock", "p50_us", "latency", "redlock", "p50_us", true, 1.3,
     true},
    {"TLS latency p50 vs the TLS floor", "latency-tls", "redlock", "p50_us", "latency-tls", "floor", "p50_us", true,
     1.10, false},
    // Issue 32: a semaphore's acquire+release within 1.3× the mutex's own.
    {"semaphore (3 permits) latency p50 vs the mutex's p50", "latency-semaphore", "redlock", "p50_us", "latency",
     "redlock", "p50_us", true, 1.3, false},
    // ... and a read lock's too.
    {"read lock latency p50 vs the mutex's p50", "latency-shared", "redlock", "p50_us", "latency", "redlock", "p50_us",
     true, 1.3, false},
    // Issue 34: members with replicas. replicated=1 adds INFO replication
    // behind each acquire (within 1.3× of the same primaries named
    // plainly); WAIT for one replica (wait_replicas=1) adds that replica's
    // acknowledgement, one more round trip per acquire (within 1.8× of
    // replicated=1), p50 and p99.
    {"replicated=1 latency p50 vs the same primaries plain", "latency-replicated", "redlock", "p50_us",
     "latency-primaries", "redlock", "p50_us", true, 1.3, false},
    {"wait_replicas=1 latency p50 vs replicated=1", "latency-wait", "redlock", "p50_us", "latency-replicated", "redlock",
     "p50_us", true, 1.8, false},
    {"wait_replicas=1 latency p99 vs replicated=1", "latency-wait", "redlock", "p99_us", "latency-replicated", "redlock",
     "p99_us", true, 1.8, false},
    // ... and a cluster member: routing by slot plus the slot's marker
    // script behind each acquire, in the same write (within 1.3× of five
    // lone masters, p50 and p99).
    {"cluster members latency p50 vs lone masters", "latency-cluster", "redlock", "p50_us", "latency", "redlock",
     "p50_us", true, 1.3, false},
    {"cluster members latency p99 vs lone masters", "latency-cluster", "redlock", "p99_us", "latency", "redlock",
     "p99_us", true, 1.3, false},
    // ... and a permit handed from one holder to a waiter as a lock is.
    {"handoff between permits p50 vs the mutex's handoff p50", "handoff-semaphore", "redlock",
     "from_release_call_p50_us", "handoff", "redlock", "from_release_call_p50_us", true, 1.3, false},
    // Issue 31: a lone waiter reacts to a release within 0.5 ms, and within
    // 2× the floor's two round trips (release, then the waiter's SET) —
    // timed from the release call: from its return, both systems' waiters
    // often have the lock already (sample 0; bench/CONTRACT.md).
    {"handoff p50 from the release call vs the floor", "handoff", "redlock", "from_release_call_p50_us", "handoff",
     "floor", "from_release_call_p50_us", true, 2.0, false},
    {"handoff p50 (µs)", "handoff", "redlock", "p50_us", "", "", "", true, 500, true},
    // Issue 16: a crowd of waiters costs at most 4N = 20 commands per
    // handoff, and the handoff p99 of 256 waiters is within 2× of one's.
    {"crowd of 1: commands per handoff", "handoff-crowd-1", "redlock", "commands_per_handoff", "", "", "", true, 20,
     false},
    {"crowd of 8: commands per handoff", "handoff-crowd-8", "redlock", "commands_per_handoff", "", "", "", true, 20,
     false},
    {"crowd of 64: commands per handoff", "handoff-crowd-64", "redlock", "commands_per_handoff", "", "", "", true, 20,
     false},
    {"crowd of 256: commands per handoff", "handoff-crowd-256", "redlock", "commands_per_handoff", "", "", "", true,
     20, false},
    {"crowd of 256: handoff p99 vs a crowd of 1", "handoff-crowd-256", "redlock", "p99_us", "handoff-crowd-1",
     "redlock", "p99_us", true, 2.0, false},
    // The same p99 target in fair order (AcquireOptions::fair), where a
    // release wakes one waiter. (Its commands per handoff are not held to
    // 4N: the queue costs more by design, docs/benchmarks.md "Fair order".)
    {"fair crowd of 256: handoff p99 vs a fair crowd of 1", "handoff-crowd-256-fair", "redlock", "p99_us",
     "handoff-crowd-1-fair", "redlock", "p99_us", true, 2.0, false},
    // Issue 16, many leases: batched extensions cost a twentieth of the
    // unbatched requests and a tenth of their client CPU, per lease-second.
    {"leases: requests per lease-second, batched vs unbatched", "leases-100k", "redlock", "requests_per_lease_s",
     "leases-100k-unbatched", "redlock", "requests_per_lease_s", true, 0.05, false},
    {"leases: client CPU per lease-second, batched vs unbatched", "leases-100k", "redlock", "cpu_us_per_lease_s",
     "leases-100k-unbatched", "redlock", "cpu_us_per_lease_s", true, 0.10, false},
    {"leases: bytes per held lease", "leases-100k", "redlock", "bytes_per_lease", "", "", "", true, 256, false},
    // The same two ratios with the extensions falling due spread in time
    // (leases taken at an even pace), as a service's do: fewer leases per
    // round, so the cost per round weighs more than in the bunched run.
    {"leases spread: requests per lease-second vs unbatched", "leases-100k-spread", "redlock",
     "requests_per_lease_s", "leases-100k-unbatched", "redlock", "requests_per_lease_s", true, 0.05, false},
    {"leases spread: client CPU per lease-second vs unbatched", "leases-100k-spread", "redlock", "cpu_us_per_lease_s",
     "leases-100k-unbatched", "redlock", "cpu_us_per_lease_s", true, 0.10, false},
};
// Metrics shown in the table, in this order (all numeric ones go to latest.json).
// The crowd scenarios add their per-command counts (cmd_<name>_per_handoff)
// right after commands_per_handoff, the leases scenarios theirs
// (cmd_<name>_per_lease_s) after commands_per_lease_s.
const std::vector<std::string> kTableMetrics = {"p50_us",
                                                "p90_us",
                                                "p99_us",
                                                "p999_us",
                                                "ops_per_s",
                                                "cpu_us_per_op",
                                                "bytes_per_lock",
                                                "failed_attempts_per_handoff",
                                                "attempts_per_handoff",
                                                "from_release_call_p50_us",
                                                "from_release_call_p99_us",
                                                "self_handoff_share",
                                                "to_other_p50_us",
                                                "to_other_p99_us",
                                                "order_inversions",
                                                "order_inversion_share",
                                                "order_overtaken_per_handoff",
                                                "commands_per_handoff",
                                                "master_cpu_us_per_handoff",
                                                "wait_p50_us",
                                                "wait_p99_us",
                                                "max_wait_us",
                                                "max_open_wait_us",
                                                "acquisitions_per_waiter_min",
                                                "acquisitions_per_waiter_max",
                                                "acquisitions_per_waiter_cv",
                                                "starved_waiters",
                                                "early_handoffs",
                                                "safety_violations_total",
                                                "leases",
                                                "ttl_ms",
                                                "extend_batch_max",
                                                "cpu_us_per_lease_s",
                                                "requests_per_lease_s",
                                                "commands_per_lease_s",
                                                "master_cpu_us_per_lease_s",
                                                "bytes_per_lease",
                                                "leases_extended",
                                                "extend_failures",
                                                "leases_lost_total",
                                                "failovers",
                                                "failover_p50_ms",
                                                "failover_max_ms",
                                                "floor_p50_ms",
                                                "floor_max_ms",
                                                "overhead_p50_ms",
                                                "overhead_max_ms",
                                                "failover_per_floor_p50",
                                                "failover_per_floor_max",
                                                "failover_per_ttl_p50",
                                                "failover_per_ttl_max",
                                                "told_p50_ms",
                                                "told_max_ms",
                                                "told_overhead_p50_ms",
                                                "told_overhead_max_ms",
                                                "told_none_rounds",
                                                "told_none_p50_ms",
                                                "standby_held_after_kill_max",
                                                "errors_total"};
// Counts summed over rounds (reported as NAME_total) instead of the median.
const std::set<std::string> kSummed = {"errors", "safety_violations", "leases_lost"};
// max_over_rounds: a run's maximum (failover: the worst of its rounds) is
// reported as the maximum over rounds, not their median.
bool max_over_rounds(const std::string& m) {
  return (m.ends_with("_max_ms") && (m.starts_with("failover_") || m.starts_with("floor_") ||
                                     m.starts_with("overhead_") || m.starts_with("told_"))) ||
         m == "failover_per_floor_max" || m == "failover_per_ttl_max" || m == "standby_rounds_after_kill_max" ||
         m == "standby_held_after_kill_max";
}
// Numeric fields that describe the run rather than measure it.
const std::set<std::string> kNotMetrics = {"round", "rss_before", "rss_after"};

const std::map<std::string, std::string> kColors = {
    {"redlock", "#1f6fb4"}, {"node-redlock", "#d0342c"}, {"floor", "#2a9d3a"}};

[[noreturn]] void fail(const std::string& msg) {
  std::cerr << "bench_report: " << msg << "\n";
  std::exit(1);
}

struct Cell {
  std::map<std::string, std::vector<double>> values;  // metric -> one value per round
  std::vector<std::string> unsupported;
  std::vector<std::string> failed;
  int runs = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  if (n == 0) return NAN;
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string fmt_number(double v) {
  if (std::isnan(v)) return "—";
  char buf[64];
  double a = std::fabs(v);
  if (a == 0) return "0";
  if (a >= 100) std::snprintf(buf, sizeof buf, "%.0f", v);
  else if (a >= 10) std::snprintf(buf, sizeof buf, "%.1f", v);
  else if (a >= 1) std::snprintf(buf, sizeof buf, "%.2f", v);
  else if (a >= 0.01) std::snprintf(buf, sizeof buf, "%.3f", v);
  else std::snprintf(buf, sizeof buf, "%.2g", v);  // e.g. requests per lease-second
  return buf;
}

std::string fmt_ratio(double a, double b) {
  if (std::isnan(a) || std::isnan(b) || b == 0) return "—";
  char buf[64];
  const double r = a / b;
  std::snprintf(buf, sizeof buf, r != 0 && std::fabs(r) < 0.01 ? "%.2g×" : "%.2f×", r);
  return buf;
}

// ---- machine ----------------------------------------------------------------

json machine_info() {
  json m;
  std::ifstream cpu("/proc/cpuinfo");
  std::string line, model;
  int cores = 0;
  while (std::getline(cpu, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = trim(line.substr(0, colon)), v = trim(line.substr(colon + 1));
    if (k == "processor") ++cores;
    if (k == "model name" && model.empty()) model = v;
  }
  m["cpu_model"] = model.empty() ? "unknown" : model;
  m["cores"] = cores;
  utsname u{};
  if (uname(&u) == 0) {
    m["kernel"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  }
  std::ifstream mem("/proc/meminfo");
  while (std::getline(mem, line)) {
    if (line.rfind("MemTotal:", 0) == 0) {
      long long kb = std::atoll(line.c_str() + 9);
      m["memory_bytes"] = kb * 1024;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(kb) / (1024.0 * 1024.0));
      m["memory"] = buf;
      break;
    }
  }
  return m;
}

std::string iso_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---- SVG --------------------------------------------------------------------

void write_file(const fs::path& p, const std::string& content) {
  std::ofstream f(p);
  if (!f) fail("cannot write " + p.string() + ": " + std::strerror(errno));
  f << content;
  if (!f) fail("cannot write " + p.string());
}

std::string fmt_us_tick(double us) {
  char buf[32];
  if (us >= 1e6) std::snprintf(buf, sizeof buf, "%g s", us / 1e6);
  else if (us >= 1e3) std::snprintf(buf, sizeof buf, "%g ms", us / 1e3);
  else std::snprintf(buf, sizeof buf, "%g µs", us);
  return buf;
}

// plot_axis is the bottom or left axis of a plot whose area starts at
// (left, top) and is width × height: grid lines across it, labels 8 px out
// (bottom: 18 px), size 11, a size-12 caption (left: rotated, at x = 18).
svg::Axis plot_axis(svg::Axis::Side side, double left, double top, double width, double height,
                    const std::string& caption) {
  svg::Axis a;
  a.side = side;
  a.caption = caption;
  a.label_size = 11;
  a.caption_size = 12;
  if (side == svg::Axis::Side::bottom) {
    a.start = left, a.end = left + width, a.at = top + height, a.plot_depth = height;
    a.label_offset = 18;
  } else {
    a.start = top, a.end = top + height, a.at = left, a.plot_depth = width;
    a.label_offset = 8;
    a.caption_offset = left - 18;
  }
  return a;
}

// CDF of the pooled samples, one curve per system, log x axis.
std::string cdf_svg(const std::string& scenario, const std::map<std::string, std::vector<double>>& samples) {
  const int W = 760, H = 440, L = 70, R = 20, T = 50, B = 60;
  const double pw = W - L - R, ph = H - T - B;
  double lo = INFINITY, hi = 0;
  for (auto& [sys, v] : samples) {
    if (v.empty()) continue;
    lo = std::min(lo, std::max(1.0, v.front()));
    hi = std::max(hi, std::max(1.0, v.back()));
  }
  double dlo = std::floor(std::log10(lo)), dhi = std::ceil(std::log10(hi));
  if (dhi <= dlo) dhi = dlo + 1;
  auto X = [&](double us) { return L + (std::log10(std::max(1.0, us)) - dlo) / (dhi - dlo) * pw; };
  auto Y = [&](double p) { return T + (1.0 - p) * ph; };

  svg::Document doc(W, H, {{"font-size", 12}});
  doc.text(W / 2.0, 24, scenario + ": acquire + release, cumulative distribution of pair latency",
           {{"text-anchor", "middle"}, {"font-size", 15}, {"font-weight", "bold"}});
  // grid: decades with 2 and 5 minors; probabilities every 0.1
  svg::Axis xa = plot_axis(svg::Axis::Side::bottom, L, T, pw, ph, "pair latency (µs, log scale)");
  xa.caption_offset = B - 16;
  for (double d = dlo; d <= dhi; d += 1) {
    for (double m : {1.0, 2.0, 5.0}) {
      double us = m * std::pow(10.0, d);
      if (std::log10(us) > dhi + 1e-9) break;
      xa.ticks.push_back({X(us), m == 1.0 || (dhi - dlo) <= 3 ? fmt_us_tick(us) : "",
                          m == 1.0 ? "#bbbbbb" : "#e6e6e6"});
    }
  }
  doc.axis(xa);
  svg::Axis ya = plot_axis(svg::Axis::Side::left, L, T, pw, ph, "fraction of pairs ≤ x");
  for (int i = 0; i <= 10; ++i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%.1f", i / 10.0);
    ya.ticks.push_back({Y(i / 10.0), buf, i == 0 || i == 10 ? "#bbbbbb" : "#eeeeee"});
  }
  doc.axis(ya);
  // curves: at most ~1200 points, denser in the tail
  int legend = 0;
  for (const auto& sys : kSystems) {
    auto it = samples.find(sys);
    if (it == samples.end() || it->second.empty()) continue;
    const auto& v = it->second;
    const size_t n = v.size();
    std::vector<size_t> idx;
    for (int i = 0; i < 1000; ++i) idx.push_back(static_cast<size_t>(static_cast<double>(i) / 1000.0 * n));
    for (int i = 0; i < 200; ++i) idx.push_back(static_cast<size_t>((0.99 + 0.01 * i / 200.0) * n));
    idx.push_back(n - 1);
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    // A point per selected rank; points closer than half a pixel to the last
    // one drawn are dropped (the curve looks the same, the file is small).
    std::vector<svg::Point> pts = {{X(v[idx.front()]), Y(0)}};
    for (size_t k : idx) {
      if (k >= n) continue;
      double x = X(v[k]);
      double y = Y(static_cast<double>(k + 1) / static_cast<double>(n));
      if (std::fabs(x - pts.back().x) < 0.5 && std::fabs(y - pts.back().y) < 0.5 && k != n - 1) continue;
      pts.push_back({x, y});
    }
    doc.polyline(pts, {{"fill", "none"}, {"stroke", kColors.at(sys)}, {"stroke-width", 2}});
    char lab[160];
    std::snprintf(lab, sizeof lab, "%s (n=%zu, p50 %s µs, p99 %s µs)", sys.c_str(), n,
                  fmt_number(v[std::max<size_t>(1, static_cast<size_t>(std::ceil(0.5 * n))) - 1]).c_str(),
                  fmt_number(v[std::max<size_t>(1, static_cast<size_t>(std::ceil(0.99 * n))) - 1]).c_str());
    double ly = T + ph - 14 - 18.0 * legend;
    doc.line(L + pw - 300, ly - 4, L + pw - 276, ly - 4, {{"stroke", kColors.at(sys)}, {"stroke-width", 3}});
    doc.text(L + pw - 270, ly, lab, {{"font-size", 11}});
    ++legend;
  }
  return doc.finish();
}

// Bars: median ops/s per system, whiskers min..max over rounds.
std::string throughput_svg(const std::map<std::string, std::vector<double>>& per_system, const std::string& note) {
  const int W = 560, H = 400, L = 80, R = 20, T = 50, B = 70;
  const double pw = W - L - R, ph = H - T - B;
  double top = 0;
  for (auto& [sys, v] : per_system)
    for (double x : v) top = std::max(top, x);
  if (top <= 0) top = 1;
  const double step = svg::nice_step(top, 8);
  double ymax = std::ceil(top * 1.08 / step) * step;
  auto Y = [&](double v) { return T + (1.0 - v / ymax) * ph; };

  svg::Document doc(W, H, {{"font-size", 12}});
  doc.text(W / 2.0, 24, "throughput: acquire + release pairs per second",
           {{"text-anchor", "middle"}, {"font-size", 15}, {"font-weight", "bold"}});
  svg::Axis ya = plot_axis(svg::Axis::Side::left, L, T, pw, ph, "pairs / s");
  for (double v : svg::tick_values(0, ymax, step)) ya.ticks.push_back({Y(v), fmt_number(v), v == 0 ? "#999999" : "#eeeeee"});
  doc.axis(ya);
  // The systems as categories along x: labels only.
  svg::Axis xa = plot_axis(svg::Axis::Side::bottom, L, T, pw, ph, "");
  xa.label_offset = 20;
  xa.label_size = 12;
  const double slot = pw / static_cast<double>(kSystems.size());
  for (size_t i = 0; i < kSystems.size(); ++i) {
    const auto& sys = kSystems[i];
    double cx = L + slot * (static_cast<double>(i) + 0.5);
    xa.ticks.push_back({cx, sys});
    auto it = per_system.find(sys);
    if (it == per_system.end() || it->second.empty()) {
      doc.text(cx, T + ph - 10, "no data", {{"text-anchor", "middle"}, {"font-size", 11}, {"fill", "#888888"}});
      continue;
    }
    double med = median(it->second);
    double mn = *std::min_element(it->second.begin(), it->second.end());
    double mx = *std::max_element(it->second.begin(), it->second.end());
    double bw = slot * 0.55;
    doc.rect(cx - bw / 2, Y(med), bw, Y(0) - Y(med), {{"fill", kColors.at(sys)}});
    if (it->second.size() > 1) {
      const svg::Attrs whisker = {{"stroke", "#333333"}, {"stroke-width", 1.5}};
      doc.line(cx, Y(mx), cx, Y(mn), whisker);
      doc.line(cx - 8, Y(mx), cx + 8, Y(mx), whisker);
      doc.line(cx - 8, Y(mn), cx + 8, Y(mn), whisker);
    }
    doc.text(cx, Y(mx) - 6, fmt_number(med), {{"text-anchor", "middle"}, {"font-weight", "bold"}});
  }
  doc.axis(xa);
  doc.text(W / 2.0, H - 14, note, {{"text-anchor", "middle"}, {"font-size", 11}, {"fill", "#555555"}});
  return doc.finish();
}

// SamplesArg is one --samples argument, SYSTEM:SCENARIO=FILE.
struct SamplesArg {
  std::string system, scenario, file;
};

// split_samples_arg reads one --samples argument into `out`; returns what is
// wrong with it, empty when it is well formed and names a known system.
std::string split_samples_arg(const std::string& v, SamplesArg& out) {
  const auto colon = v.find(':'), eq = v.find('=');
  if (colon == std::string::npos || eq == std::string::npos || eq < colon)
    return "wants SYSTEM:SCENARIO=FILE, got '" + v + "'";
  out = {v.substr(0, colon), v.substr(colon + 1, eq - colon - 1), v.substr(eq + 1)};
  if (std::find(kSystems.begin(), kSystems.end(), out.system) == kSystems.end())
    return "unknown system '" + out.system + "' in '" + v + "'";
  return {};
}

std::vector<double> read_samples(const std::string& path) {
  std::ifstream f(path);
  if (!f) fail("cannot read samples file " + path + ": " + std::strerror(errno));
  std::vector<double> v;
  std::string line;
  while (std::getline(f, line)) {
    line = trim(line);
    if (line.empty()) continue;
    char* end = nullptr;
    double x = std::strtod(line.c_str(), &end);
    if (*end != '\0' || !std::isfinite(x) || x < 0) fail("bad sample '" + line + "' in " + path);
    v.push_back(x);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string input;
  fs::path out_dir = "docs/benchmarks";
  std::vector<std::string> samples_args;
  CLI::App app{"bench_report: medians over rounds of the benchmark results, as a Markdown table, "
               "latest.json and SVG plots.",
               "bench_report"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--input", input, "The JSON lines of every run of every round")
      ->type_name("RESULTS.jsonl")
      ->required();
  app.add_option("--out-dir", out_dir, "Write latest.json and the SVGs here")->type_name("DIR")->capture_default_str();
  const CLI::Validator samples_arg(
      [](std::string& v) {
        SamplesArg unused;
        return split_samples_arg(v, unused);
      },
      "");
  app.add_option("--samples", samples_args, "Raw samples of one system and scenario, for the CDF plots")
      ->type_name("SYSTEM:SCENARIO=FILE")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(samples_arg);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::cerr << "bench_report: ";
    return app.exit(e) == 0 ? 0 : 2;
  }
  // scenario -> system -> pooled samples
  std::map<std::string, std::map<std::string, std::vector<double>>> samples;
  for (const std::string& v : samples_args) {
    SamplesArg arg;
    split_samples_arg(v, arg);
    const auto s = read_samples(arg.file);
    auto& pool = samples[arg.scenario][arg.system];
    pool.insert(pool.end(), s.begin(), s.end());
  }

  std::ifstream in(input);
  if (!in) fail("cannot read " + input + ": " + std::strerror(errno));
  // scenario -> system -> cell
  std::map<std::string, std::map<std::string, Cell>> cells;
  std::set<long long> rounds_seen;
  std::string line;
  int lineno = 0, bad = 0;
  while (std::getline(in, line)) {
    ++lineno;
    line = trim(line);
    if (line.empty()) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const std::exception& e) {
      std::cerr << "bench_report: " << input << ":" << lineno << ": not JSON, skipped (" << e.what() << ")\n";
      ++bad;
      continue;
    }
    if (!j.is_object() || !j.contains("system") || !j["system"].is_string() || !j.contains("scenario") ||
        !j["scenario"].is_string()) {
      std::cerr << "bench_report: " << input << ":" << lineno << ": no \"system\"/\"scenario\", skipped\n";
      ++bad;
      continue;
    }
    std::string sys = j["system"];
    std::string scen = j.contains("label") && j["label"].is_string() ? j["label"].get<std::string>()
                                                                       : j["scenario"].get<std::string>();
    if (j.contains("round") && j["round"].is_number_integer()) rounds_seen.insert(j["round"].get<long long>());
    Cell& c = cells[scen][sys];
    ++c.runs;
    if (j.contains("unsupported")) {
      std::string why = j["unsupported"].is_string() ? j["unsupported"].get<std::string>() : j["unsupported"].dump();
      if (std::find(c.unsupported.begin(), c.unsupported.end(), why) == c.unsupported.end())
        c.unsupported.push_back(why);
      continue;
    }
    if (j.contains("failed")) {
      c.failed.push_back(j["failed"].is_string() ? j["failed"].get<std::string>() : j["failed"].dump());
      continue;
    }
    for (auto& [k, v] : j.items()) {
      if (!v.is_number() || kNotMetrics.count(k)) continue;
      if (kSummed.count(k)) c.values[k + "_total"].push_back(v.get<double>());
      else c.values[k].push_back(v.get<double>());
    }
  }
  if (cells.empty()) fail(input + " holds no result");

  int rounds = static_cast<int>(rounds_seen.size());
  if (rounds == 0) {
    for (auto& [scen, per] : cells)
      for (auto& [sys, c] : per) rounds = std::max(rounds, c.runs);
  }

  std::vector<std::string> scenarios = kScenarioOrder;
  for (auto& [scen, per] : cells)
    if (std::find(scenarios.begin(), scenarios.end(), scen) == scenarios.end()) scenarios.push_back(scen);
  scenarios.erase(std::remove_if(scenarios.begin(), scenarios.end(), [&](const std::string& s) { return !cells.count(s); }),
                  scenarios.end());

  auto metric_of = [&](const std::string& scen, const std::string& sys, const std::string& m) -> double {
    auto& per = cells[scen];
    auto it = per.find(sys);
    if (it == per.end()) return NAN;
    auto mit = it->second.values.find(m);
    if (mit == it->second.values.end() || mit->second.empty()) return NAN;
    if (m.ends_with("_total")) {
      double s = 0;
      for (double x : mit->second) s += x;
      return s;
    }
    if (max_over_rounds(m)) return *std::max_element(mit->second.begin(), mit->second.end());
    return median(mit->second);
  };

  // latest.json
  json results = json::object();
  for (const auto& scen : scenarios) {
    for (auto& [sys, c] : cells[scen]) {
      json r = json::object();
      for (auto& [m, v] : c.values) r[m] = metric_of(scen, sys, m);
      if (!c.values.empty()) r["rounds"] = c.values.begin()->second.size();
      if (!c.unsupported.empty()) r["unsupported"] = c.unsupported.front();
      if (!c.failed.empty()) r["failed_runs"] = c.failed;
      results[sys][scen] = r;
    }
  }
  // The targets: value, limit, met or not; for the node-relative latency
  // targets also the floor's value of the same ratio (what bounds them).
  json targets = json::array();
  std::ostringstream tt;
  tt << "| target | redlock | limit | met | floor on the same ratio |\n|---|---:|---:|---|---:|\n";
  for (const Target& target : kTargets) {
    const double a = metric_of(target.scen_a, target.sys_a, target.metric_a);
    const double b = target.scen_b.empty() ? 1.0 : metric_of(target.scen_b, target.sys_b, target.metric_b);
    const double value = a / b;
    // The floor's value: the same ratio with the floor in redlock's place
    // (node-relative and self-relative targets).
    const bool absolute = target.scen_b.empty();
    double bound = NAN;
    if (target.floor_bound && absolute) {
      bound = metric_of(target.scen_a, "floor", target.metric_a);
    } else if (target.floor_bound) {
      const std::string sys_b = target.sys_b == "redlock" ? "floor" : target.sys_b;
      bound = metric_of(target.scen_a, "floor", target.metric_a) / metric_of(target.scen_b, sys_b, target.metric_b);
    }
    const bool known = std::isfinite(value);
    const bool met = known && (target.at_most ? value <= target.limit : value >= target.limit);
    json row = {{"target", target.name}, {"limit", target.limit}, {"at_most", target.at_most}};
    row["value"] = known ? json(value) : json(nullptr);
    row["met"] = known ? json(met) : json(nullptr);
    if (std::isfinite(bound)) row["floor_value"] = bound;
    targets.push_back(row);
    tt << "| " << target.name << " | " << (known ? (absolute ? fmt_number(value) : fmt_ratio(a, b)) : "—") << " | "
       << (target.at_most ? "≤ " : "≥ ") << (absolute ? fmt_number(target.limit) : fmt_number(target.limit) + "×")
       << " | " << (known ? (met ? "yes" : "**no**") : "not measured") << " | "
       << (std::isfinite(bound) ? fmt_number(bound) + (absolute ? "" : "×") : "") << " |\n";
  }

  json latest = {{"machine", machine_info()}, {"generated", iso_now()}, {"rounds", rounds}, {"results", results},
                 {"targets", targets}};
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail("cannot create " + out_dir.string() + ": " + ec.message());
  write_file(out_dir / "latest.json", latest.dump(2) + "\n");

  // The table.
  std::ostringstream t;
  t << "| scenario | metric | redlock | node-redlock | floor | redlock/node-redlock | redlock/floor |\n"
    << "|---|---|---:|---:|---:|---:|---:|\n";
  std::vector<std::string> notes;
  for (const auto& scen : scenarios) {
    auto& per = cells[scen];
    auto cell_text = [&](const std::string& sys, const std::string& m) -> std::string {
      auto it = per.find(sys);
      if (it == per.end()) return "—";
      if (!it->second.unsupported.empty() && it->second.values.empty()) return "n/a";
      if (!it->second.failed.empty() && it->second.values.empty()) return "failed";
      const double v = metric_of(scen, sys, m);
      if (m.starts_with("failover_per_floor") && std::isfinite(v)) {  // about 1.00x: the digits are the overhead
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.4f", v);
        return buf;
      }
      return fmt_number(v);
    };
    bool first = true;
    std::vector<std::string> metrics;
    for (const auto& m : kTableMetrics) {
      metrics.push_back(m);
      if (m != "commands_per_handoff" && m != "commands_per_lease_s") continue;
      const std::string per_what = m.substr(std::string("commands").size());  // "_per_handoff", …
      std::set<std::string> per_command;
      for (auto& [sys, c] : per)
        for (auto& [name, v] : c.values)
          if (name.rfind("cmd_", 0) == 0 && name.ends_with(per_what)) per_command.insert(name);
      metrics.insert(metrics.end(), per_command.begin(), per_command.end());
    }
    for (const auto& m : metrics) {
      bool any = false;
      for (const auto& sys : kSystems) {
        auto it = per.find(sys);
        if (it != per.end() && it->second.values.count(m)) any = true;
      }
      if (!any) continue;
      double r = metric_of(scen, "redlock", m), n = metric_of(scen, "node-redlock", m),
             f = metric_of(scen, "floor", m);
      t << "| " << (first ? scen : "") << " | " << m << " | " << cell_text("redlock", m) << " | "
        << cell_text("node-redlock", m) << " | " << cell_text("floor", m) << " | "
        << (m.ends_with("_total") ? "" : fmt_ratio(r, n)) << " | " << (m.ends_with("_total") ? "" : fmt_ratio(r, f))
        << " |\n";
      first = false;
    }
    if (first) {  // nothing measured for this scenario at all
      t << "| " << scen << " | — | " << cell_text("redlock", "") << " | " << cell_text("node-redlock", "") << " | "
        << cell_text("floor", "") << " | | |\n";
    }
    for (const auto& sys : kSystems) {
      auto it = per.find(sys);
      if (it == per.end()) continue;
      for (const auto& why : it->second.unsupported) notes.push_back(scen + ", " + sys + ": unsupported — " + why);
      if (!it->second.failed.empty())
        notes.push_back(scen + ", " + sys + ": " + std::to_string(it->second.failed.size()) + " failed run(s) — " +
                        it->second.failed.front());
    }
  }
  std::cout << "Medians over " << rounds << " round(s); errors_total and safety_violations_total are sums, failover's *_max figures maxima. Ratios are redlock's median "
            << "divided by the other's (latency: below 1 is faster; ops_per_s: above 1 is faster).\n\n"
            << t.str();
  if (!notes.empty()) {
    std::cout << "\n";
    for (auto& n : notes) std::cout << "- " << n << "\n";
  }
  std::cout << "\nTargets (ratios of the medians above):\n\n" << tt.str();

  // Plots.
  for (auto& [scen, per_sys] : samples) {
    for (auto& [sys, v] : per_sys) std::sort(v.begin(), v.end());
    std::string name = scen + "-cdf.svg";
    write_file(out_dir / name, cdf_svg(scen, per_sys));
    std::cerr << "bench_report: wrote " << (out_dir / name).string() << "\n";
  }
  if (cells.count("throughput")) {
    std::map<std::string, std::vector<double>> per;
    std::string conc;
    for (auto& [sys, c] : cells["throughput"]) {
      auto it = c.values.find("ops_per_s");
      if (it != c.values.end()) per[sys] = it->second;
      auto ci = c.values.find("concurrency");
      if (ci != c.values.end() && !ci->second.empty() && conc.empty()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.0f", median(ci->second));
        conc = buf;
      }
    }
    std::string note = "median over " + std::to_string(rounds) + " round(s), whiskers min–max" +
                       (conc.empty() ? "" : "; " + conc + " concurrent workers on distinct resources");
    write_file(out_dir / "throughput.svg", throughput_svg(per, note));
    std::cerr << "bench_report: wrote " << (out_dir / "throughput.svg").string() << "\n";
  }
  std::cerr << "bench_report: wrote " << (out_dir / "latest.json").string() << "\n";
  return bad > 0 ? 1 : 0;
}
