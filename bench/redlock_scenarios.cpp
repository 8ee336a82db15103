// redlock_scenarios.cpp — the scenarios of redlock_bench (what each one
// measures, and the settings, are in the header of redlock_bench.cpp). All of
// them run on the caller's uv loop with redlock::AsyncClient; callbacks never
// run on the caller's stack, so chains of acquire → release need no
// trampolines.
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "redlock/redlock.hpp"

namespace redlock_bench {

// Shared with redlock_bench.cpp (declared there the same way).
using Metrics = std::map<std::string, double>;
[[noreturn]] void die(int code, const std::string& message);

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
constexpr int memory_in_flight = 256;  // memory: acquires / releases in flight at once

struct Run {
  long long ops = 0, errors = 0;
  double seconds = 0;
  std::vector<long long> samples;  // µs
  std::optional<double> cpu_us_per_op, bytes_per_lock, failed_attempts_per_handoff;
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
    s_.client->acquire(resource_, acquire_opts(lock_ttl), [this](Result<Lock> r) {
      if (!r) {
        note_error(*s_.run, "acquire: " + r.error().to_string());
        return next();
      }
      s_.client->release(resource_, std::move(r->token), [this](Result<ReleaseResult> rr) {
        if (std::string why = release_problem(rr); !why.empty()) {
          note_error(*s_.run, "release: " + why);
        } else {
          s_.run->samples.push_back(micros_since(t0_));
          ++s_.run->ops;
        }
        next();
      });
    });
  }

 private:
  ChainRun& s_;
  std::string resource_;
  clk::time_point t0_{};
};

