// connection.cpp — one master's connection. See connection.hpp.
#include "connection.hpp"
#include "resp.hpp"

#include <algorithm>
#include <array>

namespace redlock::detail {

namespace {

// reconnect_delay: capped exponential backoff with jitter — uniformly 50–100 %
// of min(reconnect_max, reconnect_min · 2^failures) — and counts the failure.
// The jitter comes from the Runtime (deterministic in the simulator).
std::chrono::milliseconds reconnect_delay(const Options& options, unsigned& failures, Runtime& runtime) {
  const long long base = options.reconnect_min.count();
  const long long cap = options.reconnect_max.count();
  const long long step = std::min(cap, base << std::min(failures, 20u));
  ++failures;
  return std::chrono::milliseconds{step / 2 +
                                   static_cast<long long>(runtime.random_below(static_cast<std::uint64_t>(step / 2 + 1)))};
}

// write_auth writes `AUTH password`, or `AUTH user password` for an ACL
// user; true when it wrote one.
bool write_auth(Wire& wire, const NodeAddress& address) {
  if (address.password.empty()) return false;
  std::array<std::string_view, 3> argv{"AUTH"};
  std::size_t argc = 1;
  if (!address.user.empty()) argv[argc++] = address.user;
  argv[argc++] = address.password;
  return wire.write(std::span<const std::string_view>(argv.data(), argc));
}

}  // namespace

std::string_view to_string(Connection::State state) noexcept {
  switch (state) {
    case Connection::State::idle: return "idle";
    case Connection::State::connecting: return "connecting";
    case Connection::State::handshaking: return "handshaking";
    case Connection::State::ready: return "ready";
    case Connection::State::backing_off: return "backing_off";
    case Connection::State::closing: return "closing";
    case Connection::State::closed: return "closed";
  }
  return "?";
}

Connection::Connection(Runtime& runtime, WireFactory& wires, const NodeAddress& address, const Options& options,
                       ConnectionOwner& owner, std::function<void()> on_closed)
    : runtime_(runtime),
      wires_(wires),
      address_(address),
      options_(options),
      owner_(owner),
      on_closed_(std::move(on_closed)),
      timer_(runtime.timer([this] { on_timer(); })) {}

Connection::~Connection() = default;

void Connection::start() {
  if (state_ == State::idle) to(State::connecting);
}

void Connection::ready() {
  if (state_ == State::handshaking) to(State::ready);
}

void Connection::drop(std::string reason) {
  if (wire_ == nullptr) return;
  to(state_ == State::closing ? State::closed : State::backing_off, std::move(reason));
}

void Connection::close(std::chrono::milliseconds drain) {
  if (state_ == State::closing || state_ == State::closed) return;
  if (wire_ != nullptr && drain.count() > 0) {
    timer_->start(drain);
    to(State::closing);
  } else {
    to(State::closed, "client closed");
  }
}

void Connection::redial(std::string reason) {
  if (state_ == State::idle) return start();
  if (state_ == State::closing || state_ == State::closed) return;
  if (wire_ != nullptr) drop(std::move(reason));
  if (state_ != State::backing_off) return;  // the owner closed it inside on_down
  failures_ = 0;
  timer_->stop();
  to(State::connecting);
}

bool Connection::write(std::span<const std::string_view> argv) { return wire_ != nullptr && wire_->write(argv); }

bool Connection::write_encoded(std::span<const std::string_view> head, std::size_t tail_args,
                               std::span<const std::string_view> tail) {
  return wire_ != nullptr && wire_->write_encoded(head, tail_args, tail);
}

void Connection::read_now() {
  if (wire_ != nullptr) wire_->read_now();
}

// to: every state change goes through here. The Connection's own effects
// come first, the owner's events last: an owner that reacts by calling
// drop() or close() finds a consistent state, and nothing runs after it
// here.
void Connection::to(State next, std::string reason) {
  const State from = state_;
  state_ = next;
  switch (next) {
    case State::idle: break;
    case State::connecting:
      owner_.on_state(from, next, reason);
      return open();
    case State::handshaking: break;
    case State::ready:
      failures_ = 0;
      timer_->stop();
      break;
    case State::closing: break;  // the drain bound is armed by close()
    case State::backing_off:
    case State::closed: {
      const bool had_wire = wire_ != nullptr;
      wire_.reset();  // its late bytes may still reach the master: nothing relies on them being lost
      auth_pending_ = false;
      if (had_wire) last_error_ = reason;
      if (next == State::backing_off) {
        timer_->start(reconnect_delay(options_, failures_, runtime_));
      } else {
        timer_->start(std::chrono::milliseconds{0});  // the close report, on a later loop turn
      }
      owner_.on_state(from, next, reason);
      if (had_wire) owner_.on_down(reason);  // `reason` is ours: the owner may close() inside
      return;
    }
  }
  owner_.on_state(from, next, reason);
}

// open: a new Wire, AUTH first, then the owner's handshake; the connect
// deadline covers all of it, up to ready().
void Connection::open() {
  wire_ = wires_.connect(address_, *this);
  timer_->start(options_.connect_timeout);
  auth_pending_ = write_auth(*wire_, address_);
  if (!address_.password.empty() && !auth_pending_) return drop("cannot queue AUTH");
  if (!owner_.on_open()) drop("cannot queue the handshake");
}

void Connection::on_timer() {
  switch (state_) {
    case State::closed: {
      // The close report: free the timer (allowed inside its own fire),
      // then tell the owner, who may free this Connection.
      std::function<void()> done = std::move(on_closed_);
      timer_.reset();
      if (done) done();
      return;
    }
    case State::closing: return to(State::closed, "client closed");  // the drain took too long
    case State::backing_off: return to(State::connecting);
    case State::connecting:
    case State::handshaking: {
      std::string why = "connect timeout after " + std::to_string(options_.connect_timeout.count()) + " ms";
      std::string stage = state_ == State::handshaking ? std::string("the server to answer the handshake")
                                                       : wire_->waiting_for();
      if (!stage.empty()) why += ", waiting for " + stage;
      return to(State::backing_off, std::move(why));
    }
    case State::idle:
    case State::ready: return;
  }
}

void Connection::on_connected() {
  if (state_ == State::connecting) to(State::handshaking);
}

void Connection::on_reply(const WireReply& reply) {
  if (auth_pending_) {
    auth_pending_ = false;
    if (reply.type == WireReply::Type::error) drop("AUTH failed: " + resp::server_text(reply.str));
    return;
  }
  owner_.on_reply(reply);
}

void Connection::on_flush() { owner_.on_flush(); }

void Connection::on_lost(std::string_view why) {
  drop(std::string(why));  // copied first: `why` may live in the Wire
}

}  // namespace redlock::detail
