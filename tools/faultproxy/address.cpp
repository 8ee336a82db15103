// address.cpp — see address.hpp.
#include "faultproxy/address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <charconv>
#include <cstring>

namespace faultproxy {
namespace {

std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

int parse_port(std::string_view text, std::string_view full, std::string_view what) {
  int port = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port < 0 || port > 65535)
    throw AddressError(std::string(what) + ": bad port " + quote(text) + " in " + quote(full) +
                       " (expected 0..65535)");
  return port;
}

}  // namespace

bool is_loopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

Endpoint parse_endpoint(std::string_view text, std::string_view what, bool allow_unix) {
  const std::string w(what);
  Endpoint ep;
  if (text.substr(0, 5) == "unix:") {
    if (!allow_unix) throw AddressError(w + ": unix sockets are not supported here: " + quote(text));
    ep.is_unix = true;
    ep.path = std::string(text.substr(5));
    if (ep.path.empty()) throw AddressError(w + ": empty unix socket path in " + quote(text));
    if (ep.path.size() >= sizeof(sockaddr_un{}.sun_path))
      throw AddressError(w + ": unix socket path longer than " +
                         std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes: " + quote(text));
    return ep;
  }

  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      throw AddressError(w + ": expected [V6ADDR]:PORT, got " + quote(text));
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos)
      throw AddressError(w + ": expected ADDR:PORT" + std::string(allow_unix ? " or unix:PATH" : "") +
                         ", got " + quote(text));
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      throw AddressError(w + ": IPv6 addresses need brackets ([::1]:PORT): " + quote(text));
  }
  const int p = parse_port(port, text, what);
  // "localhost" only as a spelling of 127.0.0.1: no resolver is consulted,
  // so what is checked is exactly what is used.
  const std::string h = host == "localhost" ? std::string("127.0.0.1") : std::string(host);

  sockaddr_in in{};
  sockaddr_in6 in6{};
  if (inet_pton(AF_INET, h.c_str(), &in.sin_addr) == 1) {
    in.sin_family = AF_INET;
    in.sin_port = htons(static_cast<uint16_t>(p));
    std::memcpy(&ep.addr, &in, sizeof in);
  } else if (inet_pton(AF_INET6, h.c_str(), &in6.sin6_addr) == 1) {
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(static_cast<uint16_t>(p));
    std::memcpy(&ep.addr, &in6, sizeof in6);
  } else {
    throw AddressError(w + ": " + quote(host) + " is not a numeric IP address (in " + quote(text) +
                       "); only loopback addresses are allowed");
  }
  if (!is_loopback(ep.sa()))
    throw AddressError(w + ": " + quote(host) + " is not a loopback address (in " + quote(text) +
                       "): faultproxy only uses 127.0.0.0/8 and ::1");
  return ep;
}

Endpoint endpoint_from_sockaddr(const sockaddr* sa) {
  Endpoint ep;
  if (sa->sa_family == AF_INET) std::memcpy(&ep.addr, sa, sizeof(sockaddr_in));
  else if (sa->sa_family == AF_INET6) std::memcpy(&ep.addr, sa, sizeof(sockaddr_in6));
  return ep;
}

int Endpoint::port() const {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return 0;
}

std::string Endpoint::host() const {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, buf, sizeof buf);
  else if (addr.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof buf);
  return buf;
}

std::string Endpoint::text() const {
  if (is_unix) return "unix:" + path;
  if (addr.ss_family == AF_INET6) return "[" + host() + "]:" + std::to_string(port());
  return host() + ":" + std::to_string(port());
}

}  // namespace faultproxy
