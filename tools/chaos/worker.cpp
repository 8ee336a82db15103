// worker.cpp — one chaos client: acquire, read-modify-write the resource's
// shared counter (in a separate redis, never faulted; key "counter:R")
// under the lock, release; repeat until the run's end. Every step is
// appended to a JSONL history (history.hpp) and flushed, so a worker paused
// or killed mid-run leaves a history up to its last step.
//
//   chaos_worker --nodes URLS [--tls-ca FILE] --counter-port P --client N --history FILE
//                --resource R --until-ns T [--ttl MS] [--wait MS]
//                [--max-ttl MS] [--node-timeout MS] [--hold-ms A:B]
//                [--greedy] [--quarantine] [--polling] [--fair] [--threads T] [--rest-ms A:B]
//                [--permits P | --shared-pct N]
//                [--stall-timeout MS] [--leases M [--lease-hold-ms A:B]] [--resources K]
//                [--election]
// With --threads T the process runs T clients (ids (N+1)*100 + 0..T-1, apart
// from every single client's N) on one shared, thread-safe redlock::Client,
// each with its own counter connection.
// With --resources K (> 1) each turn locks one of R-0 … R-(K-1), drawn at
// random, instead of R.
// With --shared-pct N (0-100) a turn takes a read lock (AcquireOptions::
// shared) with probability N %, else a write lock as without it. A reader
// reads the counter at the start of its hold, holds, rereads it while
// Lock::valid() and logs both ("read" event, stamped after the reread
// returned); it never writes. Not with --permits or --fair (the library
// refuses those with a read lock).
// With --leases M it instead takes M leases (Client::lock, TTL --ttl, kept
// extended by their watchdogs) on resources of its own, R-N-0 … R-N-(M-1),
// holds them to the run's end and releases them; an "ok" per lease taken, a
// "lost" for each whose on_lost runs, a "release" per lease at the end. With
// --lease-hold-ms A:B too it holds them A-B ms at a time, releases them and
// takes them anew, until the run's end.
// With --election it is instead a candidate for leader of the election R
// (Client::campaign, identity "chaos-N", lease TTL --ttl) until the run's
// end: elected, it logs "elected" and then, while leading() (asked before
// each beat), works --hold-ms and writes "term T beat k" under its term to
// the fenced store (FencedStore, key "R:beat", in the counter redis),
// logging each write ("fenced") and resting --rest-ms; it stops at a
// refusal (a newer term wrote). The leading() check is not repeated between
// the work and the write: a leader stopped during its work writes late,
// which only the store's fence can refuse. Its end is logged as "deposed"
// (stamped in on_deposed) or "resigned" (at the run's end, stamped before
// resign()); then it runs again.
// SIGTERM ends the run early, as its end would: the runner's way to stop a
// run that has what it needs. Exit 0 after the run; 2 on bad arguments or
// an unusable config.
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "history.hpp"
#include "redlock/fenced_store.hpp"
#include "redlock/redlock.hpp"

using namespace redlock;
using namespace redlock::chaos;
using std::chrono::milliseconds;

namespace {

struct Args {
  std::string nodes, history, resource = "chaos";
  std::string tls_ca;  // CA of rediss:// masters
  int counter_port = 0, client = 0, threads = 1;
  std::int64_t until_ns = 0;
  long ttl = 1000, wait = 2000, max_ttl = 2000, node_timeout = 50, hold_min = 1, hold_max = 10;
  long rest_min = 0, rest_max = 5;  // pause after a release, so others get their turn
  long stall_timeout = 0;           // 0: max(the library's default, 4 node timeouts)
  long leases = 0;                  // > 0: hold this many leases instead of the counter loop
  long permits = 0;                 // > 0: R is a semaphore of P permits; events name "R/permit<i>"
  long shared_pct = 0;              // a turn is a reader's with this probability (%)
  long resources = 1;               // > 1: each turn locks one of resource-0 … resource-(n-1)
  long lease_hold_min = 0, lease_hold_max = 0;  // 0:0: hold the leases for the whole run
  bool greedy = false, quarantine = false, polling = false;
  bool fair = false;                // every acquire waits in fair order (AcquireOptions::fair)
  bool election = false;            // a candidate for leader of `resource` instead of the counter loop
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "chaos_worker: %s\n", why.c_str());
  std::exit(2);
}

