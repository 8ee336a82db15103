// quorum.hpp — one fan-out round, decided exactly once.
//
// QuorumTally is the pure decision rule; QuorumRound sends one script to
// every node of a Transport at once and feeds the first event of each node
// into the tally. The round is decided as soon as the outcome is certain and
// never waits for a slow minority; it keeps tracking stragglers after that
// and frees itself once every node has given its final event and its owner
// has let go (detach).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "redlock/lock.hpp"
#include "sabotage.hpp"
#include "transport.hpp"
#include "validity.hpp"

namespace redlock::detail {

// max_nodes: the most masters a client may have (config refuses more). A
// Redlock group is 3 to 7 masters; the bound keeps every per-lease vote
// count (one byte in a batched extension) exact.
inline constexpr std::size_t max_nodes = 100;

// majority_of: the quorum of a lock's rounds over n masters, N/2 + 1. The
// rounds take their quorum as a parameter (RoundRule); a lock's operations
// ask for this one.
inline std::size_t majority_of(std::size_t n) noexcept { return n / 2 + (sabotage().small_quorum ? 0 : 1); }

// most_server_ttl: the longest remaining TTL a master's PTTL is believed
// (a century). A longer one, or a negative one other than -1 (no expiry),
// is unknown — reported as -1, and never added to a clock or a wait.
inline constexpr std::chrono::milliseconds most_server_ttl = most_server_time;

// RoundMode — what the votes are for.
//   majority  (acquire, extend, fence) a yes is a vote for the lock
//   release   a yes or a "not ours" confirms our value is gone from a node
enum class RoundMode : std::uint8_t { majority, release };

// RoundRule — a round's mode and its quorum: how many of its nodes must
// vote yes (majority mode), or the fewest nodes our value must never remain
// on (release mode).
struct RoundRule {
  RoundMode mode;
  std::size_t quorum;
};

// lock_rule: the rule of a lock's rounds over n masters.
inline RoundRule lock_rule(RoundMode mode, std::size_t n) noexcept { return {mode, majority_of(n)}; }

// QuorumTally — the votes of one round so far: one first outcome per node.
// Counts only; decide() says what they mean.
class QuorumTally {
 public:
  QuorumTally(std::size_t nodes, RoundRule rule) noexcept;

  // record takes the first outcome of one node (never `pending`) and returns
  // true exactly once: when this outcome decided the round (decide() left
  // `open`). Outcomes past the node count are ignored.
  bool record(Outcome first) noexcept;

  bool decided() const noexcept { return decided_; }
  // success: the round's votes, without its clocks, say yes.
  bool success() const noexcept;

  RoundMode mode() const noexcept { return mode_; }
  std::size_t nodes() const noexcept { return nodes_; }
  std::size_t quorum() const noexcept { return quorum_; }
  std::size_t ok() const noexcept { return ok_; }
  std::size_t held() const noexcept { return held_; }
  std::size_t answered() const noexcept { return answered_; }

