// operation.hpp — the engine's operations as explicit state machines.
//
// Each operation (acquire with its fence phase, extend, release; each of one
// resource or several) is an `enum class State` and one transition
// function, `step(Event)`. Rounds (src/quorum.hpp) do every majority count;
// an operation reads their decision. Time, timers and randomness come from
// the engine's Runtime: the same code runs on a uv loop and in the
// deterministic simulator (tools/sim).
//
// Every operation completes exactly once, never on the caller's stack: its
// one timer defers each completion to a later loop turn, and batches the
// replies that arrive in the loop turn of the deciding one.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "redlock/observer.hpp"
#include "engine.hpp"
#include "validity.hpp"
#include "quorum.hpp"
#include "runtime.hpp"

namespace redlock::detail {

// fair_refresh — the longest a fair waiter sleeps between two rounds
// (wake_safety_net, at least 4 × fair_grace): each round re-stamps its
// place in every queue. fair_life — how long a place outlives the round
// that stamped it: one refresh, plus the two node timeouts a round's
// send and reply may take, plus one more refresh of slack for a late
// timer or a busy loop. A waiter that died is out of every queue within
// fair_life of its last round (docs/design.md, "Fair order").
inline milliseconds fair_refresh(const Options& o) { return std::max(o.wake_safety_net, 4 * o.fair_grace); }
inline milliseconds fair_life(const Options& o) { return 2 * fair_refresh(o) + 2 * o.node_timeout; }

// LockKeys — what an operation names on every master: one lock key, or the
// sorted keys of a multi-resource lock, and the resource the Lock reports.
struct LockKeys {
  std::string resource;               // the (first) resource
  std::string key;                    // its lock key
  std::vector<std::string> more_keys; // a multi-resource lock: the keys after `key` (sorted)

  bool multi() const noexcept { return !more_keys.empty(); }
  // release_call deletes `value` wherever it still is. `announce`: publish
  // on each key's channel (a release of a held lock); a rollback of a failed
  // attempt announces nothing — it freed nothing anyone held.
  Call release_call(const std::string& value, bool announce) const;
};

// round_summary: "ok/N: addr why; addr why" — the count of yes and what
// every other node said.
std::string round_summary(const QuorumTally& tally, const std::vector<NodeOutcome>& nodes);

// verdict_code: the error of a majority round's verdict other than yes —
// too late, too little validity left, not held (`extend`) or held
// elsewhere, or no quorum; round_error: that, with its text, naming what
// every node said.
Errc verdict_code(Verdict verdict, bool extend) noexcept;
Error round_error(Verdict verdict, const QuorumTally& tally, const std::vector<NodeOutcome>& nodes,
                  const RoundClock& clock, bool extend);

// Operation — what the three state machines share: the engine's list, the
// timer, the round in flight, and freeing itself once done.
class Operation : public RoundListener {
 public:
  // Event — every input an operation reacts to.
  //   timer       its timer fired (a delay passed, or a deferred step is due)
  //   decided     the round in flight is decided (from a node event)
  //   settled     every node of that round gave its first event
  //   cancel      the caller's stop token was requested (delivered on the loop)
  //   abort       the client is closing
  //   released / subscribed / resubscribed   wake-ups (WakeListener::Why)
  //   turn        the waiter before it in its client's line left (an acquire)
  enum class Event : std::uint8_t { timer, decided, settled, cancel, abort, released, subscribed, resubscribed, turn };

  Operation(Engine& engine, LockKeys keys, std::string token);
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;
  virtual ~Operation();

  // begin: the first step, on the next loop turn.
  void begin() { arm(milliseconds{0}); }
  virtual void step(Event event) = 0;

  void on_round_decided() final { step(Event::decided); }
  void on_round_settled() final { step(Event::settled); }

  // The problem with the arguments, reported as invalid_argument on the
  // first step; empty when none.
  std::string problem;
  std::uint64_t id = 0;  // for cancellation from other threads (Engine::watch_cancel)
  std::optional<std::stop_callback<std::function<void()>>> on_cancel;
  Operation* prev = nullptr;  // the engine's intrusive list
  Operation* next = nullptr;

