// node_session.cpp — one master's session: the request pipeline (send,
// replies, deadlines, a lost connection). The handshake, data checks and
// quarantine are in node_health.cpp; the contract in node_session.hpp.
#include "node_session.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>

#include "keys.hpp"
#include "resp.hpp"
#include "sabotage.hpp"
#include "scripts.hpp"
#include "sentinel_watch.hpp"
#include "validity.hpp"

namespace redlock::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

ReplyView view_of(const WireReply& r) {
  ReplyView v;
  switch (r.type) {
    case WireReply::Type::status: v.type = ReplyView::Type::status; break;
    case WireReply::Type::string: v.type = ReplyView::Type::string; break;
    case WireReply::Type::integer: v.type = ReplyView::Type::integer; break;
    case WireReply::Type::nil: v.type = ReplyView::Type::nil; break;
    case WireReply::Type::error: v.type = ReplyView::Type::error; break;
    case WireReply::Type::array: v.type = ReplyView::Type::array; break;
  }
  v.integer = r.integer;
  v.str = r.str;
  if (r.type == WireReply::Type::array && r.elements.size() <= v.items.size()) {
    bool integers = true;
    for (std::size_t i = 0; i < r.elements.size(); ++i) {
      integers = integers && r.elements[i].type == WireReply::Type::integer;
      if (integers) v.items[i] = r.elements[i].integer;
    }
    if (integers) v.item_count = static_cast<std::uint8_t>(r.elements.size());
  }
  return v;
}

// view_for is the reply to p as the round reads it. An acquire sent as
// `SET … NX PX ttl GET` (Redis 7 and later: see set_get_) answers nil when it
// set the key and the old value when another holds it; the round reads the
// plain form's +OK and nil, so the two are mapped here, where the form sent
// is known per command and never guessed from the reply. A key of another
// type answers WRONGTYPE in either form of GET, and stays an error. Held by
// readers (the old value is their mark), the nil carries the mark: a
// waiting writer learns of readers from it (docs/design.md, "Read-write
// locks").
ReplyView view_for(bool set_get, const WireReply& r) {
  ReplyView v = view_of(r);
  if (!set_get) return v;
  if (v.type == ReplyView::Type::nil) {
    v.type = ReplyView::Type::status;
    v.str = "OK";
  } else if (v.type == ReplyView::Type::string) {
    v.type = ReplyView::Type::nil;  // held: the old value is another's
    v.str = v.str == readers_mark ? readers_mark : std::string_view();
  }
  return v;
}

constexpr milliseconds deadline_slack{2};

long long to_ms(Clock::duration d) { return duration_cast<milliseconds>(d).count(); }

// public_state: the observer's name for a Connection state (the same order).
ConnectionState public_state(Connection::State s) noexcept {
  static_assert(static_cast<int>(Connection::State::closed) == static_cast<int>(ConnectionState::closed));
  static_assert(static_cast<int>(Connection::State::ready) == static_cast<int>(ConnectionState::ready));
  return static_cast<ConnectionState>(s);
}

}  // namespace

NodeSession::NodeSession(Runtime& runtime, WireFactory& wires, NodeAddress address, const Options& options,
                         const std::string* shas, std::function<void()> on_closed, std::function<void()> on_ready)
    : runtime_(runtime),
      wires_(wires),
      address_(std::move(address)),
      target_(serving_address(address_)),
      display_(address_.display()),
      options_(options),
      shas_(shas),
      on_ready_(std::move(on_ready)),
      deadline_timer_(runtime.timer([this] { on_deadline(); })),
      check_timer_(runtime.timer([this] { on_check_timer(); })),
      conn_(runtime, wires, target_, options, *this, std::move(on_closed)) {}

NodeSession::~NodeSession() = default;

void NodeSession::start() {
  started_ = true;
  if (!closing_ && has_target(target_)) conn_.start();
}

