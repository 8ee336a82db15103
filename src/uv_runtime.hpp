// uv_runtime.hpp — the production Runtime: a uv loop, the boot clock, and the
// OS CSPRNG (src/token.hpp). Loop thread only, except Signal::raise.
#pragma once

#include <uv.h>

#include "runtime.hpp"

namespace redlock::detail {

// The loop's timers count CLOCK_MONOTONIC, which stops while the system is
// suspended; every Timer keeps its due time on Clock (CLOCK_BOOTTIME) and
// re-arms for what is left when it fires early. At a resume the kernel
// cancels every CLOCK_REALTIME timerfd armed with TFD_TIMER_CANCEL_ON_SET
// (a resume counts as a clock set); UvRuntime watches one and then fires
// every timer whose due time passed during the suspend, at once, rather
// than when the monotonic clock reaches it (a lease's loss, a guard's
// deadline). Without such a timerfd (an old kernel, a sandbox), timers
// fire late after a resume and valid() still reads the clock.
class UvRuntime final : public Runtime {
 public:
  // UvRuntime keeps `loop`, which must outlive it. Timers and signals it
  // made may outlive the UvRuntime but not the loop: each frees its uv
  // handle in the handle's close callback.
  explicit UvRuntime(uv_loop_t* loop);
  UvRuntime(const UvRuntime&) = delete;
  UvRuntime& operator=(const UvRuntime&) = delete;
  ~UvRuntime() override;

  TimePoint now() override { return Clock::now(); }
  std::chrono::system_clock::time_point wall_now() override { return std::chrono::system_clock::now(); }
  std::unique_ptr<Timer> timer(std::function<void()> fire) override;
  std::unique_ptr<Signal> signal(std::function<void()> fire) override;
  Result<std::string> random_token() override;
  std::uint64_t random_below(std::uint64_t bound) override;

  uv_loop_t* loop() const noexcept { return loop_; }

  // close stops watching for a resume (the destructor does it otherwise);
  // its handle is gone once the loop has run its close callbacks.
  void close() noexcept;
  // fire_overdue fires, on the next loop turn, every active timer whose due
  // time has passed on Clock: what a resume from suspend calls (and a test).
  void fire_overdue() noexcept;

  struct Timers;  // the live timers, shared with them (they may outlive us)

 private:
  struct ResumeWatch;
  uv_loop_t* loop_;
  std::shared_ptr<Timers> timers_;
  ResumeWatch* resume_ = nullptr;  // null when closed or unavailable
};

}  // namespace redlock::detail
