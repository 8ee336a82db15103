// redlock_scenarios.cpp — the scenarios of redlock_bench (what each one
// measures, and the settings, are in the header of redlock_bench.cpp). All of
// them run on the caller's uv loop with redlock::AsyncClient; callbacks never
// run on the caller's stack, so chains of acquire → release need no
// trampolines.
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "master_stats.hpp"
#include "redlock/redlock.hpp"
#include "redlock_bench.hpp"

namespace redlock_bench {

namespace {

using clk = std::chrono::steady_clock;
using redlock::AsyncClient;
using redlock::Lock;
using redlock::ReleaseResult;
using redlock::Result;
using std::chrono::milliseconds;

constexpr milliseconds lock_ttl{10000};     // CONTRACT.md: TTL 10000 ms unless the scenario says otherwise
constexpr milliseconds memory_ttl{60000};   // outlives the run; = Options::max_ttl (default), which must be >= it
constexpr milliseconds handoff_wait{5000};  // the waiter's AcquireOptions::wait
// handoff: the holder releases hold_min + uniform(0..hold_spread) after the
// waiter's acquire call: after its first round, at a random phase of its
// retry cycle (retry_delay + retry_jitter = 50 + 0..50 ms by default).
constexpr int handoff_hold_min_ms = 2, handoff_hold_spread_ms = 100;
constexpr int memory_in_flight = 256;  // memory, leases: acquires / releases in flight at once
constexpr milliseconds lease_ttl_max{30000};  // leases: TTL min(this, hold / 2)

struct Run {
  long long ops = 0, errors = 0;
  double seconds = 0;
  std::vector<long long> samples;  // µs
  std::optional<double> cpu_us_per_op, bytes_per_lock, failed_attempts_per_handoff, attempts_per_handoff;
  Metrics extra;  // the scenario's own fields (leases)
};

long long micros_since(clk::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(clk::now() - t0).count();
}

redlock::AcquireOptions acquire_opts(milliseconds ttl, milliseconds wait = milliseconds{0}) {
  redlock::AcquireOptions o;
  o.ttl = ttl;
  o.wait = wait;
  return o;
}

// note_error counts an error and shows the first few on stderr.
void note_error(Run& run, const std::string& what) {
  if (++run.errors <= 5) std::fprintf(stderr, "redlock_bench: error: %s\n", what.c_str());
}

// release_problem says why a release failed, or returns "" if it released.
std::string release_problem(const Result<ReleaseResult>& rr) {
  if (!rr) return rr.error().to_string();
  if (rr->released) return {};
  std::string why = "not released (" + std::to_string(rr->released_nodes) + " nodes)";
  for (const auto& n : rr->nodes) {
    if (n.outcome != redlock::Outcome::ok)
      why += "; " + n.address + " " + std::string(redlock::outcome_name(n.outcome)) +
             (n.error.empty() ? "" : ": " + n.error);
  }
  return why;
}

// run_until runs the loop until `done` is set.
void run_until(uv_loop_t* loop, const bool& done) {
  while (!done) {
    if (uv_run(loop, UV_RUN_ONCE) == 0 && !done) die(1, "internal: the loop ran out of work");
  }
}

// heap_bytes: the bytes malloc has handed out and not been given back (in
// its arena and in mmapped blocks).
long heap_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<long>(m.uordblks + m.hblkhd);
}

long resident_bytes() {
  long size = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr || std::fscanf(f, "%ld %ld", &size, &resident) != 2) die(1, "cannot read /proc/self/statm");
  std::fclose(f);
  return resident * sysconf(_SC_PAGESIZE);
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// ---------------------------------------------------------------------------
// Warm-up: the connectivity check and a few pairs before any measurement.

class Warmup {
 public:
  Warmup(AsyncClient& client, std::string resource) : client_(client), resource_(std::move(resource)) {}

  // run returns an empty string, or why no majority of the masters answers.
  std::string run(uv_loop_t* loop) {
    uv_timer_init(loop, &timer_);
    timer_.data = this;
    give_up_ = clk::now() + milliseconds{3000};
    attempt();
    run_until(loop, done_);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
    uv_run(loop, UV_RUN_NOWAIT);
    return why_;
  }

 private:
  // A majority is enough: the degraded scenarios start with masters paused
  // or slow, exactly what the library must cope with.
  void attempt() {
    client_.acquire(resource_, acquire_opts(lock_ttl), [this](Result<Lock> r) {
      if (!r) return retry_or_fail(r.error().to_string());
      client_.release(resource_, r->token, [this](Result<ReleaseResult> rr) {
        if (!rr) return retry_or_fail(rr.error().to_string());
        if (!rr->released) return retry_or_fail("the warm-up lock was not released");
        if (++pairs_ < 101) return attempt();  // 1 check + 100 warm-up pairs
        done_ = true;
      });
    });
  }

