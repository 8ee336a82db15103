// hiredis_wire.hpp — the production Wire (src/wire.hpp): one hiredis async
// context on a uv loop, through our poll adapter (src/poll_adapter.hpp:
// close-on-exec sockets, the SIGPIPE guard, one write per loop turn).
// Commands are formatted in RESP by us into one reused buffer and handed to
// hiredis ready-made; hiredis parses the replies. Only hiredis API present
// in both 0.14 and 1.x is used. Loop thread only.
#pragma once

#include <uv.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "runtime.hpp"
#include "uv_runtime.hpp"
#include "wire.hpp"

struct redisAsyncContext;

namespace redlock::detail {

// HiredisWire — one connection. Destroying it frees the hiredis context
// (hiredis defers the free while one of its callbacks runs); every
// callback of a context whose Wire is gone, or that already reported
// on_lost, is ignored.
class HiredisWire final : public Wire {
 public:
  // HiredisWire keeps `runtime` and `events`, which must outlive it.
  HiredisWire(uv_loop_t* loop, Runtime& runtime, const NodeAddress& address, WireEvents& events);
  HiredisWire(const HiredisWire&) = delete;
  HiredisWire& operator=(const HiredisWire&) = delete;
  ~HiredisWire() override;

  bool write(std::span<const std::string_view> argv) override;
  void read_now() override;

  // The hiredis callbacks (C linkage trampolines in hiredis_wire.cpp).
  void replied(const void* reply);
  void flushing() { events_.on_flush(); }
  void connected() { events_.on_connected(); }
  void lost(std::string why);

 private:
  void fail_later(std::string why);

  WireEvents& events_;
  redisAsyncContext* ac_ = nullptr;
  std::string buffer_;  // the command being queued, in RESP (reused)
  std::string failure_;
  std::unique_ptr<Timer> failure_timer_;  // a connect that failed at once reports on a later turn
};

// HiredisWireFactory — opens HiredisWires on `loop`, which must outlive
// the factory and every Wire it made.
class HiredisWireFactory final : public WireFactory {
 public:
  explicit HiredisWireFactory(uv_loop_t* loop) noexcept : loop_(loop), runtime_(loop) {}
  std::unique_ptr<Wire> connect(const NodeAddress& address, WireEvents& events) override {
    return std::make_unique<HiredisWire>(loop_, runtime_, address, events);
  }

 private:
  uv_loop_t* loop_;
  UvRuntime runtime_;  // timers for failures reported later
};

}  // namespace redlock::detail