long number(const char* name, const char* value) {
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || v < 0) usage(std::string(name) + ": \"" + value + "\" is not a number >= 0");
  return v;
}

void range(const char* name, const char* v, long& lo, long& hi) {
  if (std::sscanf(v, "%ld:%ld", &lo, &hi) != 2 || lo < 0 || lo > hi) {
    usage(std::string(name) + ": \"" + v + "\" is not MIN:MAX");
  }
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--greedy") { a.greedy = true; continue; }
    if (k == "--quarantine") { a.quarantine = true; continue; }
    if (k == "--polling") { a.polling = true; continue; }
    if (k == "--fair") { a.fair = true; continue; }
    if (k == "--election") { a.election = true; continue; }
    if (i + 1 >= argc) usage(k + ": needs a value");
    const char* v = argv[++i];
    if (k == "--nodes") a.nodes = v;
    else if (k == "--tls-ca") a.tls_ca = v;
    else if (k == "--history") a.history = v;
    else if (k == "--resource") a.resource = v;
    else if (k == "--counter-port") a.counter_port = static_cast<int>(number("--counter-port", v));
    else if (k == "--client") a.client = static_cast<int>(number("--client", v));
    else if (k == "--threads") a.threads = static_cast<int>(number("--threads", v));
    else if (k == "--until-ns") a.until_ns = std::strtoll(v, nullptr, 10);
    else if (k == "--ttl") a.ttl = number("--ttl", v);
    else if (k == "--wait") a.wait = number("--wait", v);
    else if (k == "--max-ttl") a.max_ttl = number("--max-ttl", v);
    else if (k == "--node-timeout") a.node_timeout = number("--node-timeout", v);
    else if (k == "--stall-timeout") a.stall_timeout = number("--stall-timeout", v);
    else if (k == "--leases") a.leases = number("--leases", v);
    else if (k == "--permits") a.permits = number("--permits", v);
    else if (k == "--shared-pct") a.shared_pct = number("--shared-pct", v);
    else if (k == "--resources") a.resources = number("--resources", v);
    else if (k == "--hold-ms") range("--hold-ms", v, a.hold_min, a.hold_max);
    else if (k == "--rest-ms") range("--rest-ms", v, a.rest_min, a.rest_max);
    else if (k == "--lease-hold-ms") range("--lease-hold-ms", v, a.lease_hold_min, a.lease_hold_max);
    else usage("unknown option " + k);
  }
  if (a.nodes.empty() || a.history.empty() || a.counter_port == 0 || a.until_ns == 0) {
    usage("--nodes, --history, --counter-port and --until-ns are required");
  }
  if (a.resources < 1) usage("--resources: at least 1");
  if (a.shared_pct > 100) usage("--shared-pct: at most 100");
  if (a.shared_pct > 0 && (a.permits > 0 || a.fair)) usage("--shared-pct: not with --permits or --fair");
  return a;
}

class History {
 public:
  explicit History(const std::string& path) : f_(std::fopen(path.c_str(), "a")) {
    if (f_ == nullptr) usage("--history: cannot open " + path + ": " + std::strerror(errno));
  }
  ~History() { std::fclose(f_); }
  void add(const Event& e) {
    const std::string line = to_json_line(e) + "\n";
    std::lock_guard<std::mutex> lock(mu_);
    std::fwrite(line.data(), 1, line.size(), f_);
    std::fflush(f_);
  }

 private:
  std::FILE* f_;
  std::mutex mu_;
};