// await_target: the commands taken before a sentinel member's primary was
// named fail once connect_timeout has passed without one.
void NodeSession::await_target() {
  if (target_timer_ == nullptr) {
    target_timer_ = runtime_.timer([this] {
      if (has_target(target_) || closing_) return;
      fail_unwritten("no primary named by the sentinels within " + std::to_string(options_.connect_timeout.count()) +
                     " ms");
    });
  }
  if (!target_timer_->active()) target_timer_->start(options_.connect_timeout);
}

void NodeSession::retarget(const Endpoint& primary) {
  if (closing_) return;
  if (target_timer_) target_timer_->stop();
  const bool same = target_.host == primary.host && target_.port == primary.port;
  target_.host = primary.host;
  target_.port = primary.port;
  if (!started_ || (same && conn_.state() != State::idle)) return;
  retargeting_ = true;  // the old primary's connection going is no loss to report
  conn_.redial("the sentinels name another primary, " + target_.display());
  retargeting_ = false;
}

void NodeSession::on_flush() {
  if (!check_owed_ || !conn_.live()) return;
  check_owed_ = false;
  if (!queue_checks()) conn_.drop("cannot queue the data-loss vote check");
}

// queue_raw writes a handshake or check command. It goes before the
// commands still waiting for the handshake: replies come in write order.
bool NodeSession::queue_raw(Kind kind, std::span<const std::string_view> argv, std::size_t tag) {
  if (!conn_.write(argv)) return false;
  Pending p;
  p.kind = kind;
  p.slot = tag;
  p.sent = runtime_.now();
  const std::size_t at = pending_.size() - unwritten_;
  pending_.insert(pending_.begin() + static_cast<std::ptrdiff_t>(at), p);
  scanned_ = std::min(scanned_, at);
  return true;
}

// queue_asking writes ASKING: the next command runs on this node, which is
// importing its slot (a Cluster's ASK redirect).
bool NodeSession::queue_asking() {
  const std::string_view argv[1] = {"ASKING"};
  return queue_raw(Kind::asking, argv);
}

// queue_call writes one call: PING, SET key value NX PX ttl, or EVALSHA sha
// K key… arg1 [arg2 …] (EVAL body … after NOSCRIPT), through a reused argv.
bool NodeSession::queue_call(const Call& call, bool as_eval) {
  argv_.clear();
  if (call.command == CommandId::ping) {
    argv_.push_back("PING");
  } else if (call.command == CommandId::set_nx) {
    argv_.insert(argv_.end(), {"SET", call.key, call.arg1, "NX", "PX", call.arg2});
    if (set_get_) argv_.push_back("GET");
  } else {
    const std::size_t id = static_cast<std::size_t>(call.command);
    const bool encoded = call.encoded_key_count != 0;
    const std::size_t keys = encoded ? call.encoded_key_count : 1 + call.more_keys.size();
    argv_.push_back(as_eval ? std::string_view("EVAL") : std::string_view("EVALSHA"));
    argv_.push_back(as_eval ? script_bodies[id] : std::string_view(shas_[id]));
    argv_.emplace_back(numkeys_, std::to_chars(numkeys_, numkeys_ + sizeof numkeys_, keys).ptr);
    if (encoded) {
      const std::string_view tail[] = {call.encoded_keys, call.encoded_args};
      return conn_.write_encoded(argv_, call.encoded_key_count + call.encoded_arg_count, tail);
    }
    argv_.push_back(call.key);
    for (const std::string& key : call.more_keys) argv_.push_back(key);
    argv_.push_back(call.arg1);
    if (call.command == CommandId::marker) {
      // A slot's marker (a Cluster member's): judged against the server
      // that runs it, so its run id and replication id are this
      // connection's, filled in as it is written.
      argv_.insert(argv_.end(), {call.arg2, run_id_, replid_});
    } else if (!call.arg2.empty()) {
      argv_.push_back(call.arg2);
      for (const std::string& arg : call.more_args) argv_.push_back(arg);
    }
  }
  return conn_.write(argv_);
}