 private:
  std::uint8_t nodes_, quorum_;
  std::uint8_t ok_ = 0, held_ = 0, answered_ = 0;
  RoundMode mode_;
  bool decided_ = false;
};
static_assert(max_nodes <= 255, "a tally counts nodes in a byte");

// Verdict — what a round came to.
enum class Verdict : std::uint8_t {
  open,       // not certain: answers still to come can change it
  yes,        // majority: a quorum said yes (and the clocks agree);
              // release: at least one node deleted our value, and it may
              // remain on fewer than a quorum
  refused,    // majority: no quorum, and some node holds another value or
              // lacks ours; release: no node had our value, and it may
              // remain on fewer than a quorum
  no_quorum,  // majority: no quorum otherwise (timeouts, errors);
              // release: our value may still be on a quorum
  too_short,  // majority: a quorum, but too little validity left
  too_late,   // majority: a quorum, answered after the lock's deadline
};

// RoundClock — what the clocks say of a majority round when it is judged.
struct RoundClock {
  std::chrono::microseconds validity;    // validity_left(ttl, elapsed, drift)
  std::chrono::milliseconds min_validity;
  bool in_time = true;  // answered before the lock's validity deadline
};

// decide — the one rule every round is judged by (acquire, fence phase,
// extend, each lease of a batched extension, release, rollback): the
// verdict of `tally` (with `clock`, a majority round's success also needs
// validity above the minimum, in time). A partial tally of a round that is
// over is judged by tally_of(), which counts the silent nodes as unsure.
Verdict decide(const QuorumTally& tally, const RoundClock* clock = nullptr) noexcept;

// quorum_at_most / quorum_at_least: the value a quorum of the nodes told
// at most (the quorum-th smallest of `values`, one per node that told one:
// when a key frees on a quorum, a fair waiter's place) or at least (the
// quorum-th largest: what status reports a quorum holds); none when fewer
// than a quorum told.
std::optional<long long> quorum_at_most(std::vector<long long>& values, std::size_t quorum);
std::optional<long long> quorum_at_least(std::vector<long long>& values, std::size_t quorum);

// quorum_says: `yes` of `nodes` agreeing is a quorum's word (decide() on
// that tally).
bool quorum_says(std::size_t yes, std::size_t nodes, std::size_t quorum) noexcept;

// one_vote — one server, one vote: `server` (a run id's hash,
// NodeEvent::server; 0: unknown) may give a round one yes only. False, with
// `same_server_text` to report, when it already gave one; else records it.
bool one_vote(std::vector<std::uint64_t>& yes_servers, std::uint64_t server);
inline constexpr std::string_view same_server_text =
    "the same server as another master that already said yes (run id): one server, one vote";

// RoundListener — told once, from a node event, that the round is decided,
// and once more when every node has given its first event (settled; may
// coincide with the decision, then both are called).
class RoundListener {
 public:
  virtual void on_round_decided() = 0;
  virtual void on_round_settled() {}

 protected:
  ~RoundListener() = default;
};

class QuorumRound final : public ReplySink {
 public:
  // launch sends `call` to every node at once, except those `skip` marks
  // (empty: none), which count as final at once, outcome `held` ("not
  // sent"). A decision reached inside launch (every send refused at once)
  // is not signalled to the listener: the caller checks decided() after
  // launch returns. Ownership: the caller must call detach() exactly once;
  // the round frees itself afterwards.
  static QuorumRound* launch(Transport& transport, Call call, RoundRule rule, RoundListener* listener,
                             const std::vector<bool>& skip = {});

  QuorumRound(const QuorumRound&) = delete;
  QuorumRound& operator=(const QuorumRound&) = delete;

  // detach drops the listener; the round lives on until its stragglers are
  // final, then frees itself (at once if they already are).
  void detach() noexcept;
  // take_outcomes: the outcomes, moved out, and detach() (the caller's
  // part ends there).
  std::vector<NodeOutcome> take_outcomes() noexcept;

  // A semaphore's acquire (sem_acquire) is decided permit by permit: a
  // master's yes is a vote for the permit it took and a "held" for every
  // other. tally() is then the leading permit's (the most yes so far; at
  // most one can reach a quorum), and the round is decided once it is.
  bool decided() const noexcept { return tally().decided(); }
  bool settled() const noexcept { return tally_.answered() == tally_.nodes(); }
  const QuorumTally& tally() const noexcept {
    return permits_.empty() || sabotage().permit_majority ? tally_ : permits_[leading_];
  }
  // leading_permit: a semaphore acquire's permit with the most yes (0
  // before any); permit_votes: per node, the permit it took (-1: none).
  long long leading_permit() const noexcept { return static_cast<long long>(leading_); }
  const std::vector<std::int16_t>& permit_votes() const noexcept { return votes_; }
  // permit_counter: a fenced semaphore acquire's highest fence counter of
  // `permit` among the masters that gave it (0 when none told one).
  long long permit_counter(std::size_t permit) const noexcept;
  // outcomes: one per node; `pending` for nodes with no event yet.
  const std::vector<NodeOutcome>& outcomes() const noexcept { return outcomes_; }
  const Call& call() const noexcept { return call_; }
  // max_counter: the highest fence counter read so far (fenced_acquire
  // rounds), or ticket (fair_acquire rounds); 0 when none.
  long long max_counter() const noexcept { return max_counter_; }
  // quorum_rank: a fair acquire's place in the masters' queues — the
  // lowest r such that a quorum of the masters put it at r or ahead
  // (0: the head on a quorum); -1 when fewer than a quorum told.
  long long quorum_rank() const;
  // tickets_agree: every node that answered a fair acquire so far told the
  // same ticket, max_counter() (a first round: the waiter sits at its
  // ticket on those masters).
  bool tickets_agree() const;

