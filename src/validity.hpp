// validity.hpp — the Redlock time arithmetic, on the boot clock only
// (Runtime::now, CLOCK_BOOTTIME: it counts system suspend).
//
//   drift    = ceil(ttl · drift_factor) + 2 ms
//   validity = ttl − elapsed − drift
// where elapsed runs from T1 (taken before the first send of a round) to
// the moment the round's outcome is evaluated. The lock may be used until
// T1 + ttl − drift = now + validity.
#pragma once

#include <chrono>
#include <cmath>

namespace redlock::detail {

using std::chrono::microseconds;
using std::chrono::milliseconds;

// drift_allowance is the clock-drift margin for a TTL.
inline milliseconds drift_allowance(milliseconds ttl, double drift_factor) {
  auto scaled = static_cast<long long>(std::ceil(static_cast<double>(ttl.count()) * drift_factor));
  return milliseconds{scaled} + milliseconds{2};
}

// validity_left is ttl − elapsed − drift (may be negative).
inline microseconds validity_left(milliseconds ttl, microseconds elapsed, double drift_factor) {
  return microseconds{ttl} - elapsed - microseconds{drift_allowance(ttl, drift_factor)};
}

// most_server_time: the longest span of time a master's number is believed
// to mean (a century): an uptime or a remaining TTL beyond it is the
// server's nonsense, unknown, and never added to a clock or a wait.
inline constexpr milliseconds most_server_time{100LL * 366 * 24 * 3600 * 1000};

// quarantine_period is how long a freshly (re)started node sits out: any
// lock it lost in the restart has expired everywhere by then.
inline milliseconds quarantine_period(milliseconds max_ttl, double drift_factor) {
  return max_ttl + drift_allowance(max_ttl, drift_factor);
}

}  // namespace redlock::detail
