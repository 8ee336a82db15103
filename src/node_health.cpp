// node_health.cpp — the handshake, what a master says about itself (INFO,
// the data-loss marker, the vote check) and the quarantine it sits out:
// the part of NodeSession (src/node_session.hpp) that judges whether a
// master's votes count. The request pipeline is in node_session.cpp.
// docs/design.md §5.
#include "node_session.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>

#include "keys.hpp"
#include "resp.hpp"
#include "sabotage.hpp"
#include "scripts.hpp"
#include "server_info.hpp"
#include "validity.hpp"

namespace redlock::detail {

namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// major_version is the leading number of a redis_version ("7.0.15" → 7),
// 0 when there is none.
int major_version(std::string_view version) {
  int major = 0;
  const auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), major);
  return ec == std::errc{} && end != version.data() ? major : 0;
}

// MarkerValue: what a marker's value, "EPOCH DECLARED_MS BORN_MS", says:
// its first word, and the period declared in its second when that reads
// as a number (bounded).
struct MarkerValue {
  std::string_view epoch;
  std::optional<std::chrono::milliseconds> declared;
};

MarkerValue read_marker(std::string_view value) {
  const std::size_t first = value.find(' ');
  MarkerValue m{value.substr(0, first), std::nullopt};
  if (first == std::string_view::npos) return m;
  const std::string_view rest = value.substr(first + 1);
  if (const std::optional<long long> ms =
          bounded_number(rest.substr(0, rest.find(' ')), std::numeric_limits<long long>::max())) {
    m.declared = std::chrono::milliseconds{*ms};
  }
  return m;
}

// MarkerAnswer: the marker script's answer, [STATE, EPOCH, DECLARED_MS,
// AGE_MS], four strings with both numbers read and bounded (checked before
// any arithmetic); nullopt for anything else.
struct MarkerAnswer {
  std::string_view state;
  std::string_view epoch;
  long long declared_ms = 0;
  long long age_ms = 0;
};

std::optional<MarkerAnswer> read_marker_answer(const WireReply& reply) {
  if (reply.type != WireReply::Type::array || reply.elements.size() != 4) return std::nullopt;
  for (const WireReply& e : reply.elements) {
    if (e.type != WireReply::Type::string) return std::nullopt;
  }
  const std::optional<long long> declared = bounded_number(reply.elements[2].str, std::numeric_limits<long long>::max());
  const std::optional<long long> age = bounded_number(reply.elements[3].str, std::numeric_limits<long long>::max());
  if (!declared || !age) return std::nullopt;
  return MarkerAnswer{reply.elements[0].str, reply.elements[1].str, *declared, *age};
}

// The largest quarantine any valid client declares (max_ttl_ms and
// drift_factor at their bounds, src/config_validate.cpp); a marker that declares
// more is not believed, and counts as this much.
// (quarantine_period(2^31 − 1 ms, 0.5): max_ttl plus half of it, rounded
// up, plus 2 ms.)
constexpr long long most_max_ttl_ms = std::numeric_limits<std::int32_t>::max();
constexpr milliseconds most_declared{most_max_ttl_ms + (most_max_ttl_ms + 1) / 2 + 2};
// A server up longer than a century is lying; its uptime is unknown.
constexpr long long most_uptime_s = std::chrono::duration_cast<std::chrono::seconds>(most_server_time).count();

}  // namespace

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
    return conn_.drop("SCRIPT EXISTS failed: " + resp::server_text(reply.str));
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
  if (shard_) {
    // A shard has no marker of its own: its slots' markers go behind the
    // acquires (src/cluster_member.cpp), and the first answer judges the
    // restart. A PING ends the handshake.
    const std::string_view ping[1] = {"PING"};
    if (!queue_raw(Kind::ready_ping, ping)) conn_.drop("cannot queue PING");
    return;
  }
  if (!queue_marker()) conn_.drop("cannot queue the data-loss marker check");
}

