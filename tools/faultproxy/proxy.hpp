// proxy.hpp — the whole fault proxy on one uv loop: N listeners forwarding
// to one target, and the control socket that steers their faults. The
// faultproxy command is a thin main() around this; a test or tool may also
// run it on a loop of its own.
#pragma once

#include <uv.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "faultproxy/address.hpp"

namespace faultproxy {

class ControlServer;
class Listener;

// 4 MiB per direction per connection: far above what a Redis client has in
// flight, small enough that hundreds of held connections stay cheap.
inline constexpr std::size_t kDefaultMaxQueue = 4 * 1024 * 1024;

struct ProxyConfig {
  Endpoint target;                 // loopback TCP
  std::vector<Endpoint> listen;    // loopback TCP, one listener each
  Endpoint control;                // loopback TCP or unix socket
  std::uint64_t seed = 0;          // jitter draws
  std::size_t max_queue = kDefaultMaxQueue;  // backpressure limit per direction
  // keep_in_flight: bytes a client sent are still delivered to the target
  // (after their delay) when the client's side is gone, then the upstream
  // side is closed with a FIN — what a real network does with segments the
  // client's kernel already sent. Off: a client that is gone tears the pair
  // down at once and what was still queued is dropped.
  bool keep_in_flight = false;
};

class Proxy {
 public:
  Proxy(uv_loop_t* loop, ProxyConfig config);
  ~Proxy();  // shutdown(); the loop must run again to free the handles
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  // start binds every listener and the control socket. Throws
  // std::runtime_error naming the address that failed (call shutdown and
  // run the loop to release what was opened).
  void start();
  // shutdown closes listeners, connections and the control socket. Once
  // the loop has run the close callbacks, it has no handle of ours left.
  void shutdown();

  // startup_info: {"control","listeners":[names],"target","seed","pid"} —
  // the line the command prints once it is ready.
  nlohmann::json startup_info() const;
  nlohmann::json status() const;
  std::string execute(std::string_view line);  // one control command
  const std::vector<Listener*>& listeners() const { return listeners_; }

 private:
  uv_loop_t* loop_;
  ProxyConfig config_;
  std::vector<Listener*> listeners_;  // each frees itself after close()
  ControlServer* control_ = nullptr;  // frees itself after close()
  bool shut_down_ = false;
};

}  // namespace faultproxy
