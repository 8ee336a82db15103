// acquire.cpp — taking a lock, as a state machine over rounds.
//
// Safety rests on four rules kept here:
//  0. every acquire attempt writes a value no other attempt writes (a fresh
//     128-bit random value per attempt), and a rollback or cleanup names the
//     value of its own attempt: a late one can never delete what a later
//     attempt, or anyone else, wrote — whatever order connections deliver in;
//  1. elapsed is measured on the monotonic clock from T1, taken before the
//     first send of a round, to the moment the outcome is evaluated, and
//     validity = ttl − elapsed − drift must stay above min_validity;
//  2. an attempt that fails is rolled back on every node — a timeout means
//     "maybe applied" — down the same connection behind the SET, so a SET
//     that lands late is deleted right after;
//  3. a fenced lock is handed out only after a majority raised its fence
//     within the validity that began at phase 1's T1.
#include <algorithm>

#include "keys.hpp"
#include "operation.hpp"
#include "sabotage.hpp"
#include "telemetry.hpp"
#include "token.hpp"
#include "validity.hpp"

namespace redlock::detail {

using std::chrono::duration_cast;

AcquireOperation::AcquireOperation(Engine& engine, LockKeys keys, AcquireOptions opts, milliseconds ttl,
                                   LockCallback done)
    : Operation(engine, std::move(keys), std::move(opts.token)),
      ttl_(ttl),
      wait_deadline_(engine.runtime().now() + opts.wait),
      done_(std::move(done)),
      caller_token_(!token_.empty()),
      fence_(opts.fence),
      fair_(opts.fair),
      tries_once_(opts.wait <= milliseconds{0}),
      writer_(!tries_once_ && !caller_token_ && !fence_ && !fair_ && !keys_.multi() && !keys_.semaphore() &&
              !keys_.shared),
      stamper_(!tries_once_ && !caller_token_ && (fence_ || fair_) && !keys_.multi() && !keys_.semaphore() &&
               !keys_.shared),
      waiter_(engine, *this, keys_, wait_deadline_, fair_, tries_once_, caller_token_) {}

// step — the transition function. Inputs that cannot be acted on in the
// current state (a cancel during an attempt) are latched and read when the
// attempt ends.
void AcquireOperation::step(Event event) {
  if (event == Event::cancel) cancelled_ = true;
  if (event == Event::abort) aborted_ = true;
  switch (state_) {
    case State::starting: {
      if (event == Event::abort || event == Event::cancel) return arm(milliseconds{0});
      if (event != Event::timer) return;
      if (std::optional<Error> e = early_error()) return fail(std::move(*e));  // aborted_ implies closing
      if (cancelled_) return finish(cancelled_error());
      const Waiter::Next next = waiter_.step(wait_event(Waiter::Kind::begin));
      if (next.what == Waiter::Next::Do::attempt) return start_attempt();
      to(State::waiting);
      return follow(next);
    }
    case State::attempting:
    case State::fencing:
      if (event == Event::abort) return abort_attempt();
      if (event == Event::decided) return arm(milliseconds{0});  // batch this loop turn's replies
      if (event == Event::timer && round_->decided()) return evaluate();
      return;  // cancel: acted on when the attempt ends
    case State::waiting:
      if (event == Event::abort || event == Event::cancel) return arm(milliseconds{0});
      if (event != Event::timer) return;
      if (aborted_) return fail(closed_error());
      if (cancelled_) return finish(cancelled_error());
      return start_attempt();
    case State::done: return;
  }
}

void AcquireOperation::follow(Waiter::Next next) {
  switch (next.what) {
    case Waiter::Next::Do::nothing: return;
    case Waiter::Next::Do::attempt: return start_attempt();
    case Waiter::Next::Do::arm: return arm(next.delay);
  }
}

void AcquireOperation::on_wake(WakeListener::Why why, std::string_view message) {
  Waiter::Kind kind = Waiter::Kind::released;
  switch (why) {
    case WakeListener::Why::released:
      if (Telemetry* t = engine_.telemetry()) t->woken(keys_.resource);
      break;
    case WakeListener::Why::subscribed: kind = Waiter::Kind::subscribed; break;
    case WakeListener::Why::resubscribed: kind = Waiter::Kind::resubscribed; break;
  }
  Waiter::Event e = wait_event(kind);
  e.message = message;
  follow(waiter_.step(e));
}

void AcquireOperation::your_turn(bool took) {
  Waiter::Event e = wait_event(Waiter::Kind::turn);
  e.took = took;
  follow(waiter_.step(e));
}

milliseconds AcquireOperation::wait_left(TimePoint at) const {
  return std::max(std::chrono::ceil<milliseconds>(wait_deadline_ - at), milliseconds{0});
}

Call AcquireOperation::attempt_call() const {
  std::string ttl = std::to_string(ttl_.count());
  if (fair_) return fair_call(std::move(ttl));
  if (keys_.semaphore()) {
    // Every permit's key, then the permits key; each master takes the
    // first free permit from first_slot_ on (src/scripts.hpp).
    Call call{.command = CommandId::sem_acquire, .key = keys_.permit_keys.front(), .arg1 = token_, .arg2 = ttl};
    call.more_keys.reserve(keys_.permit_keys.size());
    call.more_keys.assign(keys_.permit_keys.begin() + 1, keys_.permit_keys.end());
    call.more_keys.push_back(keys_.key);
    call.more_args = {std::to_string(keys_.permit_keys.size()), std::to_string(first_slot_)};
    if (fence_) {
      // Phase 1 of a fenced permit: each master reads the counter of the
      // permit it gives, in the same step.
      for (const std::string& key : keys_.permit_keys) call.more_keys.push_back(fence_key_of(key));
      call.more_args.emplace_back("fence");
    }
    return call;
  }
  if (keys_.shared) {
    // A reader: the lock key, the readers, the writers' intents. (The broken
    // variant reads and writes a lock key of its own: it never meets a
    // writer's value, nor a writer its mark.)
    return {.command = CommandId::read_acquire,
            .key = sabotage().read_ignores_writer ? sibling_of(keys_.key, ":readlock") : keys_.key,
            .arg1 = token_,
            .arg2 = ttl,
            .more_keys = {readers_key_of(keys_.key), writers_key_of(keys_.key)}};
  }
  if (writer_ && readers_seen_ && !sabotage().no_writer_intent) {
    // A writer's retry after it met readers: it stamps its intent, and new
    // readers wait behind it (src/scripts.hpp, write_acquire). A writer
    // that never met one retries with the plain SET NX: a crowd of writers
    // costs the masters nothing more.
    return write_call(token_, std::move(ttl));
  }
  if (fence_) {
    return {.command = CommandId::fenced_acquire, .key = keys_.key, .arg1 = token_, .arg2 = ttl, .more_keys = fenced_keys()};
  }
  if (keys_.multi()) {
    return {.command = CommandId::multi_acquire, .key = keys_.key, .arg1 = token_, .arg2 = ttl, .more_keys = keys_.more_keys};
  }
  // A value drawn for this attempt is on no master yet: a plain SET NX PX
  // says all. A caller's value may be (a refresh), and so may the one value
  // the broken "reused value" variant keeps for retries.
  const bool maybe_present = caller_token_ || (sabotage().reused_value && attempts_ > 1);
  return {.command = maybe_present ? CommandId::acquire : CommandId::set_nx, .key = keys_.key, .arg1 = token_, .arg2 = ttl};
}

// fair_call: a fair waiter's attempt — of a lock, or of any permit of a
// semaphore (its permits key first, its permit keys after the queue's;
// src/scripts.hpp, fair_permits).
Call AcquireOperation::fair_call(std::string ttl) const {
  // The waiter's place lapses `fair_life` after this round unless its
  // next round comes first; a waiter that died is out of every queue by
  // then, and the queue key dies with its last live waiter. (The broken
  // variant keeps the place for the whole wait and the TTL: a killed
  // waiter with a long wait blocks every fair try for that long.)
  const long long life = sabotage().no_queue_lapse ? wait_left(engine_.runtime().now()).count() + ttl_.count()
                                                   : fair_life(options()).count();
  Call call{.command = CommandId::fair_acquire,
            .key = keys_.key,
            .arg1 = token_,
            .arg2 = std::move(ttl),
            .more_keys = {queue_key_of(keys_.key), turn_key_of(keys_.key), expiry_key_of(keys_.key)},
            .more_args = {fair_id_, std::to_string(ticket_), std::to_string(options().fair_grace.count()),
                          std::to_string(life), tries_once_ ? "1" : "0"}};
  if (keys_.semaphore()) {
    call.more_keys.insert(call.more_keys.end(), keys_.permit_keys.begin(), keys_.permit_keys.end());
    call.more_args.push_back(std::to_string(keys_.permit_keys.size()));
    call.more_args.push_back(std::to_string(first_slot_));
    call.more_args.push_back(keys_.channel_name());
  }
  return call;
}

void AcquireOperation::start_attempt() {
  if (!caller_token_ && !(sabotage().reused_value && attempts_ > 0)) {
    // Every attempt writes a value of its own (rule 0 above).
    Result<std::string> value = engine_.runtime().random_token();
    if (!value) return fail(value.error());
    if (fair_) {
      // A fair value: its waiter id (the second half of the first draw),
      // the same on every attempt, and a part drawn for this one (the first
      // half of each draw); src/token.hpp.
      if (fair_id_.empty()) fair_id_ = value->substr(fair_id_size, fair_id_size);
      *value = fair_token(fair_id_, *value);
    }
    // A writer's name among the intents: drawn once, as a fair waiter's.
    if ((writer_ || stamper_) && intent_id_.empty()) intent_id_ = value->substr(fair_id_size, fair_id_size);
    // The token (a plain draw in base64url), then the owner, in the buffer
    // of the attempt before (a retry allocates nothing more than its
    // draw), sized to fit: the lock keeps this buffer.
    assign_drawn_value(token_, std::move(*value), engine_.owner_suffix());
  }
  if (keys_.semaphore() && attempts_ == 0) {
    // Concurrent acquirers start at different permits, so that with
    // permits to spare their masters seldom split their votes.
    first_slot_ = engine_.runtime().random_below(keys_.permit_keys.size());
  }
  if (stamper_ && attempts_ > 0) stamp_intent();
  ++attempts_;
  waiter_.step({.kind = Waiter::Kind::sent});  // reads no clock: the hot path
  to(State::attempting);
  t1_ = now();
  if (sabotage().wall_clock) t1_wall_ = engine_.runtime().wall_now();
  Call call = attempt_call();
  // A writer's intent may be stamped on any master this reaches, also
  // where the answer comes after the round's decision: taken back when it
  // ends (leave_intent; on each connection the leave comes after the stamp).
  if (call.command == CommandId::write_acquire) intent_sent_ = true;
  launch(std::move(call), RoundMode::majority);
}

// stamp_intent: a fenced or fair writer's retry is preceded by its intent
// alone — write_acquire without a value, which sets nothing and stamps the
// intent only where readers hold or other writers wait (src/scripts.hpp):
// new readers then wait behind it, as behind a plain writer's. Down each
// connection ahead of the attempt; nobody reads its answers (leave_intent
// takes the stamps back as the writer ends, wherever they landed).
void AcquireOperation::stamp_intent() {
  if (sabotage().no_writer_intent) return;
  intent_sent_ = true;
  QuorumRound::launch(engine_.transport(), write_call(std::string(), std::to_string(ttl_.count())),
                      lock_rule(RoundMode::release, engine_.transport().size()), nullptr)
      ->detach();
}

// write_call: a writer's write_acquire with `value` (empty: its intent
// alone), its intent to lapse fair_life after this round.
Call AcquireOperation::write_call(std::string value, std::string ttl) const {
  return {.command = CommandId::write_acquire,
          .key = keys_.key,
          .arg1 = std::move(value),
          .arg2 = std::move(ttl),
          .more_keys = {writers_key_of(keys_.key)},
          .more_args = {intent_id_, std::to_string(fair_life(options()).count())}};
}

// start_fence_phase: phase 1 reached a majority; F = the highest counter any
// node reported + 1. Phase 2 raises the counter to F on the nodes where our
// value still is; the lock (with F) is granted only if a majority confirms
// within the validity that began at phase 1's T1.
void AcquireOperation::start_fence_phase() {
  const auto counter = static_cast<std::uint64_t>(std::max(round_->max_counter(), 0LL));
  if (counter >= max_fence) {
    // The script refuses such a counter; this guards the arithmetic (and
    // the simulator's masters) all the same: a fence is never rounded.
    std::vector<NodeOutcome> nodes = take_outcomes();
    rollback();
    Error e = make_error(Errc::no_quorum, "fence counter of " + keys_.resource + " is " + std::to_string(counter) +
                                              ", at or above 2^53 (" + std::to_string(max_fence) +
                                              "): fences are exact only below it; refused");
    e.nodes = std::move(nodes);
    return fail(std::move(e));
  }
  fence_value_ = counter + 1;
  drop_round();
  waiter_.step({.kind = Waiter::Kind::fence});
  to(State::fencing);
  launch({.command = CommandId::fence_raise,
          .key = keys_.key,
          .arg1 = token_,
          .arg2 = std::to_string(fence_value_),
          .more_keys = fenced_keys()},
         RoundMode::majority);
}

// fenced_keys: what the two fence scripts take after the first lock key —
// the other lock keys, then every lock key's fence counter, in order.
std::vector<std::string> AcquireOperation::fenced_keys() const {
  std::vector<std::string> keys = keys_.more_keys;
  keys.push_back(fence_key_of(keys_.key));
  for (const std::string& key : keys_.more_keys) keys.push_back(fence_key_of(key));
  return keys;
}

// rollback undoes this attempt: its value, and only its value, is deleted
// wherever it landed — also where it lands late, since the rollback follows
// the SET on the same connection. A caller's value is never rolled back: it
// may be a lock the caller holds (the acquire was a refresh), and a late
// rollback could delete a later attempt's success under that same value;
// such keys expire by their TTL.
//
// A master whose first answer to this attempt's acquire was "held by
// another value" is left out: the acquire ran there once, atomically, and
// wrote nothing (every acquire script is all-or-nothing), and this value
// is never sent there again — so no key with it can appear. A master that
// timed out, failed, erred or said yes gets the rollback. In a crowd this
// halves the commands of a lost attempt. (Not after the fence phase: a
// fence_raise "no" says nothing about a phase-1 SET still on its way. Not
// in the reused_value sabotage either: it is the first design, which sent
// one value on every attempt and rolled back everywhere.)
// `attempt` holds the attempt round's outcomes when the rollback follows
// it (empty: every master gets the rollback).
void AcquireOperation::rollback(const std::vector<NodeOutcome>& attempt) {
  if (keys_.semaphore()) return sem_cleanup(-1, attempt, {});
  if (sabotage().no_rollback || caller_token_) return;
  std::vector<bool> skip(sabotage().reused_value ? 0 : attempt.size());
  for (std::size_t i = 0; i < skip.size(); ++i) skip[i] = attempt[i].outcome == Outcome::held;
  QuorumRound::launch(engine_.transport(), keys_.release_call(token_, false),
                      lock_rule(RoundMode::release, engine_.transport().size()), nullptr, skip)
      ->detach();
}

// sem_cleanup: a semaphore's attempt may have taken a permit on any master
// that did not answer "all held" — a different one on each. Every permit
// but `keep` (the one won, or -1) loses this attempt's value there; on a
// master that voted for `keep` there is nothing else to delete. The same
// rules as rollback's: only this attempt's value, down the connection
// behind the acquire, so a late acquire is cleaned up right after.
void AcquireOperation::sem_cleanup(long long keep, const std::vector<NodeOutcome>& attempt,
                                   const std::vector<std::int16_t>& votes) {
  if (sabotage().no_rollback) return;
  std::vector<bool> skip(attempt.size());
  for (std::size_t i = 0; i < skip.size(); ++i) {
    skip[i] = attempt[i].outcome == Outcome::held || (keep >= 0 && i < votes.size() && votes[i] == keep);
  }
  // Every master voted for the permit won (or wrote nothing): no other
  // permit holds the value anywhere — the usual win costs no cleanup.
  if (!skip.empty() && std::all_of(skip.begin(), skip.end(), [](bool s) { return s; })) return;
  Call call = keys_.release_call(token_, false);
  call.arg2 = std::to_string(keep);
  QuorumRound::launch(engine_.transport(), std::move(call), lock_rule(RoundMode::release, engine_.transport().size()),
                      nullptr, skip)
      ->detach();
}

// abort_attempt: the client is closing. The attempt on its way (or decided
// but not yet acted on) may have set its value anywhere: it is rolled back
// now, before the connections close (they close gracefully, so the
// rollback still reaches every master that got the SET).
void AcquireOperation::abort_attempt() {
  rollback();
  drop_round();
  to(State::waiting);  // whose next step sees aborted_
  arm(milliseconds{0});
}

void AcquireOperation::evaluate() {
  const TimePoint at = now();
  microseconds elapsed = duration_cast<microseconds>(at - t1_);
  if (sabotage().no_elapsed) elapsed = microseconds{0};
  if (sabotage().wall_clock) elapsed = duration_cast<microseconds>(engine_.runtime().wall_now() - t1_wall_);
  const QuorumTally tally = round_->tally();
  const RoundClock clock = clock_of(ttl_, elapsed, true);
  const Verdict verdict = decide(tally, &clock);
  if (verdict == Verdict::yes && keys_.semaphore()) {
    if (state_ == State::fencing) return grant_permit(fence_slot_, clock, at, elapsed);
    const auto slot = static_cast<std::size_t>(round_->leading_permit());
    sem_cleanup(static_cast<long long>(slot), round_->outcomes(), round_->permit_votes());
    if (fence_ && !cancelled_) return start_permit_fence(slot);
    return grant_permit(slot, clock, at, elapsed);
  }
  if (verdict == Verdict::yes) {
    if (cancelled_) {
      // Taken after all, but the caller has gone: give it back (a real
      // release: the lock was held, waiters may take it now).
      if (!caller_token_) give_back(keys_);
      return finish(cancelled_error());
    }
    if (fence_ && state_ == State::attempting) return start_fence_phase();
    tell_round(OpKind::acquire, nullptr, attempts_, elapsed, round_->outcomes());
    // The name and the value move into the lock: the operation ends here
    // and reads neither again (a held lock keeps one allocation of each).
    const bool shared = keys_.shared;
    Lock lock = grant(std::move(keys_.resource), std::move(token_), ttl_, clock, at, elapsed, attempts_, fence_value_);
    lock.shared = shared;
    return finish(std::move(lock));
  }

  Waiter::Failure failure;
  if (fair_) {
    // The first round joins every queue at one above its last; the highest
    // of those tickets is this waiter's place everywhere. Where a master
    // put it lower (it had not heard of every waiter), the next attempt,
    // at once, puts it at exactly that ticket: masters should sort the same
    // waiters alike, or their heads differ (until a turn runs out). A
    // master that answers after the decision is put right by the next
    // attempt the waiter makes anyway.
    if (ticket_ == 0) {
      ticket_ = round_->max_counter();
      failure.fix_ticket = ticket_ > 0 && !round_->tickets_agree();
    }
    failure.rank = round_->quorum_rank();
  }
  // A semaphore's next attempt starts at the permit this one came closest
  // to winning: masters that split their votes then mostly agree.
  if (keys_.semaphore() && round_->tally().ok() > 0) first_slot_ = static_cast<std::size_t>(round_->leading_permit());
  std::vector<NodeOutcome> nodes = take_outcomes();
  if (writer_ && !readers_seen_) {
    readers_seen_ = std::any_of(nodes.begin(), nodes.end(), [](const NodeOutcome& n) {
      return n.outcome == Outcome::held && n.error == readers_held_text;
    });
  }
  // The text is read only when this failure ends the acquire (the
  // telemetry reads the code): a waiter's other failed attempts build none.
  const bool last = !cancelled_ && (at >= wait_deadline_ || aborted_);
  const bool fence_failed = state_ == State::fencing && (verdict == Verdict::refused || verdict == Verdict::no_quorum);
  Error e;
  e.code = fence_failed ? Errc::no_quorum : verdict_code(verdict, false);
  if (last && fence_failed) {
    e = make_error(Errc::no_quorum, "fence " + std::to_string(fence_value_) + " not confirmed by a majority " +
                                        round_summary(tally, nodes));
  } else if (last) {
    e = round_error(verdict, tally, nodes, clock, false);
  }
  tell_round(OpKind::acquire, &e, attempts_, elapsed, nodes);
  // A failed attempt may have set its value anywhere it did not hear "held".
  // (Two calls, not one with `?:`, which would copy `nodes`.)
  if (state_ == State::attempting) {
    rollback(nodes);
  } else {
    rollback();
  }
  if (keys_.semaphore() && permits_differ(nodes)) {
    // A quorum of masters keep another P for this name: no attempt of
    // this client can win while they do. (Fewer may be a stale minority.)
    e = make_error(Errc::invalid_argument, "semaphore " + keys_.resource + ": a quorum of masters keep another " +
                                               "number of permits than this client's " +
                                               std::to_string(keys_.permit_keys.size()) + " " + round_summary(tally, nodes));
    e.nodes = std::move(nodes);
    return fail(std::move(e));
  }
  e.nodes = std::move(nodes);
  e.attempts = attempts_;
  e.elapsed = elapsed;
  failure.code = e.code;
  failure.yes = tally.ok();
  retry_after_failure(std::move(e), failure, at);
}

// permits_differ: a quorum of `nodes` answered that the name's semaphore
// has another number of permits (sem_acquire's error).
bool AcquireOperation::permits_differ(const std::vector<NodeOutcome>& nodes) const {
  std::size_t differ = 0;
  for (const NodeOutcome& n : nodes) {
    differ += n.outcome == Outcome::error && n.error.find(" permits; this client asked for ") != std::string::npos;
  }
  return quorum_says(differ, nodes.size(), majority_of(nodes.size()));
}

// give_back: a lock (or permit) this attempt won after its caller cancelled
// is released for real — it was held, waiters may take it now.
void AcquireOperation::give_back(const LockKeys& held) {
  QuorumRound::launch(engine_.transport(), held.release_call(token_, true),
                      lock_rule(RoundMode::release, engine_.transport().size()), nullptr)
      ->detach();
}

// grant_permit: a semaphore's attempt won permit `slot` (a quorum of
// masters gave it; fenced: and confirmed its fence). What it took
// elsewhere was cleaned up already; a caller that cancelled meanwhile gets
// nothing, and the permit is released (waiters told).
void AcquireOperation::grant_permit(std::size_t slot, const RoundClock& clock, TimePoint at, microseconds elapsed) {
  if (cancelled_) {
    give_back({.resource = keys_.resource, .key = keys_.permit_keys[slot], .channel = keys_.channel});
    return finish(cancelled_error());
  }
  tell_round(OpKind::acquire, nullptr, attempts_, elapsed, round_->outcomes());
  Lock lock = grant(std::move(keys_.resource), std::move(token_), ttl_, clock, at, elapsed, attempts_, fence_value_);
  lock.permit = static_cast<std::uint32_t>(slot);
  finish(std::move(lock));
}

// start_permit_fence: a fenced semaphore acquire won permit `slot`; phase 2
// is the mutex's on that permit's key and fence counter (fence_raise), F
// one above the highest counter of it that the masters which gave it read
// — a quorum, which meets every quorum an earlier holder of the permit
// raised its counter on (docs/design.md, "Semaphores").
void AcquireOperation::start_permit_fence(std::size_t slot) {
  const auto counter = static_cast<std::uint64_t>(std::max(round_->permit_counter(slot), 0LL));
  if (counter >= max_fence) {
    std::vector<NodeOutcome> nodes = take_outcomes();
    rollback();
    Error e = make_error(Errc::no_quorum, "fence counter of " + keys_.resource + " permit " + std::to_string(slot) +
                                              " is " + std::to_string(counter) + ", at or above 2^53 (" +
                                              std::to_string(max_fence) + "): fences are exact only below it; refused");
    e.nodes = std::move(nodes);
    return fail(std::move(e));
  }
  fence_value_ = counter + 1;
  fence_slot_ = slot;
  drop_round();
  waiter_.step({.kind = Waiter::Kind::fence});
  to(State::fencing);
  const std::string& key = keys_.permit_keys[slot];
  launch({.command = CommandId::fence_raise,
          .key = key,
          .arg1 = token_,
          .arg2 = std::to_string(fence_value_),
          .more_keys = {fence_key_of(key)}},
         RoundMode::majority);
}

// retry_after_failure: the attempt failed; the waiter plans the next
// while the wait lasts.
void AcquireOperation::retry_after_failure(Error e, const Waiter::Failure& failure, TimePoint at) {
  if (cancelled_) return finish(cancelled_error());
  if (at >= wait_deadline_ || aborted_) return fail(std::move(e));
  to(State::waiting);
  Waiter::Event event = wait_event(Waiter::Kind::failed);
  event.now = at;
  Waiter::Failure f = failure;
  f.nodes = &e.nodes;
  event.failure = &f;
  follow(waiter_.step(event));
}

// leave_queue: a fair waiter that ends without the lock takes itself out
// of every queue it may be in; where the lock is free the next is named.
void AcquireOperation::leave_queue() {
  // A round that told no ticket may still have queued the waiter somewhere
  // (a master that answered late); a try never joins anywhere.
  if (!fair_ || fair_id_.empty() || tries_once_) return;
  // A semaphore's waiter names its permits (the first as the lock key):
  // where any is free, the next waiter is named.
  Call call{.command = CommandId::fair_leave,
            .key = keys_.semaphore() ? keys_.permit_keys.front() : keys_.key,
            .arg1 = fair_id_,
            .arg2 = keys_.channel_name(),
            .more_keys = {queue_key_of(keys_.key), expiry_key_of(keys_.key)}};
  if (keys_.semaphore()) call.more_keys.insert(call.more_keys.end(), keys_.permit_keys.begin() + 1, keys_.permit_keys.end());
  QuorumRound::launch(engine_.transport(), std::move(call), lock_rule(RoundMode::release, engine_.transport().size()),
                      nullptr)
      ->detach();
}

// leave_intent: a writer's intent may be on any master its retries
// reached; as it ends it takes it back everywhere (where that was the last
// intent and no writer holds, the readers held back are told). A plain
// writer's win took it back where it won: only the other masters are sent
// to. (A stamper's win took nothing back.)
void AcquireOperation::leave_intent(bool took) {
  if (!intent_sent_) return;
  std::vector<bool> skip;
  if (took && writer_ && round_ != nullptr) {
    const std::vector<NodeOutcome>& nodes = round_->outcomes();
    skip.resize(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) skip[i] = nodes[i].outcome == Outcome::ok;
  }
  Call call{.command = CommandId::write_leave,
            .key = keys_.key,
            .arg1 = intent_id_,
            .arg2 = channel_of(keys_.key),
            .more_keys = {writers_key_of(keys_.key)}};
  QuorumRound::launch(engine_.transport(), std::move(call), lock_rule(RoundMode::release, engine_.transport().size()),
                      nullptr, skip)
      ->detach();
}

Error AcquireOperation::cancelled_error() const {
  Error e = make_error(Errc::cancelled, "acquire of " + keys_.resource + " cancelled by the caller");
  e.attempts = attempts_;
  return e;
}

void AcquireOperation::fail(Error e) {
  if (e.attempts == 0) e.attempts = attempts_;
  finish(std::move(e));
}

void AcquireOperation::finish(Result<Lock> r) {
  to(State::done);
  tell_finished(OpKind::acquire);
  if (!r.ok()) leave_queue();
  leave_intent(r.ok());
  Waiter::Event e{.kind = Waiter::Kind::end};
  e.took = r.ok();
  waiter_.step(e);
  LockCallback done = std::move(done_);
  close();
  if (done) done(std::move(r));
}

}  // namespace redlock::detail