// Counter — the shared values, one per resource, in a redis of its own that
// no fault touches.
class Counter {
 public:
  explicit Counter(int port) {
    timeval tv{2, 0};
    c_ = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c_ == nullptr || c_->err != 0) usage("cannot reach the counter redis on port " + std::to_string(port));
    redisSetTimeout(c_, tv);
  }
  ~Counter() { redisFree(c_); }
  std::int64_t read(const std::string& resource) {
    auto* r = static_cast<redisReply*>(redisCommand(c_, "GET counter:%s", resource.c_str()));
    if (r == nullptr) usage("counter redis: " + std::string(c_->errstr));
    const std::int64_t v = r->type == REDIS_REPLY_STRING ? std::strtoll(r->str, nullptr, 10) : 0;
    freeReplyObject(r);
    return v;
  }
  void write(const std::string& resource, std::int64_t v) {
    auto* r = static_cast<redisReply*>(
        redisCommand(c_, "SET counter:%s %lld", resource.c_str(), static_cast<long long>(v)));
    if (r == nullptr) usage("counter redis: " + std::string(c_->errstr));
    freeReplyObject(r);
  }

 private:
  redisContext* c_ = nullptr;
};

// Stop — the run's end: --until-ns, or SIGTERM. SIGTERM is blocked in every
// thread and taken by one thread that waits for it (sigwait), so the
// clients end their current turn and release what they hold. Construct it
// before any other thread (the Client's loop too): threads inherit the
// blocked signal.
class Stop {
 public:
  explicit Stop(std::int64_t until_ns) : until_(until_ns) {
    sigemptyset(&term_);
    sigaddset(&term_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term_, nullptr);
    waiter_ = std::thread([this] {
      int sig = 0;
      sigwait(&term_, &sig);
      {
        std::lock_guard<std::mutex> lock(mu_);
        requested_ = true;
      }
      cv_.notify_all();
      source_.request_stop();
    });
  }
  // Ends the waiter if no SIGTERM came: this one is for it alone.
  ~Stop() {
    pthread_kill(waiter_.native_handle(), SIGTERM);
    waiter_.join();
  }
  Stop(const Stop&) = delete;
  Stop& operator=(const Stop&) = delete;

  bool reached() const { return requested_ || monotonic_ns() >= until_; }
  // token: requested on SIGTERM (a campaign's cancel); until_ns: the run's end.
  std::stop_token token() const { return source_.get_token(); }
  std::int64_t until_ns() const { return until_; }
  // wait returns at the run's end; wait_until at `t_ns` (CLOCK_BOOTTIME)
  // if that comes first.
  void wait() { wait_until(until_); }
  void wait_until(std::int64_t t_ns) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto t = redlock::BootClock::time_point(std::chrono::nanoseconds(std::min(t_ns, until_)));
    cv_.wait_until(lock, t, [this] { return requested_.load(); });
  }

 private:
  const std::int64_t until_;
  sigset_t term_{};
  std::atomic<bool> requested_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::stop_source source_;
  std::thread waiter_;
};

Event base(EventType type, int id, const std::string& resource) {
  Event e;
  e.type = type;
  e.client = id;
  e.t = monotonic_ns();
  e.resource = resource;
  return e;
}

// Work: how long the holder works inside its lock, asked once it has read
// the counter.
using Work = std::function<milliseconds()>;

// write_turn: the writer's read-modify-write of its resource's counter.
void write_turn(int id, const std::string& held, const Lock& lock, const Work& work, Counter& counter,
                History& history) {
  const std::int64_t read = counter.read(held);
  if (const auto w = work(); w > milliseconds{0}) std::this_thread::sleep_for(w);
  if (lock.valid()) {
    // Stamped before the SET: the write takes effect after t, so writes
    // of one resource sort by t in the order they took effect. (Stamped
    // after it, a worker paused between the two — by the scenario, or by
    // the machine — logged its write late: it sorted after later writes,
    // and the checker counted lost updates the counter did not have.)
    Event w = base(EventType::write, id, held);
    counter.write(held, read + 1);
    w.read = read;
    w.wrote = read + 1;
    history.add(w);
  }
}

