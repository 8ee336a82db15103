// redlock_bench — the `redlock` system of the benchmark suite, on the public
// API only. It follows bench/CONTRACT.md: the same invocation, scenarios and
// one-line JSON result as the floor program and the node-redlock peer. This
// file: arguments, set-up, output; the scenarios: redlock_scenarios.cpp.
//
//   redlock_bench --nodes URL,... --scenario latency|throughput|handoff|memory
//                 [--seconds S] [--concurrency C] [--samples FILE] [--locks N]
//   redlock_bench --nodes URL,... --scenario handoff-crowd --events FILE
//                 [--waiters W] [--resource NAME] [--gate FIFO] [--seconds S]
//                 [--fair]
//   redlock_bench --nodes URL,... --scenario leases [--leases N] [--hold S]
//                 [--spread] [--gate FIFO [--stats-before FILE --stats-after FILE]]
//   redlock_bench --nodes URL,... --scenario failover [--failovers N] [--lease-ttl MS]
//   [--extend-batch-max N] [--extend-batch-window MS] (any scenario)
//   (redlock_bench --help)
//
// Everything runs on ONE uv loop of this thread with redlock::AsyncClient, so
// the numbers are the library's, not thread hand-offs (the blocking Client
// would add a cross-thread post and a promise per call).
//
// Settings: library defaults except quarantine, which is OFF — the
// benchmark's masters were just started, so with it on every master would
// sit out max_ttl + drift (60.6 s) and no lock could be taken — and
// Options::extend_batch_max / extend_batch_window, which --extend-batch-max
// and --extend-batch-window set (default: the library's). Defaults in
// force: node_timeout 50 ms, release_settle 0, node_outcomes off, drift_factor 0.01, and
// acquire retries every retry_delay 50 ms + uniform 0–50 ms retry_jitter
// (only after failures other than "held": a waiter is woken by release
// notifications, wake_ups on). Lock TTL 10000 ms;
// memory: 60000 ms (= the default Options::max_ttl, which must be ≥ it);
// leases: min(30 s, hold / 2), so that a short hold sees several extensions
// as well (LeaseOptions::extend_at is 1/3 of the validity: with 30 s, one
// every ~10 s).
//
// Before measuring, each client takes and releases a warm-up lock until a majority of
// N masters answered ok (at most 3 s; otherwise exit 1 naming the nodes),
// then runs 100 more acquire+release pairs. Samples are µs on steady_clock;
// percentiles are by nearest rank; errors are counted, not sampled.
//
//   latency    one chain on one resource: acquire (try-lock) → release →
//              acquire …; sample = one acquire+release pair. --permits P:
//              the resource is a semaphore of P permits (each acquire takes
//              one, each release gives it back; the runner's
//              latency-semaphore). --shared: each acquire is a read lock
//              (AcquireOptions::shared; the runner's latency-shared).
//   throughput C chains like that on C distinct resources, all pipelined on
//              the same five connections; ops = pairs; cpu_us_per_op =
//              getrusage(RUSAGE_SELF) user+sys over the run / pairs.
//   handoff    a holder client and a waiter client (two AsyncClients, so two
//              sets of connections, as two processes would have) on one
//              resource: the holder acquires; the waiter calls acquire with
//              wait = 5 s; the holder releases 2 + uniform(0..100) ms after
//              the waiter's call (a release at a random phase of the
//              waiter's retry cycle, after its first attempt has failed);
//              sample = from the holder's release completing to the
//              waiter's acquire completing (0 if the waiter got there
//              first). attempts_per_handoff = mean(Lock::attempts);
//              failed_attempts_per_handoff = mean(Lock::attempts − 2): the
//              first attempt, which finds the lock held, begins the wait.
//   memory     N locks (--locks, default 100000) on distinct resources,
//              acquired 256 in flight, the Lock values kept; RSS
//              (/proc/self/statm) after the loop settled minus before (read
//              after a first wave of 256 locks, taken and released: the
//              working set of 256 acquisitions in flight is no held lock's);
//              bytes_per_lock = delta / locks held; heap_bytes_per_lock =
//              sizeof(Lock) + growth of malloc's bytes in use / locks held
//              (no free chunks). Samples: per-acquire
//              latency; ops/seconds: the acquisition phase. Then all are
//              released, 256 in flight.
//   handoff-crowd  one process of a crowd (scripts/bench.sh starts several):
//              W waiters (--waiters, default 1), each an acquire with wait =
//              30 s on the shared --resource through this process's one
//              AsyncClient; whoever gets it holds it uniform 1–5 ms, releases
//              and waits again, for S seconds; then the waits still going
//              are cancelled (AcquireOptions::cancel) and the holders release.
//              Every acquisition goes to --events FILE (bench/CONTRACT.md) on
//              steady_clock (CLOCK_MONOTONIC, shared by the processes);
//              bench_crowd_merge turns the files of all processes into
//              handoffs. With --gate FIFO the process writes "ready PID" to
//              FIFO after its warm-up and starts only when a line "go" comes
//              on stdin, so that the crowd starts together and no warm-up
//              command falls inside the runner's command count. Its own
//              JSON line: ops = its acquisitions, p*_us = its waits.
//              --fair: every waiter's acquire has AcquireOptions::fair
//              (fair order: a queue on every master, a release wakes the
//              next waiter only; the runner's handoff-crowd-K-fair); the
//              rest is the same (Options::fair_grace: the default, 250 ms).
//   leases     N leases (--leases, default 100000) on distinct resources,
//              AsyncClient::lock with LeaseOptions defaults (watchdog on)
//              and the TTL above, taken 256 in flight (--spread: at an
//              even pace over one TTL, so that their extensions fall due
//              spread in time, not bunched); then held for
//              --hold S seconds (default 60) while the watchdogs extend
//              them, then released, 256 in flight. bytes_per_lease = RSS
//              (/proc/self/statm) with all held, settled, minus before /
//              leases held. Over the hold only: ops = extensions
//              (Stats::leases_extended), p*_us = the extensions' latency
//              from Stats::extend_latency (the upper edge of its
//              power-of-two bucket: up to 2× over), cpu_us_per_lease_s =
//              getrusage user+sys / (leases × hold seconds); leases_lost =
//              Stats::leases_lost at the end of the hold. With --gate FIFO
//              it writes "held PID" to FIFO once all are held and settled
//              and waits for "go" on stdin, holds, writes "done PID" and
//              waits for "go" again: the runner reads the masters' INFO in
//              between. With --stats-before/--stats-after (the files the
//              runner wrote there, read after the second "go") also
//              commands_per_lease_s (every command in commandstats, the
//              scripts' own calls included), requests_per_lease_s (only the
//              commands the client sends: not GET, SET, PTTL, PEXPIRE,
//              DEL, PUBLISH, TIME, which the library's scripts call — the
//              client's own SET NX and vote-check GET follow acquires
//              only, and none is taken during the hold), cmd_<name>_per_lease_s
//              and master_cpu_us_per_lease_s (INFO cpu, user + sys). A lost
//              lease fails the run: exit 3, after the JSON line.
//   failover   leader election (redlock_failover.cpp): N rounds (--failovers,
//              default 5) in which a leader process — this program with
//              --scenario failover-leader, which campaigns with TTL
//              --lease-ttl (default 1000 ms), says "elected TERM" on stdout
//              and leads until killed — is SIGKILLed while a standby
//              (AsyncClient::campaign, waiting) and an observer
//              (AsyncClient::observe) of this process, on two clients of
//              their own, run; the kill comes 20 ms + uniform(0..TTL) after
//              the standby began to campaign (a random phase of the leader's
//              extension cycle). Per round: failover = kill → the standby
//              elected; told = kill → the observer told the standby leads
//              (told_none: → told "no leader", when it was, first); floor =
//              what the dead leader's lock still had to live at the kill
//              (once it is reaped, one leader() reading: expires_in, plus
//              the reading's mid-point − the kill); overhead = failover −
//              floor. ops = rounds; p*_us = failover; failover_p50_ms /
//              _max_ms and the same for floor, overhead, told,
//              told_overhead (told − floor), told_after_elected, told_none;
//              failover_per_floor_p50 / _max, failover_per_ttl_p50 / _max,
//              told_none_rounds, ttl_ms; standby_rounds_after_kill_p50 /
//              _max (the standby's acquire rounds, Stats::acquire_rounds,
//              from the kill to elected) and standby_held_after_kill (of
//              them, those that found the lock held). The standby resigns after each
//              round. Each leader process is reaped; it dies with this one.
//
// Exit: 0 with the JSON line; 1 if the masters are unreachable or the run
// failed (message on stderr); 2 on a usage error; 3 if a lease was lost
// (leases; the JSON line is printed first).
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "redlock/redlock.hpp"
#include "redlock_bench.hpp"
#include "run_seconds.hpp"

