// error.cpp — names of codes and outcomes, and the text forms.
#include "redlock/error.hpp"

#include <algorithm>

namespace redlock {

std::string_view errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::held: return "redlock.held";
    case Errc::no_quorum: return "redlock.no_quorum";
    case Errc::validity_too_short: return "redlock.validity_too_short";
    case Errc::not_held: return "redlock.not_held";
    case Errc::too_late: return "redlock.too_late";
    case Errc::invalid_argument: return "redlock.invalid_argument";
    case Errc::config: return "redlock.config";
    case Errc::closed: return "redlock.closed";
    case Errc::internal: return "redlock.internal";
    case Errc::lost: return "redlock.lost";
    case Errc::cancelled: return "redlock.cancelled";
  }
  return "redlock.unknown";
}

std::string_view outcome_name(Outcome outcome) noexcept {
  switch (outcome) {
    case Outcome::ok: return "ok";
    case Outcome::held: return "held";
    case Outcome::timeout: return "timeout";
    case Outcome::error: return "error";
    case Outcome::quarantined: return "quarantined";
    case Outcome::pending: return "pending";
  }
  return "unknown";
}

std::string Error::to_string() const {
  std::string s(errc_name(code));
  s += ": ";
  s += message;
  return s;
}

std::chrono::milliseconds Lock::remaining() const noexcept {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(validity_deadline -
                                                                    BootClock::now());
  return std::max(left, std::chrono::milliseconds{0});
}

}  // namespace redlock
