// wire.hpp — one connection to one master as a Connection sees it:
// commands go out in order, replies come back in the same order, and the
// connection can be lost. Nothing about sockets, hiredis or uv: production
// runs a Connection on a SocketWire (src/socket_wire.hpp), the
// deterministic simulator (tools/sim) on a simulated connection whose bytes
// it delays, drops and delivers late.
//
// Late bytes: a connection that was dropped may still deliver what was
// written on it to the server, after anything written on its replacement
// (the kernel still holds it, or a path still carries it). The session
// never relies on a dropped connection's writes being lost; that is what
// attempt-unique values are for (docs/design.md, "Late messages").
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/config.hpp"
#include "resp.hpp"

namespace redlock::detail {

// WireReply — one RESP2 reply, borrowed for the duration of on_reply.
struct WireReply {
  enum class Type : std::uint8_t { status, string, integer, nil, error, array };
  Type type = Type::nil;
  long long integer = 0;
  std::string_view str;                 // status, bulk string or error text
  std::span<const WireReply> elements;  // array
};

// WireEvents — what a Wire reports to its owner. Events arrive on the
// owner's loop, never inside a Wire call (write, read_now, the factory's
// connect), except on_reply (or on_lost) inside read_now. After on_lost, or after the
// Wire is destroyed, no event follows.
class WireEvents {
 public:
  // on_connected: the transport is up; commands written so far (if any)
  // go out now.
  virtual void on_connected() = 0;
  // on_reply: the answer to the oldest command not yet answered. After a
  // SUBSCRIBE (the wake-up subscribers, src/wake.hpp), every pub/sub
  // message the server pushes, in arrival order, as RESP2 arrays:
  // ["subscribe" | "unsubscribe", channel, count], ["message", channel,
  // payload].
  virtual void on_reply(const WireReply& reply) = 0;
  // on_flush: the commands written since the last flush are about to go
  // out in one write; commands written inside on_flush go in that same
  // write, behind them.
  virtual void on_flush() = 0;
  // on_lost: the connection is gone (refused, reset, closed by the peer,
  // or a protocol error); `why` names it. Unanswered commands stay
  // unanswered: their bytes may or may not have reached the server.
  virtual void on_lost(std::string_view why) = 0;

 protected:
  ~WireEvents() = default;
};

// Wire — one connection. Destroying it drops the connection at once, with
// no event (allowed inside its own events: the implementation defers what
// it must).
class Wire {
 public:
  virtual ~Wire() = default;
  // write queues one command (argv[0] is its name; argv is read during the
  // call only); it goes out at the next flush, after the connection is up.
  // Returns false when the command cannot be queued (the connection is
  // already failing); then no reply will come for it.
  virtual bool write(std::span<const std::string_view> argv) = 0;
  // write_encoded queues one command whose arguments after `head` are
  // `tail_args` bulk strings already in RESP, in the pieces of `tail` (a
  // batch round encodes its keys once for every master). SocketWire sends
  // the bytes as they are; a Wire that deals in arguments (the
  // simulator's, the tests') reads them back: an encoding that is not
  // exactly `tail_args` bulk strings is refused (false) there.
  virtual bool write_encoded(std::span<const std::string_view> head, std::size_t tail_args,
                             std::span<const std::string_view> tail) {
    std::string joined;
    for (std::string_view piece : tail) joined += piece;
    std::vector<std::string_view> argv(head.begin(), head.end());
    if (!resp::split_bulks(joined, tail_args, argv)) return false;
    return write(argv);
  }
  // read_now delivers, through on_reply, the replies that have already
  // arrived but were not read yet (and on_lost, if that read finds the
  // connection gone) (a stalled loop turn reads them before
  // judging deadlines: production reads the socket once, at most one loop
  // turn's budget of it, src/socket_wire.hpp; the simulator has nothing
  // to do).
  virtual void read_now() = 0;
  // waiting_for: while the connection is not up yet, what it waits for, in
  // words ("the TLS handshake"); the owner's connect timeout names it.
  // Empty when there is nothing more to say.
  virtual std::string waiting_for() const { return {}; }
};

// WireFactory — opens connections (production: SocketWireFactory, on a uv loop).
class WireFactory {
 public:
  virtual ~WireFactory() = default;
  // connect starts one connection to `address`; `events` must outlive the
  // returned Wire. A connection that fails at once reports on_lost on a
  // later loop turn (never a null Wire).
  virtual std::unique_ptr<Wire> connect(const NodeAddress& address, WireEvents& events) = 0;
};

}  // namespace redlock::detail
