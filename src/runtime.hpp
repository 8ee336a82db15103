// runtime.hpp — everything the algorithm takes from the world apart from
// the masters: the time, timers, randomness, and a way in from other
// threads. Production runs on a uv loop (UvRuntime, src/uv_runtime.hpp);
// the deterministic simulator (tools/sim) runs the same engine, node
// sessions and watchdogs on simulated time and a seeded generator. Nothing
// in the algorithm reads a clock, starts a uv timer or draws a random
// number except through a Runtime.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "redlock/clock.hpp"
#include "redlock/error.hpp"

namespace redlock::detail {

// Clock counts system suspend (CLOCK_BOOTTIME, redlock/clock.hpp): a lock
// expires on the masters while this machine sleeps.
using Clock = redlock::BootClock;
using TimePoint = Clock::time_point;

// Timer — one restartable one-shot timer on the runtime's loop. `fire` (given
// at creation) runs on the loop, never inside start(). Destroying the Timer
// stops it for good: fire never runs afterwards, and destroying it inside
// its own fire is allowed (fire must then not touch its captures again).
class Timer {
 public:
  virtual ~Timer() = default;
  // start (re)arms the timer to fire once after `delay` (0: on the next loop
  // turn), never before `delay` has passed on Clock; a pending start is
  // replaced.
  virtual void start(std::chrono::milliseconds delay) = 0;
  virtual void stop() = 0;
  virtual bool active() const = 0;
};

// Signal — a way in from any thread: raise() may be called from any thread
// (and at any time until the Signal is destroyed); `fire` then runs on the
// loop, once per batch of raises. A Signal never keeps the loop alive.
class Signal {
 public:
  virtual ~Signal() = default;
  virtual void raise() = 0;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  // now: the monotonic clock every deadline and validity is measured on.
  virtual TimePoint now() = 0;
  // wall_now: the wall clock. The algorithm never uses it (docs/design.md,
  // "Time and validity"); only the broken wall_clock variant does, on purpose.
  virtual std::chrono::system_clock::time_point wall_now() = 0;
  virtual std::unique_ptr<Timer> timer(std::function<void()> fire) = 0;
  // post runs `task` once on a later loop turn, never inside post(): a
  // completion that must not run on its caller's stack. It cannot be
  // cancelled, so whoever posts keeps alive what `task` touches (counts it
  // before closing). A one-shot timer that frees itself in its fire.
  void post(std::function<void()> task) {
    auto* posted = new std::unique_ptr<Timer>;
    *posted = timer([posted, task = std::move(task)]() mutable {
      std::unique_ptr<std::unique_ptr<Timer>> owned(posted);  // frees the timer after the task
      std::function<void()> run = std::move(task);
      run();
    });
    (*posted)->start(std::chrono::milliseconds{0});
  }
  virtual std::unique_ptr<Signal> signal(std::function<void()> fire) = 0;
  // random_token: 128 random bits as 32 hex digits, the draw a lock value
  // is made from (src/token.hpp; production: the OS CSPRNG; Errc::internal
  // when it fails, never a weaker source).
  virtual Result<std::string> random_token() = 0;
  // owner_suffix: what a drawn value carries after its token to name the
  // holder ("~host:pid[:label]", src/token.hpp). Production: this host and
  // process; the default (the simulator, tests): none, or "~sim:0:label".
  virtual std::string owner_suffix(std::string_view label) {
    return label.empty() ? std::string() : "~sim:0:" + std::string(label);
  }
  // random_below: uniform in [0, bound), 0 when bound is 0; for jitter and
  // backoff, never for values.
  virtual std::uint64_t random_below(std::uint64_t bound) = 0;

  // random_delay: uniform in [0, max] ms.
  std::chrono::milliseconds random_delay(std::chrono::milliseconds max) {
    const auto bound = static_cast<std::uint64_t>(std::max<long long>(max.count(), 0)) + 1;
    return std::chrono::milliseconds{static_cast<long long>(random_below(bound))};
  }
};

}  // namespace redlock::detail
