// node.cpp — one master's connection. See node.hpp for the contract.
#include "node.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <string_view>

#include "connection.hpp"
#include "poll_adapter.hpp"
#include "sabotage.hpp"
#include "token.hpp"
#include "validity.hpp"

namespace redlock::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// hiredis says "Connection refused"; outcomes read "connection refused".
std::string lowercase_first(const char* text) {
  std::string s = text != nullptr && *text != '\0' ? text : "connection error";
  s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
  return s;
}

void reply_trampoline(redisAsyncContext* ac, void* reply, void*) {
  static_cast<Node*>(ac->data)->handle_reply(ac, static_cast<redisReply*>(reply));
}

void connect_trampoline(const redisAsyncContext* ac, int status) {
  if (status != REDIS_OK) static_cast<Node*>(ac->data)->connection_lost(ac, lowercase_first(ac->errstr));
}

void disconnect_trampoline(const redisAsyncContext* ac, int status) {
  static_cast<Node*>(ac->data)
      ->connection_lost(ac, status == REDIS_OK ? "disconnected" : lowercase_first(ac->errstr));
}

ReplyView view_of(const redisReply* r) {
  ReplyView v;
  switch (r->type) {
    case REDIS_REPLY_STATUS: v.type = ReplyView::Type::status; break;
    case REDIS_REPLY_STRING: v.type = ReplyView::Type::string; break;
    case REDIS_REPLY_INTEGER: v.type = ReplyView::Type::integer; break;
    case REDIS_REPLY_NIL: v.type = ReplyView::Type::nil; break;
    case REDIS_REPLY_ERROR: v.type = ReplyView::Type::error; break;
    case REDIS_REPLY_ARRAY: v.type = ReplyView::Type::array; break;
    default: v.type = ReplyView::Type::other; break;
  }
  v.integer = r->integer;
  if (r->str != nullptr) v.str = std::string_view(r->str, r->len);
  if (r->type == REDIS_REPLY_ARRAY && r->elements <= v.items.size()) {
    bool integers = true;
    for (std::size_t i = 0; i < r->elements; ++i) {
      integers = integers && r->element[i] != nullptr && r->element[i]->type == REDIS_REPLY_INTEGER;
      if (integers) v.items[i] = r->element[i]->integer;
    }
    if (integers) v.item_count = static_cast<std::uint8_t>(r->elements);
  }
  return v;
}

std::string info_field(std::string_view info, std::string_view name) {
  std::size_t at = 0;
  while ((at = info.find(name, at)) != std::string_view::npos) {
    if ((at == 0 || info[at - 1] == '\n') && at + name.size() < info.size() && info[at + name.size()] == ':') {
      std::size_t begin = at + name.size() + 1;
      std::size_t end = info.find_first_of("\r\n", begin);
      return std::string(info.substr(begin, end == std::string_view::npos ? end : end - begin));
    }
    at += name.size();
  }
  return {};
}

// append_bulk appends one RESP bulk string: $<len>\r\n<bytes>\r\n.
void append_bulk(std::string& out, std::string_view arg) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, arg.size());
  out += '$';
  out.append(digits, end);
  out += "\r\n";
  out += arg;
  out += "\r\n";
}

constexpr milliseconds deadline_slack{2};

long long to_ms(std::chrono::steady_clock::duration d) { return duration_cast<milliseconds>(d).count(); }

}  // namespace

Node::Node(uv_loop_t* loop, NodeAddress address, const Options& options, const std::string* shas,
           std::function<void()> on_closed)
    : loop_(loop),
      address_(std::move(address)),
      display_(address_.display()),
      options_(options),
      shas_(shas),
      on_closed_(std::move(on_closed)) {
  uv_timer_init(loop_, &deadline_timer_);
  uv_timer_init(loop_, &conn_timer_);
  deadline_timer_.data = this;
  conn_timer_.data = this;
  open_handles_ = 2;
}