  void retry_or_fail(std::string why) {
    if (clk::now() >= give_up_) {
      why_ = "no majority of the masters answers: " + why;
      done_ = true;
      return;
    }
    pairs_ = 0;
    uv_timer_start(  // masters may still be starting: try again in 50 ms
        &timer_, [](uv_timer_t* t) { static_cast<Warmup*>(t->data)->attempt(); }, 50, 0);
  }

  AsyncClient& client_;
  std::string resource_;
  uv_timer_t timer_;
  clk::time_point give_up_{};
  int pairs_ = 0;
  bool done_ = false;
  std::string why_;
};

// ---------------------------------------------------------------------------
// latency and throughput: chains of acquire → release on their own resource.

struct ChainRun {
  AsyncClient* client;
  Run* run;
  clk::time_point deadline;
  long active = 0;
  bool done = false;
  std::uint32_t permits = 0;  // a semaphore's (latency --permits)
  bool shared = false;        // read locks (latency --shared)
};

class Chain {
 public:
  Chain(ChainRun& shared, std::string resource) : s_(shared), resource_(std::move(resource)) {}

  void next() {
    if (clk::now() >= s_.deadline) {
      if (--s_.active == 0) s_.done = true;
      return;
    }
    t0_ = clk::now();
    redlock::AcquireOptions o = acquire_opts(lock_ttl);
    o.permits = s_.permits;
    o.shared = s_.shared;
    s_.client->acquire(resource_, std::move(o), [this](Result<Lock> r) {
      if (!r) {
        note_error(*s_.run, "acquire: " + r.error().to_string());
        return next();
      }
      auto released = [this](Result<ReleaseResult> rr) {
        if (std::string why = release_problem(rr); !why.empty()) {
          note_error(*s_.run, "release: " + why);
        } else {
          s_.run->samples.push_back(micros_since(t0_));
          ++s_.run->ops;
        }
        next();
      };
      if (r->permit || r->shared) return s_.client->release(*r, std::move(released));  // the permit's key, the reader's entry
      s_.client->release(resource_, std::move(r->token), std::move(released));
    });
  }

 private:
  ChainRun& s_;
  std::string resource_;
  clk::time_point t0_{};
};

Run measure_chains(uv_loop_t* loop, AsyncClient& client, const std::string& base, long chains, double seconds,
                   bool measure_cpu, std::uint32_t permits = 0, bool read = false) {
  Run run;
  run.samples.reserve(static_cast<std::size_t>(std::min(seconds * 100000, 1e7)));
  ChainRun shared{&client, &run, {}, chains, false, permits, read};
  std::vector<std::unique_ptr<Chain>> all;
  for (long i = 0; i < chains; ++i) {
    all.push_back(std::make_unique<Chain>(shared, chains == 1 ? base : base + "-" + std::to_string(i)));
  }
  const double cpu0 = cpu_seconds();
  const clk::time_point t0 = clk::now();
  shared.deadline = t0 + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
  for (auto& c : all) c->next();
  run_until(loop, shared.done);
  run.seconds = std::chrono::duration<double>(clk::now() - t0).count();
  if (measure_cpu && run.ops > 0) run.cpu_us_per_op = (cpu_seconds() - cpu0) * 1e6 / static_cast<double>(run.ops);
  return run;
}

// ---------------------------------------------------------------------------
// handoff: a holder and a waiter on one resource.

// With permits P > 0 the resource is a semaphore of P permits: the holder
// takes all P, the waiter waits for one, the holder gives back one (the
// handoff between permits), and the rest after the waiter's turn.
class Handoff {
 public:
  Handoff(uv_loop_t* loop, AsyncClient& holder, AsyncClient& waiter, std::string resource, std::uint32_t permits,
          Run& run)
      : holder_(holder),
        waiter_(waiter),
        resource_(std::move(resource)),
        permits_(permits),
        run_(run),
        rng_(std::random_device{}()) {
    uv_timer_init(loop, &timer_);
    timer_.data = this;
  }

  void start(clk::time_point deadline) {
    deadline_ = deadline;
    cycle();
  }
  bool done() const { return done_; }
  long long failed_attempts() const { return failed_attempts_; }
  long long attempts() const { return attempts_; }
  // from_call: each handoff timed from the holder's release call (µs).
  std::vector<long long>& from_call() { return from_call_; }

  // close_timer closes our one handle; the loop must run afterwards.
  void close_timer() { uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr); }

 private:
  void after(milliseconds delay, void (Handoff::*what)()) {
    then_ = what;
    uv_timer_start(
        &timer_,
        [](uv_timer_t* t) {
          auto* self = static_cast<Handoff*>(t->data);
          (self->*self->then_)();
        },
        static_cast<std::uint64_t>(delay.count()), 0);
  }

