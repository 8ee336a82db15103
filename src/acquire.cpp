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

namespace {

using std::chrono::duration_cast;

// max_fair_spread: a fair waiter's safety net is wake_safety_net × its
// place, up to this many; waiters up to this place also check on a queue
// that stopped moving (AcquireOperation::queue_moved).
constexpr long long max_fair_spread = 8;

}  // namespace

AcquireOperation::AcquireOperation(Engine& engine, LockKeys keys, AcquireOptions opts, milliseconds ttl,
                                   LockCallback done)
    : Operation(engine, std::move(keys), std::move(opts.token)),
      ttl_(ttl),
      wait_deadline_(engine.runtime().now() + opts.wait),
      done_(std::move(done)),
      caller_token_(!token_.empty()),
      fence_(opts.fence),
      fair_(opts.fair),
      tries_once_(opts.wait <= milliseconds{0}) {}

// step — the transition function. Inputs that cannot be acted on in the
// current state (a cancel during an attempt, a wake-up during an attempt)
// are latched and read when the attempt ends.
void AcquireOperation::step(Event event) {
  switch (event) {
    case Event::cancel: cancelled_ = true; break;
    case Event::abort: aborted_ = true; break;
    case Event::released:
    case Event::resubscribed:
    case Event::subscribed: return wake(event);
    case Event::turn: return take_turn();
    default: break;
  }
  switch (state_) {
    case State::starting:
      if (event == Event::abort || event == Event::cancel) return arm(milliseconds{0});
      if (event != Event::timer) return;
      if (std::optional<Error> e = early_error()) return fail(std::move(*e));  // aborted_ implies closing
      if (cancelled_) return finish(cancelled_error());
      // No barging: while this client's line for the lock is not empty, a
      // new waiter joins its end instead of trying ahead of it.
      if (uses_line() && engine_.line_busy(keys_.key) && now() < wait_deadline_) return queue_up(wait_left(now()));
      // A fair waiter's first round already joins the queues: it listens
      // from the start, so that a release naming it is heard (with the
      // channel still subscribed — WakeHub::linger — at no cost).
      if (fair_ && options().wake_ups && now() < wait_deadline_) watch_all();
      return start_attempt();
    case State::attempting:
    case State::fencing:
      if (event == Event::abort) return abort_attempt();
      if (event == Event::decided) return arm(milliseconds{0});  // batch this loop turn's replies
      if (event == Event::timer && round_->decided()) return evaluate();
      return;  // cancel: acted on when the attempt ends
    case State::retry_wait:
    case State::subscribe_wait:
    case State::queued:  // its timer: the wait's deadline, one last try
      if (event == Event::abort || event == Event::cancel) return arm(milliseconds{0});
      if (event != Event::timer) return;
      if (aborted_) return fail(closed_error());
      if (cancelled_) return finish(cancelled_error());
      return start_attempt();
    case State::done: return;
  }
}

void AcquireOperation::on_wake(WakeListener::Why why, std::string_view message) {
  if (why == WakeListener::Why::subscribed) listening_ = true;
  switch (why) {
    case WakeListener::Why::released:
      if (Telemetry* t = engine_.telemetry()) t->woken(keys_.resource);
      if (fair_) return fair_wake(message);
      return step(Event::released);
    case WakeListener::Why::subscribed: return step(Event::subscribed);
    case WakeListener::Why::resubscribed: return step(Event::resubscribed);
  }
}

// wake: a release was published (or the subscription came up, or came
// back): retry soon. During an attempt, remember it for when it ends.
void AcquireOperation::wake(Event why) {
  switch (state_) {
    case State::attempting:
    case State::fencing:
      if (why != Event::subscribed) woken_ = true;
      return;
    case State::subscribe_wait:
      state_ = State::retry_wait;
      if (why == Event::subscribed) return arm(milliseconds{0});  // a release from now on is heard
      [[fallthrough]];
    case State::retry_wait: {
      if (why == Event::subscribed) return;
      // One reaction per failed attempt: a waiter whose retry a notification
      // already brought forward ignores the next ones (in a crowd, handoffs
      // come faster than a wide spread: re-drawing on each would try every
      // waiter about every √(2 · handoff · spread), not every spread).
      if (wake_pending_) return;
      wake_pending_ = true;
      // A retry already due sooner stays: in a crowd every release would
      // otherwise push back the waiters whose turn was coming.
      const TimePoint at = now();
      const milliseconds left = wait_left(at);
      const milliseconds delay = std::clamp(wake_jitter(), milliseconds{0}, left);
      if (due_ <= at + delay) return;
      return arm(delay);
    }
    case State::starting:
    case State::queued:  // not watching: nothing to wake
    case State::done: return;
  }
}

