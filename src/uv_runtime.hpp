// uv_runtime.hpp — the production Runtime: a uv loop, the boot clock, and the
// OS CSPRNG (src/token.hpp). Loop thread only, except Signal::raise.
#pragma once

#include <uv.h>

#include "runtime.hpp"

namespace redlock::detail {

// The loop's timers count CLOCK_MONOTONIC, which stops while the system is
// suspended; every Timer keeps its due time on Clock (CLOCK_BOOTTIME) and
// re-arms for what is left when it fires early. A ResumeWatch (below) fires
// the timers whose due time passed during a suspend at the resume.
class UvRuntime final : public Runtime {
 public:
  // UvRuntime keeps `loop`, which must outlive it. Timers and signals it
  // made may outlive the UvRuntime but not the loop: each frees its uv
  // handle in the handle's close callback.
  explicit UvRuntime(uv_loop_t* loop);

  TimePoint now() override { return Clock::now(); }
  std::chrono::system_clock::time_point wall_now() override { return std::chrono::system_clock::now(); }
  std::unique_ptr<Timer> timer(std::function<void()> fire) override;
  std::unique_ptr<Signal> signal(std::function<void()> fire) override;
  Result<std::string> random_token() override;
  std::string owner_suffix(std::string_view label) override;
  std::uint64_t random_below(std::uint64_t bound) override;

  uv_loop_t* loop() const noexcept { return loop_; }

  // fire_overdue fires, on the next loop turn, every active timer whose due
  // time has passed on Clock: what a resume from suspend calls.
  void fire_overdue() noexcept;

  struct Timers;  // the live timers, shared with them (they may outlive us)

 private:
  uv_loop_t* loop_;
  std::shared_ptr<Timers> timers_;
};

// ResumeWatch — at a resume from suspend the kernel cancels every
// CLOCK_REALTIME timerfd armed with TFD_TIMER_CANCEL_ON_SET (a resume counts
// as a clock set); this watches one on the runtime's loop and then calls
// fire_overdue, so that a lease's loss or a deadline that passed while the
// system slept is acted on at the resume, not when CLOCK_MONOTONIC reaches
// it. A clock set wakes it too (harmless: nothing is overdue). Without such
// a timerfd (an old kernel, a sandbox) it does nothing: timers then fire
// late after a resume, and valid() still reads the clock. Its handle never
// keeps the loop alive; close() (or the destructor) closes it, freed in its
// close callback. `runtime` must outlive it.
class ResumeWatch {
 public:
  explicit ResumeWatch(UvRuntime& runtime);
  ResumeWatch(const ResumeWatch&) = delete;
  ResumeWatch& operator=(const ResumeWatch&) = delete;
  ~ResumeWatch();
  void close() noexcept;

 private:
  struct Handle;
  Handle* handle_ = nullptr;  // null when closed or unavailable
};

}  // namespace redlock::detail