 protected:
  void arm(milliseconds delay);
  TimePoint now() { return engine_.runtime().now(); }
  const Options& options() const noexcept { return engine_.options(); }
  // launch sends `call` to every node (but those `skip` marks); a
  // decision inside launch itself is stepped on the next loop turn.
  // A lock's rounds: a majority (lock_rule).
  void launch(Call call, RoundMode mode, const std::vector<bool>& skip = {});
  // clock_of: a majority round's clocks, judged `elapsed` after its T1.
  RoundClock clock_of(milliseconds ttl, microseconds elapsed, bool in_time) const;
  // grant: the lock a won round hands out, valid `clock.validity` from `at`
  // (= T1 + ttl − drift), with the round's outcomes if asked for.
  Lock grant(std::string resource, std::string token, milliseconds ttl, const RoundClock& clock, TimePoint at,
             microseconds elapsed, int attempts, std::uint64_t fence) const;
  // drop_round lets the round in flight go (it frees itself once final).
  void drop_round() noexcept;
  // take_outcomes copies the per-node outcomes and drops the round.
  std::vector<NodeOutcome> take_outcomes();
  // close: done; nothing more runs but freeing on the next loop turn.
  void close();
  bool closed() const noexcept { return closed_; }
  // early_error: why the first step must not send anything — the arguments
  // (`problem`) or the client closing; none when it may go ahead.
  std::optional<Error> early_error() const;
  static Error closed_error() { return make_error(Errc::closed, "the client was closed"); }
  // tell_round / tell_finished: the telemetry's view of a decided round
  // (`failure` null: it succeeded) and of the operation's completion.
  void tell_round(OpKind op, const Error* failure, int attempt, microseconds elapsed,
                  const std::vector<NodeOutcome>& nodes) const noexcept;
  void tell_finished(OpKind op) noexcept;

  Engine& engine_;
  LockKeys keys_;
  std::string token_;
  QuorumRound* round_ = nullptr;
  TimePoint due_{};  // when the timer was last armed to fire
  TimePoint started_{};  // when the operation was created (its latency)

 private:
  std::unique_ptr<Timer> timer_;
  bool closed_ = false;
};

// AcquireOperation — take a lock: attempt rounds until one wins a majority
// with enough validity, or the wait runs out. Docs: docs/design.md
// ("Acquire", "Waiting", "Fencing tokens").
class AcquireOperation final : public Operation, public WakeListener {
 public:
  // State:
  //   starting          the first attempt is due on the next loop turn
  //   attempting        an attempt's round is in flight (a fenced acquire's phase 1)
  //   fencing           phase 2 of a fenced acquire: raising the counter to F
  //   retry_wait        waiting to retry: a poll delay, a split-vote backoff,
  //                     the holder's TTL, or a release notification
  //   subscribe_wait    waiting to retry until the subscription is confirmed
  //   queued            behind an earlier waiter of this client for the same
  //                     lock (Engine::join_line): asleep until its turn or
  //                     its wait's deadline
  //   done
  enum class State : std::uint8_t { starting, attempting, fencing, retry_wait, subscribe_wait, queued, done };

  AcquireOperation(Engine& engine, LockKeys keys, AcquireOptions opts, milliseconds ttl, LockCallback done);
  void step(Event event) override;
  void on_wake(WakeListener::Why why, std::string_view message) override;
  // your_turn: from Engine::leave_line — the waiter before this one left its
  // line (`took`: holding the lock). Only latches and arms a timer.
  void your_turn(bool took);
  State state() const noexcept { return state_; }

 private:
  void wake(Event why);
  void start_attempt();
  void start_fence_phase();
  void evaluate();
  void retry_after_failure(Error e, const QuorumTally& tally, TimePoint at);
  bool wait_for_release(const std::vector<NodeOutcome>& nodes, milliseconds left);
  // Fair order (docs/design.md, "Fair order"). fair_wait: the sleep of a
  // fair waiter after a failed attempt, by its place in the queues (false:
  // poll, wake-ups are off or unavailable); fair_wake: a release named the
  // next waiters, or was published by a holder that was not fair;
  // leave_queue: a fair waiter that gives up leaves every queue.
  bool fair_wait(const std::vector<NodeOutcome>& nodes, milliseconds left);
  void fair_wake(std::string_view message);
  void queue_moved();
  void leave_queue();
  // uses_line: this acquire waits in its client's line (one lock key, a
  // value of its own, wake-ups on, not fair: the masters' queues order
  // those); see Engine::join_line.
  bool uses_line() const noexcept { return options().wake_ups && !keys_.multi() && !caller_token_ && !fair_; }
  // enter_line: join the end of its client's line for keys_.key.
  void enter_line();
  // queue_up: join the line behind a waiter of this client, and sleep.
  void queue_up(milliseconds left);
  void take_turn();
  // watch_all subscribes to the releases of every resource of the lock
  // (all or none: unavailable when any is).
  WatchState watch_all();
  milliseconds wait_left(TimePoint at) const;
  void rollback(const std::vector<NodeOutcome>& attempt = {});
  void abort_attempt();
  Call attempt_call() const;
  std::vector<std::string> fenced_keys() const;
  milliseconds wake_jitter() { return engine_.runtime().random_delay(wake_spread_); }
  // channels: the release channel of every resource of the lock (named
  // once, at the first wait).
  const std::vector<std::string>& channels();
  // heard: the latest hearing mark of the lock's channels (Transport::
  // heard), none unless every one is confirmed.
  std::optional<std::uint64_t> heard();
  Error cancelled_error() const;
  void finish(Result<Lock> r);
  void fail(Error e);  // finish with `e`, counting the attempts made
  void stop_watching();