  void on_node_event(std::size_t slot, const NodeEvent& event) override;

 private:
  QuorumRound(Transport& transport, Call call, RoundRule rule, RoundListener* listener);
  ~QuorumRound() = default;
  void record_first(std::size_t slot);
  // record: node `slot`'s first outcome into the tallies; true when it
  // decided the round.
  bool record(std::size_t slot, Outcome first) noexcept;
  void maybe_free() noexcept;

  Call call_;
  QuorumTally tally_;
  std::vector<NodeOutcome> outcomes_;
  RoundListener* listener_;
  std::size_t finals_ = 0;
  std::vector<std::uint64_t> yes_servers_;  // one_vote
  long long max_counter_ = 0;
  // FairPlace — what one node told a fair acquire: its ticket (-1: no
  // answer) and the waiter's rank in its queue (-1: none).
  struct FairPlace {
    long long ticket = -1;
    long long rank = -1;
  };
  std::vector<FairPlace> places_;  // fair_acquire: per node, once any answered
  std::vector<QuorumTally> permits_;  // sem_acquire: one tally per permit
  std::vector<std::int16_t> votes_;   // sem_acquire: per node, the permit it took (-1: none)
  std::vector<long long> counters_;   // fenced sem_acquire: per node, that permit's fence counter
  std::size_t leading_ = 0;
  bool launching_ = true;
  bool detached_ = false;
};

// tally_of: the tally of a round that is over (failed, cut short, or
// merged from several rounds): a node with no answer (`pending`) counts as
// unsure, so the tally is decided.
QuorumTally tally_of(const std::vector<NodeOutcome>& nodes, RoundRule rule) noexcept;

// token_absent_text: the error text of a master that answered "not ours" to
// an extend or release (an extend round's and a batched extension's alike).
// readers_held_text: the error text of a master whose SET NX … GET found
// the readers' mark (Redis 7 and later).
inline constexpr std::string_view readers_held_text = "held by readers";
inline constexpr std::string_view token_absent_text = "token not present (expired, released, or another holder)";
// gone_on_retry_text: the note of a master that answered "not ours" to a
// release's retry after an earlier round of that release may have run
// there (counted as released: src/operation.cpp, merge_round).
inline constexpr std::string_view gone_on_retry_text =
    "gone when asked again: an earlier round of this release, whose answer was lost, deleted it (or its TTL ran out)";

// refused_for_good: so many nodes answered "not ours" (held) to an extend
// — which never recreates a key — that even if every other node said yes,
// no quorum would: none ever will again for that value.
bool refused_for_good(const std::vector<NodeOutcome>& nodes, RoundRule rule) noexcept;

// quorum_free_in: when the key will be gone from a quorum, from the TTLs
// the nodes reported to an acquire (a node that said yes is free now);
// none when fewer than a quorum reported one.
std::optional<std::chrono::milliseconds> quorum_free_in(const std::vector<NodeOutcome>& nodes, std::size_t quorum);

// classify turns one reply to `command` into an outcome, filling holder_ttl
// and error text. Exposed for tests.
void classify(CommandId command, const NodeEvent& event, NodeOutcome& out);

}  // namespace redlock::detail
