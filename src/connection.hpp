// connection.hpp — one connection to one master, with everything around
// it that the lock sessions (NodeSession) and the wake-up subscribers
// (Subscriber) need alike: opening a Wire, AUTH, the connect deadline over
// transport and handshake, reconnect with backoff, a bounded graceful close,
// and the close report. One state enum, one transition function (to()).
//
//   idle ──start──▶ connecting ──Wire up──▶ handshaking ──ready()──▶ ready
//                      ▲   │                     │                     │
//                      │   └──────── lost, refused, connect deadline, drop() ──┐
//                      │                                                       ▼
//                      └──────────── backoff timer ─────────────────── backing_off
//   any ──close(drain)──▶ closing (a live Wire and drain > 0: the owner's
//   replies still due may come, until drop() or the drain bound) ──▶ closed
//   ──next loop turn──▶ on_closed.
//
// `connecting` covers what the Wire does before it is up (resolving the
// name, the TCP connect, the TLS handshake: Wire::waiting_for names which);
// `handshaking` is the owner's own commands after AUTH (NodeSession: SELECT,
// SCRIPT LOAD, INFO, the marker; Subscriber: its SUBSCRIBE), until the
// owner says ready(). A stall is the owner's judgement (NodeSession's
// deadlines): it drop()s, and the connection backs off like any loss.
//
// No I/O of its own: a Wire from the WireFactory, timers and jitter from
// the Runtime, so the simulator runs it too. Loop thread only; no owner
// event is ever raised inside a call the owner made, except on_down inside
// drop() and close() (the owner asked for it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "redlock/config.hpp"
#include "runtime.hpp"
#include "wire.hpp"

namespace redlock::detail {

class ConnectionOwner;

class Connection final : private WireEvents {
 public:
  enum class State : std::uint8_t { idle, connecting, handshaking, ready, backing_off, closing, closed };

  // Connection keeps `runtime`, `wires`, `options` and `owner`, which must
  // outlive it. on_closed runs once, on a later loop turn than the
  // transition to closed, after the Connection has let go of its Wire and
  // timer; the owner may free the Connection inside it.
  Connection(Runtime& runtime, WireFactory& wires, const NodeAddress& address, const Options& options,
             ConnectionOwner& owner, std::function<void()> on_closed);
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // start opens the first Wire (idle → connecting).
  void start();
  // ready: the owner's handshake is complete (handshaking → ready); the
  // connect deadline stops and the backoff resets.
  void ready();
  // drop lets the Wire go for `reason` (a failed handshake step, a stall):
  // backing_off, or closed while closing. Nothing when there is no Wire.
  void drop(std::string reason);
  // close: no reconnect from now on. With a live Wire and drain > 0 the
  // connection stays `closing` — the owner's outstanding replies may come —
  // until the owner drop()s it or `drain` passes; then closed.
  void close(std::chrono::milliseconds drain);
  // redial: the address this connection dials has changed (a sentinel
  // named another primary, the next sentinel is to be asked). Idle: start;
  // a live Wire is dropped for `reason`; then, backing off, connect at once
  // (the wait was for the old address) with the failures so far forgotten.
  // Nothing once closing.
  void redial(std::string reason);

  // write queues one command on the Wire (see Wire::write); false when
  // there is no Wire or it refuses.
  bool write(std::span<const std::string_view> argv);
  bool write_encoded(std::span<const std::string_view> head, std::size_t tail_args,
                     std::span<const std::string_view> tail);
  // read_now: see Wire::read_now (nothing without a Wire).
  void read_now();

  State state() const noexcept { return state_; }
  bool live() const noexcept { return wire_ != nullptr; }
  // last_error: why the last Wire went ("not connected yet" before any).
  const std::string& last_error() const noexcept { return last_error_; }

 private:
  // WireEvents
  void on_connected() override;
  void on_reply(const WireReply& reply) override;
  void on_flush() override;
  void on_lost(std::string_view why) override;

  // to: the one transition function. Does what entering `next` takes (open
  // or release the Wire, arm the timer), then tells the owner.
  void to(State next, std::string reason = {});
  void open();
  void on_timer();

  Runtime& runtime_;
  WireFactory& wires_;
  const NodeAddress& address_;
  const Options& options_;
  ConnectionOwner& owner_;
  std::function<void()> on_closed_;
  std::unique_ptr<Wire> wire_;
  std::unique_ptr<Timer> timer_;  // connect deadline, backoff, drain bound, close report
  State state_ = State::idle;
  unsigned failures_ = 0;         // connections failed since the last ready()
  bool auth_pending_ = false;     // AUTH's reply is due before the owner's
  std::string last_error_ = "not connected yet";
};

// ConnectionOwner — what a Connection tells its owner. Every event comes
// from a Wire event or a timer, except on_down inside drop()/close().
class ConnectionOwner {
 public:
  // on_open: a new Wire was opened (AUTH, when the address has a password,
  // is already written): write the owner's handshake commands. False drops
  // the connection ("cannot queue the handshake").
  virtual bool on_open() = 0;
  // on_reply: a reply to the owner's commands (AUTH's is taken before), or
  // a pushed pub/sub message.
  virtual void on_reply(const WireReply& reply) = 0;
  // on_flush: see WireEvents::on_flush.
  virtual void on_flush() {}
  // on_down: the Wire is gone (the connection is backing_off, or closed);
  // commands written on it will never be answered. `why` stays valid
  // during the call only.
  virtual void on_down(std::string_view why) = 0;
  // on_state: every transition, after it happened (reason: why, for the
  // transitions that have one). For observers; nothing by default.
  virtual void on_state(Connection::State from, Connection::State to, std::string_view reason) {
    (void)from;
    (void)to;
    (void)reason;
  }

 protected:
  ~ConnectionOwner() = default;
};

// to_string: the state's name ("backing_off").
std::string_view to_string(Connection::State state) noexcept;

}  // namespace redlock::detail
