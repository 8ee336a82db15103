// test_runtime.hpp — Runtimes for unit tests.
//   SeededRuntime  the uv loop's time and timers, with jitter drawn from a
//                  fixed seed (the draws' sequence is the same on every run).
//   ManualRuntime  no loop at all: time moves only when the test calls
//                  advance(), which fires the timers due, in order.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime.hpp"
#include "uv_runtime.hpp"

namespace redlock::test {

using detail::Runtime;
using detail::TimePoint;

class SeededRuntime final : public Runtime {
 public:
  explicit SeededRuntime(uv_loop_t* loop) : inner_(loop) {}
  TimePoint now() override { return inner_.now(); }
  std::chrono::system_clock::time_point wall_now() override { return inner_.wall_now(); }
  std::unique_ptr<detail::Timer> timer(std::function<void()> fire) override { return inner_.timer(std::move(fire)); }
  std::unique_ptr<detail::Signal> signal(std::function<void()> fire) override { return inner_.signal(std::move(fire)); }
  Result<std::string> random_token() override { return inner_.random_token(); }
  std::uint64_t random_below(std::uint64_t bound) override { return bound == 0 ? 0 : rng_() % bound; }

 private:
  detail::UvRuntime inner_;
  std::mt19937_64 rng_{12};
};

class ManualRuntime final : public Runtime {
 public:
  // draw, when set, replaces the seeded generator of random_below.
  std::function<std::uint64_t(std::uint64_t)> draw;

  TimePoint now() override { return now_; }
  std::chrono::system_clock::time_point wall_now() override {
    return std::chrono::system_clock::time_point{} + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                         now_.time_since_epoch());
  }
  std::unique_ptr<detail::Timer> timer(std::function<void()> fire) override {
    return std::make_unique<ManualTimer>(*this, std::move(fire));
  }
  std::unique_ptr<detail::Signal> signal(std::function<void()> fire) override {
    return std::make_unique<ManualSignal>(timer(std::move(fire)));
  }
  // random_token: 32 hex digits, a counter (distinct, reproducible).
  Result<std::string> random_token() override {
    char text[33];
    std::snprintf(text, sizeof text, "%032llx", static_cast<unsigned long long>(++tokens_));
    return std::string(text);
  }
  std::uint64_t random_below(std::uint64_t bound) override {
    if (bound == 0) return 0;
    return draw ? draw(bound) : rng_() % bound;
  }

  // advance moves time forward by `by`, firing every timer due by then in
  // order of due time (then of arming); time stands at each one's due time
  // while it fires. advance(0) fires what is due now (a 0 ms start).
  void advance(std::chrono::milliseconds by) {
    const TimePoint until = now_ + by;
    for (;;) {
      ManualTimer* next = nullptr;
      for (ManualTimer* t : timers_) {
        if (t->armed && t->due <= until && (next == nullptr || t->due < next->due ||
                                             (t->due == next->due && t->seq < next->seq))) {
          next = t;
        }
      }
      if (next == nullptr) break;
      now_ = std::max(now_, next->due);
      next->armed = false;
      next->fire();  // may destroy it
    }
    now_ = until;
  }
  // advance_to: advance up to `at` (in whole ms from now).
  void advance_to(TimePoint at) { advance(std::chrono::duration_cast<std::chrono::milliseconds>(at - now_)); }
  // timers: how many timers exist (armed or not).
  std::size_t timers() const { return timers_.size(); }
  // armed: how many timers are running.
  std::size_t armed() const {
    return static_cast<std::size_t>(std::count_if(timers_.begin(), timers_.end(), [](auto* t) { return t->armed; }));
  }

 private:
  struct ManualTimer final : detail::Timer {
    ManualTimer(ManualRuntime& rt, std::function<void()> f) : runtime(rt), fire(std::move(f)) {
      runtime.timers_.push_back(this);
    }
    ~ManualTimer() override { std::erase(runtime.timers_, this); }
    void start(std::chrono::milliseconds delay) override {
      armed = true;
      due = runtime.now_ + std::max(delay, std::chrono::milliseconds{0});
      seq = ++runtime.seq_;
    }
    void stop() override { armed = false; }
    bool active() const override { return armed; }

    ManualRuntime& runtime;
    std::function<void()> fire;
    bool armed = false;
    TimePoint due{};
    std::uint64_t seq = 0;
  };
  struct ManualSignal final : detail::Signal {
    explicit ManualSignal(std::unique_ptr<detail::Timer> t) : timer(std::move(t)) {}
    void raise() override { timer->start(std::chrono::milliseconds{0}); }
    std::unique_ptr<detail::Timer> timer;
  };

  TimePoint now_{std::chrono::hours{1}};
  std::uint64_t seq_ = 0;
  std::uint64_t tokens_ = 0;
  std::mt19937_64 rng_{12};
  std::vector<ManualTimer*> timers_;
};

}  // namespace redlock::test