  redlock::AcquireOptions opts(milliseconds wait = milliseconds{0}) const {
    redlock::AcquireOptions o = acquire_opts(lock_ttl, wait);
    o.permits = permits_;
    return o;
  }

  void cycle() {
    if (clk::now() >= deadline_) {
      done_ = true;
      return;
    }
    take();
  }

  // take: the holder's next lock (or permit: it takes every one of them),
  // then the waiter comes.
  void take() {
    holder_.acquire(resource_, opts(), [this](Result<Lock> r) {
      if (!r) {
        note_error(run_, "holder acquire: " + r.error().to_string());
        return release_rest(&Handoff::retry_cycle);
      }
      held_.push_back(std::move(*r));
      if (held_.size() < std::max<std::uint32_t>(permits_, 1)) return take();
      released_ = waited_ = false;
      waiter_lock_.reset();
      waiter_.acquire(resource_, opts(handoff_wait), [this](Result<Lock> w) {
        waiter_at_ = clk::now();
        waited_ = true;
        if (w) {
          waiter_lock_ = std::move(*w);
        } else {
          note_error(run_, "waiter acquire: " + w.error().to_string());
        }
        if (released_) record();
      });
      const int hold = handoff_hold_min_ms + std::uniform_int_distribution<int>(0, handoff_hold_spread_ms)(rng_);
      after(milliseconds{hold}, &Handoff::release_holder);
    });
  }

  void retry_cycle() { after(milliseconds{10}, &Handoff::cycle); }

  // release_rest gives back what the holder still holds, then `then`.
  void release_rest(void (Handoff::*then)()) {
    if (held_.empty()) return (this->*then)();
    const Lock lock = std::move(held_.back());
    held_.pop_back();
    holder_.release(lock, [this, then](Result<ReleaseResult> rr) {
      if (std::string why = release_problem(rr); !why.empty()) note_error(run_, "holder release: " + why);
      release_rest(then);
    });
  }

  void release_holder() {
    release_called_at_ = clk::now();
    const Lock lock = std::move(held_.front());
    held_.erase(held_.begin());
    holder_.release(lock, [this](Result<ReleaseResult> rr) {
      released_at_ = clk::now();
      released_ = true;
      if (std::string why = release_problem(rr); !why.empty()) note_error(run_, "holder release: " + why);
      if (waited_) record();
    });
  }

  void record() {
    if (!waiter_lock_) return release_rest(&Handoff::cycle);
    const auto gap = std::chrono::duration_cast<std::chrono::microseconds>(waiter_at_ - released_at_).count();
    run_.samples.push_back(std::max<long long>(gap, 0));
    from_call_.push_back(
        std::chrono::duration_cast<std::chrono::microseconds>(waiter_at_ - release_called_at_).count());
    ++run_.ops;
    // The waiter's first attempt finds the lock held (it starts while the
    // holder holds it): that is where its wait begins. Failed attempts are
    // the ones after it that did not take the lock (bench/CONTRACT.md).
    attempts_ += waiter_lock_->attempts;
    failed_attempts_ += std::max(waiter_lock_->attempts - 2, 0);
    waiter_.release(*waiter_lock_, [this](Result<ReleaseResult> rr) {
      if (std::string why = release_problem(rr); !why.empty()) note_error(run_, "waiter release: " + why);
      release_rest(&Handoff::cycle);
    });
  }

  AsyncClient& holder_;
  AsyncClient& waiter_;
  std::string resource_;
  std::uint32_t permits_;
  Run& run_;
  std::mt19937 rng_;
  uv_timer_t timer_;
  void (Handoff::*then_)() = nullptr;
  clk::time_point deadline_{}, released_at_{}, release_called_at_{}, waiter_at_{};
  std::vector<long long> from_call_;
  std::vector<Lock> held_;  // the holder's lock, or its permits
  std::optional<Lock> waiter_lock_;
  bool released_ = false, waited_ = false, done_ = false;
  long long failed_attempts_ = 0, attempts_ = 0;
};

Run measure_handoff(uv_loop_t* loop, AsyncClient& holder, AsyncClient& waiter, const std::string& resource,
                    std::uint32_t permits, double seconds) {
  Run run;
  Handoff h(loop, holder, waiter, resource, permits, run);
  const clk::time_point t0 = clk::now();
  h.start(t0 + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds)));
  while (!h.done()) uv_run(loop, UV_RUN_ONCE);
  run.seconds = std::chrono::duration<double>(clk::now() - t0).count();
  if (run.ops > 0) {
    run.failed_attempts_per_handoff = static_cast<double>(h.failed_attempts()) / static_cast<double>(run.ops);
    run.attempts_per_handoff = static_cast<double>(h.attempts()) / static_cast<double>(run.ops);
    std::vector<long long>& from_call = h.from_call();
    std::sort(from_call.begin(), from_call.end());
    run.extra["from_release_call_p50_us"] = static_cast<double>(nearest_rank(from_call, 50));
    run.extra["from_release_call_p99_us"] = static_cast<double>(nearest_rank(from_call, 99));
  }
  h.close_timer();
  uv_run(loop, UV_RUN_NOWAIT);
  return run;
}