Run measure_chains(uv_loop_t* loop, AsyncClient& client, const std::string& base, long chains, double seconds,
                   bool measure_cpu) {
  Run run;
  run.samples.reserve(static_cast<std::size_t>(std::min(seconds * 100000, 1e7)));
  ChainRun shared{&client, &run, {}, chains, false};
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

class Handoff {
 public:
  Handoff(uv_loop_t* loop, AsyncClient& holder, AsyncClient& waiter, std::string resource, Run& run)
      : holder_(holder), waiter_(waiter), resource_(std::move(resource)), run_(run), rng_(std::random_device{}()) {
    uv_timer_init(loop, &timer_);
    timer_.data = this;
  }

  void start(clk::time_point deadline) {
    deadline_ = deadline;
    cycle();
  }
  bool done() const { return done_; }
  long long failed_attempts() const { return failed_attempts_; }

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

  void cycle() {
    if (clk::now() >= deadline_) {
      done_ = true;
      return;
    }
    holder_.acquire(resource_, acquire_opts(lock_ttl), [this](Result<Lock> r) {
      if (!r) {
        note_error(run_, "holder acquire: " + r.error().to_string());
        return after(milliseconds{10}, &Handoff::cycle);
      }
      holder_token_ = std::move(r->token);
      released_ = waited_ = false;
      waiter_lock_.reset();
      waiter_.acquire(resource_, acquire_opts(lock_ttl, handoff_wait), [this](Result<Lock> w) {
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

  void release_holder() {
    holder_.release(resource_, holder_token_, [this](Result<ReleaseResult> rr) {
      released_at_ = clk::now();
      released_ = true;
      if (std::string why = release_problem(rr); !why.empty()) note_error(run_, "holder release: " + why);
      if (waited_) record();
    });
  }

  void record() {
    if (!waiter_lock_) return after(milliseconds{0}, &Handoff::cycle);
    const auto gap = std::chrono::duration_cast<std::chrono::microseconds>(waiter_at_ - released_at_).count();
    run_.samples.push_back(std::max<long long>(gap, 0));
    ++run_.ops;
    failed_attempts_ += waiter_lock_->attempts - 1;
    waiter_.release(resource_, waiter_lock_->token, [this](Result<ReleaseResult> rr) {
      if (std::string why = release_problem(rr); !why.empty()) note_error(run_, "waiter release: " + why);
      cycle();
    });
  }

  AsyncClient& holder_;
  AsyncClient& waiter_;
  std::string resource_;
  Run& run_;
  std::mt19937 rng_;
  uv_timer_t timer_;
  void (Handoff::*then_)() = nullptr;
  clk::time_point deadline_{}, released_at_{}, waiter_at_{};
  std::string holder_token_;
  std::optional<Lock> waiter_lock_;
  bool released_ = false, waited_ = false, done_ = false;
  long long failed_attempts_ = 0;
};

Run measure_handoff(uv_loop_t* loop, AsyncClient& holder, AsyncClient& waiter, const std::string& resource,
                    double seconds) {
  Run run;
  Handoff h(loop, holder, waiter, resource, run);
  const clk::time_point t0 = clk::now();
  h.start(t0 + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds)));
  while (!h.done()) uv_run(loop, UV_RUN_ONCE);
  run.seconds = std::chrono::duration<double>(clk::now() - t0).count();
  if (run.ops > 0) {
    run.failed_attempts_per_handoff = static_cast<double>(h.failed_attempts()) / static_cast<double>(run.ops);
  }
  h.close_timer();
  uv_run(loop, UV_RUN_NOWAIT);
  return run;
}

// ---------------------------------------------------------------------------
// handoff-crowd: W waiters of this process, each an acquire with wait on the
// ONE resource that every process of the crowd shares; a waiter that gets it
// holds it uniform 1–5 ms, releases, and waits again. Each acquisition is an
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
};

class Crowd {
 public:
  Crowd(uv_loop_t* loop, AsyncClient& client, std::string resource, int waiters, Run& run)
      : client_(client), resource_(std::move(resource)), run_(run), rng_(std::random_device{}()),
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
    w.now = {w.id, wait_started, 0, 0, 0};
    w.cancel = std::stop_source();
    w.waiting = true;
    redlock::AcquireOptions o = acquire_opts(lock_ttl, crowd_wait);
    o.cancel = w.cancel.get_token();
    client_.acquire(resource_, std::move(o), [this, &w](Result<Lock> r) {
      w.waiting = false;
      if (!r) {
        if (r.error().code == redlock::Errc::cancelled) {
          open_.push_back({w.id, w.now.wait_started, steady_ns(), 0, 0});
          return finish();
        }
        note_error(run_, "waiter " + std::to_string(w.id) + " acquire: " + r.error().to_string());
        if (stopping_) return finish();
        return wait(w, w.now.wait_started);  // the same wait goes on
      }
      w.now.acquired = steady_ns();
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
// memory: hold N locks at once.

class Memory {
 public:
  Memory(AsyncClient& client, std::string base, long n, Run& run)
      : client_(client), base_(std::move(base)), n_(n), run_(run) {
    locks_.reserve(static_cast<std::size_t>(n));
    run_.samples.assign(static_cast<std::size_t>(n), 0);  // touched now: not part of the delta
  }

  void acquire_all(uv_loop_t* loop) {
    done_ = false;
    next_ = 0;
    fill_acquire();
    run_until(loop, done_);
    run_.samples.resize(static_cast<std::size_t>(run_.ops));
  }

  void release_all(uv_loop_t* loop) {
    done_ = false;
    next_ = 0;
    fill_release();
    run_until(loop, done_);
  }

  const std::vector<Lock>& locks() const { return locks_; }

 private:
  void fill_acquire() {
    while (in_flight_ < memory_in_flight && next_ < n_) {
      ++in_flight_;
      const clk::time_point t0 = clk::now();
      client_.acquire(base_ + "-" + std::to_string(next_++), acquire_opts(memory_ttl), [this, t0](Result<Lock> r) {
        if (r) {
          run_.samples[static_cast<std::size_t>(run_.ops++)] = micros_since(t0);
          locks_.push_back(std::move(*r));
        } else {
          note_error(run_, "acquire: " + r.error().to_string());
        }
        --in_flight_;
        if (next_ == n_ && in_flight_ == 0) done_ = true;
        fill_acquire();
      });
    }
  }

  void fill_release() {
    const long total = static_cast<long>(locks_.size());
    while (in_flight_ < memory_in_flight && next_ < total) {
      ++in_flight_;
      const Lock& lock = locks_[static_cast<std::size_t>(next_++)];
      client_.release(lock.resource, lock.token, [this, total](Result<ReleaseResult> rr) {
        if (std::string why = release_problem(rr); !why.empty()) note_error(run_, "release: " + why);
        --in_flight_;
        if (next_ == total && in_flight_ == 0) done_ = true;
        fill_release();
      });
    }
    if (total == 0) done_ = true;
  }

  AsyncClient& client_;
  std::string base_;
  long n_;
  Run& run_;
  std::vector<Lock> locks_;
  long next_ = 0, in_flight_ = 0;
  bool done_ = false;
};

// write_crowd_events writes the events file of bench/CONTRACT.md (handoff-crowd).
void write_crowd_events(const std::string& path, const Crowd& crowd, int waiters, long long errors) {
  std::ofstream f(path);
  f << "crowd redlock " << getpid() << ' ' << waiters << ' ' << crowd.start_ns() << ' ' << crowd.stop_ns() << ' '
    << errors << '\n';
  for (const CrowdEvent& e : crowd.events()) {
    f << "acq " << e.waiter << ' ' << e.wait_started << ' ' << e.acquired << ' ' << e.release_started << ' '
      << e.released << '\n';
  }
  for (const CrowdEvent& e : crowd.open_waits()) f << "open " << e.waiter << ' ' << e.wait_started << ' ' << e.acquired << '\n';
  f.flush();
  if (!f) die(1, "cannot write " + path);
}

Run measure_crowd(uv_loop_t* loop, AsyncClient& client, const std::string& resource, int waiters, double seconds,
                  const std::string& events_path) {
  Run run;
  Crowd crowd(loop, client, resource, waiters, run);
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

Run measure_memory(uv_loop_t* loop, AsyncClient& client, const std::string& base, long n) {
  Run run;
  Memory m(client, base, n, run);
  settle(loop, milliseconds{50});
  const long before = resident_bytes();
  const clk::time_point t0 = clk::now();
  m.acquire_all(loop);
  run.seconds = std::chrono::duration<double>(clk::now() - t0).count();
  settle(loop, milliseconds{100});
  const long after = resident_bytes();
  if (!m.locks().empty() && !m.locks().front().valid()) note_error(run, "the first lock expired before RSS was read");
  if (run.ops > 0) run.bytes_per_lock = static_cast<double>(after - before) / static_cast<double>(run.ops);
  std::fprintf(stderr, "redlock_bench: memory: RSS %ld -> %ld bytes for %lld locks\n", before, after, run.ops);
  m.release_all(loop);
  return run;
}

Metrics finish(Run&& run, std::vector<long long>& samples) {
  Metrics m{
      {"ops", static_cast<double>(run.ops)}, {"seconds", run.seconds}, {"errors", static_cast<double>(run.errors)}};
  if (run.cpu_us_per_op) m["cpu_us_per_op"] = *run.cpu_us_per_op;
  if (run.bytes_per_lock) m["bytes_per_lock"] = *run.bytes_per_lock;
  if (run.failed_attempts_per_handoff) m["failed_attempts_per_handoff"] = *run.failed_attempts_per_handoff;
  samples = std::move(run.samples);
  return m;
}

}  // namespace

std::string check_masters(uv_loop_t* loop, AsyncClient& client, const std::string& resource) {
  Warmup warmup(client, resource);
  return warmup.run(loop);
}

Metrics run_latency(uv_loop_t* loop, AsyncClient& client, const std::string& base, double seconds,
                    std::vector<long long>& samples) {
  return finish(measure_chains(loop, client, base, 1, seconds, false), samples);
}

Metrics run_throughput(uv_loop_t* loop, AsyncClient& client, const std::string& base, long concurrency, double seconds,
                       std::vector<long long>& samples) {
  return finish(measure_chains(loop, client, base, concurrency, seconds, true), samples);
}

Metrics run_handoff(uv_loop_t* loop, AsyncClient& holder, AsyncClient& waiter, const std::string& resource,
                    double seconds, std::vector<long long>& samples) {
  return finish(measure_handoff(loop, holder, waiter, resource, seconds), samples);
}

Metrics run_memory(uv_loop_t* loop, AsyncClient& client, const std::string& base, long locks,
                   std::vector<long long>& samples) {
  return finish(measure_memory(loop, client, base, locks), samples);
}

Metrics run_handoff_crowd(uv_loop_t* loop, AsyncClient& client, const std::string& resource, int waiters,
                          double seconds, const std::string& events_path, std::vector<long long>& samples) {
  return finish(measure_crowd(loop, client, resource, waiters, seconds, events_path), samples);
}

}  // namespace redlock_bench