// fair_wake: "turn HEAD SECOND" names the next two of a master's queue:
// the head tries at once, the second checks once the head's turn (grace)
// is over — it takes the head out of the queue if that one never came.
// Every other fair waiter sleeps on: a release wakes one client, not all.
// Any other message is a release by a holder that was not fair, which
// names nobody: the waiter that was the head at its last attempt tries.
void AcquireOperation::fair_wake(std::string_view message) {
  bool head = false, second = false;
  if (sabotage().fair_no_turn && message.starts_with("turn ")) return;
  if (message.starts_with("turn ")) {
    // Every master publishes the same text for one release: a new text is
    // a new release, and the queue moved up by one.
    const bool moved = message != last_turn_;
    if (moved) last_turn_ = message;
    message.remove_prefix(5);
    const std::size_t space = message.find(' ');
    head = message.substr(0, space) == waiter_;
    second = space != std::string_view::npos && message.substr(space + 1) == waiter_;
    if (!head && !second && moved) return queue_moved();
  } else {
    head = rank_ == 0;
  }
  if (!head && !second) return;
  // Each master publishes once it deleted the key: the head tries once a
  // majority of them named it — then the lock is free on a majority, and
  // its SETs do not overtake the release on the masters still deleting
  // (they would find the key held, and the round fail). A master whose
  // message is lost costs one node timeout.
  if (head) turns_.record(Outcome::ok);
  const bool majority = head && turns_.success();
  switch (state_) {
    case State::attempting:
      if (majority) woken_ = true;  // a failed attempt retries at once
      return;
    case State::retry_wait:
    case State::subscribe_wait: {
      const milliseconds delay = majority ? milliseconds{0}
                                 : head   ? options().node_timeout
                                          : options().fair_grace + milliseconds{1};
      if (due_ <= now() + delay) return;
      return arm(std::min(delay, wait_left(now())));
    }
    case State::starting:
    case State::fencing:
    case State::queued:
    case State::done: return;
  }
}

// queue_moved: a release named two others. A waiter near the front (by its
// place at its last attempt, less one per release since) checks, if the
// queue stops moving, after one grace per place ahead of it: so behind
// waiters that cannot come (dead, paused: nobody takes the lock, nobody
// releases) the first live one takes them out within a few graces, while a
// queue that moves never lets the check fire. Waiters further back than
// max_fair_spread sleep their longest safety net again, capped at a
// refresh: while the queue moves they send only the rounds that keep
// their places.
void AcquireOperation::queue_moved() {
  if (rank_ > 2) --rank_;
  if (rank_ < 2) return;
  if (state_ != State::retry_wait && state_ != State::subscribe_wait) return;
  // The queue moves: whatever this waiter meant to check (a head that had
  // not come yet) is moot; it sleeps by its new place.
  const milliseconds wait = rank_ <= max_fair_spread ? options().fair_grace * rank_ + milliseconds{1}
                                                     : options().wake_safety_net * max_fair_spread;
  arm(std::min({wait, fair_refresh(options()), wait_left(now())}));
}

void AcquireOperation::your_turn(bool took) {
  turn_took_ = took;
  step(Event::turn);
}

// take_turn: the waiter before this one left the line, so this one is
// first now: it listens for releases from here on. If the one before left
// holding the lock, its release will be published: wait for it (or the
// safety net). Otherwise the lock may be free: try at once. A queued
// waiter trying at its deadline (attempting) just carries on.
void AcquireOperation::take_turn() {
  if (state_ != State::queued) return;
  state_ = State::retry_wait;
  const milliseconds left = wait_left(now());
  if (watch_all() == WatchState::ready && turn_took_) return arm(std::min(options().wake_safety_net, left));
  arm(milliseconds{0});
}

void AcquireOperation::enter_line() {
  in_line_ = true;
  engine_.join_line(keys_.key, this);
}

void AcquireOperation::queue_up(milliseconds left) {
  enter_line();
  state_ = State::queued;
  arm(left);
}

milliseconds AcquireOperation::wait_left(TimePoint at) const {
  return std::max(std::chrono::ceil<milliseconds>(wait_deadline_ - at), milliseconds{0});
}

WatchState AcquireOperation::watch_all() {
  // Every resource's channel (a multi-resource lock frees when any of its
  // parts does); ready only when all of them are.
  const std::vector<std::string>& all = channels();
  WatchState watch = WatchState::ready;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const WatchState w = engine_.transport().watch(all[i], this);
    if (w == WatchState::unavailable) {
      for (std::size_t j = 0; j < i; ++j) engine_.transport().unwatch(all[j], this);
      return WatchState::unavailable;
    }
    if (w == WatchState::pending) watch = WatchState::pending;
  }
  watching_ = true;
  woken_ = false;
  listening_ = watch == WatchState::ready;
  return watch;
}

