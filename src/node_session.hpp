// node_session.hpp — one master, as a state machine with no I/O of its
// own: its Connection (src/connection.hpp) opens Wires, authenticates,
// bounds the connect and backs off between reconnects, as it does for the
// wake-up subscribers; the session adds what a lock needs: a deadline on
// every command, stall detection, the restart quarantine read from INFO on
// every (re)connect, and the data-loss marker (docs/design.md, §5). Time,
// timers and jitter come from a Runtime (src/runtime.hpp): production runs
// it on SocketWires and a UvRuntime, the deterministic simulator
// (tools/sim) on simulated ones.
//
// Commands are accepted while the connection is being set up, but nothing
// of theirs is written before the whole handshake succeeded: AUTH (the
// Connection's), SELECT, SCRIPT LOAD, INFO, then the data-loss marker. They
// wait in the FIFO, unwritten (bounded by the connect deadline), and are
// written in order the moment the handshake completes, their node timeout
// running from then; a failed handshake fails them, and nothing else goes
// down that connection.
//
// Loop thread only. Every event a sink receives comes from a Wire event or
// a Runtime timer, never from inside send().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/config.hpp"
#include "connection.hpp"
#include "runtime.hpp"
#include "telemetry.hpp"
#include "transport.hpp"
#include "wire.hpp"

namespace redlock::detail {

// QuarantineShare — what the masters of one client learn together: the
// largest quarantine any of their markers declares (a marker keeps the
// largest any client wrote). A master that may have lost data sits out
// that, not only this client's own max_ttl plus drift: a client with a
// smaller max_ttl never counts a master that may have forgotten a longer
// lock another client still holds (docs/design.md, "Data loss").
// `raised` runs when `largest` grows.
struct QuarantineShare {
  std::chrono::milliseconds largest{0};
  std::function<void()> raised;
};

// loss_period: how long a master (or a Cluster slot) sits out after it may
// have lost data: this client's max_ttl plus drift, or the largest period
// any client declared on a master of this client, whichever is longer.
std::chrono::milliseconds loss_period(const Options& options, const QuarantineShare& share) noexcept;

class NodeSession final : private ConnectionOwner {
 public:
  using clock = Clock;
  using State = Connection::State;

  // NodeSession keeps references to `runtime`, `wires`, `options` and
  // `shas` (script_count SHA-1s: the NodeSet passes script_shas(); the
  // rest it owns, and it outlives the session). on_closed runs once, on a
  // later loop turn than close(), after the session has let go of its Wire
  // and its timers; the owner may free the session inside it. on_ready
  // runs each time a handshake completes.
  NodeSession(Runtime& runtime, WireFactory& wires, NodeAddress address, const Options& options,
              const std::string* shas, std::function<void()> on_closed, std::function<void()> on_ready = {});
  NodeSession(const NodeSession&) = delete;
  NodeSession& operator=(const NodeSession&) = delete;
  ~NodeSession();

  void start();
  // retarget: the member's primary is now `primary` (a sentinel named it).
  // A connection to another server is dropped ("the sentinels name …") and
  // the next one dials `primary` at once; what the session learnt (run id,
  // replication id, marker epoch, quarantine) stays, so the new server is
  // judged against the old at its handshake, as after any failover. The
  // first call of a sentinel member starts its connection.
  void retarget(const Endpoint& primary);
  // on_lost: runs each time a connection of this session is lost or
  // refused, except when retarget() or close() dropped it (a sentinel
  // member's watch then asks the next sentinel).
  void on_lost(std::function<void(std::string_view why)> hook) { on_lost_ = std::move(hook); }
  // send: see Transport::send. `asking`: written behind ASKING (a Cluster
  // slot being imported here: the command runs once, on this node).
  bool send(const Call& call, ReplySink* sink, std::size_t slot, std::string& why, bool asking = false);
  // as_shard: this session is one shard primary of a Cluster member
  // (src/cluster_member.hpp), set before start(). Its handshake requires
  // cluster_enabled:1 and writes no marker of its own (a shard's marker
  // lives per slot: the member sends a `marker` Call for the slot behind
  // each acquire), no vote check is written behind acquires, and the
  // periodic check is a PING. A marker Call's answer is delivered as the
  // string "STATE EPOCH DECLARED_MS AGE_MS" (or an error naming what was
  // wrong with it); its first answer on a connection judges the restart
  // INFO showed, as the handshake's marker does for a lone master.
  void as_shard() noexcept { shard_ = true; }
  // vote_blocked: whether this server's yes counts for nothing now
  // (quarantine or exclusion), and why in `why` (valid until the next call).
  bool vote_blocked(clock::time_point now, std::string_view& why);
  // period: how long a server (or a Cluster slot) sits out after it may
  // have lost data (see note_loss).
  std::chrono::milliseconds period() const noexcept;
  // close refuses new commands, lets the ones already written reach the
  // server and waits for their replies (at most connect_timeout +
  // node_timeout), then fails what is left ("client closed") and drops
  // the Wire.
  void close();

