// runner.cpp — `chaos`: run scenarios, check their histories, report.
//
//   chaos [--scenario NAME[,NAME…]] [--long] [--seconds N] [--json FILE]
//         [--out DIR] [--seed N] [--keep-histories] [--list]   (chaos --help)
// For each scenario: start its masters (fixture: free ports, temp dirs,
// stopped by pid), spawn the worker processes, play the nemesis schedule,
// heal, let the system quiesce, check the merged history, and write
// DIR/NAME.json and DIR/NAME.svg. Exit 0 when every scenario showed what it
// must (safe: no violation; broken on purpose: a violation caught), 1
// otherwise, 2 on bad arguments.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "bed.hpp"
#include "checker.hpp"
#include "redlock/redlock.hpp"
#include "scenario.hpp"
#include "timeline_svg.hpp"

using namespace redlock::chaos;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Args {
  std::vector<std::string> only;
  bool long_run = false;
  int seconds = 0;  // 0: 3 s short, 60 s long
  std::string json_file;
  std::string out_dir = "chaos-out";
  unsigned seed = 0;  // 0: from the clock
  bool keep_histories = false;
  bool list = false;
  bool tls = false;
};

// parse reads the command line into `a`; returns the exit status when the
// program is done (--help: 0; a bad argument: 2, its message on stderr).
std::optional<int> parse(int argc, char** argv, Args& a) {
  CLI::App app{"chaos: run fault-injection scenarios against five Redis masters, check each history, report.",
               "chaos"};
  // A repeated option's last value wins: scripts/chaos.sh passes --out before the caller's arguments.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  const CLI::Validator known_scenario(
      [](std::string& name) {
        const auto& all = all_scenarios();
        const bool known = std::any_of(all.begin(), all.end(), [&](const Scenario& s) { return s.name == name; });
        return known ? std::string() : "unknown scenario \"" + name + "\" (see --list)";
      },
      "");
  app.add_option("--scenario", a.only, "Run only these scenarios (default: all; see --list)")
      ->type_name("NAME[,NAME...]")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(known_scenario);
  app.add_flag("--long", a.long_run, "Run each scenario 60 s instead of 3 s");
  app.add_option("--seconds", a.seconds, "Run each scenario N s (at least its own minimum); overrides --long")
      ->type_name("N")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  app.add_option("--json", a.json_file, "Also write every scenario's result to FILE as one JSON array")
      ->type_name("FILE");
  app.add_option("--out", a.out_dir, "Write NAME.json and NAME.svg per scenario here")
      ->type_name("DIR")
      ->capture_default_str();
  app.add_option("--seed", a.seed, "Seed of the fault schedules (default: from the clock; printed at the start)")
      ->type_name("N");
  app.add_flag("--keep-histories", a.keep_histories, "Keep the workers' histories in DIR/NAME.histories");
  app.add_flag("--list", a.list, "List the scenarios and exit");
  app.add_flag("--tls", a.tls, "The clients reach the masters over TLS (rediss://)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::cerr << "chaos: ";
    return app.exit(e) == 0 ? 0 : 2;
  }
  return std::nullopt;
}

std::string here() { return fs::read_symlink("/proc/self/exe").parent_path().string(); }

// spawn starts a worker with our environment and ENV on top; it dies with
// the runner.
std::unique_ptr<redlock::support::Process> spawn(std::vector<std::string> args,
                                                 std::vector<std::pair<std::string, std::string>> env) {
  redlock::support::ProcessOptions o;
  o.argv = std::move(args);
  o.env_set = std::move(env);
  return std::make_unique<redlock::support::Process>(std::move(o));
}

struct WorkerExits {
  int killed = 0;  // still running at the deadline
  int failed = 0;  // exited non-zero or by a signal of their own
};

// wait_all waits for the workers until `deadline`; stragglers are killed.
WorkerExits wait_all(std::vector<std::unique_ptr<redlock::support::Process>>& workers,
                     std::chrono::steady_clock::time_point deadline) {
  WorkerExits exits;
  for (auto& worker : workers) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const std::optional<int> code = worker->wait(std::max(left, std::chrono::milliseconds{0}));
    if (!code) {
      worker->kill();
      ++exits.killed;
    } else if (*code != 0) {
      ++exits.failed;
    }
  }
  return exits;
}