bool NodeSession::send(const Call& call, ReplySink* sink, std::size_t slot, std::string& why, bool asking) {
  if (closing_) {
    why = "client closed";
    return false;
  }
  // A sentinel member whose primary has not been named yet takes the
  // command as it would during a handshake: unwritten, until the primary
  // is named and its handshake completes, or connect_timeout passes.
  const bool awaiting_target = started_ && !has_target(target_);
  if (!conn_.live() && !awaiting_target) {
    why = conn_.last_error();
    return false;
  }
  if (!duplicate_.empty() && !is_release(call.command)) {
    why = duplicate_;
    return false;
  }
  const clock::time_point now = runtime_.now();
  if (unresponsive_ && !is_release(call.command)) {
    why = "not answering: a command sent " + std::to_string(to_ms(now - unresponsive_since_)) +
          " ms ago is still unanswered; not sent";
    return false;
  }
  if (pending_.size() >= options_.max_pending) {
    why = "too many commands in flight (" + std::to_string(pending_.size()) + ")";
    return false;
  }
  // Before the handshake completed nothing is written: the command waits,
  // bounded by the connection's connect deadline (which fails it with the
  // stage it waited in); its node timeout runs from its write. (Counted
  // from here, a first command on a master a few round trips away timed
  // out while its handshake ran.)
  // An acquire is followed by the vote check: its yes counts only if the
  // master still has the marker it had (it lost no data up to the SET).
  const bool write_now = conn_.state() == State::ready;
  if (write_now && asking && !queue_asking()) {
    why = "connection is closing";
    return false;
  }
  if (write_now && !queue_call(call, false)) {
    why = "connection is closing";
    return false;
  }
  Pending p;
  p.asking = asking;
  p.set_get = write_now && sends_get(call);
  p.sink = sink;
  p.slot = slot;
  p.call = &call;
  p.sent = now;
  // Unwritten: a bound behind the connect deadline, which comes first.
  p.deadline = now + options_.node_timeout + (write_now ? milliseconds{0} : options_.connect_timeout);
  pending_.push_back(p);
  unwritten_ += write_now ? 0 : 1;
  if (awaiting_target) await_target();
  if (write_now && holds_back(call.command)) check_owed_ = true;
  // Even when the timer is armed (for a stall, say): this deadline may
  // come first.
  arm_at(p.deadline + deadline_slack);
  return true;
}

void NodeSession::on_reply(const WireReply& reply) {
  // One reply per command written, in order: a reply with none written
  // and unanswered is the server's own (broken, or not a Redis at all);
  // nothing it says after can be matched to a command.
  if (pending_.size() == unwritten_) {
    if (sabotage().keep_unsolicited) return;
    return conn_.drop("unsolicited reply (no command was waiting for one); reconnecting");
  }
  unresponsive_ = false;
  const Pending p = pending_.front();
  pending_.pop_front();
  if (scanned_ > 0) --scanned_;
  const clock::time_point now = runtime_.now();

  if (p.kind == Kind::vote_check) {
    handle_vote_check(reply, now);
  } else if (p.kind == Kind::wait) {
    handle_wait(reply, static_cast<long long>(p.slot));  // WAIT's count, or -1: not known
  } else if (p.kind == Kind::replication) {
    handle_replication(reply, now);
  } else if (p.kind == Kind::asking || p.kind == Kind::keepalive) {
    if (reply.type == WireReply::Type::error && !closing_) {
      conn_.drop(std::string(p.kind == Kind::asking ? "ASKING" : "PING") + " failed: " + resp::server_text(reply.str));
    }
  } else if (p.kind == Kind::ready_ping) {
    if (reply.type == WireReply::Type::error) {
      if (!closing_) conn_.drop("PING failed: " + resp::server_text(reply.str));
    } else if (conn_.state() == State::handshaking) {
      become_ready();
    }
  } else if (p.kind != Kind::script) {
    if (p.kind == Kind::marker) marker_in_flight_ = false;
    if (closing_) {
      // nothing more to set up
    } else if (p.kind == Kind::scripts_exist) {
      load_missing(reply);
    } else if (reply.type == WireReply::Type::error) {
      const char* what = p.kind == Kind::info     ? "INFO"
                         : p.kind == Kind::marker ? "the data-loss marker (redlock-marker)"
                                                  : "connection setup (SELECT/SCRIPT LOAD)";
      conn_.drop(std::string(what) + " failed: " + resp::server_text(reply.str));
    } else if (p.kind == Kind::info) {
      handle_info(reply, now);
    } else if (p.kind == Kind::marker) {
      handle_marker(reply, now);
    }
  } else {
    const bool noscript = reply.type == WireReply::Type::error && reply.str.substr(0, 8) == "NOSCRIPT";
    const bool check = holds_back(p.call->command);
    if (noscript && !p.retried && !closing_ && is_script(p.call->command) && (!p.asking || queue_asking()) &&
        queue_call(*p.call, true)) {
      // The script cache was flushed: run it by its text, which reloads it.
      Pending again = p;
      again.retried = true;
      again.deadline = std::max(p.deadline, now);
      pending_.push_back(again);
      check_owed_ = check_owed_ || check;
    } else if (check) {
      // Hold the answer back until the vote check behind it has answered.
      HeldReply& h = held_.emplace_back();
      h.view = view_for(p.set_get, reply);
      h.text.assign(h.view.str);
      h.quarantined = quarantined(now);
      h.sink = p.sink;
      h.slot = p.slot;
      h.sent = p.sent;
    } else if (shard_ && p.call->command == CommandId::marker) {
      deliver_marker(p, reply, now);
    } else {
      deliver(p, reply, now);
    }
  }
  // A graceful close ends with the last answer it waited for.
  if (closing_ && conn_.live() && pending_.empty() && held_.empty()) {
    conn_.drop("client closed");
    return;
  }
  rearm();
}

