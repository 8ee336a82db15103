// waiter.hpp — how an acquire waits between its attempts.
//
// An acquire (src/acquire.cpp) makes the attempts; its Waiter decides when
// the next one goes: after a poll delay (wake-ups off or unavailable), on a
// release notification in its client's line for the lock, or by its place
// in the masters' fair queues (docs/design.md, "Waiting", "Fair order").
// Every input — the acquire's attempts and failures, notifications, the
// line's turns — passes through step(), which answers with what the
// acquire does next; only to() changes the state.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/error.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"
#include "quorum.hpp"
#include "runtime.hpp"
#include "transport.hpp"

namespace redlock::detail {

class AcquireOperation;
class Engine;
struct LockKeys;

// fair_refresh — the longest a fair waiter sleeps between two rounds
// (wake_safety_net, at least 4 × fair_grace): each round re-stamps its
// place in every queue. fair_life — how long a place outlives the round
// that stamped it: one refresh, plus the two node timeouts a round's
// send and reply may take, plus one more refresh of slack for a late
// timer or a busy loop. A waiter that died is out of every queue within
// fair_life of its last round (docs/design.md, "Fair order").
inline milliseconds fair_refresh(const Options& o) { return std::max(o.wake_safety_net, 4 * o.fair_grace); }
inline milliseconds fair_life(const Options& o) { return 2 * fair_refresh(o) + 2 * o.node_timeout; }

class Waiter {
 public:
  // State:
  //   idle         before the first attempt
  //   attempting   an attempt is in flight (phase 1 of a fenced acquire)
  //   fencing      phase 2 of a fenced acquire is in flight
  //   sleeping     until the next attempt: a poll delay, a split-vote
  //                backoff, the holder's TTL, a notification, the safety net
  //   subscribing  until the subscription is confirmed (a release from
  //                then on is heard), or one node timeout
  //   queued       behind an earlier waiter of this client for the same
  //                lock (Engine::join_line): until its turn or the deadline
  //   done
  enum class State : std::uint8_t { idle, attempting, fencing, sleeping, subscribing, queued, done };

  // Kind — the inputs:
  //   begin        the acquire's first step
  //   sent         an attempt went out
  //   fence        its phase 1 won; phase 2 went out
  //   failed       the attempt failed and the wait goes on (`failure`)
  //   released     a release was published on a watched channel (`message`)
  //   subscribed / resubscribed   a subscription was confirmed / came back
  //   turn         the waiter before it in its client's line left (`took`:
  //                holding the lock)
  //   end          the acquire ends (`took`: with the lock)
  enum class Kind : std::uint8_t { begin, sent, fence, failed, released, subscribed, resubscribed, turn, end };

  // Failure — what a failed attempt told.
  struct Failure {
    Errc code = Errc::no_quorum;
    std::size_t yes = 0;  // masters that said yes (split votes, when held)
    const std::vector<NodeOutcome>* nodes = nullptr;
    bool fix_ticket = false;  // fair: the first round's masters proposed different tickets
    long long rank = -1;      // fair: its place on a quorum (QuorumRound::quorum_rank)
  };

  struct Event {
    Kind kind;
    TimePoint now{};
    TimePoint due{};  // when the acquire's timer fires (last armed)
    std::string_view message{};
    bool took = false;
    const Failure* failure = nullptr;
  };

  // Next — what the acquire does: nothing; attempt now; or arm its timer
  // for `delay`, and attempt when it fires.
  struct Next {
    enum class Do : std::uint8_t { nothing, attempt, arm };
    Do what = Do::nothing;
    milliseconds delay{0};
  };

  // `op` is the acquire this waiter belongs to: it listens on the channels
  // and stands in the lines. `keys` outlive the waiter (the acquire's).
  Waiter(Engine& engine, AcquireOperation& op, const LockKeys& keys, TimePoint deadline, bool fair, bool tries_once,
         bool caller_token);

  Next step(const Event& event);
  State state() const noexcept { return state_; }

 private:
  void to(State s) noexcept { state_ = s; }
  Next begin(const Event& e);
  void sent();
  Next failed(const Event& e);
  Next woken(const Event& e);
  Next fair_released(const Event& e);
  Next queue_moved(const Event& e);
  Next line_turn(const Event& e);
  void end(bool took);
  // wait_for_release / fair_wait: the sleep after an attempt that found
  // the lock held; none when wake-ups are off or unavailable (then poll).
  std::optional<Next> wait_for_release(const std::vector<NodeOutcome>& nodes, milliseconds left);
  std::optional<Next> fair_wait(const std::vector<NodeOutcome>& nodes, milliseconds left);
  // uses_line: waits in its client's line (one lock key, a value of its
  // own, wake-ups on, not fair: the masters' queues order those).
  bool uses_line() const noexcept;
  void enter_line();
  Next queue_up(milliseconds left);
  // watch_all subscribes to the releases of every resource of the lock
  // (all or none: unavailable when any is).
  WatchState watch_all();
  void stop_watching();
  // channels: the release channel of every resource (named once).
  const std::vector<std::string>& channels();
  // heard: the latest hearing mark of the lock's channels (Transport::
  // heard), none unless every one is confirmed.
  std::optional<std::uint64_t> heard();
  milliseconds wait_left(TimePoint at) const;
  milliseconds wake_jitter();
  const Options& options() const noexcept;
  static Next arm(milliseconds delay) { return {Next::Do::arm, delay}; }

  Engine& engine_;
  AcquireOperation& op_;
  const LockKeys& keys_;
  TimePoint deadline_;
  bool fair_;
  bool tries_once_;
  bool caller_token_;
  State state_ = State::idle;
  long long rank_ = -1;          // fair: its place after the last attempt
  bool need_fix_ = false;        // fair: the next attempt fixes its ticket, at once
  bool listening_ = false;       // the subscription is confirmed: a release from now on is heard
  bool sent_listening_ = false;  // fair: it was already when the attempt in flight was sent
  bool subscribe_waited_ = false;            // fair: it waited for the confirmation once
  std::optional<std::uint64_t> sent_heard_;  // heard() as the attempt in flight was sent (not fair)
  std::vector<std::string> channels_;        // see channels()
  // fair: the masters that named it the head since its last attempt began,
  // as votes (a majority: its turn).
  QuorumTally turns_{0, lock_rule(RoundMode::majority, 0)};
  std::string last_turn_;        // fair: the last "turn …" message heard (one per release)
  bool woken_ = false;           // a release was heard while an attempt was on its way
  bool named_head_ = false;      // fair: a master named it the head since its last attempt
  bool wake_pending_ = false;    // the next retry was brought forward by a notification
  bool woken_attempt_ = false;   // the attempt on its way was brought forward by one
  bool watching_ = false;        // subscribed to the resource's releases
  bool in_line_ = false;         // in its client's line for the key (first or queued)
  milliseconds split_backoff_{0};  // > 0 after split votes: retry within a random delay up to this
  milliseconds wake_spread_{0};    // see docs/design.md, "A crowd spreads itself out"
};

}  // namespace redlock::detail
