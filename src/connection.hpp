// connection.hpp — what the command connections (NodeSession) and the
// pub/sub connections (Subscriber) do alike: authenticate, and back off between
// reconnects.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "redlock/config.hpp"
#include "runtime.hpp"

namespace redlock::detail {

// AuthCommand — `AUTH password`, or `AUTH user password` for an ACL user;
// empty when the address has no password. Views into `address`.
struct AuthCommand {
  std::array<std::string_view, 3> argv{"AUTH"};
  std::size_t argc = 0;

  explicit AuthCommand(const NodeAddress& address) {
    if (address.password.empty()) return;
    argc = 1;
    if (!address.user.empty()) argv[argc++] = address.user;
    argv[argc++] = address.password;
  }
  std::span<const std::string_view> args() const { return {argv.data(), argc}; }
};

// reconnect_delay: capped exponential backoff with jitter — uniformly 50–100 %
// of min(reconnect_max, reconnect_min · 2^failures) — and counts the failure.
// The jitter comes from the Runtime (deterministic in the simulator).
inline std::chrono::milliseconds reconnect_delay(const Options& options, unsigned& failures, Runtime& runtime) {
  const long long base = options.reconnect_min.count();
  const long long cap = options.reconnect_max.count();
  const long long step = std::min(cap, base << std::min(failures, 20u));
  ++failures;
  return std::chrono::milliseconds{step / 2 +
                                   static_cast<long long>(runtime.random_below(static_cast<std::uint64_t>(step / 2 + 1)))};
}

// report_closed: an owner's close report, from the fire of its last timer:
// frees that timer (allowed inside its own fire), then runs on_closed,
// which may free the owner.
inline void report_closed(std::unique_ptr<Timer>& timer, std::function<void()>& on_closed) {
  std::function<void()> done = std::move(on_closed);
  timer.reset();
  if (done) done();
}

}  // namespace redlock::detail