// ---------------------------------------------------------------------------
// handoff-crowd: W waiters of this process, each an acquire with wait on the
// ONE resource that every process of the crowd shares; a waiter that gets it
// holds it uniform 1–5 ms, releases, and waits again (fair: every acquire
// with AcquireOptions::fair, so the crowd queues). Each acquisition is an
// event (steady_clock ns, which is CLOCK_MONOTONIC on Linux and so shared by
// every process of the machine); bench_crowd_merge merges the processes'
// events into handoffs.

constexpr int crowd_hold_min_ms = 1, crowd_hold_max_ms = 5;
// A waiter's AcquireOptions::wait: longer than any wait in the crowd is
// expected to be; an acquire that still times out is an error and waits again.
constexpr milliseconds crowd_wait{30000};

long long steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clk::now().time_since_epoch()).count();
}

struct CrowdEvent {
  int waiter;
  long long wait_started, acquired, release_started, released;  // steady_clock ns
  int attempts = 0;  // the acquire's (Lock::attempts)
};

class Crowd {
 public:
  Crowd(uv_loop_t* loop, AsyncClient& client, std::string resource, int waiters, bool fair, Run& run)
      : client_(client), resource_(std::move(resource)), fair_(fair), run_(run), rng_(std::random_device{}()),
        waiters_(static_cast<std::size_t>(waiters)) {
    for (std::size_t i = 0; i < waiters_.size(); ++i) {
      Waiter& w = waiters_[i];
      uv_timer_init(loop, &w.hold);
      w.hold.data = &w;
      w.crowd = this;
      w.id = static_cast<int>(i);
    }
    uv_timer_init(loop, &stop_timer_);
    stop_timer_.data = this;
  }

  void start(double seconds) {
    start_ns_ = steady_ns();
    active_ = waiters_.size();
    uv_timer_start(
        &stop_timer_, [](uv_timer_t* t) { static_cast<Crowd*>(t->data)->stop(); },
        static_cast<std::uint64_t>(std::llround(seconds * 1000)), 0);
    for (auto& w : waiters_) wait(w, steady_ns());
  }
  bool done() const { return active_ == 0; }
  long long start_ns() const { return start_ns_; }
  long long stop_ns() const { return stop_ns_; }
  const std::vector<CrowdEvent>& events() const { return events_; }
  // open_waits: (waiter, wait_started, cancelled at) of the waits the stop cut short.
  const std::vector<CrowdEvent>& open_waits() const { return open_; }

  // close_timers closes our handles; the loop must run afterwards.
  void close_timers() {
    for (auto& w : waiters_) uv_close(reinterpret_cast<uv_handle_t*>(&w.hold), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&stop_timer_), nullptr);
  }

 private:
  struct Waiter {
    Crowd* crowd = nullptr;
    int id = 0;
    uv_timer_t hold;
    std::stop_source cancel;
    bool waiting = false;
    std::string token;
    CrowdEvent now{};
  };

  void wait(Waiter& w, long long wait_started) {
    w.now = {w.id, wait_started, 0, 0, 0, 0};
    w.cancel = std::stop_source();
    w.waiting = true;
    redlock::AcquireOptions o = acquire_opts(lock_ttl, crowd_wait);
    o.cancel = w.cancel.get_token();
    o.fair = fair_;
    client_.acquire(resource_, std::move(o), [this, &w](Result<Lock> r) {
      w.waiting = false;
      if (!r) {
        if (r.error().code == redlock::Errc::cancelled) {
          open_.push_back({w.id, w.now.wait_started, steady_ns(), 0, 0, 0});
          return finish();
        }
        note_error(run_, "waiter " + std::to_string(w.id) + " acquire: " + r.error().to_string());
        if (stopping_) return finish();
        return wait(w, w.now.wait_started);  // the same wait goes on
      }
      w.now.acquired = steady_ns();
      w.now.attempts = r->attempts;
      w.token = std::move(r->token);
      const int hold = std::uniform_int_distribution<int>(crowd_hold_min_ms, crowd_hold_max_ms)(rng_);
      uv_timer_start(
          &w.hold,
          [](uv_timer_t* t) {
            auto* waiter = static_cast<Waiter*>(t->data);
            waiter->crowd->release(*waiter);
          },
          static_cast<std::uint64_t>(hold), 0);
    });
  }

  void release(Waiter& w) {
    w.now.release_started = steady_ns();
    client_.release(resource_, w.token, [this, &w](Result<ReleaseResult> rr) {
      w.now.released = steady_ns();
      events_.push_back(w.now);
      ++run_.ops;
      run_.samples.push_back((w.now.acquired - w.now.wait_started) / 1000);
      if (std::string why = release_problem(rr); !why.empty()) {
        note_error(run_, "waiter " + std::to_string(w.id) + " release: " + why);
      }
      if (stopping_) return finish();
      wait(w, steady_ns());
    });
  }

  void stop() {
    stopping_ = true;
    stop_ns_ = steady_ns();
    for (auto& w : waiters_) {
      if (w.waiting) w.cancel.request_stop();
    }
  }

  void finish() { --active_; }

  AsyncClient& client_;
  std::string resource_;
  bool fair_;  // AcquireOptions::fair on every wait (handoff-crowd-K-fair)
  Run& run_;
  std::mt19937 rng_;
  std::vector<Waiter> waiters_;  // never resized: the timers point into it
  uv_timer_t stop_timer_;
  std::vector<CrowdEvent> events_, open_;
  std::size_t active_ = 0;
  bool stopping_ = false;
  long long start_ns_ = 0, stop_ns_ = 0;
};

