// connection.hpp — what the command connections (Node) and the pub/sub
// connections (Subscriber) do alike: authenticate, and back off between
// reconnects.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "redlock/config.hpp"
#include "token.hpp"

namespace redlock::detail {

// AuthCommand — `AUTH password`, or `AUTH user password` for an ACL user;
// argc is 0 when the address has no password. Views into `address`.
struct AuthCommand {
  const char* argv[3] = {"AUTH", nullptr, nullptr};
  std::size_t lens[3] = {4, 0, 0};
  int argc = 0;

  explicit AuthCommand(const NodeAddress& address) {
    if (address.password.empty()) return;
    argc = 1;
    if (!address.user.empty()) {
      argv[argc] = address.user.c_str();
      lens[argc++] = address.user.size();
    }
    argv[argc] = address.password.c_str();
    lens[argc++] = address.password.size();
  }
};

// reconnect_delay: capped exponential backoff with jitter — uniformly 50–100 %
// of min(reconnect_max, reconnect_min · 2^failures) ms — and counts the failure.
inline std::uint64_t reconnect_delay(const Options& options, unsigned& failures) {
  const long long base = options.reconnect_min.count();
  const long long cap = options.reconnect_max.count();
  const long long step = std::min(cap, base << std::min(failures, 20u));
  ++failures;
  return static_cast<std::uint64_t>(step / 2) +
         random_below(static_cast<unsigned long long>(step / 2 + 1));
}

}  // namespace redlock::detail
