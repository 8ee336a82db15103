// redlock/clock.hpp — the clock every deadline of the library is on.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace redlock {

// BootClock — a monotonic clock that keeps counting while the system is
// suspended: CLOCK_BOOTTIME on Linux. std::chrono::steady_clock is
// CLOCK_MONOTONIC there, which stops during a suspend; a lock's key expires
// on the masters meanwhile, so a deadline on steady_clock would still lie
// ahead after a resume when the lock is long gone. Every deadline the
// library hands out (Lock::validity_deadline, Lease::deadline) and every
// deadline it keeps is on this clock. Compare them with BootClock::now(),
// never with steady_clock. Where CLOCK_BOOTTIME does not exist, it is
// CLOCK_MONOTONIC.
struct BootClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<BootClock>;
  static constexpr bool is_steady = true;

  static time_point now() noexcept {
    timespec ts{};
#ifdef CLOCK_BOOTTIME
    ::clock_gettime(CLOCK_BOOTTIME, &ts);
#else
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return time_point{duration{static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec}};
  }
};

}  // namespace redlock