// ---------------------------------------------------------------------------
// memory and leases: many operations, a bounded number in flight.

// Bounded runs start(i, done) for i in [0, n), at most memory_in_flight
// begun and not done at once; the i-th calls done() when it completed (on
// a later loop turn, as every AsyncClient callback). run returns when all
// have.
class Bounded {
 public:
  using Start = std::function<void(long, std::function<void()>)>;

  static void run(uv_loop_t* loop, long n, Start start) {
    Bounded b(n, std::move(start));
    b.fill();
    run_until(loop, b.done_);
  }

  // paced: the same, but the i-th operation starts no earlier than
  // i / n × `over` from now (an even pace; a 10 ms tick).
  static void paced(uv_loop_t* loop, long n, milliseconds over, Start start) {
    Bounded b(n, std::move(start));
    b.pace_ = over;
    b.began_ = clk::now();
    uv_timer_init(loop, &b.tick_);
    b.tick_.data = &b;
    uv_timer_start(
        &b.tick_, [](uv_timer_t* t) { static_cast<Bounded*>(t->data)->fill(); }, 0, 10);
    run_until(loop, b.done_);
    uv_close(reinterpret_cast<uv_handle_t*>(&b.tick_), nullptr);
    uv_run(loop, UV_RUN_NOWAIT);
  }

 private:
  Bounded(long n, Start start) : n_(n), start_(std::move(start)), done_(n == 0) {}

  // due: how many operations may have started by now.
  long due() const {
    if (pace_.count() <= 0) return n_;
    const double share = std::chrono::duration<double>(clk::now() - began_) / pace_;
    return std::min(n_, static_cast<long>(share * static_cast<double>(n_)) + 1);
  }

  void fill() {
    const long until = due();
    while (in_flight_ < memory_in_flight && next_ < until) {
      ++in_flight_;
      start_(next_++, [this] {
        --in_flight_;
        if (next_ == n_ && in_flight_ == 0) done_ = true;
        if (pace_.count() <= 0) fill();  // paced: the tick fills
      });
    }
  }

  long n_;
  Start start_;
  long next_ = 0, in_flight_ = 0;
  bool done_;
  milliseconds pace_{0};
  clk::time_point began_{};
  uv_timer_t tick_{};
};

// memory: hold N locks at once.
class Memory {
 public:
  Memory(AsyncClient& client, std::string base, long n, Run& run)
      : client_(client), base_(std::move(base)), n_(n), run_(run) {
    locks_.reserve(static_cast<std::size_t>(n));
    run_.samples.assign(static_cast<std::size_t>(n), 0);  // touched now: not part of the delta
  }

  void acquire_all(uv_loop_t* loop) {
    Bounded::run(loop, n_, [this](long i, std::function<void()> done) {
      const clk::time_point t0 = clk::now();
      client_.acquire(base_ + "-" + std::to_string(i), acquire_opts(memory_ttl),
                      [this, t0, done = std::move(done)](Result<Lock> r) {
                        if (r) {
                          run_.samples[static_cast<std::size_t>(run_.ops++)] = micros_since(t0);
                          locks_.push_back(std::move(*r));
                        } else {
                          note_error(run_, "acquire: " + r.error().to_string());
                        }
                        done();
                      });
    });
    run_.samples.resize(static_cast<std::size_t>(run_.ops));
  }