  const std::string& address() const noexcept { return display_; }
  // serving: the server dialled: a sentinel member's primary as last
  // named ("" before one is); the member itself for every other kind.
  const NodeAddress& serving() const noexcept { return target_; }
  State state() const noexcept { return conn_.state(); }
  const std::string& last_error() const noexcept { return conn_.last_error(); }
  clock::time_point quarantined_until() const noexcept { return quarantine_until_; }
  const std::string& server_version() const noexcept { return version_; }
  const std::string& run_id() const noexcept { return run_id_; }
  // replicas: connected_slaves at the last reading, -1 when not known.
  long long replicas() const noexcept { return replicas_; }
  // uptime: the server's uptime now, from INFO server at the last
  // handshake plus the time since; -1 s when INFO was never read.
  std::chrono::seconds uptime(clock::time_point now) const noexcept;
  // quarantine_left: how long the node still sits out of majorities (zero
  // when it counts, or when quarantine is off).
  std::chrono::milliseconds quarantine_left(clock::time_point now) const noexcept;
  // excluded: why this master's votes never count, whatever its uptime (a
  // maxmemory-policy that may evict lock keys, or the same server as
  // another configured master); empty when they do.
  const std::string& excluded() const noexcept { return excluded_.empty() ? duplicate_ : excluded_; }
  // set_duplicate_of: this master is the same server (run id) as another
  // configured one, named in `text`; empty clears it. Set by the NodeSet
  // whenever a handshake completes (one server, one vote).
  void set_duplicate_of(std::string text) { duplicate_ = std::move(text); }
  // share: learn and use the largest declared quarantine together with
  // the other masters of `share` (which must outlive this session);
  // alone by default. reapply_quarantine: sit out the (now longer)
  // period from the last moment this master may have lost data.
  void share(QuarantineShare* share) noexcept { share_ = share; }
  void reapply_quarantine();
  // observe: report to `telemetry` (may be null) as node `index`.
  void observe(Telemetry* telemetry, std::size_t index) noexcept {
    telemetry_ = telemetry;
    index_ = index;
  }

 private:
  // vote_check: the GET of the data-loss marker written behind the
  // acquires of one flush (one per flush); their replies are held back
  // until it answers. wait and replication go before it on a replicated
  // member (src/node_replication.cpp): WAIT for replicas, INFO replication.
  // asking: ASKING before a command (its +OK is swallowed). ready_ping: a
  // shard's last handshake step; keepalive: a shard's periodic check.
  enum class Kind : std::uint8_t {
    script,
    handshake,
    scripts_exist,
    info,
    marker,
    vote_check,
    wait,
    replication,
    asking,
    ready_ping,
    keepalive
  };
  struct Pending {
    Kind kind = Kind::script;
    bool timed_out = false;
    bool retried = false;  // already re-sent as EVAL after NOSCRIPT
    bool set_get = false;  // written as SET … NX PX ttl GET (see view_for)
    bool asking = false;   // written behind ASKING (send's `asking`)
    ReplySink* sink = nullptr;
    std::size_t slot = 0;
    const Call* call = nullptr;
    clock::time_point sent{};
    clock::time_point deadline{};
  };
  // An acquire reply waiting for the vote check written behind it.
  struct HeldReply {
    ReplyView view;  // view.str is set from text when delivered
    std::string text;
    bool quarantined = false;
    ReplySink* sink = nullptr;
    std::size_t slot = 0;
    clock::time_point sent{};
  };

  // ConnectionOwner
  bool on_open() override;
  void on_reply(const WireReply& reply) override;
  void on_flush() override;
  void on_down(std::string_view why) override;
  void on_state(State from, State to, std::string_view reason) override;

  bool queue_raw(Kind kind, std::span<const std::string_view> argv, std::size_t tag = 0);
  bool queue_call(const Call& call, bool as_eval);
  bool queue_asking();
  bool queue_marker();
  void load_missing(const WireReply& reply);
  bool queue_vote_check();
  // Replicated members (src/node_replication.cpp).
  // A replicated member (NodeAddress::replicated, which wait_replicas
  // implies) checks role and replication id behind every flush of held
  // writes, and with wait_replicas WAITs for that many replicas (all:
  // replicas_) first, for at most wait_timeout().
  bool replicated() const noexcept {
    return address_.replicated || address_.wait_replicas != 0 || address_.kind == NodeAddress::Kind::sentinel;
  }
  std::chrono::milliseconds wait_timeout() const noexcept;
  bool holds_back(CommandId id) const noexcept;
  bool queue_checks();
  void handle_wait(const WireReply& reply, long long needed);
  void handle_replication(const WireReply& reply, clock::time_point now);
  void handle_info(const WireReply& reply, clock::time_point now);
  void handle_marker(const WireReply& reply, clock::time_point now);
  void handle_vote_check(const WireReply& reply, clock::time_point now);
  void learn_declared(std::chrono::milliseconds declared);
  void fail_held();
  void become_ready();
  void fail_unwritten(std::string_view why);
  void await_target();
  void fail_written();
  void raise_quarantine(clock::time_point until, std::string reason);
  void note_loss(clock::time_point at, std::string reason);
  void deliver_marker(const Pending& p, const WireReply& reply, clock::time_point now);
  void judge_restart(bool clean);
  void deliver(const Pending& p, const WireReply& reply, clock::time_point now);
  void fail(const Pending& p, std::string_view why, clock::time_point now);
  void on_deadline();
  void on_check_timer();
  void rearm();
  void arm_at(clock::time_point due);
  bool quarantined(clock::time_point now);
  void on_quarantine_over();

