// runner.cpp — `chaos`: run scenarios, check their histories, report.
//
//   chaos [--scenario NAME[,NAME…]] [--long] [--seconds N] [--acquisitions N]
//         [--json FILE] [--out DIR] [--seed N] [--keep-histories] [--list]   (chaos --help)
// For each scenario: start its masters (fixture: free ports, temp dirs,
// stopped by pid), spawn the worker processes, play the nemesis schedule,
// heal, let the system quiesce, check the merged history, and write
// DIR/NAME.json and DIR/NAME.svg. A scenario with a target of acquisitions
// (soak-1m) ends as soon as it is reached. Exit 0 when every scenario
// showed what it must (safe: no violation; broken on purpose: a violation
// caught), 1 otherwise, 2 on bad arguments.
#include <signal.h>
#include <sys/resource.h>
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
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "bed.hpp"
#include "checker.hpp"
#include "leader_lookout.hpp"
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
  int seconds = 0;  // 0: the scenario's own length, else 3 s short, 60 s long
  long acquisitions = 0;  // 0: the scenario's own target
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
  app.add_option("--scenario", a.only,
                 "Run only these scenarios (default: all but those that run only when named; see --list)")
      ->type_name("NAME[,NAME...]")
      ->delimiter(',')
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(known_scenario);
  app.add_flag("--long", a.long_run, "Run each scenario 60 s instead of 3 s");
  app.add_option("--seconds", a.seconds,
                 "Run each scenario N s (at least its own minimum; the time limit of one with a target); overrides "
                 "--long")
      ->type_name("N")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  auto* acquisitions =
      app.add_option("--acquisitions", a.acquisitions,
                     "A scenario with a target (soak-1m) runs until N acquisitions instead of its own number")
          ->type_name("N")
          ->check(CLI::Range(1L, std::numeric_limits<long>::max()));
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
  if (acquisitions->count() > 0) {
    const auto& all = all_scenarios();
    const bool any = std::any_of(a.only.begin(), a.only.end(), [&](const std::string& name) {
      return std::any_of(all.begin(), all.end(),
                         [&](const Scenario& s) { return s.name == name && s.target_acquisitions > 0; });
    });
    if (!any) {
      std::cerr << "chaos: --acquisitions: none of the scenarios named (--scenario) has a target of acquisitions\n";
      return 2;
    }
  }
  return std::nullopt;
}

// selected: whether this run includes `s` — named, or (none named) every
// scenario that does not wait to be named; with --tls, none with Sentinel
// or Cluster members unless named (their bed has no TLS: named, it says so).
bool selected(const Scenario& s, const Args& a) {
  if (a.only.empty()) return !s.on_demand && !(a.tls && (s.sentinel_members > 0 || s.cluster_members > 0));
  return std::find(a.only.begin(), a.only.end(), s.name) != a.only.end();
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
  std::vector<std::string> failures;  // "K: exit N" for worker process K (128 + a signal's number), for the report
};