Node::~Node() = default;

void Node::start() { connect(); }

void Node::connect() {
  if (closing_) return;
  redisAsyncContext* ac = address_.kind == NodeAddress::Kind::tcp
                              ? redisAsyncConnect(address_.host.c_str(), address_.port)
                              : redisAsyncConnectUnix(address_.path.c_str());
  if (ac == nullptr) {
    last_error_ = "out of memory creating the connection";
    schedule_reconnect();
    return;
  }
  if (ac->err != 0) {
    last_error_ = lowercase_first(ac->errstr);
    redisAsyncFree(ac);
    schedule_reconnect();
    return;
  }
  if (!attach_to_loop(ac, loop_)) {
    last_error_ = "cannot watch the socket";
    redisAsyncFree(ac);
    schedule_reconnect();
    return;
  }
  ac->data = this;
  ac_ = ac;
  state_ = State::connecting;
  redisAsyncSetConnectCallback(ac, connect_trampoline);
  redisAsyncSetDisconnectCallback(ac, disconnect_trampoline);
  uv_timer_start(
      &conn_timer_, [](uv_timer_t* t) { static_cast<Node*>(t->data)->on_conn_timer(); },
      static_cast<std::uint64_t>(options_.connect_timeout.count()), 0);
  if (!queue_handshake()) drop_connection("cannot queue the handshake");
}

bool Node::queue_handshake() {
  if (const AuthCommand auth(address_); auth.argc > 0) {
    if (!queue_raw(Kind::handshake, auth.argc, const_cast<const char**>(auth.argv), auth.lens)) return false;
  }
  if (address_.db != 0) {
    const std::string db = std::to_string(address_.db);
    const char* argv[2] = {"SELECT", db.c_str()};
    const std::size_t lens[2] = {6, db.size()};
    if (!queue_raw(Kind::handshake, 2, argv, lens)) return false;
  }
  // Load the scripts before the first EVALSHA: a NOSCRIPT retry goes to the
  // back of the pipeline, where a release sent meanwhile would overtake the
  // acquire it is meant to undo. So NOSCRIPT only follows a SCRIPT FLUSH.
  for (std::string_view body : script_bodies) {
    const char* load[3] = {"SCRIPT", "LOAD", body.data()};
    const std::size_t load_lens[3] = {6, 4, body.size()};
    if (!queue_raw(Kind::handshake, 3, load, load_lens)) return false;
  }
  const char* argv[2] = {"INFO", "server"};
  const std::size_t lens[2] = {4, 6};
  return queue_raw(Kind::info, 2, argv, lens);
}

bool Node::queue_raw(Kind kind, int argc, const char** argv, const std::size_t* lens) {
  if (redisAsyncCommandArgv(ac_, reply_trampoline, nullptr, argc, argv, lens) != REDIS_OK) return false;
  Pending p;
  p.kind = kind;
  p.sent = clock::now();
  pending_.push_back(p);
  return true;
}

// queue_call writes the command in the protocol's own form (RESP) into a
// reused buffer and hands hiredis the bytes: no format-string parsing and no
// allocation per command on our side.
bool Node::queue_call(const Call& call, bool as_eval) {
  wire_.clear();
  if (call.command == CommandId::ping) {
    wire_ += "*1\r\n$4\r\nPING\r\n";
  } else if (call.command == CommandId::set_nx) {
    // SET key token NX PX ttl
    wire_ += "*6\r\n$3\r\nSET\r\n";
    append_bulk(wire_, call.key);
    append_bulk(wire_, call.arg1);
    wire_ += "$2\r\nNX\r\n$2\r\nPX\r\n";
    append_bulk(wire_, call.arg2);
  } else {
    // EVALSHA sha K key… arg1 [arg2] (EVAL body … after NOSCRIPT)
    const std::size_t id = static_cast<std::size_t>(call.command);
    const std::size_t keys = 1 + call.more_keys.size();
    const std::size_t argc = 3 + keys + (call.arg2.empty() ? 1 : 2);
    char digits[24];
    wire_ += '*';
    wire_.append(digits, std::to_chars(digits, digits + sizeof digits, argc).ptr);
    wire_ += "\r\n";
    append_bulk(wire_, as_eval ? std::string_view("EVAL") : std::string_view("EVALSHA"));
    append_bulk(wire_, as_eval ? script_bodies[id] : std::string_view(shas_[id]));
    append_bulk(wire_, std::string_view(digits, std::to_chars(digits, digits + sizeof digits, keys).ptr));
    append_bulk(wire_, call.key);
    for (const std::string& key : call.more_keys) append_bulk(wire_, key);
    append_bulk(wire_, call.arg1);
    if (!call.arg2.empty()) append_bulk(wire_, call.arg2);
  }
  return redisAsyncFormattedCommand(ac_, reply_trampoline, nullptr, wire_.data(), wire_.size()) == REDIS_OK;
}