  State state_ = State::starting;
  milliseconds ttl_;
  TimePoint wait_deadline_;
  LockCallback done_;
  bool caller_token_;  // the caller gave the value: a refresh; never rolled back
  bool fence_;         // a fenced acquire (two phases)
  bool fair_;          // in fair order: waits in the masters' queues
  bool tries_once_;    // no wait: one attempt (fair: it never joins a queue)
  std::string waiter_;    // fair: its id in the queues (16 hex digits, drawn at the first attempt)
  long long ticket_ = 0;  // fair: its place in every queue, once the first round told it
  long long rank_ = -1;   // fair: its place after the last attempt (QuorumRound::majority_rank)
  bool need_fix_ = false; // fair: the first round's masters proposed different tickets
  bool listening_ = false;      // the subscription is confirmed: a release from now on is heard
  bool sent_listening_ = false; // fair: it was already when the attempt in flight was sent
  std::optional<std::uint64_t> sent_heard_; // heard() as the attempt in flight was sent (a waiter, not fair)
  std::vector<std::string> channels_;       // see channels()
  bool subscribe_waited_ = false; // fair: it waited for the subscription's confirmation once
  // fair: the masters that named it the head since its last attempt began,
  // as votes (a majority: its turn).
  QuorumTally turns_{0, lock_rule(RoundMode::majority, 0)};
  std::string last_turn_;       // fair: the last "turn …" message heard (one per release)
  // Inputs latched until the state can act on them.
  bool cancelled_ = false;
  bool aborted_ = false;
  bool woken_ = false;     // a release was heard while an attempt was on its way
  bool wake_pending_ = false;  // the next retry was brought forward by a notification
  bool woken_attempt_ = false; // the attempt on its way was brought forward by one
  bool watching_ = false;  // subscribed to the resource's releases
  bool in_line_ = false;   // in its client's line for keys_.key (first or queued)
  bool turn_took_ = false; // your_turn's `took`, read by take_turn
  TimePoint t1_{};
  std::chrono::system_clock::time_point t1_wall_{};  // only for the broken wall_clock variant
  int attempts_ = 0;
  std::uint64_t fence_value_ = 0;  // F, once phase 1 won
  milliseconds split_backoff_{0};  // > 0 after split votes: retry within a random delay up to this
  milliseconds wake_spread_{0};    // see docs/design.md, "A crowd spreads itself out"
};

// ExtendOperation — push a held lock's TTL out on a majority, before its
// validity deadline. Never recreates a missing key.
class ExtendOperation final : public Operation {
 public:
  enum class State : std::uint8_t { starting, extending, done };

  ExtendOperation(Engine& engine, LockKeys keys, Lock lock, milliseconds ttl, LockCallback done);
  void step(Event event) override;

 private:
  void evaluate();
  void finish(Result<Lock> r);

  State state_ = State::starting;
  milliseconds ttl_;
  TimePoint lock_deadline_;  // the lock's validity deadline (max: none known)
  std::uint64_t fence_;
  TimePoint t1_{};
  LockCallback done_;
};

// ReleaseOperation — delete our value everywhere and announce the release.
// Once its outcome is certain it waits up to release_settle for the
// stragglers of a healthy cluster (so the count is exact there); a hung
// minority costs at most that. A release after which our value may still
// be on a majority — so many nodes timed out or failed — is sent again to
// those nodes only, up to
// Options::release_retries times, retry_delay + jitter apart: deleting our
// own value is idempotent, and a lock left to its TTL blocks everyone.
//   starting     the first round is due on the next loop turn
//   releasing    a round is in flight
//   settling     decided; waiting up to release_settle for the rest
//   retry_wait   not released; the next round to the unsure nodes is due
//   done
class ReleaseOperation final : public Operation {
 public:
  enum class State : std::uint8_t { starting, releasing, settling, retry_wait, done };

  ReleaseOperation(Engine& engine, LockKeys keys, std::string token, ReleaseCallback done);
  void step(Event event) override;

 private:
  // merge_round folds the round in flight into outcomes_: a node's answer
  // from an earlier round stays unless it was unsure (timeout, error,
  // pending) and this round has a better one.
  void merge_round();
  void round_over();
  void relaunch();
  void report();
  void finish(Result<ReleaseResult> r);

  State state_ = State::starting;
  TimePoint t1_{};
  int retries_left_ = 0;
  int rounds_ = 1;
  std::vector<NodeOutcome> outcomes_;  // merged over the rounds so far
  ReleaseCallback done_;
};

}  // namespace redlock::detail