// queue_marker runs the marker script (scripts.hpp): at the end of the
// handshake, and every data_check_interval while ready.
bool NodeSession::queue_marker() {
  Result<std::string> epoch = runtime_.random_token();
  if (!epoch) return false;
  const std::string ms = std::to_string(period().count());
  const std::string_view argv[10] = {"EVALSHA",  shas_[static_cast<std::size_t>(CommandId::marker)],
                                     "3",        marker_key,
                                     marker_server_key, marker_replid_key,
                                     *epoch,     ms,
                                     run_id_,    replid_};
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
    if ((p.asking && !queue_asking()) || !queue_call(*p.call, false)) {
      ++unwritten_;
    } else {
      p.set_get = sends_get(*p.call);
      if (holds_back(p.call->command)) check_owed_ = true;
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
  // Read intact less than an interval ago (a vote check): due once the
  // marker has gone unread that long. A master answering vote checks is
  // not silent either, so the keep-alive is not needed meanwhile.
  const clock::time_point now = runtime_.now();
  const clock::time_point due = marker_read_ + options_.data_check_interval;
  if (now < due) return check_timer_->start(std::chrono::ceil<milliseconds>(due - now));
  check_timer_->start(options_.data_check_interval);
  if (shard_) {
    // A shard's keep-alive: its data checks are its slots' markers.
    const std::string_view ping[1] = {"PING"};
    if (pending_.empty() && !queue_raw(Kind::keepalive, ping)) conn_.drop("cannot queue PING");
    return;
  }
  if (marker_in_flight_) return;
  if (!queue_marker()) return conn_.drop("cannot queue the data-loss marker check");
  rearm();
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
  // A replica's writes are lost at its next sync (and a read-only one
  // refuses them): whatever answers here must be a primary. A server that
  // does not say (a proxy) is taken as one.
  // A Cluster member's shard must be a cluster node: a lone server there
  // would take keys of every slot, and answer no redirect.
  if (shard_ && info_field(info, "cluster_enabled") != "1") {
    return conn_.drop("is not a Redis Cluster node (INFO cluster_enabled is not 1)");
  }
  const std::string role = info_field(info, "role");
  if (!role.empty() && role != "master") {
    return conn_.drop("is a replica (role:" + resp::server_text(role) + "), not a primary: its votes would not last");
  }
  // The same server with another replication history: it was a replica
  // meanwhile and took another primary's data (demoted, resynced, promoted
  // again), so it may have lost keys it held; the marker's replid key shows
  // it to clients that never met it before (docs/design.md §5).
  const std::string previous_replid = std::move(replid_);
  replid_ = replication_id(info);
  if (sabotage().no_failover_check || sabotage().no_replid_check) replid_.clear();
  replicas_ = bounded_number(info_field(info, "connected_slaves"), 1'000'000).value_or(-1);
  if (!previous_replid.empty() && !replid_.empty() && replid_ != previous_replid && run_id_ == previous_run_id) {
    note_loss(now, "its replication history changed (master_replid): it was a replica and took another server's data");
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
  // Intact (our epoch), the marker says what the marker script's answer
  // says of a marker met before: our epoch, and the largest period any
  // client declared there. So the vote check serves as the periodic check
  // too, and a client that acquires often sends no marker script at all.
  // A declaration that does not read as a number teaches nothing, and the
  // periodic check stays due (its script reports it).
  const MarkerValue marker = read_marker(reply.type == WireReply::Type::string ? reply.str : std::string_view());
  const bool intact = !marker_epoch_.empty() && marker.epoch == marker_epoch_;
  if (intact && marker.declared) {
    learn_declared(*marker.declared);
    marker_read_ = now;
  }
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
  // A replicated member's checks before this one (WAIT, INFO replication)
  // may have found that these writes cannot be counted on: each fails.
  const std::string refusal = std::move(refusal_);
  refusal_.clear();
  for (HeldReply& h : held) {
    NodeEvent ev;
    if (!refusal.empty()) {
      ev.kind = EventKind::failed;
      ev.rtt = duration_cast<microseconds>(now - h.sent);
      ev.text = refusal;
      h.sink->on_node_event(h.slot, ev);
      continue;
    }
    ev.kind = EventKind::reply;
    ev.rtt = duration_cast<microseconds>(now - h.sent);
    ev.reply = h.view;
    ev.reply.str = h.text;
    ev.server = server_;
    ev.quarantined = h.quarantined || quarantined_now;
    if (ev.quarantined) ev.text = quarantine_text_;
    h.sink->on_node_event(h.slot, ev);
  }
  // Its room goes back to held_ (a vote check follows every acquire: no
  // allocation for the next one), unless a sink queued new acquires.
  if (held_.empty()) {
    held.clear();
    held_.swap(held);
  }
}

// handle_marker: the marker script's answer. A marker that was missing,
// carries another epoch than the one seen last, or was written by another
// server (a promoted replica has its primary's marker) means the master
// lost its data, or is another one, since: it sits out the quarantine from
// now. A young marker means someone saw that `age` ago. The numbers are
// the server's: checked before any arithmetic.
void NodeSession::handle_marker(const WireReply& reply, clock::time_point now) {
  const std::optional<MarkerAnswer> answer = read_marker_answer(reply);
  if (!answer) return conn_.drop("unexpected reply to the data-loss marker script");
  const std::string_view state = answer->state;
  const std::string epoch(answer->epoch);
  learn_declared(milliseconds{answer->declared_ms});
  marker_read_ = now;
  const milliseconds age = std::min(milliseconds{answer->age_ms}, period());
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
  judge_restart(clean);
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

// deliver_marker: a shard's answer to a slot's marker Call (see as_shard),
// checked as handle_marker checks its own, and delivered as one string
// "STATE EPOCH DECLARED_MS AGE_MS". The first on a connection judges the
// restart INFO showed: only a clean start of this very server is none.
void NodeSession::deliver_marker(const Pending& p, const WireReply& reply, clock::time_point now) {
  if (reply.type == WireReply::Type::error) return deliver(p, reply, now);  // a redirect, say: the member reads it
  // The member reads the answer back as four words: a state it knows and
  // an epoch of one word.
  const std::optional<MarkerAnswer> answer = read_marker_answer(reply);
  const std::string_view state = answer ? answer->state : std::string_view();
  const std::string_view epoch = answer ? answer->epoch : std::string_view();
  const bool known_state = state == "created" || state == "replaced" || state == "found" || state == "clean";
  const bool word = !epoch.empty() && epoch.size() <= 64 && epoch.find_first_of(" \r\n") == std::string_view::npos;
  if (!answer || !known_state || !word) {
    WireReply error;
    error.type = WireReply::Type::error;
    error.str = "unexpected reply to the data-loss marker script";
    return deliver(p, error, now);
  }
  learn_declared(milliseconds{answer->declared_ms});
  judge_restart(state == "clean");
  marker_text_.assign(state).append(" ").append(epoch).append(" ");
  marker_text_.append(std::to_string(answer->declared_ms)).append(" ").append(std::to_string(answer->age_ms));
  WireReply text;
  text.type = WireReply::Type::string;
  text.str = marker_text_;
  deliver(p, text, now);
}

// judge_restart: the restart INFO showed at this connection's handshake,
// judged at its first marker answer: only a clean start of this very
// server is no loss.
void NodeSession::judge_restart(bool clean) {
  if (!restart_at_) return;
  if (!clean) note_loss(*restart_at_, "restarted recently");
  restart_at_.reset();
}

bool NodeSession::vote_blocked(clock::time_point now, std::string_view& why) {
  if (!quarantined(now)) return false;
  why = quarantine_text_;
  return true;
}

// learn_declared: a marker declares that some client's locks may live
// `declared` (plus drift): every master of this client sits out at least
// that after a loss, from now on. More than any client can declare is not
// believed: the most counts.
void NodeSession::learn_declared(milliseconds declared) {
  declared = std::min(declared, most_declared);
  if (declared <= share_->largest) return;
  share_->largest = declared;
  if (share_->raised) share_->raised();
}

// period: how long a master sits out after it may have lost data — this
// client's max_ttl plus drift, or the largest any master of this client
// declares (another client's), whichever is longer.
milliseconds NodeSession::period() const noexcept { return loss_period(options_, *share_); }

milliseconds loss_period(const Options& options, const QuarantineShare& share) noexcept {
  if (sabotage().own_quarantine) return quarantine_period(options.max_ttl, options.drift_factor);
  return std::max(quarantine_period(options.max_ttl, options.drift_factor), share.largest);
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
  const long long ms = duration_cast<milliseconds>(quarantine_until_ - now).count();
  if (ms == text_ms_) return true;
  text_ms_ = ms;
  char digits[24];
  const char* end = std::to_chars(digits, digits + sizeof digits, ms).ptr;
  const std::string_view left(digits, static_cast<std::size_t>(end - digits));
  quarantine_text_.assign(quarantine_reason_).append("; quarantined for another ").append(left).append(" ms");
  return true;
}

}  // namespace redlock::detail