bool Node::send(const Call& call, ReplySink* sink, std::size_t slot, std::string& why) {
  if (closing_) {
    why = "client closed";
    return false;
  }
  if (ac_ == nullptr) {
    why = last_error_;
    return false;
  }
  if (unresponsive_ && !is_release(call.command)) {
    why = "not answering: a command sent " + std::to_string(to_ms(clock::now() - unresponsive_since_)) +
          " ms ago is still unanswered; not sent";
    return false;
  }
  if (pending_.size() >= options_.max_pending) {
    why = "too many commands in flight (" + std::to_string(pending_.size()) + ")";
    return false;
  }
  if (!queue_call(call, false)) {
    why = ac_->errstr != nullptr && ac_->err != 0 ? lowercase_first(ac_->errstr) : "connection is closing";
    return false;
  }
  Pending p;
  p.sink = sink;
  p.slot = slot;
  p.call = &call;
  p.sent = clock::now();
  p.deadline = p.sent + options_.node_timeout;
  pending_.push_back(p);
  if (!armed_) rearm();
  return true;
}

void Node::handle_reply(redisAsyncContext* ac, redisReply* reply) {
  if (pending_.empty()) return;  // cannot happen: one entry per hiredis callback
  if (reply != nullptr && ac == ac_) unresponsive_ = false;
  const Pending p = pending_.front();
  pending_.pop_front();
  if (scanned_ > 0) --scanned_;
  const clock::time_point now = clock::now();

  if (p.kind != Kind::script) {
    const bool failed = reply == nullptr || reply->type == REDIS_REPLY_ERROR;
    if (failed && ac == ac_) {
      const std::string what = p.kind == Kind::info ? "INFO server" : "connection setup (AUTH/SELECT/SCRIPT LOAD)";
      drop_connection(what + " failed: " +
                      (reply != nullptr ? std::string(reply->str, reply->len) : lowercase_first(ac->errstr)));
    } else if (p.kind == Kind::info && !failed && ac == ac_ && !closing_) {
      handle_info(reply, now);
    }
    return;
  }

  const bool noscript = reply != nullptr && reply->type == REDIS_REPLY_ERROR &&
                        std::string_view(reply->str, reply->len).substr(0, 8) == "NOSCRIPT";
  if (noscript && !p.retried && is_script(p.call->command) && ac == ac_ && queue_call(*p.call, true)) {
    // The script cache was flushed: run it by its text, which reloads it.
    Pending again = p;
    again.retried = true;
    again.deadline = std::max(p.deadline, now);
    pending_.push_back(again);
    return;
  }
  deliver(p, ac, reply, now);
  rearm();
}

