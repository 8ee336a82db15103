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

// majority_of: the quorum of n masters, N/2 + 1. Every majority decision of
// the library (rounds, a lease's "lost for good", when a held lock frees,
// reports) counts through it; it is written nowhere else.
inline std::size_t majority_of(std::size_t n) noexcept { return n / 2 + (sabotage().small_quorum ? 0 : 1); }

// most_server_ttl: the longest remaining TTL a master's PTTL is believed
// (a century). A longer one, or a negative one other than -1 (no expiry),
// is unknown — reported as -1, and never added to a clock or a wait.
inline constexpr std::chrono::milliseconds most_server_ttl = most_server_time;

// RoundMode — what "decided" means.
//   majority  (acquire, extend) success when ok ≥ quorum; failure as soon as
//             ok + unanswered < quorum
//   release   decided when every node answered, or when at least a quorum
//             confirmed that our token is gone from them (ok or held): then
//             fewer than a quorum can still hold it
enum class RoundMode : std::uint8_t { majority, release };

class QuorumTally {
 public:
  QuorumTally(std::size_t nodes, RoundMode mode) noexcept;

  // record takes the first outcome of one node (never `pending`) and returns
  // true exactly once: when this outcome decided the round.
  bool record(Outcome first) noexcept;

  bool decided() const noexcept { return decided_; }
  // success: majority mode — a quorum said ok (latched at the decision);
  // release mode — at least one ok and fewer than a quorum unconfirmed.
  bool success() const noexcept;

  std::size_t nodes() const noexcept { return nodes_; }
  std::size_t quorum() const noexcept { return majority_of(nodes_); }
  std::size_t ok() const noexcept { return ok_; }
  std::size_t held() const noexcept { return held_; }
  std::size_t answered() const noexcept { return answered_; }

 private:
  std::size_t nodes_;
  RoundMode mode_;
  std::size_t ok_ = 0, held_ = 0, answered_ = 0;
  bool decided_ = false, success_ = false;
};

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
  static QuorumRound* launch(Transport& transport, Call call, RoundMode mode, RoundListener* listener,
                             const std::vector<bool>& skip = {});

  QuorumRound(const QuorumRound&) = delete;
  QuorumRound& operator=(const QuorumRound&) = delete;

  // detach drops the listener; the round lives on until its stragglers are
  // final, then frees itself (at once if they already are).
  void detach() noexcept;

  bool decided() const noexcept { return tally_.decided(); }
  bool settled() const noexcept { return tally_.answered() == tally_.nodes(); }
  const QuorumTally& tally() const noexcept { return tally_; }
  // outcomes: one per node; `pending` for nodes with no event yet.
  const std::vector<NodeOutcome>& outcomes() const noexcept { return outcomes_; }
  const Call& call() const noexcept { return call_; }
  // max_counter: the highest fence counter read so far (fenced_acquire
  // rounds), or ticket (fair_acquire rounds); 0 when none.
  long long max_counter() const noexcept { return max_counter_; }
  // majority_rank: a fair acquire's place in the masters' queues — the
  // lowest r such that a majority of the masters put it at r or ahead
  // (0: the head on a majority); -1 when fewer than a majority told.
  long long majority_rank() const;
  // tickets_agree: every node that answered a fair acquire so far told the
  // same ticket, max_counter() (a first round: the waiter sits at its
  // ticket on those masters).
  bool tickets_agree() const;

  void on_node_event(std::size_t slot, const NodeEvent& event) override;

 private:
  QuorumRound(Transport& transport, Call call, RoundMode mode, RoundListener* listener);
  ~QuorumRound() = default;
  void record_first(std::size_t slot);
  void maybe_free() noexcept;

  Call call_;
  QuorumTally tally_;
  std::vector<NodeOutcome> outcomes_;
  RoundListener* listener_;
  std::size_t finals_ = 0;
  std::vector<std::uint64_t> yes_servers_;  // the servers whose yes counted (NodeEvent::server)
  long long max_counter_ = 0;
  // FairPlace — what one node told a fair acquire: its ticket (-1: no
  // answer) and the waiter's rank in its queue (-1: none).
  struct FairPlace {
    long long ticket = -1;
    long long rank = -1;
  };
  std::vector<FairPlace> places_;  // fair_acquire: per node, once any answered
  bool launching_ = true;
  bool detached_ = false;
};

// tally_of: the tally of the outcomes that are in (pending ones are not),
// for the error of a round that failed or was cut short.
QuorumTally tally_of(const std::vector<NodeOutcome>& nodes, RoundMode mode) noexcept;

// token_absent_text: the error text of a master that answered "not ours" to
// an extend or release (an extend round's and a batched extension's alike).
inline constexpr std::string_view token_absent_text = "token not present (expired, released, or another holder)";
// gone_on_retry_text: the note of a master that answered "not ours" to a
// release's retry after an earlier round of that release may have run
// there (counted as released: src/operation.cpp, merge_round).
inline constexpr std::string_view gone_on_retry_text =
    "gone when asked again: an earlier round of this release, whose answer was lost, deleted it (or its TTL ran out)";

// refused_for_good: more than N − quorum nodes answered "not ours" (held)
// to an extend — which never recreates a key — so no majority can ever say
// yes again to that value.
bool refused_for_good(const std::vector<NodeOutcome>& nodes) noexcept;

// majority_free_in: when the key will be gone from a majority, from the
// TTLs the nodes reported to an acquire (a node that said yes is free now);
// none when fewer than a majority reported one.
std::optional<std::chrono::milliseconds> majority_free_in(const std::vector<NodeOutcome>& nodes);

// classify turns one reply to `command` into an outcome, filling holder_ttl
// and error text. Exposed for tests.
void classify(CommandId command, const NodeEvent& event, NodeOutcome& out);

}  // namespace redlock::detail