// wait_all waits for the workers until `deadline`; stragglers are killed.
WorkerExits wait_all(std::vector<std::unique_ptr<redlock::support::Process>>& workers, const std::set<std::size_t>& killed,
                     redlock::BootClock::time_point deadline) {
  WorkerExits exits;
  for (std::size_t k = 0; k < workers.size(); ++k) {
    if (killed.count(k) > 0) continue;  // the nemesis killed it (and reaped it)
    auto& worker = workers[k];
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - redlock::BootClock::now());
    const std::optional<int> code = worker->wait(std::max(left, std::chrono::milliseconds{0}));
    if (!code) {
      worker->kill();
      ++exits.killed;
    } else if (*code != 0) {
      ++exits.failed;
      exits.failures.push_back(std::to_string(k) + ": exit " + std::to_string(*code));
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
// age then tells every worker that they are old enough. A Cluster member
// keeps a marker per slot, written by the first acquire of a lock in that
// slot: the client then takes and releases every lock of the counter loop
// once, retrying until its slots are out of their first quarantine.
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
  const auto give_up = redlock::BootClock::now() + std::chrono::milliseconds{3 * sc.max_ttl_ms + 10000};
  for (;;) {
    auto report = (*client)->nodes();
    if (report && report->usable() == report->nodes.size()) break;
    if (redlock::BootClock::now() > give_up) {
      std::string which;  // the members that do not vote, and why
      if (report) {
        for (const auto& n : report->nodes) {
          if (n.reachable && !n.quarantined) continue;
          which += "; " + n.address + ": " +
                   (!n.reachable ? "unreachable (" + n.error + ")"
                                 : "quarantined " + std::to_string(n.quarantine_left.count()) + " ms more" +
                                       (n.excluded.empty() ? "" : " (" + n.excluded + ")"));
        }
      } else {
        which = "; " + report.error().to_string();
      }
      throw std::runtime_error("bed: the masters still do not all vote after " +
                               std::to_string(3 * sc.max_ttl_ms + 10000) + " ms" + which);
    }
    // Until the longest quarantine reported is over; a master not yet
    // reachable (its handshake under way) is asked again shortly.
    std::chrono::milliseconds left{20};
    if (report) {
      for (const auto& n : report->nodes) left = std::max(left, n.quarantine_left);
    }
    std::this_thread::sleep_for(left);
  }
  if (sc.cluster_members == 0) return;
  for (const Crew& crew : crews_of(sc)) {
    if (crew.leases > 0) continue;
    for (int r = 0; r < crew.resources; ++r) {
      const std::string resource = crew.resources > 1 ? crew.resource + "-" + std::to_string(r) : crew.resource;
      for (;;) {
        auto lock = (*client)->try_acquire(resource);
        if (lock) {
          (void)(*client)->release(*lock);
          break;
        }
        if (redlock::BootClock::now() > give_up)
          throw std::runtime_error("bed: the slot of " + resource + " still does not vote: " + lock.error().to_string());
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
      }
    }
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

// fault_node: the master a fault interval is about (0-based: "kill node 2"
// is 1), or -1 for a client's.
int fault_node(const std::string& what) {
  const auto at = what.find("node ");
  return at == std::string::npos ? -1 : std::atoi(what.c_str() + at + 5) - 1;
}

// unexplained_losses counts the lost leases with fewer than N − quorum + 1
// masters faulty — from a fault's start to `settle_ms` after its end —
// between the lease's acquisition and its loss (Scenario::leases_may_fall).
std::size_t unexplained_losses(const std::vector<Event>& events, const std::vector<Event>& faults, std::size_t n,
                               int settle_ms) {
  // The acquisitions of every lease that was lost.
  std::map<std::pair<int, std::string>, std::vector<std::int64_t>> taken;
  for (const auto& e : events)
    if (e.type == EventType::lost) taken[{e.client, e.resource}];
  if (taken.empty()) return 0;
  for (const auto& e : events) {
    if (e.type != EventType::ok) continue;
    if (auto it = taken.find({e.client, e.resource}); it != taken.end()) it->second.push_back(e.t);
  }
  for (auto& [lease, times] : taken) std::sort(times.begin(), times.end());
  std::size_t unexplained = 0;
  for (const auto& lost : events) {
    if (lost.type != EventType::lost) continue;
    const auto& times = taken[{lost.client, lost.resource}];
    auto after = std::upper_bound(times.begin(), times.end(), lost.t);
    const std::int64_t since = after != times.begin() ? *(after - 1) : lost.t;  // none: what was faulty at the loss
    std::set<int> faulty;
    for (const auto& f : faults) {
      const int node = fault_node(f.error);
      if (node >= 0 && f.t <= lost.t && f.deadline + std::int64_t{settle_ms} * 1'000'000 >= since) faulty.insert(node);
    }
    if (faulty.size() < n - (n / 2 + 1) + 1) ++unexplained;
  }
  return unexplained;
}

std::string read_file(const fs::path& path) {
  std::string text(static_cast<std::size_t>(fs::file_size(path)), '\0');
  std::ifstream(path, std::ios::binary).read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

// read_histories appends the events of every history file in `dir` to
// `events`. A million acquisitions are about 4 million lines: the space for
// one event a line is reserved first, so that the events are never moved
// to a larger buffer (which would hold them twice for a moment), and the
// files are read one at a time.
void read_histories(const fs::path& dir, std::vector<Event>& events) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  std::size_t lines = 0;
  for (const auto& file : files) {
    const std::string text = read_file(file);
    lines += static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  }
  events.reserve(events.size() + lines);
  for (const auto& file : files) {
    std::string error;
    auto more = parse_history(read_file(file), error);
    if (!error.empty()) throw std::runtime_error(file.string() + ": " + error);
    events.insert(events.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
}

// Liveness — how steadily the locks were granted, and in what order.
struct Liveness {
  // The longest time without a grant: between consecutive "ok" events (any
  // resource), from the first grant to when the workers were told to stop
  // (grants after it, of turns begun before, are not counted);
  // and the same from the end of the last fault on (-1: no fault).
  std::int64_t max_gap_ms = 0;
  std::int64_t max_gap_start_ms = 0;  // where that gap began, since the workload's start
  std::int64_t max_gap_after_faults_ms = -1;
  // The clients that asked for a lock, those that got one at least once,
  // and the fewest acquisitions any of them made.
  std::size_t clients = 0, clients_served = 0, min_client_acquisitions = 0;
  // Order: a grant "overtakes" when another client that asked more than
  // kOvertakeMs earlier was still waiting (and its wait not yet over). A
  // FIFO lock overtakes only where a waiter lost its place (paused past
  // the grace, a round without a quorum).
  std::size_t grants = 0, overtaking_grants = 0;
};
constexpr std::int64_t kOvertakeMs = 50;

Liveness liveness_of(const std::vector<Event>& events, const std::vector<Event>& faults, std::int64_t t0,
                     std::int64_t t_stop) {
  Liveness l;
  std::vector<const Event*> timeline;
  timeline.reserve(events.size());
  for (const auto& e : events)
    if (e.type == EventType::invoke || e.type == EventType::ok || e.type == EventType::fail) timeline.push_back(&e);
  std::stable_sort(timeline.begin(), timeline.end(), [](const Event* x, const Event* y) { return x->t < y->t; });
  std::int64_t fault_end = -1;
  for (const auto& f : faults) fault_end = std::max(fault_end, f.deadline);
  std::map<int, std::size_t> per_client;
  std::map<int, std::int64_t> asked;  // client → the invoke it waits on
  std::set<std::pair<std::int64_t, int>> waiting;
  std::int64_t last = -1, last_after = fault_end;
  const auto gap = [&](std::int64_t from, std::int64_t to) {
    if (from < 0) return;
    if (to - from > l.max_gap_ms * 1'000'000) {
      l.max_gap_ms = (to - from) / 1'000'000;
      l.max_gap_start_ms = (from - t0) / 1'000'000;
    }
  };
  const auto gap_after = [&](std::int64_t to) {
    if (fault_end < 0 || to < fault_end) return;
    l.max_gap_after_faults_ms = std::max(l.max_gap_after_faults_ms, (to - last_after) / 1'000'000);
    last_after = to;
  };
  for (const Event* e : timeline) {
    if (e->type == EventType::invoke) {
      per_client.try_emplace(e->client, 0);
      if (auto it = asked.find(e->client); it != asked.end()) waiting.erase({it->second, e->client});
      asked[e->client] = e->t;
      waiting.insert({e->t, e->client});
      continue;
    }
    const auto it = asked.find(e->client);
    const std::int64_t since = it != asked.end() ? it->second : e->t;
    if (it != asked.end()) {
      waiting.erase({it->second, e->client});
      asked.erase(it);
    }
    if (e->type != EventType::ok) continue;
    ++per_client[e->client];
    ++l.grants;
    if (!waiting.empty() && waiting.begin()->first < since - kOvertakeMs * 1'000'000) ++l.overtaking_grants;
    if (e->t > t_stop) continue;  // the last turns after the stop: fewer and fewer ask
    gap(last, e->t);
    gap_after(e->t);
    last = e->t;
  }
  gap(last, t_stop);
  gap_after(t_stop);
  l.clients = per_client.size();
  l.min_client_acquisitions = per_client.empty() ? 0 : std::numeric_limits<std::size_t>::max();
  for (const auto& [client, n] : per_client) {
    l.clients_served += n > 0 ? 1 : 0;
    l.min_client_acquisitions = std::min(l.min_client_acquisitions, n);
  }
  return l;
}

// Progress follows a run with a target through the workers' counters: each
// increment follows an acquisition of its own, so their sum never exceeds
// the acquisitions. Read at most once a second; said on stderr every minute.
class Progress {
 public:
  Progress(ChaosBed& bed, long target, std::string name)
      : bed_(bed),
        target_(target),
        name_(std::move(name)),
        start_(redlock::BootClock::now()),
        next_report_(start_ + std::chrono::minutes{1}) {}

  // wait_until returns at `until`, or earlier (true) once the target is reached.
  bool wait_until(redlock::BootClock::time_point until) {
    if (target_ == 0) {
      std::this_thread::sleep_until(until);
      return false;
    }
    for (;;) {
      const auto now = redlock::BootClock::now();
      if (now >= next_read_) {
        next_read_ = now + std::chrono::seconds{1};
        if (reached(now)) return true;
      }
      if (now >= until) return false;
      std::this_thread::sleep_until(std::min(until, next_read_));
    }
  }

 private:
  bool reached(redlock::BootClock::time_point now) {
    const std::int64_t done = bed_.counter_total();
    if (now >= next_report_) {
      next_report_ = now + std::chrono::minutes{1};
      const double s = std::chrono::duration<double>(now - start_).count();
      std::fprintf(stderr, "%s: %lld of %ld acquisitions after %.0f s (%.0f/s)\n", name_.c_str(),
                   static_cast<long long>(done), target_, s, s > 0 ? static_cast<double>(done) / s : 0.0);
    }
    return done >= target_;
  }

  ChaosBed& bed_;
  const long target_;
  const std::string name_;
  const redlock::BootClock::time_point start_;
  redlock::BootClock::time_point next_read_{}, next_report_;
};

// intent_lapse: how long a waiting writer's intent outlives its last round
// on a master where nothing takes it back — about 2 × max(wake_safety_net,
// 4 × fair_grace) (AcquireOptions::shared; the workers keep the defaults),
// plus the two node timeouts its round's send and reply may take, plus
// 250 ms of scheduling on a loaded machine.
std::chrono::milliseconds intent_lapse(const Scenario& sc) {
  const redlock::Options o;
  return 2 * std::max(o.wake_safety_net, 4 * o.fair_grace) + 2 * std::chrono::milliseconds{sc.node_timeout_ms} +
         std::chrono::milliseconds{250};
}

// timeline draws the run. A million windows are no picture (hundreds of MB
// that no browser draws): past kMaxDrawnWindows only the overlapping ones
// are drawn, with every fault, and the title says so.
constexpr std::size_t kMaxDrawnWindows = 100'000;
std::string timeline(CheckResult& r, const std::vector<Event>& faults, std::int64_t t0, std::int64_t t_end,
                     const std::string& title) {
  if (r.windows.size() <= kMaxDrawnWindows) return render_timeline_svg(r, faults, t0, t_end, title);
  std::vector<Window> all = std::move(r.windows);
  r.windows.clear();
  std::copy_if(all.begin(), all.end(), std::back_inserter(r.windows), [](const Window& w) { return w.overlapped; });
  const std::string svg = render_timeline_svg(
      r, faults, t0, t_end,
      title + " (only the " + std::to_string(r.windows.size()) + " overlapping windows of " +
          std::to_string(all.size()) + " drawn)");
  r.windows = std::move(all);
  return svg;
}

json run(const Scenario& sc, const Args& a, std::mt19937& rng) {
  const int seconds = a.seconds > 0 ? a.seconds : sc.seconds > 0 ? sc.seconds : a.long_run ? 60 : 3;
  const int duration_ms = std::max(seconds, sc.min_seconds) * 1000;
  const long target = sc.target_acquisitions > 0 && a.acquisitions > 0 ? a.acquisitions : sc.target_acquisitions;
  const std::string skew_lib = here() + "/../skewclock/libskewclock.so";
  ChaosBed bed({5, sc.appendfsync_always, sc.skew ? skew_lib : "",
                sc.proxied ? here() + "/../faultproxy/faultproxy" : "", a.tls,
                static_cast<std::size_t>(sc.sentinel_members), static_cast<std::size_t>(sc.cluster_members)});
  if (sc.quarantine) wait_until_voting(bed, sc);

  const fs::path dir = fs::temp_directory_path() / ("redlock-chaos-" + std::to_string(getpid()) + "-" + sc.name);
  fs::create_directories(dir);
  const std::int64_t t0 = monotonic_ns();
  const std::int64_t until = t0 + std::int64_t{duration_ms} * 1'000'000;
  const std::string worker = here() + (sc.sabotage.empty() ? "/chaos_worker" : "/chaos_worker_sabotaged");
  Stage stage{bed, {}, rng};
  const std::vector<Crew> crews = crews_of(sc);
  int workers = 0;
  for (const Crew& crew : crews) workers += crew.workers;
  std::size_t leases_wanted = 0;
  std::vector<int> lease_holders;  // the client ids of the lease crews' workers
  // start_worker starts client k of `crew` in client group `group`.
  const auto start_worker = [&](int k, const Crew& crew, int group) {
    std::vector<std::string> args{worker, "--nodes", bed.urls(group),
                                  "--counter-port", std::to_string(bed.counter_port()),
                                  "--client", std::to_string(k),
                                  "--history", (dir / (std::to_string(k) + ".jsonl")).string(),
                                  "--until-ns", std::to_string(until), "--ttl", std::to_string(sc.ttl_ms),
                                  "--wait", std::to_string(sc.wait_ms), "--max-ttl", std::to_string(sc.max_ttl_ms),
                                  "--node-timeout", std::to_string(sc.node_timeout_ms), "--hold-ms", crew.hold_ms,
                                  "--rest-ms", crew.rest_ms, "--resource", crew.resource};
    if (a.tls) args.insert(args.end(), {"--tls-ca", bed.ca_file()});
    if (sc.greedy) args.push_back("--greedy");
    if (crew.threads > 1) args.insert(args.end(), {"--threads", std::to_string(crew.threads)});
    if (crew.resources > 1) args.insert(args.end(), {"--resources", std::to_string(crew.resources)});
    if (sc.quarantine) args.push_back("--quarantine");
    if (sc.polling) args.push_back("--polling");
    if (sc.fair) args.push_back("--fair");
    if (sc.election) args.push_back("--election");
    if (sc.permits > 0) args.insert(args.end(), {"--permits", std::to_string(sc.permits)});
    if (sc.shared_pct > 0) args.insert(args.end(), {"--shared-pct", std::to_string(sc.shared_pct)});
    if (sc.stall_timeout_ms > 0) args.insert(args.end(), {"--stall-timeout", std::to_string(sc.stall_timeout_ms)});
    if (crew.leases > 0) args.insert(args.end(), {"--leases", std::to_string(crew.leases)});
    if (!crew.lease_hold_ms.empty()) args.insert(args.end(), {"--lease-hold-ms", crew.lease_hold_ms});
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
  };
  int k = 0;
  for (const Crew& crew : crews) {
    leases_wanted += static_cast<std::size_t>(crew.leases) * static_cast<std::size_t>(crew.workers);
    for (int n = 0; n < crew.workers; ++n, ++k) {
      if (crew.leases > 0) lease_holders.push_back(k);
      start_worker(k, crew, k >= workers - sc.group_b ? 1 : 0);
    }
  }
  std::unique_ptr<LeaderLookout> lookout;
  if (sc.election) {
    lookout = std::make_unique<LeaderLookout>(bed, sc.quarantine, std::chrono::milliseconds{sc.node_timeout_ms},
                                              crews.front().resource);
    stage.await_leader = [&](std::chrono::milliseconds within) {
      const int leader = lookout->leader(within);
      // Only a worker of this run that still lives is ours to hurt.
      const bool ours = leader >= 0 && static_cast<std::size_t>(leader) < stage.workers.size() &&
                        stage.killed.count(static_cast<std::size_t>(leader)) == 0;
      return ours ? leader : -1;
    };
    stage.replace = [&](std::size_t victim, const std::string& what) {
      bed.kill_process(*stage.workers.at(victim), what);
      stage.killed.insert(victim);
      start_worker(static_cast<int>(stage.workers.size()), crews.front(), 0);
    };
  }

  auto plan = sc.nemesis(duration_ms, rng);
  std::stable_sort(plan.begin(), plan.end(), [](const Action& x, const Action& y) { return x.at_ms < y.at_ms; });
  const auto start = redlock::BootClock::now();
  Progress progress(bed, target, sc.name);
  bool reached = false;
  for (auto& step : plan) {
    reached = progress.wait_until(start + std::chrono::milliseconds{step.at_ms});
    if (reached) break;
    step.run(stage);
  }
  if (target > 0 && !reached) reached = progress.wait_until(start + std::chrono::milliseconds{duration_ms});
  std::int64_t t_stop = until;  // when the workers were told to end
  if (reached) {
    // Early: the schedule's remaining steps (resumes and restarts among
    // them) are skipped. Every worker runs again, every master is healed,
    // and the workers end their turns and release what they hold.
    t_stop = monotonic_ns();
    for (std::size_t k = 0; k < stage.workers.size(); ++k)
      if (stage.killed.count(k) == 0) bed.resume_process(*stage.workers[k]);
    bed.heal_all();
    for (auto& w : stage.workers) w->signal(SIGTERM);  // a no-op on the killed (reaped)
  }
  const auto slack = std::chrono::milliseconds{sc.wait_ms + sc.ttl_ms + 10000};
  const auto stopped = redlock::BootClock::time_point(std::chrono::nanoseconds(t_stop));  // CLOCK_BOOTTIME
  const WorkerExits exits = wait_all(stage.workers, stage.killed, stopped + slack);
  bed.heal_all();
  const std::int64_t t_end = monotonic_ns();

  // Quiescence: resumed masters run what was queued for them (late SETs and
  // the releases behind them); give them a moment to do so. A master
  // restarted with its data more than twice max_ttl ago holds no key of
  // before its kill any more: its keys count. With readers, a writer's
  // intent ({R}:writers) may stay behind as designed — on a master its
  // leave did not reach (killed, cut off) — and lapses by itself: the keys
  // get that long to go.
  const std::chrono::milliseconds grace{2 * sc.max_ttl_ms};
  const auto settled_by = redlock::BootClock::now() + std::max(std::chrono::milliseconds{1000},
                                                               sc.shared_pct > 0 ? intent_lapse(sc)
                                                                                 : std::chrono::milliseconds{0});
  std::size_t leaked = bed.leaked_keys(grace);
  while (leaked > 0 && redlock::BootClock::now() < settled_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
    leaked = bed.leaked_keys(grace);
  }

  const auto check_start = redlock::BootClock::now();
  const std::vector<Event>& faults = bed.faults();
  std::vector<Event> events = faults;
  read_histories(dir, events);
  if (a.keep_histories) {
    fs::create_directories(a.out_dir);
    fs::rename(dir, fs::path(a.out_dir) / (sc.name + ".histories"));
  } else {
    fs::remove_all(dir);
  }
  // Every counter written, as it is now.
  std::map<std::string, std::int64_t> finals;
  for (const auto& e : events)
    if (e.type == EventType::write && finals.count(e.resource) == 0) finals[e.resource] = bed.counter_value(e.resource);
  const CheckInput input{std::move(events), std::move(finals), leaked, t0, t_end};
  CheckResult result = check(input);
  const double check_seconds = std::chrono::duration<double>(redlock::BootClock::now() - check_start).count();

  // While a majority is down: no acquisition may succeed, and every failure
  // must come back within wait + one node timeout (+ 250 ms of scheduling).
  std::size_t outage_successes = 0, outage_failures = 0, slow_failures = 0;
  if (sc.majority_down) {
    const std::int64_t bound_us = (sc.wait_ms + sc.node_timeout_ms + 250) * 1000;
    for (const auto& [from, to] : majority_down(faults, bed.size())) {
      for (const auto& e : input.events) {
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
  const bool violation = redlock::chaos::violation(result) || outage_successes > 0 ||
                         (sc.writes_in_time && result.stale_writes > 0);
  // A run that shows nothing proves nothing: every worker must have run to
  // its end, and a safe scenario must have taken some lock (a violation is
  // its own evidence) — with readers, some of them together; one with a
  // target must have reached it.
  const bool readers_shared = sc.shared_pct == 0 || result.shared_overlaps > 0;
  // An election's evidence: leaders were elected, the faults made failovers,
  // and (where asked) a paused ex-leader's late write met the fence.
  const ElectionResult& el = result.election;
  const bool election_shown = !sc.election || (el.elections > 0 && el.failovers >= static_cast<std::size_t>(sc.min_failovers) &&
                                               (!sc.late_write_refused || el.late_writes_refused > 0));
  const bool took = sc.election ? election_shown : result.acquisitions > 0 && readers_shared;
  const bool ran = exits.killed == 0 && exits.failed == 0 && slow_failures == 0 &&
                   (sc.expect == Expect::violation || took) &&
                   (!sc.majority_down || outage_failures > 0) &&
                   result.acquisitions >= static_cast<std::size_t>(target);
  // Leases: every attempt took its lease, and none was lost (a majority
  // stayed healthy) — or, where leases may fall, none that the faults do not
  // explain.
  auto lease_events = [&](EventType type) {
    return static_cast<std::size_t>(std::count_if(input.events.begin(), input.events.end(), [&](const Event& e) {
      return e.type == type &&
             std::find(lease_holders.begin(), lease_holders.end(), e.client) != lease_holders.end();
    }));
  };
  const std::size_t leases_taken = lease_events(EventType::ok), leases_failed = lease_events(EventType::fail);
  const std::size_t unexplained = unexplained_losses(input.events, faults, bed.size(), sc.settle_ms);
  const bool leases_kept = leases_wanted == 0 || (leases_taken >= leases_wanted && leases_failed == 0 &&
                                                  (sc.leases_may_fall ? unexplained : result.leases_lost) == 0);
  // Liveness (max_grant_gap_ms): no stall of the grants longer than the
  // scenario's bound, and every client served at least once.
  const Liveness live = liveness_of(input.events, faults, t0, t_stop);
  const bool lively = sc.max_grant_gap_ms <= 0 ||
                      (live.max_gap_ms < sc.max_grant_gap_ms && live.clients_served == live.clients);
  const bool passed = ran && leases_kept && lively && (sc.expect == Expect::safe ? !violation : violation);

  json j = to_json(result, sc.name, sc.expect == Expect::violation, {});
  j["about"] = sc.about;
  j["violation"] = violation;
  j["passed"] = passed;
  j["duration_ms"] = duration_ms;
  const double ran_seconds = static_cast<double>(t_stop - t0) / 1e9;
  j["ran_ms"] = static_cast<std::int64_t>(ran_seconds * 1000);
  j["acquisitions_per_second"] = ran_seconds > 0 ? static_cast<double>(result.acquisitions) / ran_seconds : 0.0;
  if (target > 0) {
    j["target_acquisitions"] = target;
    j["target_reached"] = result.acquisitions >= static_cast<std::size_t>(target);
  }
  j["faults"] = faults.size();
  json intervals = json::array();  // each fault: what, and from/to in ms since the workload's start
  for (const auto& f : faults) {
    intervals.push_back({{"what", f.error},
                         {"from_ms", static_cast<double>(f.t - t0) / 1e6},
                         {"to_ms", static_cast<double>(f.deadline - t0) / 1e6}});
  }
  j["fault_intervals"] = std::move(intervals);
  j["check_seconds"] = check_seconds;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  j["runner_peak_rss_mb"] = usage.ru_maxrss / 1024;  // the runner's peak so far: its check included
  j["workers"] = workers;
  j["workers_killed"] = exits.killed;
  j["workers_failed"] = exits.failed;
  if (!exits.failures.empty()) j["workers_failures"] = exits.failures;
  for (const auto& f : exits.failures) std::fprintf(stderr, "chaos: %s: worker %s\n", sc.name.c_str(), f.c_str());
  if (!sc.sabotage.empty()) j["sabotage"] = sc.sabotage;
  if (sc.shared_pct > 0) {
    j["shared_pct"] = sc.shared_pct;
    j["readers_shared"] = readers_shared;
  }
  if (leases_wanted > 0) {
    j["leases_wanted"] = leases_wanted;
    j["leases_taken"] = leases_taken;
    j["leases_failed"] = leases_failed;
    j["leases_lost_unexplained"] = unexplained;
  }
  j["max_grant_gap_ms"] = live.max_gap_ms;
  j["max_grant_gap_start_ms"] = live.max_gap_start_ms;
  j["max_grant_gap_after_faults_ms"] = live.max_gap_after_faults_ms;
  j["clients_asking"] = live.clients;
  j["clients_served"] = live.clients_served;
  j["min_client_acquisitions"] = live.min_client_acquisitions;
  j["overtaking_grants"] = live.overtaking_grants;
  j["overtaking_share"] = live.grants > 0 ? static_cast<double>(live.overtaking_grants) / live.grants : 0.0;
  if (sc.fair) j["fair"] = true;
  if (sc.max_grant_gap_ms > 0) {
    j["max_grant_gap_bound_ms"] = sc.max_grant_gap_ms;
    j["lively"] = lively;
  }
  if (sc.election) {
    j["election_shown"] = election_shown;
    j["min_failovers"] = sc.min_failovers;
    j["workers_replaced"] = stage.killed.size();
  }
  if (sc.majority_down) {
    j["successes_during_majority_outage"] = outage_successes;
    j["failures_during_majority_outage"] = outage_failures;
    j["failures_slower_than_bound"] = slow_failures;
  }

  fs::create_directories(a.out_dir);
  const std::string svg = (fs::path(a.out_dir) / (sc.name + ".svg")).string();
  if (sc.election) {  // the leaders' terms are the bars
    for (auto& w : leadership_windows(result.election)) result.windows.push_back(std::move(w));
  }
  std::ofstream(svg) << timeline(result, faults, t0, t_end, sc.name + ": " + sc.about);
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
      std::printf("%-22s %-9s %s%s\n", s.name.c_str(), s.expect == Expect::safe ? "safe" : "violation", s.about.c_str(),
                  s.on_demand ? " (runs only when named)" : "");
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
    if (!selected(sc, a)) continue;
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
      std::printf("%-22s leases taken %zu (%zu held at a time), failed %zu, lost %zu (%zu not explained by the "
                  "faults)\n",
                  "", j.value("leases_taken", std::size_t{0}), j.value("leases_wanted", std::size_t{0}),
                  j.value("leases_failed", std::size_t{0}), j.value("leases_lost", std::size_t{0}),
                  j.value("leases_lost_unexplained", std::size_t{0}));
    }
    if (j.contains("shared_pct")) {
      std::printf("%-22s read locks %zu of %zu windows (%lld %% asked), %zu reader pairs held together, %zu reads, "
                  "%zu torn%s\n",
                  "", j.value("shared_windows", std::size_t{0}), j.value("windows", std::size_t{0}),
                  j.value("shared_pct", 0LL), j.value("shared_overlaps", std::size_t{0}),
                  j.value("reads", std::size_t{0}), j.value("torn_reads", std::size_t{0}),
                  j.value("readers_shared", true) ? "" : ": NO READERS SHARED");
    }
    if (j.contains("max_grant_gap_bound_ms") || j.value("fair", false)) {
      std::printf("%-22s longest gap between grants %lld ms (at %.1f s; bound %lld ms), %lld ms after the last "
                  "fault; %zu of %zu clients served, fewest %zu each; %.1f %% of grants overtook a waiter "
                  "%lld ms earlier%s\n",
                  "", j.value("max_grant_gap_ms", 0LL), j.value("max_grant_gap_start_ms", 0LL) / 1000.0,
                  j.value("max_grant_gap_bound_ms", 0LL), j.value("max_grant_gap_after_faults_ms", -1LL),
                  j.value("clients_served", std::size_t{0}), j.value("clients_asking", std::size_t{0}),
                  j.value("min_client_acquisitions", std::size_t{0}), 100.0 * j.value("overtaking_share", 0.0),
                  static_cast<long long>(kOvertakeMs), j.value("lively", true) ? "" : ": NOT LIVELY");
    }
    if (j.contains("election")) {
      const json& e = j["election"];
      std::printf("%-22s %zu leaders elected, %zu failovers (%zu kills, %zu deposed across a pause), %zu overlaps "
                  "(%zu excused by a pause, %zu by the slack), %zu told late (longest %lld ms), %zu terms out of order; "
                  "%zu store writes, %zu refused, %zu late (%zu refused), %zu against the store's rule, %zu acts "
                  "past a leadership%s\n",
                  "", e.value("elections", std::size_t{0}), e.value("failovers", std::size_t{0}),
                  e.value("kills", std::size_t{0}), e.value("pauses", std::size_t{0}),
                  e.value("leader_overlaps", std::size_t{0}), e.value("excused_by_pause", std::size_t{0}),
                  e.value("excused_by_slack", std::size_t{0}), e.value("late_deposals", std::size_t{0}),
                  e.value("max_told_delay_ms", 0LL), e.value("term_regressions", std::size_t{0}),
                  e.value("fenced_writes", std::size_t{0}), e.value("fenced_refused", std::size_t{0}),
                  e.value("late_writes", std::size_t{0}), e.value("late_writes_refused", std::size_t{0}),
                  e.value("fence_order_violations", std::size_t{0}) + e.value("bad_refusals", std::size_t{0}) +
                      e.value("unelected_writes", std::size_t{0}),
                  e.value("acted_late", std::size_t{0}),
                  j.value("election_shown", true) ? "" : ": NOT ENOUGH SHOWN");
      for (const auto& ex : e["examples"]) std::printf("%-22s   %s\n", "", ex.get<std::string>().c_str());
    }
    if (j.contains("target_acquisitions")) {
      std::printf("%-22s %zu of %ld acquisitions (%s) in %.0f s, %.0f/s, on %zu resources; %zu stale writes; "
                  "%zu faults, recovery p50 %lld ms, p99 %lld ms; check %.0f s, runner peak RSS %lld MB\n",
                  "", j.value("acquisitions", std::size_t{0}), j.value("target_acquisitions", 0L),
                  j.value("target_reached", false) ? "reached" : "NOT reached", j.value("ran_ms", 0LL) / 1000.0,
                  j.value("acquisitions_per_second", 0.0), j.value("resources", std::size_t{0}),
                  j.value("stale_writes", std::size_t{0}), j.value("faults", std::size_t{0}),
                  j.value("recovery_p50_ms", 0LL), j.value("recovery_p99_ms", 0LL), j.value("check_seconds", 0.0),
                  j.value("runner_peak_rss_mb", 0LL));
    }
    std::fflush(stdout);
    all.push_back(j);
  }
  if (!a.json_file.empty()) std::ofstream(a.json_file) << all.dump(2) << "\n";
  return ok ? 0 : 1;
}