void Node::deliver(const Pending& p, redisAsyncContext* ac, redisReply* reply, clock::time_point now) {
  NodeEvent ev;
  ev.rtt = duration_cast<microseconds>(now - p.sent);
  if (reply == nullptr) {
    ev.kind = EventKind::failed;
    if (closing_) {
      ev.text = "client closed";
    } else if (ac->err != 0 && ac->errstr != nullptr) {
      last_error_ = lowercase_first(ac->errstr);
      ev.text = last_error_;
    } else {
      ev.text = last_error_;
    }
  } else {
    ev.kind = EventKind::reply;
    ev.reply = view_of(reply);
    ev.quarantined = quarantined(now);
    if (ev.quarantined) ev.text = quarantine_text_;
  }
  p.sink->on_node_event(p.slot, ev);
}

void Node::handle_info(redisReply* reply, clock::time_point now) {
  const std::string_view info(reply->str != nullptr ? reply->str : "", reply->len);
  version_ = info_field(info, "redis_version");
  run_id_ = info_field(info, "run_id");
  const std::string uptime = info_field(info, "uptime_in_seconds");
  const milliseconds period = quarantine_period(options_.max_ttl, options_.drift_factor);
  // Without a readable uptime assume the node just restarted.
  const long long up_ms = uptime.empty() ? 0 : std::strtoll(uptime.c_str(), nullptr, 10) * 1000;
  info_uptime_s_ = uptime.empty() ? -1 : up_ms / 1000;
  info_at_ = now;
  quarantine_until_ = up_ms < period.count() ? now + milliseconds{period.count() - up_ms} : clock::time_point{};
  state_ = State::ready;
  failures_ = 0;
  unresponsive_ = false;  // it answered the whole handshake
  uv_timer_stop(&conn_timer_);
}

std::chrono::seconds Node::uptime(clock::time_point now) const noexcept {
  if (info_uptime_s_ < 0) return std::chrono::seconds{-1};
  return std::chrono::seconds{info_uptime_s_} + std::chrono::duration_cast<std::chrono::seconds>(now - info_at_);
}

std::chrono::milliseconds Node::quarantine_left(clock::time_point now) const noexcept {
  if (!options_.quarantine || sabotage().no_quarantine || now >= quarantine_until_) return milliseconds{0};
  return std::chrono::ceil<milliseconds>(quarantine_until_ - now);
}

bool Node::quarantined(clock::time_point now) {
  if (quarantine_left(now).count() == 0) return false;
  quarantine_text_ = "restarted recently; quarantined for another " +
                     std::to_string(to_ms(quarantine_until_ - now)) + " ms";
  return true;
}

void Node::connection_lost(const redisAsyncContext* ac, std::string reason) {
  if (ac != ac_) return;  // a context we already let go of
  ac_ = nullptr;
  state_ = closing_ ? State::closed : State::disconnected;
  last_error_ = std::move(reason);
  connection_gone();
}

void Node::drop_connection(std::string reason) {
  if (ac_ == nullptr) return;
  redisAsyncContext* ac = ac_;
  ac_ = nullptr;
  state_ = closing_ ? State::closed : State::disconnected;
  last_error_ = std::move(reason);
  redisAsyncFree(ac);  // fails every pending command (deferred by hiredis when inside its callback)
  connection_gone();
}

void Node::connection_gone() {
  if (closing_) {
    finish_close();
  } else {
    schedule_reconnect();
  }
}

void Node::schedule_reconnect() {
  if (closing_) return;
  uv_timer_start(
      &conn_timer_, [](uv_timer_t* t) { static_cast<Node*>(t->data)->on_conn_timer(); },
      reconnect_delay(options_, failures_), 0);
}

void Node::on_conn_timer() {
  if (closing_) {
    drop_connection("client closed");  // the graceful close took too long
  } else if (state_ == State::disconnected) {
    connect();
  } else if (state_ == State::connecting) {
    drop_connection("connect timeout after " + std::to_string(options_.connect_timeout.count()) + " ms");
  }
}