void NodeSession::deliver(const Pending& p, const WireReply& reply, clock::time_point now) {
  NodeEvent ev;
  ev.rtt = duration_cast<microseconds>(now - p.sent);
  ev.kind = EventKind::reply;
  ev.reply = view_for(p.set_get, reply);
  ev.server = server_;
  ev.quarantined = quarantined(now);
  if (ev.quarantined) ev.text = quarantine_text_;
  if (telemetry_ != nullptr && reply.type == WireReply::Type::error) telemetry_->node_error(index_);
  p.sink->on_node_event(p.slot, ev);
}

void NodeSession::fail(const Pending& p, std::string_view why, clock::time_point now) {
  NodeEvent ev;
  ev.kind = EventKind::failed;
  ev.rtt = duration_cast<microseconds>(now - p.sent);
  ev.text = why;
  if (telemetry_ != nullptr && !closing_) telemetry_->node_error(index_);
  p.sink->on_node_event(p.slot, ev);
}

// fail_held: the connection went before the vote check answered.
void NodeSession::fail_held() {
  std::vector<HeldReply> held;
  held.swap(held_);
  const clock::time_point now = runtime_.now();
  for (const HeldReply& h : held) {
    NodeEvent ev;
    ev.kind = EventKind::failed;
    ev.rtt = duration_cast<microseconds>(now - h.sent);
    ev.text = closing_ ? std::string_view("client closed") : std::string_view("connection lost before the data check");
    h.sink->on_node_event(h.slot, ev);
  }
}

// fail_unwritten: the connection is gone, or closing, before its handshake
// completed; what waited for it was never written and never will be.
void NodeSession::fail_unwritten(std::string_view why) {
  std::vector<Pending> failed(pending_.end() - static_cast<std::ptrdiff_t>(unwritten_), pending_.end());
  pending_.resize(pending_.size() - unwritten_);
  unwritten_ = 0;
  scanned_ = std::min(scanned_, pending_.size());
  const clock::time_point now = runtime_.now();
  for (const Pending& p : failed) fail(p, why, now);
}

// fail_written: the connection is gone; what was written on it will never
// be answered (its bytes may or may not have reached the master).
void NodeSession::fail_written() {
  std::deque<Pending> gone;
  gone.swap(pending_);
  scanned_ = 0;
  const clock::time_point now = runtime_.now();
  for (const Pending& p : gone) {
    if (p.kind == Kind::script) fail(p, closing_ ? std::string_view("client closed") : conn_.last_error(), now);
  }
}