  void release_all(uv_loop_t* loop) {
    Bounded::run(loop, static_cast<long>(locks_.size()), [this](long i, std::function<void()> done) {
      const Lock& lock = locks_[static_cast<std::size_t>(i)];
      client_.release(lock.resource, lock.token, [this, done = std::move(done)](Result<ReleaseResult> rr) {
        if (std::string why = release_problem(rr); !why.empty()) note_error(run_, "release: " + why);
        done();
      });
    });
  }

  const std::vector<Lock>& locks() const { return locks_; }

 private:
  AsyncClient& client_;
  std::string base_;
  long n_;
  Run& run_;
  std::vector<Lock> locks_;
};

// write_crowd_events writes the events file of bench/CONTRACT.md (handoff-crowd).
void write_crowd_events(const std::string& path, const Crowd& crowd, int waiters, long long errors) {
  std::ofstream f(path);
  f << "crowd redlock " << getpid() << ' ' << waiters << ' ' << crowd.start_ns() << ' ' << crowd.stop_ns() << ' '
    << errors << '\n';
  for (const CrowdEvent& e : crowd.events()) {
    f << "acq " << e.waiter << ' ' << e.wait_started << ' ' << e.acquired << ' ' << e.release_started << ' '
      << e.released << ' ' << e.attempts << '\n';
  }
  for (const CrowdEvent& e : crowd.open_waits()) f << "open " << e.waiter << ' ' << e.wait_started << ' ' << e.acquired << '\n';
  f.flush();
  if (!f) die(1, "cannot write " + path);
}

Run measure_crowd(uv_loop_t* loop, AsyncClient& client, const std::string& resource, int waiters, bool fair,
                  double seconds, const std::string& events_path) {
  Run run;
  Crowd crowd(loop, client, resource, waiters, fair, run);
  const clk::time_point t0 = clk::now();
  crowd.start(seconds);
  while (!crowd.done()) {
    if (uv_run(loop, UV_RUN_ONCE) == 0 && !crowd.done()) die(1, "internal: the loop ran out of work");
  }
  run.seconds = std::chrono::duration<double>(clk::now() - t0).count();
  crowd.close_timers();
  uv_run(loop, UV_RUN_NOWAIT);
  write_crowd_events(events_path, crowd, waiters, run.errors);
  return run;
}

// settle runs the loop for `ms` so that late replies of decided rounds land.
void settle(uv_loop_t* loop, milliseconds ms) {
  uv_timer_t t;
  bool done = false;
  uv_timer_init(loop, &t);
  t.data = &done;
  uv_timer_start(
      &t, [](uv_timer_t* h) { *static_cast<bool*>(h->data) = true; }, static_cast<std::uint64_t>(ms.count()), 0);
  run_until(loop, done);
  uv_close(reinterpret_cast<uv_handle_t*>(&t), nullptr);
  uv_run(loop, UV_RUN_NOWAIT);
}

// measure_memory: before RSS is read, one wave of memory_in_flight locks
// on resources of their own is taken and released, so that the allocator
// already holds what that many acquisitions in flight use (about 1 MB: a
// constant, not a cost of each held lock, which would otherwise add
// 1 MB / N to bytes_per_lock and make it depend on N).
Run measure_memory(uv_loop_t* loop, AsyncClient& client, const std::string& base, long n) {
  Run run;
  {
    Run wave;
    Memory warm(client, base + "-wave", memory_in_flight, wave);
    warm.acquire_all(loop);
    warm.release_all(loop);
    if (wave.errors > 0) note_error(run, "the wave before the measurement failed");
  }
  Memory m(client, base, n, run);
  settle(loop, milliseconds{50});
  const long before = resident_bytes(), heap_before = heap_bytes();
  const clk::time_point t0 = clk::now();
  m.acquire_all(loop);
  run.seconds = std::chrono::duration<double>(clk::now() - t0).count();
  settle(loop, milliseconds{100});
  const long after = resident_bytes(), heap_after = heap_bytes();
  if (!m.locks().empty() && !m.locks().front().valid()) note_error(run, "the first lock expired before RSS was read");
  if (run.ops > 0) {
    run.bytes_per_lock = static_cast<double>(after - before) / static_cast<double>(run.ops);
    // Without the allocator's free chunks: each Lock (in the vector
    // reserved before, so not in the heap's growth) and what malloc handed
    // out for it and not got back (its strings' chunks).
    run.extra["heap_bytes_per_lock"] =
        static_cast<double>(sizeof(Lock)) + static_cast<double>(heap_after - heap_before) / static_cast<double>(run.ops);
  }
  std::fprintf(stderr, "redlock_bench: memory: RSS %ld -> %ld bytes, heap in use %ld -> %ld bytes for %lld locks\n",
               before, after, heap_before, heap_after, run.ops);
  m.release_all(loop);
  return run;
}

// ---------------------------------------------------------------------------
// leases: hold N leases while the library's watchdogs extend them.

