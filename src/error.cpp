// error.cpp — names of codes, outcomes and holding states, and the text forms.
#include "redlock/error.hpp"
#include "redlock/status.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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
    case Errc::store: return "redlock.store";
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

void result_access_violation(const char* access, const Error* error) noexcept {
  // Straight to stderr, unbuffered, building no string: the program is in
  // a state its author did not expect, perhaps out of memory.
  std::fputs("redlock: ", stderr);
  std::fputs(access, stderr);
  if (error == nullptr) {
    std::fputs(" called on a value (the Result holds no error)", stderr);
  } else {
    const std::string_view code = errc_name(error->code);
    std::fputs(" called on an error: ", stderr);
    std::fwrite(code.data(), 1, code.size(), stderr);
    std::fputs(": ", stderr);
    for (const char c : error->message) std::fputc(c == '\n' || c == '\r' ? ' ' : c, stderr);  // one line
  }
  std::fputs("\n", stderr);
  std::fflush(stderr);
  std::abort();
}

std::string_view state_name(NodeHolding::State s) noexcept {
  switch (s) {
    case NodeHolding::State::free: return "free";
    case NodeHolding::State::held: return "held";
    case NodeHolding::State::unreachable: return "unreachable";
    case NodeHolding::State::wrong_type: return "wrong_type";
    case NodeHolding::State::shared: return "shared";
  }
  return "unreachable";
}

std::string Error::to_string() const {
  std::string s(errc_name(code));
  s += ": ";
  s += message;
  return s;
}

std::chrono::milliseconds LockTerms::remaining() const noexcept {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(validity_deadline -
                                                                    BootClock::now());
  return std::max(left, std::chrono::milliseconds{0});
}

}  // namespace redlock