Call AcquireOperation::attempt_call() const {
  const std::string ttl = std::to_string(ttl_.count());
  if (fair_) {
    // The waiter's place lapses `fair_life` after this round unless its
    // next round comes first; a waiter that died is out of every queue by
    // then, and the queue key dies with its last live waiter. (The broken
    // variant keeps the place for the whole wait and the TTL: a killed
    // waiter with a long wait blocks every fair try for that long.)
    const long long life = sabotage().no_queue_lapse
                               ? wait_left(engine_.runtime().now()).count() + ttl_.count()
                               : fair_life(options()).count();
    return {.command = CommandId::fair_acquire,
            .key = keys_.key,
            .arg1 = token_,
            .arg2 = ttl,
            .more_keys = {queue_key_of(keys_.key), turn_key_of(keys_.key), expiry_key_of(keys_.key)},
            .more_args = {waiter_, std::to_string(ticket_), std::to_string(options().fair_grace.count()),
                          std::to_string(life), tries_once_ ? "1" : "0"}};
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

void AcquireOperation::start_attempt() {
  if (!caller_token_ && !(sabotage().reused_value && attempts_ > 0)) {
    // Every attempt writes a value of its own (rule 0 above).
    Result<std::string> value = engine_.runtime().random_token();
    if (!value) return fail(value.error());
    if (fair_) {
      // A fair value: its waiter id (the second half of the first draw),
      // the same on every attempt, and a part drawn for this one (the first
      // half of each draw); src/token.hpp.
      if (waiter_.empty()) waiter_ = value->substr(fair_id_size, fair_id_size);
      *value = fair_token(waiter_, *value);
    }
    // The token, then the owner, in the buffer of the attempt before (a
    // retry allocates nothing more than its draw), sized to fit: the lock
    // keeps this buffer.
    token_.reserve(value->size() + engine_.owner_suffix().size());
    token_.assign(*value).append(engine_.owner_suffix());
  }
  ++attempts_;
  woken_attempt_ = wake_pending_;
  wake_pending_ = false;
  need_fix_ = false;
  sent_listening_ = listening_;
  // Confirmed on a master before the attempt is written there, a channel's
  // subscription was made before the attempt ran there: a release after
  // the attempt is then published to this client (wait_for_release).
  if (!fair_ && !tries_once_ && options().wake_ups) sent_heard_ = heard();
  turns_ = QuorumTally(engine_.transport().size(), lock_rule(RoundMode::majority, engine_.transport().size()));
  state_ = State::attempting;
  t1_ = now();
  if (sabotage().wall_clock) t1_wall_ = engine_.runtime().wall_now();
  launch(attempt_call(), RoundMode::majority);
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
  state_ = State::fencing;
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
  if (sabotage().no_rollback || caller_token_) return;
  std::vector<bool> skip(sabotage().reused_value ? 0 : attempt.size());
  for (std::size_t i = 0; i < skip.size(); ++i) skip[i] = attempt[i].outcome == Outcome::held;
  QuorumRound::launch(engine_.transport(), keys_.release_call(token_, false),
                      lock_rule(RoundMode::release, engine_.transport().size()), nullptr, skip)
      ->detach();
}

// abort_attempt: the client is closing. The attempt on its way (or decided
// but not yet acted on) may have set its value anywhere: it is rolled back
// now, before the connections close (they close gracefully, so the
// rollback still reaches every master that got the SET).
void AcquireOperation::abort_attempt() {
  rollback();
  drop_round();
  state_ = State::retry_wait;  // whose next step sees aborted_
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
  if (verdict == Verdict::yes) {
    if (cancelled_) {
      // Taken after all, but the caller has gone: give it back (a real
      // release: the lock was held, waiters may take it now).
      if (!caller_token_) {
        QuorumRound::launch(engine_.transport(), keys_.release_call(token_, true),
                            lock_rule(RoundMode::release, engine_.transport().size()), nullptr)
            ->detach();
      }
      return finish(cancelled_error());
    }
    if (fence_ && state_ == State::attempting) return start_fence_phase();
    tell_round(OpKind::acquire, nullptr, attempts_, elapsed, round_->outcomes());
    // The name and the value move into the lock: the operation ends here
    // and reads neither again (a held lock keeps one allocation of each).
    return finish(grant(std::move(keys_.resource), std::move(token_), ttl_, clock, at, elapsed, attempts_, fence_value_));
  }

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
      need_fix_ = ticket_ > 0 && !round_->tickets_agree();
    }
    rank_ = round_->quorum_rank();
  }
  std::vector<NodeOutcome> nodes = take_outcomes();
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
  rollback(state_ == State::attempting ? nodes : std::vector<NodeOutcome>{});
  e.nodes = std::move(nodes);
  e.attempts = attempts_;
  e.elapsed = elapsed;
  retry_after_failure(std::move(e), tally, at);
}