// The commands the library's scripts call (src/scripts.hpp): commandstats
// counts them under their own names, so they are not client requests. The
// client sends SET (an acquire's first attempt) and GET (the vote check)
// itself too, but only with acquires, and none is taken during the hold.
const std::set<std::string> script_calls = {"get", "set", "pttl", "pexpire", "del", "publish", "time"};

// extend_latency_delta: the extensions' latency histogram of [s0, s1].
redlock::LatencyHistogram extend_latency_delta(const redlock::Stats& s0, const redlock::Stats& s1) {
  redlock::LatencyHistogram d;
  for (std::size_t i = 0; i < d.counts.size(); ++i) {
    d.counts[i] = s1.extend_latency.counts[i] - s0.extend_latency.counts[i];
    d.count += d.counts[i];
  }
  d.sum = s1.extend_latency.sum - s0.extend_latency.sum;
  return d;
}

std::uint64_t failed_rounds(const redlock::RoundCounts& c) { return c.held + c.no_quorum + c.too_late + c.other; }

// add_master_stats: the masters' commands and CPU between the runner's two
// snapshots, per lease-second (bench/master_stats.hpp).
void add_master_stats(Run& run, const std::string& before_path, const std::string& after_path, double lease_seconds) {
  bench::MasterStats before, after;
  for (auto [path, stats] : {std::pair{&before_path, &before}, {&after_path, &after}}) {
    if (std::string why = bench::read_master_stats(*path, *stats); !why.empty()) die(1, why);
  }
  if (before.masters != after.masters) die(1, "--stats-before and --stats-after name different numbers of masters");
  long long commands = 0, requests = 0;
  for (const auto& [name, d] : bench::command_deltas(before, after)) {
    commands += d;
    if (!script_calls.count(name)) requests += d;
    run.extra["cmd_" + name + "_per_lease_s"] = static_cast<double>(d) / lease_seconds;
  }
  run.extra["commands_per_lease_s"] = static_cast<double>(commands) / lease_seconds;
  run.extra["requests_per_lease_s"] = static_cast<double>(requests) / lease_seconds;
  run.extra["master_cpu_us_per_lease_s"] = (after.cpu_seconds - before.cpu_seconds) * 1e6 / lease_seconds;
}