// on_down: the connection is gone (its late bytes may still reach the
// master: nothing relies on them being lost); what was on it fails. The
// Connection reconnects after its backoff, unless closing.
void NodeSession::on_down(std::string_view why) {
  const bool report = on_lost_ && !closing_ && !retargeting_;
  const std::string reason = report ? std::string(why) : std::string();  // `why` may not outlive the sinks below
  if (check_timer_) check_timer_->stop();
  marker_in_flight_ = false;
  check_owed_ = false;
  refusal_.clear();
  unwritten_ = 0;  // fail_written fails them too, in order
  fail_written();
  fail_held();
  if (report) on_lost_(reason);
}

// on_state: once closed, the session lets go of its timers (the Connection
// reports the close on a later turn).
void NodeSession::on_state(State from, State to, std::string_view reason) {
  if (telemetry_ != nullptr) telemetry_->connection(index_, false, public_state(from), public_state(to), reason);
  if (to != State::closed) return;
  deadline_timer_.reset();
  check_timer_.reset();
  quarantine_timer_.reset();
  target_timer_.reset();
  armed_ = false;
}

void NodeSession::on_deadline() {
  armed_ = false;
  // Timers run before the loop polls: after a loop turn that stalled (a
  // slow callback, a descheduled process), replies may already wait in the
  // socket. Read them first — an answer that arrived in time is not a
  // timeout. A timer that fires on time follows a poll that read
  // everything, so it skips the read: with a paused master that read would
  // be one EAGAIN per command.
  if (runtime_.now() > armed_due_ + milliseconds{1}) conn_.read_now();
  const clock::time_point now = runtime_.now();
  while (scanned_ < pending_.size()) {
    Pending& p = pending_[scanned_];
    if (p.kind == Kind::script && !p.timed_out) {
      if (p.deadline > now) break;
      p.timed_out = true;
      if (telemetry_ != nullptr) telemetry_->node_timeout(index_);
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
  if (conn_.state() == State::ready && !pending_.empty() && now - pending_.front().sent >= options_.stall_timeout) {
    if (telemetry_ != nullptr) telemetry_->stalled(index_);
    conn_.drop("no reply for " + std::to_string(to_ms(now - pending_.front().sent)) +
                    " ms (stalled); reconnecting");
    return;
  }
  rearm();
}

// rearm arms the deadline timer for the first deadline still to judge, or
// the stall of the oldest command, whichever comes first.
void NodeSession::rearm() {
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
  if (conn_.state() == State::ready && !pending_.empty()) {
    const clock::time_point stall = pending_.front().sent + options_.stall_timeout;
    due = have ? std::min(due, stall) : stall;
    have = true;
  }
  if (have) arm_at(due);
}

// arm_at makes the deadline timer fire by `due` (an earlier arming stays).
void NodeSession::arm_at(clock::time_point due) {
  if (closing_ || deadline_timer_ == nullptr || (armed_ && armed_due_ <= due)) return;
  armed_ = true;
  armed_due_ = due;
  deadline_timer_->start(std::max(std::chrono::ceil<milliseconds>(due - runtime_.now()), milliseconds{0}));
}

void NodeSession::close() {
  if (closing_) return;
  closing_ = true;
  deadline_timer_->stop();
  armed_ = false;
  check_timer_->stop();
  if (quarantine_timer_) quarantine_timer_->stop();
  fail_unwritten("client closed");  // a handshake still on its way will not complete now
  if (target_timer_) target_timer_->stop();
  // Commands may still be on their way — the release of a failed attempt,
  // say. Wait for their replies; a node that does not answer within the
  // connect timeout plus one node timeout (it may still be connecting) is
  // dropped.
  conn_.close(pending_.empty() ? milliseconds{0} : options_.connect_timeout + options_.node_timeout);
}

}  // namespace redlock::detail
