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
#include "waiter.hpp"

namespace redlock::detail {

// LockKeys — what an operation names on every master: one lock key, or the
// sorted keys of a multi-resource lock, and the resource the Lock reports.
// A semaphore's acquire names its permits key and every permit's key; the
// extend or release of a permit, that permit's key (a lock key) and the
// semaphore's channel.
struct LockKeys {
  std::string resource;               // the (first) resource
  std::string key;                    // its lock key (a semaphore's acquire: its permits key)
  std::vector<std::string> more_keys; // a multi-resource lock: the keys after `key` (sorted)
  std::vector<std::string> permit_keys;  // a semaphore's acquire: permit i's key at i
  std::string channel;                // where a release is announced ("": channel_of(key))
  bool shared = false;                // a read lock's (its entry in {…}:readers)
  bool permit = false;                // a semaphore's: its acquire, or a permit's extend or release

  bool multi() const noexcept { return !more_keys.empty(); }
  bool semaphore() const noexcept { return !permit_keys.empty(); }
  LockKind kind() const noexcept { return shared ? LockKind::read_lock : permit ? LockKind::permit : LockKind::lock; }
  std::string channel_name() const;
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
  // (An acquire's wake-ups and line turns are its Waiter's inputs.)
  enum class Event : std::uint8_t { timer, decided, settled, cancel, abort };

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
// with enough validity, or the wait runs out. How it waits between
// attempts is its Waiter's (src/waiter.hpp). Docs: docs/design.md
// ("Acquire", "Waiting", "Fencing tokens").
class AcquireOperation final : public Operation, public WakeListener {
 public:
  // State:
  //   starting     the first step is due on the next loop turn
  //   attempting   an attempt's round is in flight (a fenced acquire's phase 1)
  //   fencing      phase 2 of a fenced acquire: raising the counter to F
  //   waiting      its waiter decides when the next attempt goes
  //   done
  enum class State : std::uint8_t { starting, attempting, fencing, waiting, done };

  AcquireOperation(Engine& engine, LockKeys keys, AcquireOptions opts, milliseconds ttl, LockCallback done);
  void step(Event event) override;
  // on_wake / your_turn (from Engine::leave_line: the waiter before this one
  // left its line, `took`: holding the lock) are the waiter's inputs.
  void on_wake(WakeListener::Why why, std::string_view message) override;
  void your_turn(bool took);
  State state() const noexcept { return state_; }
  Waiter::State wait_state() const noexcept { return waiter_.state(); }
  // fair_id: a fair acquire's name in the masters' queues (empty before its
  // first attempt, and for any other acquire).
  std::string_view fair_id() const noexcept { return fair_id_; }

 private:
  void start_attempt();
  void start_fence_phase();
  void evaluate();
  void retry_after_failure(Error e, const Waiter::Failure& failure, TimePoint at);
  // follow: do what the waiter said.
  void follow(Waiter::Next next);
  Waiter::Event wait_event(Waiter::Kind kind) { return {.kind = kind, .now = now(), .due = due_}; }
  // leave_queue: a fair waiter that gives up leaves every queue (where the
  // lock is free, the next is named).
  void leave_queue();
  // leave_intent: a writer that stamped its intent takes it back as it
  // ends (`took`: with the lock — where its win took it back already,
  // nothing is sent).
  void leave_intent(bool took);
  milliseconds wait_left(TimePoint at) const;
  void rollback(const std::vector<NodeOutcome>& attempt = {});
  // sem_cleanup: delete this attempt's value from every permit but `keep`
  // (-1: all) on every master that may hold it elsewhere.
  void sem_cleanup(long long keep, const std::vector<NodeOutcome>& attempt, const std::vector<std::int16_t>& votes);
  void grant_permit(std::size_t slot, const RoundClock& clock, TimePoint at, microseconds elapsed);
  void start_permit_fence(std::size_t slot);
  bool permits_differ(const std::vector<NodeOutcome>& nodes) const;
  void give_back(const LockKeys& held);
  void abort_attempt();
  Call attempt_call() const;
  Call fair_call(std::string ttl) const;
  void stamp_intent();
  Call write_call(std::string value, std::string ttl) const;
  std::vector<std::string> fenced_keys() const;
  Error cancelled_error() const;
  void finish(Result<Lock> r);
  void fail(Error e);  // finish with `e`, counting the attempts made

  // to: the one writer of state_ (from step and the steps it takes).
  void to(State s) noexcept { state_ = s; }
  State state_ = State::starting;
  milliseconds ttl_;
  TimePoint wait_deadline_;
  LockCallback done_;
  bool caller_token_;  // the caller gave the value: a refresh; never rolled back
  bool fence_;         // a fenced acquire (two phases)
  bool fair_;          // in fair order: waits in the masters' queues
  bool tries_once_;    // no wait: one attempt (fair: it never joins a queue)
  // A plain acquire that waits: once an attempt met readers (SET NX …
  // GET found their mark), its retries are write_acquire and stamp its
  // intent; intent_id_ names it there (16 hex digits, drawn at the first
  // attempt), intent_sent_ once a write_acquire went out (a master may
  // stamp it even where its answer comes too late to count).
  // A fenced or fair acquire of one lock that waits (a stamper) cannot
  // tell readers from its replies: each of its retries is preceded, on
  // every connection, by a stamp alone (write_acquire without a value),
  // which stamps its intent only where readers hold or intents wait.
  bool writer_;
  bool stamper_;
  bool readers_seen_ = false;
  bool intent_sent_ = false;
  std::string fair_id_;   // fair: its id in the queues (16 hex digits, drawn at the first attempt)
  std::string intent_id_;
  long long ticket_ = 0;  // fair: its place in every queue, once the first round told it
  // Inputs latched until the state can act on them.
  bool cancelled_ = false;
  bool aborted_ = false;
  TimePoint t1_{};
  std::chrono::system_clock::time_point t1_wall_{};  // only for the broken wall_clock variant
  int attempts_ = 0;
  std::uint64_t fence_value_ = 0;  // F, once phase 1 won
  std::size_t fence_slot_ = 0;     // a fenced semaphore's: the permit phase 1 won
  std::size_t first_slot_ = 0;     // a semaphore's attempt: the permit each master tries first
  Waiter waiter_;
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

  // to: the one writer of state_ (from step and the steps it takes).
  void to(State s) noexcept { state_ = s; }
  State state_ = State::starting;
  milliseconds ttl_;
  TimePoint lock_deadline_;  // the lock's validity deadline (max: none known)
  std::uint64_t fence_;
  std::optional<std::uint32_t> permit_;
  bool shared_;
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

  // to: the one writer of state_ (from step and the steps it takes).
  void to(State s) noexcept { state_ = s; }
  State state_ = State::starting;
  TimePoint t1_{};
  int retries_left_ = 0;
  int rounds_ = 1;
  std::vector<NodeOutcome> outcomes_;  // merged over the rounds so far
  ReleaseCallback done_;
};

}  // namespace redlock::detail
