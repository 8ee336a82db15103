// node_session.cpp — one master's session. See node_session.hpp for the
// contract, docs/design.md §5 for why each step is there.
#include "node_session.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>

#include "keys.hpp"
#include "sabotage.hpp"
#include "scripts.hpp"
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
// type answers WRONGTYPE in either form of GET, and stays an error.
ReplyView view_for(bool set_get, const WireReply& r) {
  ReplyView v = view_of(r);
  if (!set_get) return v;
  if (v.type == ReplyView::Type::nil) {
    v.type = ReplyView::Type::status;
    v.str = "OK";
  } else if (v.type == ReplyView::Type::string) {
    v.type = ReplyView::Type::nil;  // held: the old value is another's
    v.str = {};
  }
  return v;
}

// major_version is the leading number of a redis_version ("7.0.15" → 7),
// 0 when there is none.
int major_version(std::string_view version) {
  int major = 0;
  const auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), major);
  return ec == std::errc{} && end != version.data() ? major : 0;
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

// bounded_number reads a server's decimal integer: digits only, and at
// most `most` — anything else (a sign, junk, a number that would overflow
// the arithmetic it goes into) is no number at all.
std::optional<long long> bounded_number(std::string_view text, long long most) {
  long long n = 0;
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size() || n > most) return std::nullopt;
  return n;
}

// The largest quarantine any valid client declares (max_ttl_ms and
// drift_factor at their bounds, src/config.cpp); a marker that declares
// more is not believed, and counts as this much.
// (quarantine_period(2^31 − 1 ms, 0.5): max_ttl plus half of it, rounded
// up, plus 2 ms.)
constexpr long long most_max_ttl_ms = std::numeric_limits<std::int32_t>::max();
constexpr milliseconds most_declared{most_max_ttl_ms + (most_max_ttl_ms + 1) / 2 + 2};
// A server up longer than a century is lying; its uptime is unknown.
constexpr long long most_uptime_s = std::chrono::duration_cast<std::chrono::seconds>(most_server_time).count();

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
      display_(address_.display()),
      options_(options),
      shas_(shas),
      on_ready_(std::move(on_ready)),
      deadline_timer_(runtime.timer([this] { on_deadline(); })),
      check_timer_(runtime.timer([this] { on_check_timer(); })),
      conn_(runtime, wires, address_, options, *this, std::move(on_closed)) {}

NodeSession::~NodeSession() = default;

void NodeSession::start() {
  if (!closing_) conn_.start();
}

// on_open: a new connection (its AUTH already written). The rest of the
// handshake goes right behind it; the connect deadline runs until the
// marker's answer completes it.
bool NodeSession::on_open() {
  if (address_.db != 0) {
    const std::string db = std::to_string(address_.db);
    const std::string_view argv[2] = {"SELECT", db};
    if (!queue_raw(Kind::handshake, argv)) return false;
  }
  // INFO with its default sections: server (uptime, run id) and memory
  // (the eviction policy). First, and small: a server that wants a
  // password says NOAUTH to it (an unauthenticated connection may not even
  // send a command of more than 10 arguments).
  const std::string_view info[1] = {"INFO"};
  if (!queue_raw(Kind::info, info)) return false;
  // The scripts are loaded before the first EVALSHA: a NOSCRIPT retry goes
  // to the back of the pipeline, where a release sent meanwhile would
  // overtake the acquire it is meant to undo. So NOSCRIPT only follows a
  // SCRIPT FLUSH. Which ones the server lacks, SCRIPT EXISTS tells in one
  // command (a server other clients use has them all: a process start
  // costs it one command, not one per script); its answer loads the
  // missing ones and then runs the marker (load_missing), so both go
  // before anything the handshake holds back.
  std::array<std::string_view, 2 + script_count> exists{"SCRIPT", "EXISTS"};
  for (std::size_t i = 0; i < script_count; ++i) exists[2 + i] = shas_[i];
  return queue_raw(Kind::scripts_exist, exists);
}