namespace redlock_bench {

[[noreturn]] void die(int code, const std::string& message) {
  std::fprintf(stderr, "redlock_bench: %s\n", message.c_str());
  std::exit(code);
}

// pass_gate: tell the runner where we are (one line "WORD PID" to the FIFO,
// atomic among the crowd's writers), then block until it says "go" on stdin.
void pass_gate(const std::string& fifo, const std::string& word) {
  const int fd = open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) die(1, "--gate " + fifo + ": " + std::strerror(errno));
  const std::string line = word + " " + std::to_string(getpid()) + "\n";
  const bool wrote = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  close(fd);
  if (!wrote) die(1, "--gate " + fifo + ": cannot write");
  std::string got;
  char c = 0;
  for (;;) {  // to the end of the line: the next gate reads the next one
    const ssize_t n = read(0, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die(1, "--gate: stdin ended before \"go\"");
    if (c == '\n') {
      if (got != "go") die(1, "--gate: expected \"go\" on stdin, got \"" + got + "\"");
      break;
    }
    got += c;
  }
}

// nearest_rank: the p-th percentile of `sorted` (nearest rank); shared
// with redlock_scenarios.cpp.
long long nearest_rank(const std::vector<long long>& sorted, double p) {
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * n));
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

namespace {

struct Args {
  std::string nodes, scenario, samples_path, tls_ca;
  std::string events_path, resource = "bench-handoff-crowd", gate;
  std::string stats_before, stats_after;
  double seconds = 3, hold = 60;
  long concurrency = 64;
  long locks = 100000, leases = 100000;
  int waiters = 1;
  bool fair = false;
  bool spread = false;
  std::uint32_t permits = 0;
  bool shared = false;
  long extend_batch_max = static_cast<long>(redlock::Options{}.extend_batch_max);
  long extend_batch_window_ms = static_cast<long>(redlock::Options{}.extend_batch_window.count());
  int failovers = 5;
  long lease_ttl_ms = 1000;
};

// to_json is the one output line of CONTRACT.md.
std::string to_json(const std::string& scenario, const Metrics& m, std::vector<long long> samples) {
  std::sort(samples.begin(), samples.end());
  const double ops = m.at("ops"), seconds = m.at("seconds");
  char buf[256];
  std::string out = "{\"system\": \"redlock\", \"scenario\": \"" + scenario + "\"";
  std::snprintf(buf, sizeof buf, ", \"ops\": %.0f, \"seconds\": %.3f, \"ops_per_s\": %.1f", ops, seconds,
                seconds > 0 ? ops / seconds : 0.0);
  out += buf;
  for (auto [name, p] : {std::pair{"p50_us", 50.0}, {"p90_us", 90.0}, {"p99_us", 99.0}, {"p999_us", 99.9}}) {
    out += std::string(", \"") + name + "\": ";
    if (!samples.empty()) {
      out += std::to_string(nearest_rank(samples, p));
    } else if (const auto it = m.find(name); it != m.end()) {
      std::snprintf(buf, sizeof buf, "%.0f", it->second);
      out += buf;
    } else {
      out += "null";
    }
  }
  // Per lease-second rates are small (a batched extension is a fraction of
  // a command): %.4g keeps their digits.
  for (auto [name, fmt] :
       {std::pair{"cpu_us_per_op", "%.2f"}, {"bytes_per_lock", "%.1f"}, {"heap_bytes_per_lock", "%.1f"},
        {"failed_attempts_per_handoff", "%.2f"},
        {"attempts_per_handoff", "%.2f"}, {"from_release_call_p50_us", "%.0f"}, {"from_release_call_p99_us", "%.0f"},
        {"leases", "%.0f"}, {"ttl_ms", "%.0f"}, {"take_seconds", "%.2f"}, {"extend_batch_max", "%.0f"}, {"extend_batch_window_ms", "%.0f"},
        {"bytes_per_lease", "%.1f"}, {"cpu_us_per_lease_s", "%.4g"}, {"commands_per_lease_s", "%.4g"},
        {"requests_per_lease_s", "%.4g"}, {"master_cpu_us_per_lease_s", "%.4g"}, {"leases_extended", "%.0f"},
        {"extend_failures", "%.0f"}, {"leases_lost", "%.0f"},
        {"failovers", "%.0f"}, {"failover_p50_ms", "%.1f"}, {"failover_max_ms", "%.1f"}, {"floor_p50_ms", "%.1f"},
        {"floor_max_ms", "%.1f"}, {"overhead_p50_ms", "%.1f"}, {"overhead_max_ms", "%.1f"},
        {"failover_per_floor_p50", "%.4f"}, {"failover_per_floor_max", "%.4f"}, {"failover_per_ttl_p50", "%.3f"},
        {"failover_per_ttl_max", "%.3f"}, {"told_p50_ms", "%.1f"}, {"told_max_ms", "%.1f"},
        {"told_overhead_p50_ms", "%.1f"}, {"told_overhead_max_ms", "%.1f"}, {"told_after_elected_p50_ms", "%.2f"},
        {"told_after_elected_max_ms", "%.2f"}, {"told_none_rounds", "%.0f"}, {"told_none_p50_ms", "%.1f"},
        {"told_none_max_ms", "%.1f"}, {"standby_rounds_after_kill_p50", "%.0f"},
        {"standby_rounds_after_kill_max", "%.0f"}, {"standby_held_after_kill_p50", "%.0f"},
        {"standby_held_after_kill_max", "%.0f"}}) {
    if (const auto it = m.find(name); it != m.end()) {
      std::snprintf(buf, sizeof buf, fmt, it->second);
      out += std::string(", \"") + name + "\": " + buf;
    }
  }
  for (const auto& [name, value] : m) {  // leases: cmd_<name>_per_lease_s
    if (name.rfind("cmd_", 0) != 0) continue;
    std::snprintf(buf, sizeof buf, "%.4g", value);
    out += ", \"" + name + "\": " + buf;
  }
  std::snprintf(buf, sizeof buf, ", \"errors\": %.0f}", m.at("errors"));
  return out + buf;
}

// ---------------------------------------------------------------------------
// Arguments.

// parse_args reads the command line; --help and bad arguments end the process (0 and 2).
Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app{"redlock_bench: one benchmark scenario of the redlock library; prints one JSON line "
               "(bench/CONTRACT.md).",
               "redlock_bench"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--nodes", a.nodes, "The masters (loopback only)")->type_name("URL,URL,...")->required();
  app.add_option("--scenario", a.scenario, "What to measure")
      ->type_name("NAME")
      ->required()
      ->check(CLI::IsMember(
          {"latency", "throughput", "handoff", "memory", "handoff-crowd", "leases", "failover", "failover-leader"}));
  app.add_option("--seconds", a.seconds, "Measure this long")
      ->type_name("S")
      ->check(bench::run_seconds(0.001, 1e9, false))
      ->capture_default_str();
  app.add_option("--concurrency", a.concurrency, "throughput: chains in flight")
      ->type_name("C")
      ->check(CLI::Range(1L, 1'000'000'000L))
      ->capture_default_str();
  app.add_option("--tls-ca", a.tls_ca, "CA file for rediss:// masters")->type_name("FILE");
  app.add_option("--samples", a.samples_path, "Write every sample (µs) here, one a line")->type_name("FILE");
  app.add_option("--locks", a.locks, "memory: locks to hold")
      ->type_name("N")
      ->check(CLI::Range(1L, 1'000'000'000L))
      ->capture_default_str();
  app.add_option("--waiters", a.waiters, "handoff-crowd: waiters in this process")
      ->type_name("W")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("--events", a.events_path, "handoff-crowd: write every acquisition here")->type_name("FILE");
  app.add_option("--resource", a.resource,
                 "handoff-crowd: the resource the crowd shares; failover-leader: the election")
      ->type_name("NAME")
      ->capture_default_str();
  CLI::Option* fair = app.add_flag("--fair", a.fair, "handoff-crowd: acquire with AcquireOptions::fair (fair order)");
  CLI::Option* permits = app.add_option("--permits", a.permits, "latency, handoff: the resource is a semaphore of P permits")
                             ->type_name("P")
                             ->check(CLI::Range(1, 100));
  CLI::Option* shared = app.add_flag("--shared", a.shared, "latency: each acquire is a read lock");
  CLI::Option* gate =
      app.add_option("--gate", a.gate,
                     "handoff-crowd: after the warm-up write \"ready PID\" here, then wait for \"go\" on stdin; "
                     "leases: the same with \"held PID\" before the hold and \"done PID\" after it")
          ->type_name("FIFO");
  app.add_option("--leases", a.leases, "leases: leases to hold")
      ->type_name("N")
      ->check(CLI::Range(1L, 10'000'000L))
      ->capture_default_str();
  app.add_option("--hold", a.hold, "leases: hold them this long while the watchdogs extend them")
      ->type_name("S")
      ->check(bench::run_seconds(1, 3600, false))
      ->capture_default_str();
  app.add_flag("--spread", a.spread,
               "leases: take them at an even pace over one TTL (their extensions fall due spread in time)");
  CLI::Option* before =
      app.add_option("--stats-before", a.stats_before, "leases: the masters' INFO the runner saved at \"held\"")
          ->type_name("FILE");
  CLI::Option* after =
      app.add_option("--stats-after", a.stats_after, "leases: the masters' INFO the runner saved at \"done\"")
          ->type_name("FILE");
  before->needs(after)->needs(gate);
  after->needs(before);
  app.add_option("--extend-batch-max", a.extend_batch_max,
                 "Options::extend_batch_max: most keys per batched extension call (1: no batching)")
      ->type_name("N")
      ->check(CLI::Range(1L, 1'000'000L))
      ->capture_default_str();
  app.add_option("--extend-batch-window", a.extend_batch_window_ms,
                 "Options::extend_batch_window: how long a due extension may wait for others, in ms")
      ->type_name("MS")
      ->check(CLI::Range(0L, 60'000L))
      ->capture_default_str();
  CLI::Option* failovers = app.add_option("--failovers", a.failovers, "failover: rounds (a leader killed in each)")
                               ->type_name("N")
                               ->check(CLI::Range(1, 1000))
                               ->capture_default_str();
  CLI::Option* lease_ttl =
      app.add_option("--lease-ttl", a.lease_ttl_ms, "failover, failover-leader: the candidates' lease TTL in ms")
          ->type_name("MS")
          ->check(CLI::Range(100L, 60'000L))
          ->capture_default_str();
  try {
    app.parse(argc, argv);
    const bool failover = a.scenario == "failover" || a.scenario == "failover-leader";
    if (failovers->count() > 0 && a.scenario != "failover")
      throw CLI::ValidationError("--failovers", "applies to --scenario failover only");
    if (lease_ttl->count() > 0 && !failover)
      throw CLI::ValidationError("--lease-ttl", "applies to --scenario failover only");
    if (a.scenario == "handoff-crowd" && a.events_path.empty())
      throw CLI::RequiredError("--events is required by --scenario handoff-crowd", CLI::ExitCodes::RequiredError);
    if (fair->count() > 0 && a.scenario != "handoff-crowd")
      throw CLI::ValidationError("--fair", "applies to --scenario handoff-crowd only");
    if (permits->count() > 0 && a.scenario != "latency" && a.scenario != "handoff")
      throw CLI::ValidationError("--permits", "applies to --scenario latency and handoff only");
    if (shared->count() > 0 && (a.scenario != "latency" || permits->count() > 0))
      throw CLI::ValidationError("--shared", "applies to --scenario latency only, without --permits");
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) std::fputs("redlock_bench: ", stderr);
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
  return a;
}

bool is_loopback_host(const std::string& host) {
  return host == "::1" || host == "localhost" || host.rfind("127.", 0) == 0;
}

// is_loopback: a unix socket, or a host on loopback; a cluster's or a
// sentinel member's every seed on loopback.
bool is_loopback(const redlock::NodeAddress& n) {
  if (n.kind == redlock::NodeAddress::Kind::unix_socket) return true;
  if (!n.seeds.empty()) {
    return std::all_of(n.seeds.begin(), n.seeds.end(),
                       [](const redlock::Endpoint& e) { return is_loopback_host(e.host); });
  }
  return is_loopback_host(n.host);
}

}  // namespace
}  // namespace redlock_bench

int main(int argc, char** argv) {
  using namespace redlock_bench;
  const Args args = parse_args(argc, argv);
  auto nodes = redlock::parse_node_list(args.nodes);
  if (!nodes) die(2, "--nodes: " + nodes.error().to_string());
  for (const auto& n : *nodes) {
    if (!is_loopback(n)) die(2, "--nodes: " + n.display() + " is not a loopback address (loopback only)");
  }
  // As the floor and Node.js do, and as docs/design.md §6 advises hosts
  // of AsyncClient: with SIGPIPE ignored a write needs no signal guard.
  std::signal(SIGPIPE, SIG_IGN);
  // A hung run must not hang the suite: SIGALRM's default action ends us.
  const double extra = args.scenario == "memory"   ? static_cast<double>(args.locks / 500)
                      : args.scenario == "leases" ? args.hold * (args.spread ? 1.5 : 1.0) + static_cast<double>(args.leases / 500)
                      : args.scenario == "failover"
                          ? args.failovers * (3.0 * static_cast<double>(args.lease_ttl_ms) / 1000 + 5)
                          : 0.0;
  // failover-leader leads until it is killed (and dies with its parent);
  // the alarm ends it if neither happens.
  if (args.scenario == "failover-leader") {
    alarm(3600);
  } else {
    alarm(static_cast<unsigned>(args.seconds + 120 + extra));
  }

  redlock::Config config;
  config.nodes = std::move(*nodes);
  config.tls.ca_file = args.tls_ca;
  config.options.quarantine = false;  // the masters were just started: see the header comment
  config.options.extend_batch_max = static_cast<std::size_t>(args.extend_batch_max);
  config.options.extend_batch_window = std::chrono::milliseconds{args.extend_batch_window_ms};

  uv_loop_t loop;
  if (uv_loop_init(&loop) != 0) die(1, "uv_loop_init failed");
  std::vector<std::unique_ptr<AsyncClient>> clients;
  for (int i = 0; i < (args.scenario == "handoff" || args.scenario == "failover" ? 2 : 1); ++i) {
    auto c = AsyncClient::create(&loop, config);
    if (!c) die(2, c.error().to_string());
    clients.push_back(std::move(*c));
  }
  const std::string base = "bench-" + std::to_string(getpid()) + "-" + args.scenario;
  // The leader process campaigns at once: its runner warmed up already.
  if (args.scenario == "failover-leader") {
    run_failover_leader(&loop, *clients[0], args.resource, std::chrono::milliseconds{args.lease_ttl_ms});
  }
  for (std::size_t i = 0; i < clients.size(); ++i) {
    if (std::string why = check_masters(&loop, *clients[i], base + "-warmup-" + std::to_string(i)); !why.empty()) {
      die(1, why);
    }
  }
  if (!args.gate.empty() && args.scenario != "leases") pass_gate(args.gate, "ready");

  std::vector<long long> samples;  // µs
  Metrics m;
  if (args.scenario == "latency") {
    m = run_latency(&loop, *clients[0], base, args.seconds, args.permits, args.shared, samples);
  } else if (args.scenario == "throughput") {
    m = run_throughput(&loop, *clients[0], base, args.concurrency, args.seconds, samples);
  } else if (args.scenario == "handoff") {
    m = run_handoff(&loop, *clients[0], *clients[1], base, args.permits, args.seconds, samples);
  } else if (args.scenario == "handoff-crowd") {
    m = run_handoff_crowd(&loop, *clients[0], args.resource, args.waiters, args.fair, args.seconds, args.events_path,
                          samples);
  } else if (args.scenario == "failover") {
    char exe[4096];
    std::size_t size = sizeof exe;
    if (const int rc = uv_exepath(exe, &size); rc != 0) die(1, std::string("uv_exepath: ") + uv_strerror(rc));
    std::vector<std::string> child{std::string(exe, size), "--nodes", args.nodes, "--scenario", "failover-leader",
                                   "--resource", base + "-election", "--lease-ttl", std::to_string(args.lease_ttl_ms)};
    if (!args.tls_ca.empty()) child.insert(child.end(), {"--tls-ca", args.tls_ca});
    m = run_failover(&loop, *clients[0], *clients[1], base + "-election", std::move(child),
                     std::chrono::milliseconds{args.lease_ttl_ms}, args.failovers, samples);
  } else if (args.scenario == "leases") {
    m = run_leases(&loop, *clients[0], base, args.leases, args.hold, args.spread, args.gate, args.stats_before,
                   args.stats_after, samples);
    m["extend_batch_max"] = static_cast<double>(args.extend_batch_max);
    m["extend_batch_window_ms"] = static_cast<double>(args.extend_batch_window_ms);
  } else {
    m = run_memory(&loop, *clients[0], base, args.locks, samples);
  }

  // Close every client, run the loop until the last handle is gone.
  std::size_t open = clients.size();
  for (auto& c : clients) c->close([&open] { --open; });
  uv_run(&loop, UV_RUN_DEFAULT);
  clients.clear();
  uv_run(&loop, UV_RUN_DEFAULT);
  const int closed = uv_loop_close(&loop);

  if (!args.samples_path.empty()) {
    std::ofstream f(args.samples_path);
    for (long long s : samples) f << s << '\n';
    if (!f) die(1, "cannot write " + args.samples_path);
  }
  // A crowd process whose waiters all lost every race did its part: the
  // merge of the whole crowd decides (and reports them as starved).
  if (m.at("ops") == 0 && args.scenario != "handoff-crowd") {
    die(1, "the run failed: no operation succeeded (" + std::to_string(static_cast<long long>(m.at("errors"))) +
               " errors)");
  }
  std::printf("%s\n", to_json(args.scenario, m, std::move(samples)).c_str());
  std::fflush(stdout);
  if (open != 0 || closed != 0) {
    die(1, "internal: the loop did not close cleanly (" + std::string(closed != 0 ? uv_strerror(closed) : "") + ", " +
               std::to_string(open) + " clients still open)");
  }
  if (const auto lost = m.find("leases_lost"); lost != m.end() && lost->second > 0) {
    die(3, std::to_string(static_cast<long long>(lost->second)) +
               " LEASE(S) LOST: the watchdogs did not keep them, with every master up (the first reasons are above)");
  }
  return 0;
}