// retry_after_failure: the attempt failed; retry while the wait lasts.
void AcquireOperation::retry_after_failure(Error e, const QuorumTally& tally, TimePoint at) {
  if (cancelled_) return finish(cancelled_error());
  if (at >= wait_deadline_ || aborted_) return fail(std::move(e));
  const Options& o = options();
  const milliseconds left = wait_left(at);
  state_ = State::retry_wait;
  // Some masters said yes, yet no majority: contenders split the votes and
  // perhaps nobody holds the lock. Their rollbacks announce nothing, so a
  // waiter does not only wait for a release: it retries after a random,
  // growing delay (reset by a clean "held" or a notification).
  const bool split = e.code == Errc::held && tally.ok() > 0;
  if (e.code == Errc::held && watching_ && woken_attempt_) {
    // A woken attempt lost the race: somebody else reacts to the same
    // releases. Until then the waiter reacted at once (spread 0). The
    // widest spread is the safety net's period: a waiter tries about that
    // often anyway.
    wake_spread_ = std::clamp(wake_spread_ * 2, o.wake_jitter + milliseconds{1}, std::max(o.wake_safety_net, o.wake_jitter));
  }
  split_backoff_ = split ? std::min(std::max(split_backoff_ * 2, o.retry_delay + o.retry_jitter), o.wake_safety_net)
                         : milliseconds{0};
  if (e.code == Errc::held && (fair_ ? fair_wait(e.nodes, left) : wait_for_release(e.nodes, left))) return;
  arm(std::min(o.retry_delay + engine_.runtime().random_delay(o.retry_jitter), left));
}

// wait_for_release: the lock is held elsewhere; wait for it without polling
// (docs/design.md, "Waiting"). False when wake-ups are off or unavailable:
// then the caller polls.
bool AcquireOperation::wait_for_release(const std::vector<NodeOutcome>& nodes, milliseconds left) {
  const Options& o = options();
  if (!o.wake_ups) return false;
  if (!watching_) {
    // Another waiter of this client is first in line: sleep behind it.
    if (uses_line() && !in_line_ && engine_.line_busy(keys_.key)) {
      queue_up(left);
      return true;
    }
    const WatchState watch = watch_all();
    if (watch == WatchState::unavailable) return false;
    if (uses_line() && !in_line_) enter_line();  // first: the line was empty
    if (watch == WatchState::pending) {
      // Retry once the subscription is confirmed (a release from then on is
      // heard), or after one node timeout at the latest.
      state_ = State::subscribe_wait;
      arm(std::min(o.node_timeout, left));
      return true;
    }
    // Already subscribed. A release between our attempt and now was
    // published before we listened: retry once at once — unless the
    // channels were heard from before the attempt went out and nothing
    // came since (their mark is unchanged): every release after the
    // attempt is then still to come, to this waiter, and it waits for it.
    if (!sent_heard_ || heard() != sent_heard_) {
      arm(milliseconds{0});
      return true;
    }
  }
  if (woken_) {  // a release was published while our attempt was on its way
    woken_ = false;
    wake_pending_ = true;
    arm(std::min(wake_jitter(), left));
    return true;
  }
  // Wait for a notification, the holder's TTL, or the safety net.
  milliseconds wait = o.wake_safety_net;
  if (const std::optional<milliseconds> free_in = quorum_free_in(nodes, majority_of(nodes.size()))) {
    wait = std::min(wait, *free_in + milliseconds{1} + wake_jitter());
  }
  if (split_backoff_ > milliseconds{0}) wait = std::min(wait, engine_.runtime().random_delay(split_backoff_));
  arm(std::min(wait, left));
  return true;
}