// load_missing: SCRIPT EXISTS answered one 0 or 1 per script, in order;
// SCRIPT LOAD each 0. Refused by the ACL (one without script|exists, as
// docs/security.md had it before), it loads them all. Any other error ends
// the connection like a failed handshake; any other answer is no Redis's.
void NodeSession::load_missing(const WireReply& reply) {
  const bool refused = reply.type == WireReply::Type::error && reply.str.starts_with("NOPERM");
  if (reply.type == WireReply::Type::error && !refused) {
    return conn_.drop("SCRIPT EXISTS failed: " + std::string(reply.str));
  }
  const bool well_formed =
      refused || (reply.type == WireReply::Type::array && reply.elements.size() == script_count &&
                  std::all_of(reply.elements.begin(), reply.elements.end(), [](const WireReply& e) {
                    return e.type == WireReply::Type::integer && (e.integer == 0 || e.integer == 1);
                  }));
  if (!well_formed) {
    return conn_.drop("SCRIPT EXISTS answered no array of " + std::to_string(script_count) + " zeros and ones");
  }
  for (std::size_t i = 0; i < script_count; ++i) {
    if (!refused && reply.elements[i].integer == 1) continue;
    const std::string_view load[3] = {"SCRIPT", "LOAD", script_bodies[i]};
    if (!queue_raw(Kind::handshake, load)) return conn_.drop("cannot queue SCRIPT LOAD");
  }
  if (!queue_marker()) conn_.drop("cannot queue the data-loss marker check");
}

// queue_marker runs the marker script (scripts.hpp): at the end of the
// handshake, and every data_check_interval while ready.
bool NodeSession::queue_marker() {
  Result<std::string> epoch = runtime_.random_token();
  if (!epoch) return false;
  const std::string ms = std::to_string(period().count());
  const std::string_view argv[8] = {"EVALSHA", shas_[static_cast<std::size_t>(CommandId::marker)], "2",
                                    marker_key, marker_server_key, *epoch, ms, run_id_};
  if (!queue_raw(Kind::marker, argv)) return false;
  marker_in_flight_ = true;
  return true;
}

// queue_vote_check writes GET <marker> behind the acquires of this flush.
bool NodeSession::queue_vote_check() {
  const std::string_view argv[2] = {"GET", marker_key};
  return queue_raw(Kind::vote_check, argv);
}

// on_flush: the connection's written commands are about to go out. If
// acquires are among them, one vote check goes out behind them all in the
// same write — it covers every acquire before it on this connection (one
// connection's commands run in order). Also while closing: acquires
// written before close() still need their check.
void NodeSession::on_flush() {
  if (!check_owed_ || !conn_.live()) return;
  check_owed_ = false;
  if (!queue_vote_check()) conn_.drop("cannot queue the data-loss vote check");
}

// queue_raw writes a handshake or check command. It goes before the
// commands still waiting for the handshake: replies come in write order.
bool NodeSession::queue_raw(Kind kind, std::span<const std::string_view> argv) {
  if (!conn_.write(argv)) return false;
  Pending p;
  p.kind = kind;
  p.sent = runtime_.now();
  const std::size_t at = pending_.size() - unwritten_;
  pending_.insert(pending_.begin() + static_cast<std::ptrdiff_t>(at), p);
  scanned_ = std::min(scanned_, at);
  return true;
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
    if (!call.arg2.empty()) {
      argv_.push_back(call.arg2);
      for (const std::string& arg : call.more_args) argv_.push_back(arg);
    }
  }
  return conn_.write(argv_);
}