// wait_until_voting lets freshly started masters pass the quarantine the
// workers would put them in: a restart quarantine (uptime below max_ttl +
// drift) and the data-loss marker's, which starts when a client first
// contacts a master (no redlock-marker yet: new, or lost its data). A client
// with the workers' quarantine settings contacts every master at once —
// that writes the markers — and asks until all five vote, sleeping each
// time until the longest quarantine it was told of is over. The markers'
// age then tells every worker that they are old enough.
void wait_until_voting(ChaosBed& bed, const Scenario& sc) {
  redlock::Config config;
  auto nodes = redlock::parse_node_list(bed.direct_urls());
  if (!nodes) throw std::runtime_error("bed: " + nodes.error().to_string());
  config.nodes = *nodes;
  config.options.quarantine = true;
  config.options.max_ttl = std::chrono::milliseconds{sc.max_ttl_ms};
  config.options.default_ttl = std::chrono::milliseconds{sc.ttl_ms};
  auto client = redlock::Client::create(config);
  if (!client) throw std::runtime_error("bed: " + client.error().to_string());
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds{3 * sc.max_ttl_ms + 10000};
  for (;;) {
    auto report = (*client)->nodes();
    if (report && report->usable() == report->nodes.size()) return;
    if (std::chrono::steady_clock::now() > give_up) {
      throw std::runtime_error("bed: the masters still do not all vote after " +
                               std::to_string(3 * sc.max_ttl_ms + 10000) + " ms");
    }
    // Until the longest quarantine reported is over; a master not yet
    // reachable (its handshake under way) is asked again shortly.
    std::chrono::milliseconds left{20};
    if (report) {
      for (const auto& n : report->nodes) left = std::max(left, n.quarantine_left);
    }
    std::this_thread::sleep_for(left);
  }
}

// majority_down_intervals: when at least a majority of masters were faulted.
std::vector<std::pair<std::int64_t, std::int64_t>> majority_down(const std::vector<Event>& faults, std::size_t n) {
  std::vector<std::pair<std::int64_t, int>> edges;
  for (const auto& f : faults) {
    if (f.error.rfind("kill node", 0) != 0 && f.error.rfind("pause node", 0) != 0) continue;
    edges.emplace_back(f.t, +1);
    edges.emplace_back(f.deadline, -1);
  }
  std::sort(edges.begin(), edges.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  int down = 0;
  for (const auto& [t, d] : edges) {
    const bool was = down >= static_cast<int>(n / 2 + 1);
    down += d;
    const bool is = down >= static_cast<int>(n / 2 + 1);
    if (!was && is) out.emplace_back(t, 0);
    if (was && !is) out.back().second = t;
  }
  return out;
}

std::vector<Event> read_histories(const fs::path& dir) {
  std::vector<Event> all;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    std::string error;
    auto events = parse_history(text.str(), error);
    if (!error.empty()) throw std::runtime_error(entry.path().string() + ": " + error);
    all.insert(all.end(), events.begin(), events.end());
  }
  return all;
}

