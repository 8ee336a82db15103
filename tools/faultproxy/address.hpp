// address.hpp — the addresses faultproxy may touch: TCP on the loopback
// range (127.0.0.0/8, ::1) and unix sockets. Everything else is refused
// here, before any socket is made, so a typo can never send test traffic to
// a real network.
#pragma once

#include <sys/socket.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace faultproxy {

// AddressError — an address that is malformed or not on the loopback range.
// The CLI maps it to exit status 2.
class AddressError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Endpoint — a parsed TCP address (sockaddr in `addr`) or a unix socket path.
struct Endpoint {
  bool is_unix = false;
  std::string path;            // unix socket path (is_unix only)
  sockaddr_storage addr{};     // AF_INET or AF_INET6 (TCP only)

  int port() const;            // TCP port (0: pick a free one)
  std::string host() const;    // "127.0.0.1" / "::1" (TCP only)
  // text: "127.0.0.1:6379", "[::1]:6379" or "unix:/path" — the form parse
  // accepts, so it round-trips through the CLI and the control protocol.
  std::string text() const;
  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&addr); }
};

// parse_endpoint parses "ADDR:PORT", "[V6]:PORT", "localhost:PORT" or (when
// allow_unix) "unix:PATH". what names the option in error messages. Throws
// AddressError for anything malformed or off the loopback range.
Endpoint parse_endpoint(std::string_view text, std::string_view what, bool allow_unix);

// endpoint_from_sockaddr wraps an address as returned by getsockname.
Endpoint endpoint_from_sockaddr(const sockaddr* sa);

// is_loopback: 127.0.0.0/8 or ::1 (also ::ffff:127.x.y.z).
bool is_loopback(const sockaddr* sa);

}  // namespace faultproxy