// read_turn: a reader looks at the counter at both ends of its hold; no
// writer may change it in between. The event is stamped after the reread
// returned: a read stamped inside the reader's window was made inside it,
// whatever pauses came between the valid() check and the stamp.
void read_turn(int id, const std::string& held, const Lock& lock, const Work& work, Counter& counter,
               History& history) {
  const std::int64_t first = counter.read(held);
  if (const auto w = work(); w > milliseconds{0}) std::this_thread::sleep_for(w);
  if (!lock.valid()) return;
  const std::int64_t reread = counter.read(held);
  Event r = base(EventType::read, id, held);
  r.read = first;
  r.reread = reread;
  history.add(r);
}

// run_client is one client's loop until the run's end.
void run_client(const Args& a, int id, Client& client, History& history, const Stop& stop) {
  Counter counter(a.counter_port);
  std::mt19937 rng(static_cast<unsigned>(id * 7919 + monotonic_ns()));
  std::uniform_int_distribution<long> hold(a.hold_min, a.hold_max);
  std::uniform_int_distribution<long> rest(a.rest_min, a.rest_max);
  std::uniform_int_distribution<long> pick(0, a.resources - 1);
  std::uniform_int_distribution<long> percent(0, 99);
  while (!stop.reached()) {
    const std::string resource = a.resources > 1 ? a.resource + "-" + std::to_string(pick(rng)) : a.resource;
    Event invoke = base(EventType::invoke, id, resource);
    history.add(invoke);
    AcquireOptions opts;
    opts.ttl = milliseconds{a.ttl};
    opts.wait = milliseconds{a.wait};
    opts.fair = a.fair;
    opts.permits = static_cast<std::uint32_t>(a.permits);
    opts.shared = percent(rng) < a.shared_pct;
    auto lock = client.acquire(resource, opts);
    const std::int64_t latency_us = (monotonic_ns() - invoke.t) / 1000;
    if (!lock) {
      Event fail = base(EventType::fail, id, resource);
      fail.latency_us = latency_us;
      fail.code = std::string(errc_name(lock.error().code));
      fail.error = lock.error().message;
      for (const auto& n : lock.error().nodes) fail.outcomes.emplace_back(outcome_name(n.outcome));
      history.add(fail);
      continue;
    }
    // A semaphore's permit is a lock of its own: its windows and counter.
    const std::string held = lock->permit ? resource + "/permit" + std::to_string(*lock->permit) : resource;
    Event ok = base(EventType::ok, id, held);
    ok.token = lock->token;
    ok.deadline = std::chrono::duration_cast<std::chrono::nanoseconds>(  // BootClock is CLOCK_BOOTTIME
                      lock->validity_deadline.time_since_epoch())
                      .count();
    ok.latency_us = latency_us;
    ok.shared = lock->shared;
    history.add(ok);

    // A greedy holder keeps the lock until just before its validity ends:
    // any overestimate of the validity then shows as an overlap.
    const Work work = [&] { return a.greedy ? lock->remaining() - milliseconds{20} : milliseconds{hold(rng)}; };
    if (lock->shared) {
      read_turn(id, held, *lock, work, counter, history);
    } else {
      write_turn(id, held, *lock, work, counter, history);
    }
    Event rel = base(EventType::release, id, held);
    auto released = client.release(*lock);
    rel.released = released && released->released;
    history.add(rel);
    std::this_thread::sleep_for(milliseconds{rest(rng)});
  }
}