// spread: the leases are taken at an even pace over one TTL, not at once,
// so their extensions fall due spread in time, as in a service that takes
// leases as its work arrives (few leases per batch window), not bunched
// (full rounds).
Run measure_leases(uv_loop_t* loop, AsyncClient& client, const std::string& base, long n, double hold, bool spread,
                   const std::string& gate, const std::string& stats_before, const std::string& stats_after) {
  Run run;
  const milliseconds ttl = std::min(lease_ttl_max, milliseconds{std::llround(hold * 500)});
  std::vector<redlock::AsyncLease> leases;
  leases.reserve(static_cast<std::size_t>(n));
  settle(loop, milliseconds{50});
  const long rss_before = resident_bytes();
  const long heap_before = heap_bytes();
  const clk::time_point taking = clk::now();
  auto take = [&](long i, std::function<void()> done) {
    redlock::LeaseOptions o;
    o.acquire.ttl = ttl;
    client.lock(base + "-lease-" + std::to_string(i), std::move(o),
                [&, done = std::move(done)](Result<redlock::AsyncLease> r) {
                  if (r) {
                    leases.push_back(std::move(*r));
                  } else {
                    note_error(run, "lock: " + r.error().to_string());
                  }
                  done();
                });
  };
  if (spread) {
    Bounded::paced(loop, n, ttl, take);
  } else {
    Bounded::run(loop, n, take);
  }
  const double take_seconds = std::chrono::duration<double>(clk::now() - taking).count();
  settle(loop, milliseconds{100});
  const long rss_after = resident_bytes();
  const long heap_after = heap_bytes();
  const auto held = static_cast<double>(leases.size());
  std::fprintf(stderr,
               "redlock_bench: leases: %zu taken in %.2f s%s (TTL %lld ms); RSS %ld -> %ld bytes; "
               "heap in use %ld -> %ld bytes\n",
               leases.size(), take_seconds, spread ? ", at an even pace over one TTL" : "",
               static_cast<long long>(ttl.count()), rss_before, rss_after, heap_before,
               heap_after);

  if (!gate.empty()) pass_gate(gate, "held");
  const redlock::Stats s0 = client.stats();
  const double cpu0 = cpu_seconds();
  const clk::time_point t0 = clk::now();
  settle(loop, milliseconds{std::llround(hold * 1000)});
  const redlock::Stats s1 = client.stats();
  run.seconds = std::chrono::duration<double>(clk::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  if (!gate.empty()) pass_gate(gate, "done");

  const double lease_seconds = held * run.seconds;
  run.ops = static_cast<long long>(s1.leases_extended - s0.leases_extended);
  run.extra["leases"] = held;
  run.extra["ttl_ms"] = static_cast<double>(ttl.count());
  run.extra["take_seconds"] = take_seconds;
  run.extra["leases_extended"] = static_cast<double>(run.ops);
  run.extra["extend_failures"] = static_cast<double>(failed_rounds(s1.extend_rounds) - failed_rounds(s0.extend_rounds));
  run.extra["leases_lost"] = static_cast<double>(s1.leases_lost);
  if (held > 0) {
    run.extra["bytes_per_lease"] = static_cast<double>(rss_after - rss_before) / held;
    // What malloc handed out and not taken back (its chunks, headers
    // included, and its mmapped blocks, the slabs of lease records among
    // them): what the leases use, without the free chunks between them.
    run.extra["heap_bytes_per_lease"] = static_cast<double>(heap_after - heap_before) / held;
    run.extra["cpu_us_per_lease_s"] = cpu * 1e6 / lease_seconds;
    if (!stats_before.empty()) add_master_stats(run, stats_before, stats_after, lease_seconds);
  }
  const redlock::LatencyHistogram latency = extend_latency_delta(s0, s1);
  if (latency.count > 0) {
    for (auto [name, q] : {std::pair{"p50_us", 0.5}, {"p90_us", 0.9}, {"p99_us", 0.99}, {"p999_us", 0.999}}) {
      run.extra[name] = static_cast<double>(latency.quantile(q).count());
    }
  }
  int shown = 0;
  for (const auto& lease : leases) {
    if (const auto lost = lease.lost(); lost && ++shown <= 5) {
      std::fprintf(stderr, "redlock_bench: LOST: %s\n", lost->to_string().c_str());
    }
  }

  Bounded::run(loop, static_cast<long>(leases.size()), [&](long i, std::function<void()> done) {
    leases[static_cast<std::size_t>(i)].release([&, done = std::move(done)](Result<ReleaseResult> rr) {
      if (std::string why = release_problem(rr); !why.empty()) note_error(run, "release: " + why);
      done();
    });
  });
  return run;
}

Metrics finish(Run&& run, std::vector<long long>& samples) {
  Metrics m{
      {"ops", static_cast<double>(run.ops)}, {"seconds", run.seconds}, {"errors", static_cast<double>(run.errors)}};
  if (run.cpu_us_per_op) m["cpu_us_per_op"] = *run.cpu_us_per_op;
  if (run.bytes_per_lock) m["bytes_per_lock"] = *run.bytes_per_lock;
  if (run.failed_attempts_per_handoff) m["failed_attempts_per_handoff"] = *run.failed_attempts_per_handoff;
  if (run.attempts_per_handoff) m["attempts_per_handoff"] = *run.attempts_per_handoff;
  m.merge(run.extra);
  samples = std::move(run.samples);
  return m;
}

}  // namespace

std::string check_masters(uv_loop_t* loop, AsyncClient& client, const std::string& resource) {
  Warmup warmup(client, resource);
  return warmup.run(loop);
}

Metrics run_latency(uv_loop_t* loop, AsyncClient& client, const std::string& base, double seconds,
                    std::uint32_t permits, bool shared, std::vector<long long>& samples) {
  return finish(measure_chains(loop, client, base, 1, seconds, false, permits, shared), samples);
}

Metrics run_throughput(uv_loop_t* loop, AsyncClient& client, const std::string& base, long concurrency, double seconds,
                       std::vector<long long>& samples) {
  return finish(measure_chains(loop, client, base, concurrency, seconds, true), samples);
}

Metrics run_handoff(uv_loop_t* loop, AsyncClient& holder, AsyncClient& waiter, const std::string& resource,
                    std::uint32_t permits, double seconds, std::vector<long long>& samples) {
  return finish(measure_handoff(loop, holder, waiter, resource, permits, seconds), samples);
}

Metrics run_memory(uv_loop_t* loop, AsyncClient& client, const std::string& base, long locks,
                   std::vector<long long>& samples) {
  return finish(measure_memory(loop, client, base, locks), samples);
}

Metrics run_handoff_crowd(uv_loop_t* loop, AsyncClient& client, const std::string& resource, int waiters,
                          bool fair, double seconds, const std::string& events_path, std::vector<long long>& samples) {
  return finish(measure_crowd(loop, client, resource, waiters, fair, seconds, events_path), samples);
}

Metrics run_leases(uv_loop_t* loop, AsyncClient& client, const std::string& base, long leases, double hold,
                   bool spread, const std::string& gate, const std::string& stats_before,
                   const std::string& stats_after, std::vector<long long>& samples) {
  return finish(measure_leases(loop, client, base, leases, hold, spread, gate, stats_before, stats_after), samples);
}

}  // namespace redlock_bench
