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
#include "keys.hpp"
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
           std::function<void()> on_closed, std::function<void()> on_ready)
    : loop_(loop),
      address_(std::move(address)),
      display_(address_.display()),
      options_(options),
      shas_(shas),
      on_closed_(std::move(on_closed)),
      on_ready_(std::move(on_ready)) {
  for (uv_timer_t* t : {&deadline_timer_, &conn_timer_, &check_timer_}) {
    uv_timer_init(loop_, t);
    t->data = this;
  }
  open_handles_ = 3;
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
  const auto before_write = [](void* self, redisAsyncContext* context) {
    static_cast<Node*>(self)->before_write(context);
  };
  if (!attach_to_loop(ac, loop_, before_write, this)) {
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
  // INFO with its default sections: server (uptime, run id) and memory
  // (the eviction policy). The marker follows once this succeeded.
  const char* argv[1] = {"INFO"};
  const std::size_t lens[1] = {4};
  return queue_raw(Kind::info, 1, argv, lens);
}

// queue_marker runs the marker script (scripts.hpp): at the end of the
// handshake, and every data_check_interval while ready.
bool Node::queue_marker() {
  Result<std::string> epoch = random_token();
  if (!epoch) return false;
  const std::string ms = std::to_string(quarantine_period(options_.max_ttl, options_.drift_factor).count());
  const std::string& sha = shas_[static_cast<std::size_t>(CommandId::marker)];
  const char* argv[6] = {"EVALSHA", sha.c_str(), "1", marker_key.data(), epoch->c_str(), ms.c_str()};
  const std::size_t lens[6] = {7, sha.size(), 1, marker_key.size(), epoch->size(), ms.size()};
  if (!queue_raw(Kind::marker, 6, argv, lens)) return false;
  marker_in_flight_ = true;
  return true;
}

// queue_vote_check writes GET <marker> (behind acquires), preformatted.
bool Node::queue_vote_check() {
  static constexpr std::string_view get_marker = "*2\r\n$3\r\nGET\r\n$14\r\nredlock-marker\r\n";
  static_assert(marker_key.size() == 14);
  if (redisAsyncFormattedCommand(ac_, reply_trampoline, nullptr, get_marker.data(), get_marker.size()) != REDIS_OK) {
    return false;
  }
  Pending p;
  p.kind = Kind::vote_check;
  p.sent = clock::now();
  pending_.push_back(p);
  return true;
}

// before_write: the connection's buffered commands are about to be
// written. If acquires are among them, one vote check goes out behind
// them all in the same write — it covers every acquire before it on this
// connection (one connection's commands run in order).
void Node::before_write(const redisAsyncContext* ac) {
  // Also while closing: acquires written before close() still need their check.
  if (!check_owed_ || ac != ac_ || ac_ == nullptr) return;
  check_owed_ = false;
  if (!queue_vote_check()) drop_connection("cannot queue the data-loss vote check");
}

// queue_raw writes a handshake or check command. It goes before the
// commands still waiting for the handshake: replies come in write order.
bool Node::queue_raw(Kind kind, int argc, const char** argv, const std::size_t* lens) {
  if (redisAsyncCommandArgv(ac_, reply_trampoline, nullptr, argc, argv, lens) != REDIS_OK) return false;
  Pending p;
  p.kind = kind;
  p.sent = clock::now();
  const std::size_t at = pending_.size() - unwritten_;
  pending_.insert(pending_.begin() + static_cast<std::ptrdiff_t>(at), p);
  scanned_ = std::min(scanned_, at);
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
    const std::size_t argc = 3 + keys + (call.arg2.empty() ? 1 : 2 + call.more_args.size());
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
    if (!call.arg2.empty()) {
      append_bulk(wire_, call.arg2);
      for (const std::string& arg : call.more_args) append_bulk(wire_, arg);
    }
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
  if (!duplicate_.empty() && !is_release(call.command)) {
    why = duplicate_;
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
  // Before the handshake completed nothing is written: the command waits.
  // An acquire is followed by the vote check: its yes counts only if the
  // master still has the marker it had (it lost no data up to the SET).
  const bool write_now = state_ == State::ready;
  if (write_now && !queue_call(call, false)) {
    why = ac_->errstr != nullptr && ac_->err != 0 ? lowercase_first(ac_->errstr) : "connection is closing";
    return false;
  }
  Pending p;
  p.written = write_now;
  p.sink = sink;
  p.slot = slot;
  p.call = &call;
  p.sent = clock::now();
  p.deadline = p.sent + options_.node_timeout;
  pending_.push_back(p);
  unwritten_ += write_now ? 0 : 1;
  if (write_now && is_acquire(call.command) && !sabotage().no_data_check) check_owed_ = true;
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

  if (p.kind == Kind::vote_check) return handle_vote_check(p, ac, reply, now);
  if (p.kind != Kind::script) {
    if (p.kind == Kind::marker) marker_in_flight_ = false;
    const bool failed = reply == nullptr || reply->type == REDIS_REPLY_ERROR;
    if (ac != ac_ || closing_) return;
    if (failed) {
      const char* what = p.kind == Kind::info     ? "INFO"
                         : p.kind == Kind::marker ? "the data-loss marker (redlock-marker)"
                                                  : "connection setup (AUTH/SELECT/SCRIPT LOAD)";
      drop_connection(std::string(what) + " failed: " +
                      (reply != nullptr ? std::string(reply->str, reply->len) : lowercase_first(ac->errstr)));
    } else if (p.kind == Kind::info) {
      handle_info(reply, now);
    } else if (p.kind == Kind::marker) {
      handle_marker(reply, now);
    }
    return;
  }

  const bool noscript = reply != nullptr && reply->type == REDIS_REPLY_ERROR &&
                        std::string_view(reply->str, reply->len).substr(0, 8) == "NOSCRIPT";
  const bool check = is_acquire(p.call->command) && !sabotage().no_data_check;
  if (noscript && !p.retried && is_script(p.call->command) && ac == ac_ && queue_call(*p.call, true)) {
    // The script cache was flushed: run it by its text, which reloads it.
    Pending again = p;
    again.retried = true;
    again.deadline = std::max(p.deadline, now);
    pending_.push_back(again);
    check_owed_ = check_owed_ || check;
    return;
  }
  if (check && reply != nullptr && ac == ac_) {
    // Hold the answer back until the vote check behind it has answered.
    HeldReply& h = held_.emplace_back();
    h.view = view_of(reply);
    h.text.assign(h.view.str);
    h.quarantined = quarantined(now);
    h.sink = p.sink;
    h.slot = p.slot;
    h.sent = p.sent;
    rearm();
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
    ev.server = server_;
    ev.quarantined = quarantined(now);
    if (ev.quarantined) ev.text = quarantine_text_;
  }
  p.sink->on_node_event(p.slot, ev);
}

void Node::handle_info(redisReply* reply, clock::time_point now) {
  const std::string_view info(reply->str != nullptr ? reply->str : "", reply->len);
  version_ = info_field(info, "redis_version");
  run_id_ = info_field(info, "run_id");
  server_ = run_id_.empty() ? 0 : std::hash<std::string>{}(run_id_) | 1;  // never 0
  const std::string uptime = info_field(info, "uptime_in_seconds");
  // uptime_in_seconds is a difference of two whole wall-clock seconds: a
  // reading of U means a true uptime anywhere in (U − 1, U + 1). The unsafe
  // side is the short one, so U counts as U − 1 (and, received at `now`,
  // it was read no later than now). Unreadable: assume it just restarted.
  info_uptime_s_ = uptime.empty() ? -1 : std::strtoll(uptime.c_str(), nullptr, 10);
  info_at_ = now;
  const milliseconds up{std::max(info_uptime_s_ - 1, 0LL) * 1000};
  const milliseconds period = quarantine_period(options_.max_ttl, options_.drift_factor);
  if (up < period) raise_quarantine(now + (period - up), "restarted recently");

  const std::string maxmemory = info_field(info, "maxmemory");
  const std::string policy = info_field(info, "maxmemory_policy");
  excluded_.clear();
  if (!options_.accept_eviction && !maxmemory.empty() && maxmemory != "0" && !policy.empty() &&
      policy != "noeviction") {
    excluded_ = "maxmemory-policy " + policy + " (maxmemory " + maxmemory +
                ") may evict lock keys: not counted toward a majority (accept_eviction)";
  }
  if (!queue_marker()) drop_connection("cannot queue the data-loss marker check");
}

// handle_vote_check: the marker as the master had it right after an
// acquire ran. Still our epoch: it lost nothing before that acquire, whose
// answer now counts as given. Missing or another epoch: the master lost its
// data, its yes must not count, and it sits out the quarantine from now.
void Node::handle_vote_check(const Pending&, const redisAsyncContext* ac, const redisReply* reply,
                             clock::time_point now) {
  if (held_.empty()) return;  // nothing waits (the acquires failed, or were retried after NOSCRIPT)
  std::vector<HeldReply> held;
  held.swap(held_);
  if (reply == nullptr || ac != ac_) {
    for (const HeldReply& h : held) {
      NodeEvent ev;
      ev.kind = EventKind::failed;
      ev.rtt = duration_cast<microseconds>(now - h.sent);
      ev.text = closing_ ? std::string_view("client closed") : std::string_view("connection lost before the data check");
      h.sink->on_node_event(h.slot, ev);
    }
    return rearm();
  }
  const std::string_view marker = reply->type == REDIS_REPLY_STRING ? std::string_view(reply->str, reply->len) : "";
  const bool intact = !marker_epoch_.empty() && marker.substr(0, marker.find(' ')) == marker_epoch_;
  if (!intact) {
    raise_quarantine(now + quarantine_period(options_.max_ttl, options_.drift_factor),
                     "lost its data (redlock-marker missing or replaced)");
    marker_epoch_.clear();  // the marker script learns (or writes) the new one
    if (!marker_in_flight_ && state_ == State::ready && !queue_marker()) {
      drop_connection("cannot queue the data-loss marker check");
    }
  }
  const bool lost_now = !intact && quarantined(now);
  for (HeldReply& h : held) {
    NodeEvent ev;
    ev.kind = EventKind::reply;
    ev.rtt = duration_cast<microseconds>(now - h.sent);
    ev.reply = h.view;
    ev.reply.str = h.text;
    ev.server = server_;
    ev.quarantined = h.quarantined || lost_now;
    if (ev.quarantined) ev.text = quarantine_text_;
    h.sink->on_node_event(h.slot, ev);
  }
  rearm();
}

// handle_marker: the marker script's answer. A marker that was missing,
// or carries another epoch than the one seen last, means the master lost
// its data since: it sits out the quarantine period from now.
void Node::handle_marker(const redisReply* reply, clock::time_point now) {
  bool well_formed = reply->type == REDIS_REPLY_ARRAY && reply->elements == 4;
  for (std::size_t i = 0; well_formed && i < 4; ++i) well_formed = reply->element[i]->type == REDIS_REPLY_STRING;
  if (!well_formed) return drop_connection("unexpected reply to the data-loss marker script");
  const std::string_view state(reply->element[0]->str, reply->element[0]->len);
  const std::string epoch(reply->element[1]->str, reply->element[1]->len);
  const milliseconds declared{std::strtoll(reply->element[2]->str, nullptr, 10)};
  const milliseconds age{std::strtoll(reply->element[3]->str, nullptr, 10)};
  const milliseconds period = std::max(quarantine_period(options_.max_ttl, options_.drift_factor), declared);
  const bool lost = state == "created" || (!marker_epoch_.empty() && epoch != marker_epoch_);
  marker_epoch_ = epoch;
  if (!sabotage().no_data_check) {
    if (lost) {
      raise_quarantine(now + period, state == "created" ? "lost its data, or is new (no redlock-marker)"
                                                        : "lost its data (redlock-marker replaced)");
    } else if (age < period) {
      // Found, but young: someone wrote it after a loss (or the master is
      // new) less than a quarantine ago; what was lost may still be valid.
      raise_quarantine(now + (period - age), "lost its data (redlock-marker written " +
                                                 std::to_string(age.count()) + " ms ago)");
    }
  }
  // Another client's larger max_ttl lengthens a restart quarantine too.
  if (info_uptime_s_ >= 0 && declared > quarantine_period(options_.max_ttl, options_.drift_factor)) {
    const milliseconds up{std::max(info_uptime_s_ - 1, 0LL) * 1000};
    if (up < period) raise_quarantine(info_at_ + (period - up), "restarted recently");
  }
  if (state_ != State::ready) become_ready();
}

void Node::raise_quarantine(clock::time_point until, std::string reason) {
  if (until <= quarantine_until_) return;
  quarantine_until_ = until;
  quarantine_reason_ = std::move(reason);
}

// become_ready: the handshake succeeded. Only now are the commands that
// waited for it written, in the order they came.
void Node::become_ready() {
  state_ = State::ready;
  failures_ = 0;
  unresponsive_ = false;  // it answered the whole handshake
  uv_timer_stop(&conn_timer_);
  if (on_ready_) on_ready_();  // may find this master a duplicate of another
  // Write what waited, in order; to a duplicate only releases (its votes
  // must not count, and its writes would answer for the other spelling).
  std::vector<Pending> waited(pending_.end() - static_cast<std::ptrdiff_t>(unwritten_), pending_.end());
  pending_.resize(pending_.size() - unwritten_);
  unwritten_ = 0;
  scanned_ = std::min(scanned_, pending_.size());
  std::vector<Pending> refused;
  for (Pending& p : waited) {
    if (!duplicate_.empty() && !is_release(p.call->command)) {
      refused.push_back(p);
      continue;
    }
    if (!queue_call(*p.call, false)) {
      p.written = false;
      ++unwritten_;
    } else if (is_acquire(p.call->command) && !sabotage().no_data_check) {
      check_owed_ = true;
    }
    pending_.push_back(p);
  }
  for (const Pending& p : refused) {
    NodeEvent ev;
    ev.kind = EventKind::failed;
    ev.text = duplicate_;
    p.sink->on_node_event(p.slot, ev);
  }
  if (unwritten_ > 0) return drop_connection("cannot write a queued command");
  const auto every = static_cast<std::uint64_t>(options_.data_check_interval.count());
  uv_timer_start(
      &check_timer_,
      [](uv_timer_t* t) {
        auto* self = static_cast<Node*>(t->data);
        if (self->state_ == State::ready && !self->closing_ && !self->marker_in_flight_ && !self->queue_marker()) {
          self->drop_connection("cannot queue the data-loss marker check");
        }
      },
      every, every);
}

// fail_unwritten: the connection is gone before its handshake completed;
// what waited for it was never written and never will be.
void Node::fail_unwritten() {
  std::vector<Pending> failed(pending_.end() - static_cast<std::ptrdiff_t>(unwritten_), pending_.end());
  pending_.resize(pending_.size() - unwritten_);
  unwritten_ = 0;
  scanned_ = std::min(scanned_, pending_.size());
  const clock::time_point now = clock::now();
  for (const Pending& p : failed) {
    NodeEvent ev;
    ev.kind = EventKind::failed;
    ev.rtt = duration_cast<microseconds>(now - p.sent);
    ev.text = closing_ ? std::string_view("client closed") : std::string_view(last_error_);
    p.sink->on_node_event(p.slot, ev);
  }
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
  if (!excluded().empty()) {
    quarantine_text_ = excluded();
    return true;
  }
  if (quarantine_left(now).count() == 0) return false;
  quarantine_text_ = quarantine_reason_ + "; quarantined for another " +
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
  uv_timer_stop(&check_timer_);
  marker_in_flight_ = false;
  check_owed_ = false;
  fail_unwritten();
  if (!held_.empty()) handle_vote_check(Pending{}, nullptr, nullptr, clock::now());  // fails what waited
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
  uv_timer_stop(&check_timer_);
  fail_unwritten();  // a handshake still on its way will not complete now
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
  for (uv_timer_t* t : {&deadline_timer_, &conn_timer_, &check_timer_}) {
    uv_close(reinterpret_cast<uv_handle_t*>(t), closed);
  }
}

}  // namespace redlock::detail