  Runtime& runtime_;
  WireFactory& wires_;
  NodeAddress address_;
  NodeAddress target_;  // what conn_ dials (serving_address; a sentinel member's moves)
  std::string display_;
  const Options& options_;
  const std::string* shas_;
  std::function<void()> on_ready_;
  bool closing_ = false;  // close() was called: nothing new is accepted
  bool shard_ = false;    // as_shard()
  bool started_ = false;  // start() was called (a sentinel member connects at its first target)
  bool retargeting_ = false;  // retarget() is dropping the connection: not a loss to report
  std::function<void(std::string_view)> on_lost_;

  // A command passed its deadline unanswered and no reply has come since:
  // new acquire and extend commands fail at once instead of piling up behind
  // it (a paused or blackholed master then costs no write and no memory).
  // Releases are still queued — one may have to delete a SET queued before
  // it. Any reply clears it, and so does a completed handshake; a new
  // connection to a node that had stopped answering does not (its
  // handshake may hang just the same), so a paused master costs nothing
  // across reconnects either.
  bool unresponsive_ = false;
  clock::time_point unresponsive_since_{};  // the sent time of the command that timed out
  std::vector<std::string_view> argv_;      // the command being queued (reused)
  char numkeys_[24] = {};                   // its key count, in digits
  std::deque<Pending> pending_;             // FIFO: written commands, then the unwritten_ ones
  std::size_t unwritten_ = 0;
  std::size_t scanned_ = 0;  // pending_[0, scanned_) need no deadline check
  clock::time_point armed_due_{};
  bool armed_ = false;

  clock::time_point quarantine_until_{};  // only ever raised
  QuarantineShare own_share_;
  QuarantineShare* share_ = &own_share_;
  std::optional<clock::time_point> last_loss_;  // the latest moment it may have lost data
  std::string last_loss_reason_;
  std::string quarantine_reason_;         // what set quarantine_until_
  std::string quarantine_text_;
  long long text_ms_ = -1;  // the ms left that quarantine_text_ says (-1: it says something else)
  std::string excluded_, duplicate_;      // see excluded()
  std::string marker_epoch_;              // the data-loss marker's epoch last seen (kept across reconnects)
  bool marker_met_ = false;               // a marker script has answered (a missing marker is then a loss)
  bool marker_in_flight_ = false;
  // The last intact reading of the marker (the marker script's answer, or a
  // vote check that found our epoch): the periodic check waits until the
  // marker has gone unread for a whole data_check_interval.
  clock::time_point marker_read_{};
  bool check_owed_ = false;  // an acquire was written and no vote check behind it yet
  std::vector<HeldReply> held_;
  std::string marker_text_;  // a shard's marker answer as delivered (deliver_marker)
  std::string version_, run_id_;
  std::string replid_;  // master_replid of the last handshake (kept across reconnects)
  long long replicas_ = -1;       // connected_slaves at the last reading (-1: unknown)
  std::string refusal_;           // why the held writes of the flush being checked do not count ("": they may)
  // The master takes `SET key value NX PX ttl GET` (Redis 7 or later, from
  // INFO at the handshake): an acquire's plain SET is sent so, and a key of
  // another type answers WRONGTYPE on the first attempt, not nil ("held").
  bool set_get_ = false;
  bool sends_get(const Call& call) const noexcept { return set_get_ && call.command == CommandId::set_nx; }
  std::uint64_t server_ = 0;       // hash of run_id_ (NodeEvent::server)
  long long info_uptime_s_ = -1;   // uptime_in_seconds of the last INFO server
  clock::time_point info_at_{};    // when that reply came
  // The restart that INFO's uptime says, held until the handshake's marker
  // answer: a clean start (docs/design.md §5) was no loss.
  std::optional<clock::time_point> restart_at_;

  std::unique_ptr<Timer> deadline_timer_;  // per-command deadlines and stall detection
  std::unique_ptr<Timer> check_timer_;     // the periodic data-loss check while ready
  // A sentinel member's wait for its first primary (await_target).
  std::unique_ptr<Timer> target_timer_;
  // Only with an observer: tells it when a quarantine has run out.
  std::unique_ptr<Timer> quarantine_timer_;
  Telemetry* telemetry_ = nullptr;
  std::size_t index_ = 0;
  Connection conn_;                        // last: destroyed first
};

}  // namespace redlock::detail