bool NodeSession::send(const Call& call, ReplySink* sink, std::size_t slot, std::string& why) {
  if (closing_) {
    why = "client closed";
    return false;
  }
  if (!conn_.live()) {
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
  if (write_now && !queue_call(call, false)) {
    why = "connection is closing";
    return false;
  }
  Pending p;
  p.set_get = write_now && sends_get(call);
  p.sink = sink;
  p.slot = slot;
  p.call = &call;
  p.sent = now;
  // Unwritten: a bound behind the connect deadline, which comes first.
  p.deadline = now + options_.node_timeout + (write_now ? milliseconds{0} : options_.connect_timeout);
  pending_.push_back(p);
  unwritten_ += write_now ? 0 : 1;
  if (write_now && is_acquire(call.command) && !sabotage().no_data_check) check_owed_ = true;
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
      conn_.drop(std::string(what) + " failed: " + std::string(reply.str));
    } else if (p.kind == Kind::info) {
      handle_info(reply, now);
    } else if (p.kind == Kind::marker) {
      handle_marker(reply, now);
    }
  } else {
    const bool noscript = reply.type == WireReply::Type::error && reply.str.substr(0, 8) == "NOSCRIPT";
    const bool check = is_acquire(p.call->command) && !sabotage().no_data_check;
    if (noscript && !p.retried && !closing_ && is_script(p.call->command) && queue_call(*p.call, true)) {
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

void NodeSession::handle_info(const WireReply& reply, clock::time_point now) {
  const std::string_view info = reply.str;
  version_ = info_field(info, "redis_version");
  // SET's GET option goes with NX from Redis 7.0 on (6.2: a syntax error).
  set_get_ = major_version(version_) >= 7;
  const std::string previous_run_id = std::move(run_id_);
  run_id_ = info_field(info, "run_id");
  if (run_id_.size() > 64 || run_id_.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) run_id_.clear();
  if (sabotage().no_failover_check) run_id_.clear();
  server_ = run_id_.empty() ? 0 : std::hash<std::string>{}(run_id_) | 1;  // never 0
  // Another server behind the same address (a failover, a replacement, a
  // restart): whatever it holds, it was not there for our earlier votes.
  if (!previous_run_id.empty() && run_id_ != previous_run_id) {
    note_loss(now, "another server answers at this address (run_id changed: a failover, replacement or restart)");
  }
  // uptime_in_seconds is a difference of two whole wall-clock seconds: a
  // reading of U means a true uptime anywhere in (U − 1, U + 1). The unsafe
  // side is the short one, so U counts as U − 1 (and, received at `now`,
  // it was read no later than now). Unreadable or absurd: assume it just
  // restarted.
  const std::optional<long long> uptime = bounded_number(info_field(info, "uptime_in_seconds"), most_uptime_s);
  info_uptime_s_ = uptime.value_or(-1);
  info_at_ = now;
  // The restart counts as a loss once the marker's answer (queued after
  // the scripts, before any command) has not shown a clean start.
  const milliseconds up{std::max(info_uptime_s_ - 1, 0LL) * 1000};
  restart_at_ = now - up;

  const std::string maxmemory = info_field(info, "maxmemory");
  const std::string policy = info_field(info, "maxmemory_policy");
  excluded_.clear();
  if (!options_.accept_eviction && !maxmemory.empty() && maxmemory != "0" && !policy.empty() &&
      policy != "noeviction") {
    excluded_ = "maxmemory-policy " + policy + " (maxmemory " + maxmemory +
                ") may evict lock keys: not counted toward a majority (accept_eviction)";
  }
  // The marker follows SCRIPT EXISTS's answer (load_missing).
}

// handle_vote_check: the marker as the master had it right after an
// acquire ran. Still our epoch: it lost nothing before that acquire, whose
// answer now counts as given. Missing or another epoch: the master lost its
// data, its yes must not count, and it sits out the quarantine from now.
void NodeSession::handle_vote_check(const WireReply& reply, clock::time_point now) {
  if (held_.empty()) return;  // nothing waits (the acquires failed, or were retried after NOSCRIPT)
  std::vector<HeldReply> held;
  held.swap(held_);
  const std::string_view marker = reply.type == WireReply::Type::string ? reply.str : std::string_view();
  const bool intact = !marker_epoch_.empty() && marker.substr(0, marker.find(' ')) == marker_epoch_;
  if (!intact) {
    note_loss(now, "lost its data (redlock-marker missing or replaced)");
    marker_epoch_.clear();  // the marker script learns (or writes) the new one
    if (!marker_in_flight_ && conn_.state() == State::ready && !queue_marker()) {
      conn_.drop("cannot queue the data-loss marker check");
    }
  }
  // A held yes counts only if nothing raised a quarantine since it came:
  // a marker check written between the acquire and this GET may have seen
  // the loss and learnt the new epoch, which then reads as "intact" here.
  const bool quarantined_now = quarantined(now);
  for (HeldReply& h : held) {
    NodeEvent ev;
    ev.kind = EventKind::reply;
    ev.rtt = duration_cast<microseconds>(now - h.sent);
    ev.reply = h.view;
    ev.reply.str = h.text;
    ev.server = server_;
    ev.quarantined = h.quarantined || quarantined_now;
    if (ev.quarantined) ev.text = quarantine_text_;
    h.sink->on_node_event(h.slot, ev);
  }
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

// handle_marker: the marker script's answer. A marker that was missing,
// carries another epoch than the one seen last, or was written by another
// server (a promoted replica has its primary's marker) means the master
// lost its data, or is another one, since: it sits out the quarantine from
// now. A young marker means someone saw that `age` ago. The numbers are
// the server's: checked before any arithmetic.
void NodeSession::handle_marker(const WireReply& reply, clock::time_point now) {
  bool well_formed = reply.type == WireReply::Type::array && reply.elements.size() == 4;
  for (std::size_t i = 0; well_formed && i < 4; ++i) well_formed = reply.elements[i].type == WireReply::Type::string;
  const std::optional<long long> declared_ms =
      well_formed ? bounded_number(reply.elements[2].str, std::numeric_limits<long long>::max()) : std::nullopt;
  const std::optional<long long> age_ms =
      well_formed ? bounded_number(reply.elements[3].str, std::numeric_limits<long long>::max()) : std::nullopt;
  if (!declared_ms || !age_ms) return conn_.drop("unexpected reply to the data-loss marker script");
  const std::string_view state = reply.elements[0].str;
  const std::string epoch(reply.elements[1].str);
  // More than any client can declare: not believed, the most counts.
  const milliseconds declared = std::min(milliseconds{*declared_ms}, most_declared);
  if (declared > share_->largest) {
    share_->largest = declared;  // every master of this client sits out at least this from now on
    if (share_->raised) share_->raised();
  }
  const milliseconds age = std::min(milliseconds{*age_ms}, period());
  // Seen before: a marker gone or re-written since is a loss. At the first
  // contact a missing or young marker cannot tell a new master (a new bed)
  // from one that lost its data; the message says both, the new one first.
  const bool seen_before = marker_met_;
  const bool lost = state == "created" || state == "replaced" || (!marker_epoch_.empty() && epoch != marker_epoch_);
  marker_epoch_ = epoch;
  marker_met_ = true;
  // "clean": this very server (the run id INFO just read) was started
  // empty where no lock could be outstanding, and has lost nothing since
  // (a loss takes the marker with it). Its restart, and the marker's age,
  // are then no loss; anything else is.
  const bool clean = state == "clean" && !lost;
  if (restart_at_) {
    if (!clean) note_loss(*restart_at_, "restarted recently");
    restart_at_.reset();
  }
  if (!sabotage().no_data_check) {
    if (lost) {
      note_loss(now, state == "replaced" ? "another server now (redlock-marker written by another run_id)"
                     : !seen_before      ? "new, or lost its data (no redlock-marker yet)"
                     : state == "created" ? "lost its data (redlock-marker missing)"
                                          : "lost its data (redlock-marker replaced)");
    } else if (!clean && age < period()) {
      // Found, but young: someone wrote it less than a quarantine ago, on a
      // new master or after a loss; what was lost may still be valid.
      note_loss(now - age,
                "new, or lost its data (redlock-marker written " + std::to_string(age.count()) + " ms ago)");
    }
  }
  if (conn_.state() == State::handshaking) become_ready();
}

// period: how long a master sits out after it may have lost data — this
// client's max_ttl plus drift, or the largest any master of this client
// declares (another client's), whichever is longer.
milliseconds NodeSession::period() const noexcept {
  if (sabotage().own_quarantine) return quarantine_period(options_.max_ttl, options_.drift_factor);
  return std::max(quarantine_period(options_.max_ttl, options_.drift_factor), share_->largest);
}

// note_loss: the master may have lost its data (or been another server) at
// `at`; it sits out period() from then — again, and longer, whenever the
// period grows (reapply_quarantine).
void NodeSession::note_loss(clock::time_point at, std::string reason) {
  if (!last_loss_ || at > *last_loss_) {
    last_loss_ = at;
    last_loss_reason_ = reason;
  }
  raise_quarantine(at + period(), std::move(reason));
}

void NodeSession::reapply_quarantine() {
  if (last_loss_) raise_quarantine(*last_loss_ + period(), last_loss_reason_);
}

void NodeSession::raise_quarantine(clock::time_point until, std::string reason) {
  if (until <= quarantine_until_) return;
  const clock::time_point now = runtime_.now();
  const bool fresh = quarantine_until_ <= now;
  quarantine_until_ = until;
  quarantine_reason_ = std::move(reason);
  text_ms_ = -1;
  if (telemetry_ == nullptr || !options_.quarantine) return;
  // A new quarantine is counted and told; a longer one only moves the
  // moment the observer hears it is over.
  if (fresh) telemetry_->quarantine(index_, true, std::chrono::ceil<milliseconds>(until - now), quarantine_reason_);
  if (!telemetry_->observed() || closing_) return;
  if (quarantine_timer_ == nullptr) quarantine_timer_ = runtime_.timer([this] { on_quarantine_over(); });
  quarantine_timer_->start(std::chrono::ceil<milliseconds>(until - now));
}

// on_quarantine_over: the observer hears that the master counts again.
void NodeSession::on_quarantine_over() {
  const clock::time_point now = runtime_.now();
  if (now < quarantine_until_) {  // raised meanwhile
    quarantine_timer_->start(std::chrono::ceil<milliseconds>(quarantine_until_ - now));
    return;
  }
  telemetry_->quarantine(index_, false, milliseconds{0}, quarantine_reason_);
}

// become_ready: the handshake succeeded. Only now are the commands that
// waited for it written, in the order they came.
void NodeSession::become_ready() {
  conn_.ready();
  unresponsive_ = false;  // it answered the whole handshake
  if (on_ready_) on_ready_();  // may find this master a duplicate of another
  // Write what waited, in order; to a duplicate only releases (its votes
  // must not count, and its writes would answer for the other spelling).
  std::vector<Pending> waited(pending_.end() - static_cast<std::ptrdiff_t>(unwritten_), pending_.end());
  pending_.resize(pending_.size() - unwritten_);
  unwritten_ = 0;
  scanned_ = std::min(scanned_, pending_.size());
  std::vector<Pending> refused;
  const clock::time_point now = runtime_.now();
  for (Pending& p : waited) {
    if (!duplicate_.empty() && !is_release(p.call->command)) {
      refused.push_back(p);
      continue;
    }
    if (!queue_call(*p.call, false)) {
      ++unwritten_;
    } else {
      p.set_get = sends_get(*p.call);
      if (is_acquire(p.call->command) && !sabotage().no_data_check) check_owed_ = true;
      // Its node timeout (and its round trip) run from now, as a command
      // written at once: deadlines stay in order along pending_.
      p.sent = now;
      p.deadline = now + options_.node_timeout;
    }
    pending_.push_back(p);
  }
  for (const Pending& p : refused) fail(p, duplicate_, now);
  if (unwritten_ > 0) return conn_.drop("cannot write a queued command");
  rearm();  // the written ones' deadlines, now + node_timeout
  check_timer_->start(options_.data_check_interval);
}

// on_check_timer: the periodic marker check. It is also the keep-alive
// of an idle connection: the stall check covers it like any command, so a
// master that stopped answering is dropped within stall_timeout even when
// nothing else is sent to it.
void NodeSession::on_check_timer() {
  if (conn_.state() != State::ready || closing_) return;
  check_timer_->start(options_.data_check_interval);
  if (marker_in_flight_) return;
  if (!queue_marker()) return conn_.drop("cannot queue the data-loss marker check");
  rearm();
}

// fail_unwritten: the connection is gone, or closing, before its handshake
// completed; what waited for it was never written and never will be.
void NodeSession::fail_unwritten() {
  std::vector<Pending> failed(pending_.end() - static_cast<std::ptrdiff_t>(unwritten_), pending_.end());
  pending_.resize(pending_.size() - unwritten_);
  unwritten_ = 0;
  scanned_ = std::min(scanned_, pending_.size());
  const clock::time_point now = runtime_.now();
  for (const Pending& p : failed) fail(p, closing_ ? std::string_view("client closed") : conn_.last_error(), now);
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

std::chrono::seconds NodeSession::uptime(clock::time_point now) const noexcept {
  if (info_uptime_s_ < 0) return std::chrono::seconds{-1};
  return std::chrono::seconds{info_uptime_s_} + std::chrono::duration_cast<std::chrono::seconds>(now - info_at_);
}

std::chrono::milliseconds NodeSession::quarantine_left(clock::time_point now) const noexcept {
  if (!options_.quarantine || sabotage().no_quarantine || now >= quarantine_until_) return milliseconds{0};
  return std::chrono::ceil<milliseconds>(quarantine_until_ - now);
}

// quarantined: whether replies from this master count for nothing now,
// and why in quarantine_text_. Every reply of a round asks, so the text is
// rebuilt only when it changes (another reason, another whole ms left).
bool NodeSession::quarantined(clock::time_point now) {
  if (!excluded().empty()) {
    quarantine_text_ = excluded();
    text_ms_ = -1;
    return true;
  }
  if (quarantine_left(now).count() == 0) return false;
  const long long ms = to_ms(quarantine_until_ - now);
  if (ms == text_ms_) return true;
  text_ms_ = ms;
  char digits[24];
  const char* end = std::to_chars(digits, digits + sizeof digits, ms).ptr;
  const std::string_view left(digits, static_cast<std::size_t>(end - digits));
  quarantine_text_.assign(quarantine_reason_).append("; quarantined for another ").append(left).append(" ms");
  return true;
}

// on_down: the connection is gone (its late bytes may still reach the
// master: nothing relies on them being lost); what was on it fails. The
// Connection reconnects after its backoff, unless closing.
void NodeSession::on_down(std::string_view) {
  if (check_timer_) check_timer_->stop();
  marker_in_flight_ = false;
  check_owed_ = false;
  unwritten_ = 0;  // fail_written fails them too, in order
  fail_written();
  fail_held();
}

// on_state: once closed, the session lets go of its timers (the Connection
// reports the close on a later turn).
void NodeSession::on_state(State from, State to, std::string_view reason) {
  if (telemetry_ != nullptr) telemetry_->connection(index_, false, public_state(from), public_state(to), reason);
  if (to != State::closed) return;
  deadline_timer_.reset();
  check_timer_.reset();
  quarantine_timer_.reset();
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
  fail_unwritten();  // a handshake still on its way will not complete now
  // Commands may still be on their way — the release of a failed attempt,
  // say. Wait for their replies; a node that does not answer within the
  // connect timeout plus one node timeout (it may still be connecting) is
  // dropped.
  conn_.close(pending_.empty() ? milliseconds{0} : options_.connect_timeout + options_.node_timeout);
}

}  // namespace redlock::detail
