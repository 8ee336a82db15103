// resolver.hpp — host names to socket addresses, without ever blocking
// the loop.
//
// A numeric host (IPv4, IPv6) is converted at once, on the loop thread. A
// name is looked up with getaddrinfo on a thread of its own, which hands the
// answer to the loop through a uv_async handle. Not libuv's
// uv_getaddrinfo: its request keeps the loop running until getaddrinfo
// returns, so a resolver that never answers would hang the client's
// shutdown, and four hung lookups would fill libuv's thread pool. A lookup
// whose connection gave up (its Wire was destroyed) is cancelled: the
// thread may still be inside getaddrinfo, but it then frees its answer and
// touches nothing of the loop (docs/design.md, "Connections").
#pragma once

#include <sys/socket.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>


struct uv_loop_s;

namespace redlock::detail {

// SocketAddress — one address to connect to (IPv4 or IPv6, port set; or a
// unix socket's path).
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// numeric_address: the addresses of a numeric host ("127.0.0.1", "::1"),
// or none when `host` is a name.
std::vector<SocketAddress> numeric_address(const std::string& host, int port);

// unix_address: the address of the unix socket at `path`; none when the
// path is too long for one.
std::optional<SocketAddress> unix_address(const std::string& path);

// Lookup — one lookup in flight; destroying it cancels it (its callback
// never runs afterwards).
class Lookup {
 public:
  virtual ~Lookup() = default;
};

// Resolver — looks names up. `done` runs on the loop, never inside
// resolve(), with every address of the name (IPv4 and IPv6, in the order
// getaddrinfo gives), or with none and the reason ("cannot resolve HOST:
// Name or service not known").
class Resolver {
 public:
  using Done = std::function<void(std::vector<SocketAddress> addresses, std::string why)>;
  virtual ~Resolver() = default;
  virtual std::unique_ptr<Lookup> resolve(const std::string& host, int port, Done done) = 0;
};

// ThreadResolver — production: getaddrinfo on a detached thread per lookup.
class ThreadResolver final : public Resolver {
 public:
  explicit ThreadResolver(uv_loop_s* loop) noexcept : loop_(loop) {}
  std::unique_ptr<Lookup> resolve(const std::string& host, int port, Done done) override;

 private:
  uv_loop_s* loop_;
};

}  // namespace redlock::detail