// fair_wait: the sleep of a fair waiter after an attempt that did not take
// the lock (its first round joined the queues). It subscribed before that
// round; if the subscription was not confirmed when the round went out, it
// waits for the confirmation and tries again (a turn named before it
// listened went unheard). The head waits for its turn's message or the holder's TTL; the
// second the same plus the head's grace (then it checks whether the head
// came); the others for a message naming them — their safety net grows
// with their place up to 8× (a waiter far back is named long before it).
// No sleep is longer than fair_refresh: each round re-stamps the waiter's
// place, which lapses fair_life after the last one (a killed waiter's).
bool AcquireOperation::fair_wait(const std::vector<NodeOutcome>& nodes, milliseconds left) {
  const Options& o = options();
  if (!o.wake_ups) return false;
  if (!watching_ && watch_all() == WatchState::unavailable) return false;
  if (!listening_ && !subscribe_waited_) {
    // Try again once the subscription is confirmed (a release from then on
    // is heard), or after one node timeout at the latest — once: a
    // subscription that no master confirms (pub/sub refused, subscribers
    // down) leaves the waiter to its safety net, not to a poll every node
    // timeout.
    subscribe_waited_ = true;
    state_ = State::subscribe_wait;
    arm(std::min(o.node_timeout, left));
    return true;
  }
  // Not yet listening when the attempt went out: a release since then that
  // named it as the head went unheard — it tries once more at once.
  if (!sent_listening_ && rank_ <= 0) woken_ = true;
  if (woken_ || need_fix_) {  // named the head while the attempt was on its way; or the ticket needs fixing
    woken_ = false;
    arm(milliseconds{0});
    return true;
  }
  milliseconds wait = o.wake_safety_net * std::clamp<long long>(rank_, 1, max_fair_spread);
  const std::optional<milliseconds> free_in = quorum_free_in(nodes, majority_of(nodes.size()));
  if (free_in && rank_ == 0) wait = std::min(wait, *free_in + milliseconds{1});
  if (free_in && rank_ == 1) wait = std::min(wait, *free_in + o.fair_grace + milliseconds{1});
  // Free, yet others ahead: the head has not come (yet). Its turn is
  // running; check again once it is over — the next dead one's too.
  if (free_in && *free_in == milliseconds{0} && rank_ >= 1) wait = std::min(wait, 2 * o.fair_grace + milliseconds{1});
  if (split_backoff_ > milliseconds{0}) wait = std::min(wait, engine_.runtime().random_delay(split_backoff_));
  // Never longer than a refresh: the next round keeps its place from lapsing.
  arm(std::min({wait, fair_refresh(o), left}));
  return true;
}

// leave_queue: a fair waiter that ends without the lock takes itself out
// of every queue it may be in; where the lock is free the next is named.
void AcquireOperation::leave_queue() {
  // A round that told no ticket may still have queued the waiter somewhere
  // (a master that answered late); a try never joins anywhere.
  if (!fair_ || waiter_.empty() || tries_once_) return;
  Call call{.command = CommandId::fair_leave,
            .key = keys_.key,
            .arg1 = waiter_,
            .arg2 = channel_of(keys_.key),
            .more_keys = {queue_key_of(keys_.key), expiry_key_of(keys_.key)}};
  QuorumRound::launch(engine_.transport(), std::move(call), lock_rule(RoundMode::release, engine_.transport().size()),
                      nullptr)
      ->detach();
}

const std::vector<std::string>& AcquireOperation::channels() {
  if (channels_.empty()) {
    channels_.push_back(channel_of(keys_.key));
    for (const std::string& key : keys_.more_keys) channels_.push_back(channel_of(key));
  }
  return channels_;
}

std::optional<std::uint64_t> AcquireOperation::heard() {
  std::optional<std::uint64_t> mark;
  for (const std::string& channel : channels()) {
    const std::optional<std::uint64_t> one = engine_.transport().heard(channel);
    if (!one) return std::nullopt;
    mark = std::max(mark.value_or(0), *one);
  }
  return mark;
}

Error AcquireOperation::cancelled_error() const {
  Error e = make_error(Errc::cancelled, "acquire of " + keys_.resource + " cancelled by the caller");
  e.attempts = attempts_;
  return e;
}

void AcquireOperation::stop_watching() {
  if (!watching_) return;
  for (const std::string& c : channels()) engine_.transport().unwatch(c, this);
  watching_ = false;
}

void AcquireOperation::fail(Error e) {
  if (e.attempts == 0) e.attempts = attempts_;
  finish(std::move(e));
}

void AcquireOperation::finish(Result<Lock> r) {
  state_ = State::done;
  tell_finished(OpKind::acquire);
  if (!r.ok()) leave_queue();
  // The next in line starts listening before this one stops, so the
  // channel stays subscribed between them.
  if (in_line_) {
    in_line_ = false;
    engine_.leave_line(keys_.key, this, r.ok());
  }
  stop_watching();
  LockCallback done = std::move(done_);
  close();
  if (done) done(std::move(r));
}

}  // namespace redlock::detail