json run(const Scenario& sc, const Args& a, std::mt19937& rng) {
  const int duration_ms = std::max(a.seconds > 0 ? a.seconds : (a.long_run ? 60 : 3), sc.min_seconds) * 1000;
  const std::string skew_lib = here() + "/../skewclock/libskewclock.so";
  ChaosBed bed({5, sc.appendfsync_always, sc.skew ? skew_lib : "",
                sc.proxied ? here() + "/../faultproxy/faultproxy" : "", a.tls});
  if (sc.quarantine) wait_until_voting(bed, sc);

  const fs::path dir = fs::temp_directory_path() / ("redlock-chaos-" + std::to_string(getpid()) + "-" + sc.name);
  fs::create_directories(dir);
  const std::int64_t t0 = monotonic_ns();
  const std::int64_t until = t0 + std::int64_t{duration_ms} * 1'000'000;
  const std::string worker = here() + (sc.sabotage.empty() ? "/chaos_worker" : "/chaos_worker_sabotaged");
  Stage stage{bed, {}, rng};
  for (int k = 0; k < sc.workers; ++k) {
    const int group = k >= sc.workers - sc.group_b ? 1 : 0;
    std::vector<std::string> args{worker, "--nodes", bed.urls(group), "--counter-port", std::to_string(bed.counter_port()),
                                  "--client", std::to_string(k), "--history", (dir / (std::to_string(k) + ".jsonl")).string(),
                                  "--until-ns", std::to_string(until), "--ttl", std::to_string(sc.ttl_ms),
                                  "--wait", std::to_string(sc.wait_ms), "--max-ttl", std::to_string(sc.max_ttl_ms),
                                  "--node-timeout", std::to_string(sc.node_timeout_ms), "--hold-ms", sc.hold_ms,
                                  "--rest-ms", sc.rest_ms};
    if (a.tls) args.insert(args.end(), {"--tls-ca", bed.ca_file()});
    if (sc.greedy) args.push_back("--greedy");
    if (sc.threads > 1) args.insert(args.end(), {"--threads", std::to_string(sc.threads)});
    if (sc.quarantine) args.push_back("--quarantine");
    if (sc.polling) args.push_back("--polling");
    if (sc.stall_timeout_ms > 0) args.insert(args.end(), {"--stall-timeout", std::to_string(sc.stall_timeout_ms)});
    if (sc.leases > 0) args.insert(args.end(), {"--leases", std::to_string(sc.leases)});
    std::vector<std::pair<std::string, std::string>> env;
    if (!sc.sabotage.empty()) env.emplace_back("REDLOCK_SABOTAGE", sc.sabotage);
    if (sc.worker_clock_rate != 1.0) {
      env.emplace_back("LD_PRELOAD", skew_lib);
      env.emplace_back("SKEWCLOCK_RATE", std::to_string(sc.worker_clock_rate));
      // In a sanitizer build the shim is preloaded ahead of the ASan runtime,
      // which ASan would refuse; the shim does no allocation, so that is safe.
      const char* asan = std::getenv("ASAN_OPTIONS");
      env.emplace_back("ASAN_OPTIONS", std::string(asan != nullptr ? asan : "") +
                                           (asan != nullptr && *asan != '\0' ? ":" : "") +
                                           "verify_asan_link_order=0");
    }
    stage.workers.push_back(spawn(std::move(args), std::move(env)));
  }

  auto plan = sc.nemesis(duration_ms, rng);
  std::stable_sort(plan.begin(), plan.end(), [](const Action& x, const Action& y) { return x.at_ms < y.at_ms; });
  const auto start = std::chrono::steady_clock::now();
  for (auto& step : plan) {
    std::this_thread::sleep_until(start + std::chrono::milliseconds{step.at_ms});
    step.run(stage);
  }
  const auto slack = std::chrono::milliseconds{sc.wait_ms + sc.ttl_ms + 10000};
  const WorkerExits exits = wait_all(stage.workers, start + std::chrono::milliseconds{duration_ms} + slack);
  bed.heal_all();
  const std::int64_t t_end = monotonic_ns();

  // Quiescence: resumed masters run what was queued for them (late SETs and
  // the releases behind them); give them a moment to do so.
  std::size_t leaked = bed.leaked_keys();
  for (int i = 0; i < 100 && leaked > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
    leaked = bed.leaked_keys();
  }

  std::vector<Event> events = read_histories(dir);
  if (a.keep_histories) {
    fs::create_directories(a.out_dir);
    fs::rename(dir, fs::path(a.out_dir) / (sc.name + ".histories"));
  } else {
    fs::remove_all(dir);
  }
  const std::vector<Event>& faults = bed.faults();
  events.insert(events.end(), faults.begin(), faults.end());
  CheckInput input{events, bed.counter_value(), leaked, t0, t_end};
  const CheckResult result = check(input);

  // While a majority is down: no acquisition may succeed, and every failure
  // must come back within wait + one node timeout (+ 250 ms of scheduling).
  std::size_t outage_successes = 0, outage_failures = 0, slow_failures = 0;
  if (sc.majority_down) {
    const std::int64_t bound_us = (sc.wait_ms + sc.node_timeout_ms + 250) * 1000;
    for (const auto& [from, to] : majority_down(faults, bed.size())) {
      for (const auto& e : events) {
        // 50 ms of grace: a round decided just before the last kill returns after it.
        const bool inside = e.t > from + 50'000'000 && e.t < to;
        if (inside && e.type == EventType::ok) ++outage_successes;
        if (inside && e.type == EventType::fail) {
          ++outage_failures;
          if (e.latency_us > bound_us) ++slow_failures;
        }
      }
    }
  }
  const bool violation = redlock::chaos::violation(result) || outage_successes > 0;
  // A run that shows nothing proves nothing: every worker must have run to
  // its end, and a safe scenario must have taken some lock (a violation is
  // its own evidence).
  const bool ran = exits.killed == 0 && exits.failed == 0 && slow_failures == 0 &&
                   (sc.expect == Expect::violation || result.acquisitions > 0) &&
                   (!sc.majority_down || outage_failures > 0);
  // A leases scenario: every lease taken, none lost (a majority stayed healthy).
  const auto leases_wanted = static_cast<std::size_t>(sc.leases) * static_cast<std::size_t>(sc.workers);
  const bool leases_kept = sc.leases == 0 || (result.acquisitions == leases_wanted && result.leases_lost == 0);
  const bool passed = ran && leases_kept && (sc.expect == Expect::safe ? !violation : violation);

  json j = to_json(result, sc.name, sc.expect == Expect::violation, {});
  j["about"] = sc.about;
  j["violation"] = violation;
  j["passed"] = passed;
  j["duration_ms"] = duration_ms;
  j["workers"] = sc.workers;
  j["workers_killed"] = exits.killed;
  j["workers_failed"] = exits.failed;
  if (!sc.sabotage.empty()) j["sabotage"] = sc.sabotage;
  if (sc.leases > 0) j["leases_wanted"] = leases_wanted;
  if (sc.majority_down) {
    j["successes_during_majority_outage"] = outage_successes;
    j["failures_during_majority_outage"] = outage_failures;
    j["failures_slower_than_bound"] = slow_failures;
  }

  fs::create_directories(a.out_dir);
  const std::string svg = (fs::path(a.out_dir) / (sc.name + ".svg")).string();
  std::ofstream(svg) << render_timeline_svg(result, faults, t0, t_end, sc.name + ": " + sc.about);
  j["timeline"] = svg;
  std::ofstream(fs::path(a.out_dir) / (sc.name + ".json")) << j.dump(2) << "\n";
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (const auto done = parse(argc, argv, a)) return *done;
  if (a.list) {
    for (const auto& s : all_scenarios()) {
      std::printf("%-22s %-9s %s\n", s.name.c_str(), s.expect == Expect::safe ? "safe" : "violation", s.about.c_str());
    }
    return 0;
  }
  const unsigned seed = a.seed != 0 ? a.seed : static_cast<unsigned>(monotonic_ns() % 1000000007);
  std::printf("seed %u (repeat a run's schedules with --seed %u)\n", seed, seed);
  std::mt19937 rng(seed);
  json all = json::array();
  bool ok = true;
  std::printf("%-22s %-9s %6s %8s %5s %5s %5s %6s %7s %8s  %s\n", "scenario", "expect", "acq", "overlaps", "lost",
              "stale", "leak", "succ%", "p99_ms", "recov_ms", "result");
  for (const auto& sc : all_scenarios()) {
    if (!a.only.empty() && std::find(a.only.begin(), a.only.end(), sc.name) == a.only.end()) continue;
    json j;
    try {
      j = run(sc, a, rng);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "chaos: %s: %s\n", sc.name.c_str(), e.what());
      j = {{"scenario", sc.name}, {"passed", false}, {"error", e.what()}};
    }
    ok = ok && j.value("passed", false);
    std::printf("%-22s %-9s %6zu %8zu %5zu %5zu %5zu %6.1f %7.1f %8lld  %s\n", sc.name.c_str(),
                sc.expect == Expect::safe ? "safe" : "violation", j.value("acquisitions", std::size_t{0}),
                j.value("overlaps", std::size_t{0}), j.value("lost_updates", std::size_t{0}),
                j.value("stale_writes", std::size_t{0}), j.value("leaked_keys", std::size_t{0}),
                100.0 * j.value("success_rate", 0.0), j.value("p99_us", 0LL) / 1000.0,
                static_cast<long long>(j.value("max_recovery_ms", -1LL)), j.value("passed", false) ? "PASS" : "FAIL");
    if (j.contains("leases_wanted")) {
      std::printf("%-22s leases taken %zu of %zu, lost %zu\n", "", j.value("acquisitions", std::size_t{0}),
                  j.value("leases_wanted", std::size_t{0}), j.value("leases_lost", std::size_t{0}));
    }
    std::fflush(stdout);
    all.push_back(j);
  }
  if (!a.json_file.empty()) std::ofstream(a.json_file) << all.dump(2) << "\n";
  return ok ? 0 : 1;
}