// take_leases takes a.leases leases (fewer if the run ends first) on the
// resources R-id-0 … of this client; their watchdogs extend them on the
// client's loop.
std::vector<std::pair<std::string, Lease>> take_leases(const Args& a, int id, Client& client, History& history,
                                                       const Stop& stop) {
  std::vector<std::pair<std::string, Lease>> leases;
  leases.reserve(static_cast<std::size_t>(a.leases));
  for (long i = 0; i < a.leases && !stop.reached(); ++i) {
    const std::string resource = a.resource + "-" + std::to_string(id) + "-" + std::to_string(i);
    Event invoke = base(EventType::invoke, id, resource);
    history.add(invoke);
    LeaseOptions opts;
    opts.acquire.ttl = milliseconds{a.ttl};
    opts.acquire.wait = milliseconds{a.wait};
    // Runs on the client's loop: one line to the history, nothing more.
    opts.on_lost = [&history, id, resource](const Error& why) {
      Event lost;
      lost.type = EventType::lost;
      lost.client = id;
      lost.t = monotonic_ns();
      lost.resource = resource;
      lost.error = why.to_string();
      history.add(lost);
    };
    auto lease = client.lock(resource, std::move(opts));
    const std::int64_t latency_us = (monotonic_ns() - invoke.t) / 1000;
    if (!lease) {
      Event fail = base(EventType::fail, id, resource);
      fail.latency_us = latency_us;
      fail.code = std::string(errc_name(lease.error().code));
      fail.error = lease.error().message;
      history.add(fail);
      continue;
    }
    Event ok = base(EventType::ok, id, resource);
    ok.token = lease->token();
    ok.deadline = std::chrono::duration_cast<std::chrono::nanoseconds>(lease->deadline().time_since_epoch())
                      .count();
    ok.latency_us = latency_us;
    history.add(ok);
    leases.emplace_back(resource, std::move(*lease));
  }
  return leases;
}

// hold_leases takes a.leases leases and keeps them until the run's end, or
// with --lease-hold-ms for that long, then releases them and takes them
// anew, until the run's end.
void hold_leases(const Args& a, int id, Client& client, History& history, Stop& stop) {
  std::mt19937 rng(static_cast<unsigned>(id * 7919 + monotonic_ns()));
  std::uniform_int_distribution<long> hold(a.lease_hold_min, a.lease_hold_max);
  do {
    auto leases = take_leases(a, id, client, history, stop);
    if (a.lease_hold_max == 0) {
      stop.wait();
    } else {
      stop.wait_until(monotonic_ns() + hold(rng) * 1'000'000);
    }
    for (auto& [resource, lease] : leases) {
      Event rel = base(EventType::release, id, resource);
      auto released = lease.release();
      rel.released = released && released->released;
      history.add(rel);
    }
  } while (!stop.reached());
}

// Told — when on_deposed told a leadership it ended, and why; shared with
// the callback, which may outlive the campaign's call.
struct Told {
  std::mutex mu;
  std::condition_variable cv;
  std::int64_t t = 0;
  std::string why;
};

