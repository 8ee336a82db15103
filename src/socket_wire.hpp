// socket_wire.hpp — the production Wire (src/wire.hpp): one socket of our
// own on a uv loop, optionally wrapped in TLS.
//
// - Connect: a unix socket, or TCP to every address of the host in turn
//   (numeric hosts at once; names through a Resolver that never blocks the
//   loop, src/resolver.hpp). Sockets are close-on-exec, TCP_NODELAY and
//   keepalive. The owner's connect deadline covers resolving, connecting
//   and the TLS handshake: it destroys the Wire, which cancels them all.
// - TLS (rediss://): OpenSSL through memory BIOs, so the socket, the
//   poll and the once-per-turn flush are the same as for plain bytes;
//   on_connected comes after the TLS handshake and the certificate check.
// - Commands: our RESP writer (src/resp.hpp), into one output buffer;
//   every command queued in one loop turn leaves in one send(), right
//   before the loop polls (a uv_prepare handle), so a healthy connection
//   keeps one fixed read interest and costs no epoll_ctl per command.
//   send() with MSG_NOSIGNAL: no write of ours can raise SIGPIPE in the
//   host. (Not uv_write: libuv writes with writev, which can.)
// - Replies: hiredis's redisReader (hiredis stays the protocol parser),
//   behind a ReplyScanner (src/resp.hpp) that holds every reply to the
//   factory's limits first (resp::reply_limits, or more for a connection
//   that asks for more: cluster_slots_limits); a reply past them ends the
//   connection.
// - Bounded work per loop turn: one readable event (or read_now) reads at
//   most read_budget bytes and delivers at most reply_budget replies, so
//   the loop's timers (deadlines, stall checks, lease watchdogs) get their
//   turn whatever a server sends. Bytes left in the socket wait for the
//   next poll (level-triggered); replies already read wait in the reader,
//   which is not fed more until they are delivered, on the next turns (a
//   uv_idle handle keeps the loop from blocking meanwhile).
//
// Loop thread only. Destroying a SocketWire closes its socket at once;
// bytes not yet sent are dropped (the owner never relies on either, see
// wire.hpp, "Late bytes").
#pragma once

#include <uv.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/config.hpp"
#include "resolver.hpp"
#include "resp.hpp"
#include "tls.hpp"
#include "wire.hpp"

struct redisReader;

namespace redlock::detail {

class SocketWire final : public Wire {
 public:
  // SocketWire keeps `resolver`, `tls` (null: plain) and `events`, which
  // must outlive it; `loop` must outlive it too. Each reply is held to
  // `limits`.
  SocketWire(uv_loop_t* loop, Resolver& resolver, const TlsContext* tls, const NodeAddress& address,
             WireEvents& events, const resp::ReplyLimits& limits = resp::reply_limits);
  SocketWire(const SocketWire&) = delete;
  SocketWire& operator=(const SocketWire&) = delete;
  ~SocketWire() override;

  bool write(std::span<const std::string_view> argv) override;
  bool write_encoded(std::span<const std::string_view> head, std::size_t tail_args,
                     std::span<const std::string_view> tail) override;
  void read_now() override;
  std::string waiting_for() const override;

  // The uv callbacks (trampolines in socket_wire.cpp).
  void polled(int status, int events);
  void prepared();
  void resumed();

 private:
  enum class State : std::uint8_t { resolving, connecting, tls_handshake, ready, failed };
  struct Gone;  // notices the Wire's destruction inside its own events

  void start();
  void resolved(std::vector<SocketAddress> addresses, std::string why);
  void connect_next();
  void connect_done();
  void start_tls();
  void handshake_step();
  void read_socket();
  bool take_bytes(const char* data, std::size_t n, std::size_t& budget);
  bool parse(const char* data, std::size_t n, std::size_t& budget);
  bool deliver_replies(std::size_t& budget);
  void flush();
  bool send_out();
  void fail(std::string why);
  template <class Body>
  void enter(Body body);
  void report_failure();
  void watch(int events);
  void close_socket();
  void arm_flush();

  uv_loop_t* loop_;
  Resolver& resolver_;
  const TlsContext* tls_context_;
  NodeAddress address_;
  WireEvents& events_;
  void to(State s) noexcept { state_ = s; }  // the one writer of state_
  State state_ = State::resolving;
  bool* gone_ = nullptr;  // set by the destructor, see Gone

  std::unique_ptr<Lookup> lookup_;
  std::vector<SocketAddress> addresses_;
  std::size_t next_address_ = 0;
  std::string first_error_;  // of the first address that failed (names the usual cause)

  int fd_ = -1;
  uv_poll_t* poll_ = nullptr;   // heap: freed in its close callback
  int watching_ = 0;
  uv_prepare_t* flush_ = nullptr;
  bool flush_armed_ = false;
  uv_idle_t* backlog_ = nullptr;  // active while replies already read wait for a later turn
  std::string failure_;  // why the Wire failed (reported once, see report_failure)
  bool reported_ = false;
  bool received_any_ = false;

  std::unique_ptr<TlsSession> tls_;
  std::string plain_out_;  // TLS: commands not yet encrypted
  std::string out_;        // bytes for the socket (plain commands, or TLS records)
  std::size_t out_sent_ = 0;
  redisReader* reader_ = nullptr;
  resp::ReplyScanner scanner_;
};

// SocketWireFactory — opens SocketWires on `loop`, which must outlive the
// factory and every Wire it made. `tls` (null: plain only) must too; a
// rediss:// address without it fails its connection. Its Wires hold each
// reply to `limits` (a connection with larger replies gets a factory of
// its own).
class SocketWireFactory final : public WireFactory {
 public:
  SocketWireFactory(uv_loop_t* loop, const TlsContext* tls, Resolver* resolver = nullptr,
                    const resp::ReplyLimits& limits = resp::reply_limits)
      : loop_(loop), tls_(tls), limits_(limits), own_resolver_(loop),
        resolver_(resolver != nullptr ? *resolver : own_resolver_) {}
  std::unique_ptr<Wire> connect(const NodeAddress& address, WireEvents& events) override {
    return std::make_unique<SocketWire>(loop_, resolver_, tls_, address, events, limits_);
  }

 private:
  uv_loop_t* loop_;
  const TlsContext* tls_;
  resp::ReplyLimits limits_;
  ThreadResolver own_resolver_;
  Resolver& resolver_;
};

}  // namespace redlock::detail