void Node::on_deadline() {
  armed_ = false;
  // libuv runs timers before it polls: after a loop turn that stalled (a
  // slow callback, a descheduled process), replies may already wait in the
  // socket. Read them first — an answer that arrived in time is not a
  // timeout. (hiredis treats EAGAIN as "nothing yet".) A timer that fires on
  // time follows a poll that read everything, so it skips the read: with a
  // paused master that read would be one EAGAIN per command.
  if (ac_ != nullptr && state_ != State::disconnected && clock::now() > armed_due_ + milliseconds{1}) {
    redisAsyncHandleRead(ac_);
  }
  const clock::time_point now = clock::now();
  while (scanned_ < pending_.size()) {
    Pending& p = pending_[scanned_];
    if (p.kind == Kind::script && !p.timed_out) {
      if (p.deadline > now) break;
      p.timed_out = true;
      if (!unresponsive_) {
        unresponsive_ = true;
        unresponsive_since_ = p.sent;
      }
      NodeEvent ev;
      ev.kind = EventKind::timeout;
      ev.rtt = duration_cast<microseconds>(now - p.sent);
      p.sink->on_node_event(p.slot, ev);
    }
    ++scanned_;
  }
  if (state_ == State::ready && !pending_.empty() && now - pending_.front().sent >= options_.stall_timeout) {
    drop_connection("no reply for " + std::to_string(to_ms(now - pending_.front().sent)) +
                    " ms (stalled); reconnecting");
    return;
  }
  rearm();
}

void Node::rearm() {
  if (closing_) return;
  bool have = false;
  clock::time_point due{};
  for (std::size_t i = scanned_; i < pending_.size(); ++i) {
    if (pending_[i].kind == Kind::script && !pending_[i].timed_out) {
      // Timer slack: one wake-up serves every deadline within the next
      // 2 ms (a timeout is reported up to 2 ms after its deadline). With a
      // paused master and thousands of commands a second that is one wake-up
      // per 2 ms instead of one per command.
      due = pending_[i].deadline + deadline_slack;
      have = true;
      break;
    }
  }
  if (state_ == State::ready && !pending_.empty()) {
    const clock::time_point stall = pending_.front().sent + options_.stall_timeout;
    due = have ? std::min(due, stall) : stall;
    have = true;
  }
  if (!have || (armed_ && armed_due_ <= due)) return;
  const auto wait = std::chrono::ceil<milliseconds>(due - clock::now());
  armed_ = true;
  armed_due_ = due;
  uv_timer_start(
      &deadline_timer_, [](uv_timer_t* t) { static_cast<Node*>(t->data)->on_deadline(); },
      static_cast<std::uint64_t>(std::max<long long>(wait.count(), 0)), 0);
}

void Node::close() {
  if (closing_) return;
  closing_ = true;
  state_ = State::closed;
  uv_timer_stop(&deadline_timer_);
  uv_timer_stop(&conn_timer_);
  if (ac_ == nullptr || pending_.empty()) {
    drop_connection("client closed");
    finish_close();
    return;
  }
  // Commands may still sit in hiredis's output buffer — the release of a
  // failed attempt, say. A graceful disconnect writes them and waits for
  // their replies; a node that does not answer within the connect timeout
  // plus one node timeout (it may still be connecting) is dropped.
  redisAsyncDisconnect(ac_);
  uv_timer_start(
      &conn_timer_, [](uv_timer_t* t) { static_cast<Node*>(t->data)->on_conn_timer(); },
      static_cast<std::uint64_t>((options_.connect_timeout + options_.node_timeout).count()), 0);
}

void Node::finish_close() {
  if (handles_closing_) return;
  handles_closing_ = true;
  auto closed = [](uv_handle_t* h) {
    auto* self = static_cast<Node*>(h->data);
    if (--self->open_handles_ == 0 && self->on_closed_) self->on_closed_();
  };
  uv_close(reinterpret_cast<uv_handle_t*>(&deadline_timer_), closed);
  uv_close(reinterpret_cast<uv_handle_t*>(&conn_timer_), closed);
}

}  // namespace redlock::detail