std::int64_t ns_of(BootClock::time_point t) {  // BootClock is CLOCK_BOOTTIME
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// lead_beats is one leadership: beats while leading() and the run goes on,
// then its end, deposed or resigned, in the history.
void lead_beats(const Args& a, int id, Leadership& lead, Told& told, FencedStore& store, History& history,
                const Stop& stop, std::mt19937& rng) {
  std::uniform_int_distribution<long> work(a.hold_min, a.hold_max);
  std::uniform_int_distribution<long> rest(a.rest_min, a.rest_max);
  const std::int64_t term = static_cast<std::int64_t>(lead.term());
  const std::string key = a.resource + ":beat";
  for (std::int64_t k = 1; !stop.reached(); ++k) {
    const std::int64_t checked = monotonic_ns();  // before the check: leading() was true after this
    if (!lead.leading()) break;
    std::this_thread::sleep_for(milliseconds{work(rng)});
    Event w = base(EventType::fenced, id, a.resource);
    w.term = term;
    w.beat = k;
    w.checked = checked;
    auto wrote = store.write(key, lead.term(), "term " + std::to_string(term) + " beat " + std::to_string(k));
    w.replied = monotonic_ns();
    if (wrote) {
      w.accepted = wrote->accepted;
      w.highest = static_cast<std::int64_t>(wrote->highest);
    } else {
      w.error = wrote.error().to_string();
    }
    history.add(w);
    if (wrote && !wrote->accepted) break;  // a newer term wrote: not the leader any more
    std::this_thread::sleep_for(milliseconds{rest(rng)});
  }
  const std::int64_t before_resign = monotonic_ns();
  if (lead.leading()) {
    Event r = base(EventType::resigned, id, a.resource);
    r.t = before_resign;
    r.term = term;
    r.deadline = ns_of(lead.lease().deadline());
    history.add(r);
    (void)lead.resign();
    return;
  }
  // Deposed: on_deposed runs on the loop thread as soon as it runs past the
  // deadline (or hears the lease lost); wait for it rather than guess.
  Event d = base(EventType::deposed, id, a.resource);
  {
    std::unique_lock<std::mutex> lock(told.mu);
    told.cv.wait_for(lock, std::chrono::seconds{5}, [&] { return told.t != 0; });
    d.t = told.t != 0 ? told.t : monotonic_ns();
    d.error = told.t != 0 ? told.why : "on_deposed not told within 5 s of the leadership's end";
  }
  d.term = term;
  d.deadline = ns_of(lead.lease().deadline());
  history.add(d);
}

// campaign_until_end runs for leader of a.resource until the run's end.
void campaign_until_end(const Args& a, int id, Client& client, History& history, const Stop& stop) {
  auto at = parse_node_url("redis://127.0.0.1:" + std::to_string(a.counter_port));
  if (!at) usage(at.error().to_string());
  auto store = FencedStore::connect(*at);
  if (!store) usage("fenced store: " + store.error().to_string());
  std::mt19937 rng(static_cast<unsigned>(id * 7919 + monotonic_ns()));
  while (!stop.reached()) {
    auto told = std::make_shared<Told>();
    CampaignOptions c;
    c.identity = "chaos-" + std::to_string(id);
    c.value = "client " + std::to_string(id);
    c.ttl = milliseconds{a.ttl};
    c.wait = milliseconds{std::max<std::int64_t>(1, (stop.until_ns() - monotonic_ns()) / 1'000'000)};
    c.cancel = stop.token();
    c.on_deposed = [told](const Error& why) {
      const std::int64_t t = monotonic_ns();
      {
        std::lock_guard<std::mutex> lock(told->mu);
        told->t = t;
        told->why = why.to_string();
      }
      told->cv.notify_all();
    };
    auto lead = client.campaign(a.resource, std::move(c));
    if (!lead) {
      const Errc code = lead.error().code;
      if (code == Errc::invalid_argument || code == Errc::config) usage("campaign: " + lead.error().to_string());
      continue;  // the wait ran out (the run's end), cancelled, or a round failed: again while the run goes on
    }
    Event e = base(EventType::elected, id, a.resource);
    e.term = static_cast<std::int64_t>(lead->term());
    e.deadline = ns_of(lead->lease().deadline());
    history.add(e);
    lead_beats(a, id, *lead, *told, **store, history, stop, rng);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  Stop stop(a.until_ns);
  auto nodes = parse_node_list(a.nodes);
  if (!nodes) usage(nodes.error().to_string());
  Config config;
  config.nodes = *nodes;
  config.tls.ca_file = a.tls_ca;
  config.options.quarantine = a.quarantine;
  config.options.wake_ups = !a.polling;  // --polling: retry every retry_delay, no release notifications
  config.options.max_ttl = milliseconds{a.max_ttl};
  config.options.default_ttl = milliseconds{a.ttl};
  config.options.node_timeout = milliseconds{a.node_timeout};
  config.options.stall_timeout = a.stall_timeout > 0 ? milliseconds{a.stall_timeout}
                                                    : std::max(config.options.stall_timeout, 4 * config.options.node_timeout);
  auto client = Client::create(config);
  if (!client) usage(client.error().to_string());
  History history(a.history);
  if (a.election) {
    campaign_until_end(a, a.client, **client, history, stop);
    return 0;
  }
  if (a.leases > 0) {
    hold_leases(a, a.client, **client, history, stop);
    return 0;
  }
  if (a.threads <= 1) {
    run_client(a, a.client, **client, history, stop);
    return 0;
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < a.threads; ++t) {
    threads.emplace_back([&, t] { run_client(a, (a.client + 1) * 100 + t, **client, history, stop); });
  }
  for (auto& t : threads) t.join();
  return 0;
}
