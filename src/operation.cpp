// operation.cpp — what the operations share, and the two small ones:
// extend and release. Acquire is in src/acquire.cpp.
#include "operation.hpp"

#include <algorithm>
#include <utility>

#include "keys.hpp"
#include "telemetry.hpp"
#include "timer_queue.hpp"
#include "token.hpp"
#include "validity.hpp"

namespace redlock::detail {

namespace {

// describe lists the nodes that did not say ok: "addr reason; addr reason".
std::string describe(const std::vector<NodeOutcome>& nodes) {
  std::string out;
  for (const NodeOutcome& n : nodes) {
    if (n.outcome == Outcome::ok) continue;
    if (!out.empty()) out += "; ";
    out += n.address;
    out += ' ';
    out += n.error.empty() ? std::string(outcome_name(n.outcome)) : n.error;
  }
  return out;
}

std::string count_of(const QuorumTally& t) { return std::to_string(t.ok()) + "/" + std::to_string(t.nodes()); }

}  // namespace

std::string round_summary(const QuorumTally& tally, const std::vector<NodeOutcome>& nodes) {
  const std::string detail = describe(nodes);
  return count_of(tally) + (detail.empty() ? "" : ": " + detail);
}

std::string LockKeys::channel_name() const { return channel.empty() ? channel_of(key) : channel; }

Call LockKeys::release_call(const std::string& value, bool announce) const {
  if (shared) {
    return {.command = CommandId::read_release,
            .key = key,
            .arg1 = value,
            .arg2 = announce ? channel_name() : std::string(),
            .more_keys = {readers_key_of(key)}};
  }
  if (semaphore()) {
    // (an attempt's rollback: nothing was held, nothing announced)
    Call call{.command = CommandId::sem_cleanup, .key = permit_keys.front(), .arg1 = value, .arg2 = "-1"};
    call.more_keys.assign(permit_keys.begin() + 1, permit_keys.end());
    return call;
  }
  if (announce && !multi() && is_fair_token(value)) {
    // (a permit's: its key, its semaphore's queue and channel)
    return {.command = CommandId::fair_release,
            .key = key,
            .arg1 = value,
            .arg2 = channel_name(),
            .more_keys = {queue_key_of(key), expiry_key_of(key)},
            .more_args = {std::string(fair_waiter_of(value))}};
  }
  if (!multi()) {
    return {.command = CommandId::release, .key = key, .arg1 = value, .arg2 = announce ? channel_name() : std::string()};
  }
  Call call{.command = CommandId::multi_release, .key = key, .arg1 = value, .more_keys = more_keys};
  if (announce) {
    call.arg2 = channel_of(key);
    for (const std::string& k : more_keys) call.more_args.push_back(channel_of(k));
  }
  return call;
}

// ---- Operation ---------------------------------------------------------------------

Operation::Operation(Engine& engine, LockKeys keys, std::string token)
    : engine_(engine), keys_(std::move(keys)), token_(std::move(token)), started_(engine.runtime().now()) {
  timer_ = engine_.timers().timer([this] {
    if (closed_) {  // the step after the last: free (the timer may be destroyed inside its own fire)
      engine_.delist(this);
      delete this;
      return;
    }
    step(Event::timer);
  });
  engine_.enlist(this);
}

Operation::~Operation() { drop_round(); }

void Operation::arm(milliseconds delay) {
  due_ = now() + delay;
  timer_->start(delay);
}

void Operation::launch(Call call, RoundMode mode, const std::vector<bool>& skip) {
  round_ = QuorumRound::launch(engine_.transport(), std::move(call), lock_rule(mode, engine_.transport().size()), this,
                               skip);
  if (round_->decided()) arm(milliseconds{0});
}

RoundClock Operation::clock_of(milliseconds ttl, microseconds elapsed, bool in_time) const {
  return {.validity = validity_left(ttl, elapsed, options().drift_factor),
          .min_validity = options().min_validity,
          .in_time = in_time};
}

Lock Operation::grant(std::string resource, std::string token, milliseconds ttl, const RoundClock& clock,
                      TimePoint at, microseconds elapsed, int attempts, std::uint64_t fence) const {
  Lock lock;
  lock.resource = std::move(resource);
  lock.token = std::move(token);
  lock.ttl = ttl;
  lock.validity = std::chrono::duration_cast<milliseconds>(clock.validity);
  lock.validity_deadline = at + clock.validity;
  lock.elapsed = elapsed;
  lock.attempts = attempts;
  lock.fence = fence;
  if (options().node_outcomes) lock.nodes = round_->outcomes();
  return lock;
}

void Operation::drop_round() noexcept {
  if (round_ == nullptr) return;
  round_->detach();
  round_ = nullptr;
}

std::vector<NodeOutcome> Operation::take_outcomes() {
  std::vector<NodeOutcome> nodes = round_->take_outcomes();
  round_ = nullptr;
  return nodes;
}

void Operation::close() {
  closed_ = true;
  drop_round();
  on_cancel.reset();
  arm(milliseconds{0});
}

void Operation::tell_round(OpKind op, const Error* failure, int attempt, microseconds elapsed,
                           const std::vector<NodeOutcome>& nodes) const noexcept {
  if (Telemetry* t = engine_.telemetry()) t->round(op, keys_.kind(), keys_.resource, failure, attempt, elapsed, nodes);
}

void Operation::tell_finished(OpKind op) noexcept {
  if (Telemetry* t = engine_.telemetry())
    t->finished(op, std::chrono::duration_cast<microseconds>(engine_.runtime().now() - started_));
}

std::optional<Error> Operation::early_error() const {
  if (!problem.empty()) return make_error(Errc::invalid_argument, problem);
  if (engine_.closing()) return closed_error();
  return std::nullopt;
}

Errc verdict_code(Verdict verdict, bool extend) noexcept {
  switch (verdict) {
    case Verdict::too_late: return Errc::too_late;
    case Verdict::too_short: return Errc::validity_too_short;
    case Verdict::refused: return extend ? Errc::not_held : Errc::held;
    default: return Errc::no_quorum;
  }
}

Error round_error(Verdict verdict, const QuorumTally& tally, const std::vector<NodeOutcome>& nodes,
                  const RoundClock& clock, bool extend) {
  const std::string detail = describe(nodes);
  const std::string tail = detail.empty() ? "" : ": " + detail;
  const Errc code = verdict_code(verdict, extend);
  switch (code) {
    case Errc::too_late:
      return make_error(code, "majority " + count_of(tally) + " answered after the lock's validity deadline had passed" +
                                  tail);
    case Errc::validity_too_short:
      return make_error(code, "majority " + count_of(tally) + " reached but only " +
                                  std::to_string(clock.validity.count() / 1000) + " ms of validity left (minimum " +
                                  std::to_string(clock.min_validity.count()) + " ms)" + tail);
    case Errc::not_held: return make_error(code, "lock not held " + count_of(tally) + tail);
    case Errc::held: return make_error(code, "held elsewhere " + count_of(tally) + tail);
    default: return make_error(code, "no quorum " + count_of(tally) + tail);
  }
}

// ---- ExtendOperation ---------------------------------------------------------------

ExtendOperation::ExtendOperation(Engine& engine, LockKeys keys, Lock lock, milliseconds ttl, LockCallback done)
    : Operation(engine, std::move(keys), std::move(lock.token)),
      ttl_(ttl),
      // A lock value that never came from acquire (CLI extend) has no
      // deadline of its own: then the extension must land within its new ttl.
      lock_deadline_(lock.validity_deadline == TimePoint{} ? TimePoint::max() : lock.validity_deadline),
      fence_(lock.fence),
      permit_(lock.permit),
      shared_(lock.shared),
      done_(std::move(done)) {}

void ExtendOperation::step(Event event) {
  switch (state_) {
    case State::starting:
      if (event != Event::timer) return;
      if (std::optional<Error> e = early_error()) return finish(std::move(*e));
      to(State::extending);
      t1_ = now();
      launch({.command = shared_ ? CommandId::read_extend : keys_.multi() ? CommandId::multi_extend : CommandId::extend,
              .key = keys_.key,
              .arg1 = token_,
              .arg2 = std::to_string(ttl_.count()),
              .more_keys = shared_ ? std::vector<std::string>{readers_key_of(keys_.key)} : keys_.more_keys},
             RoundMode::majority);
      return;
    case State::extending:
      if (event == Event::decided || event == Event::abort) return arm(milliseconds{0});  // batch this turn's replies
      if (event != Event::timer) return;
      if (engine_.closing()) return finish(closed_error());
      if (round_->decided()) return evaluate();
      return;
    case State::done: return;
  }
}

void ExtendOperation::evaluate() {
  const TimePoint at = now();
  const auto elapsed = std::chrono::duration_cast<microseconds>(at - t1_);
  const QuorumTally tally = round_->tally();
  const RoundClock clock = clock_of(ttl_, elapsed, at < lock_deadline_);
  const Verdict verdict = decide(tally, &clock);
  if (verdict == Verdict::yes) {
    tell_round(OpKind::extend, nullptr, 1, elapsed, round_->outcomes());
    Lock lock = grant(keys_.resource, token_, ttl_, clock, at, elapsed, 1, fence_);
    lock.permit = permit_;
    lock.shared = shared_;
    return finish(std::move(lock));
  }
  std::vector<NodeOutcome> nodes = take_outcomes();
  Error e = round_error(verdict, tally, nodes, clock, true);
  tell_round(OpKind::extend, &e, 1, elapsed, nodes);
  e.nodes = std::move(nodes);
  e.attempts = 1;
  e.elapsed = elapsed;
  finish(std::move(e));
}

void ExtendOperation::finish(Result<Lock> r) {
  to(State::done);
  tell_finished(OpKind::extend);
  LockCallback done = std::move(done_);
  close();
  if (done) done(std::move(r));
}

// ---- ReleaseOperation --------------------------------------------------------------

ReleaseOperation::ReleaseOperation(Engine& engine, LockKeys keys, std::string token, ReleaseCallback done)
    : Operation(engine, std::move(keys), std::move(token)),
      retries_left_(engine.options().release_retries),
      done_(std::move(done)) {}

namespace {

// unsure: our value may still be on that node (the command may or may not
// have run there).
bool unsure(const NodeOutcome& n) noexcept {
  return n.outcome == Outcome::timeout || n.outcome == Outcome::error || n.outcome == Outcome::pending;
}

// release_verdict: what the outcomes so far (merged over this release's
// rounds) come to; no_quorum while our value may still be on a majority.
Verdict release_verdict(const std::vector<NodeOutcome>& nodes) noexcept {
  return decide(tally_of(nodes, lock_rule(RoundMode::release, nodes.size())));
}

}  // namespace

void ReleaseOperation::step(Event event) {
  switch (state_) {
    case State::starting:
      if (event != Event::timer) return;
      if (std::optional<Error> e = early_error()) return finish(std::move(*e));
      to(State::releasing);
      t1_ = now();
      launch(keys_.release_call(token_, true), RoundMode::release);
      return;
    case State::releasing:
      if (event == Event::abort) return arm(milliseconds{0});
      if (event == Event::timer && engine_.closing()) return finish(closed_error());
      if (event == Event::decided || (event == Event::timer && round_->decided())) {
        // Certain now; wait a little for the rest (exact counts when healthy).
        to(State::settling);
        return arm(round_->settled() ? milliseconds{0} : options().release_settle);
      }
      return;
    case State::settling:
      if (event == Event::settled || event == Event::abort) return arm(milliseconds{0});
      if (event == Event::timer && engine_.closing()) return finish(closed_error());
      if (event == Event::timer) return round_over();
      return;
    case State::retry_wait:
      if (event == Event::abort) return arm(milliseconds{0});
      if (event == Event::timer) return relaunch();
      return;
    case State::done: return;
  }
}

void ReleaseOperation::merge_round() {
  if (round_ == nullptr) return;
  const std::vector<NodeOutcome>& now_said = round_->outcomes();
  if (outcomes_.empty()) {
    outcomes_ = now_said;
    return;
  }
  for (std::size_t i = 0; i < outcomes_.size() && i < now_said.size(); ++i) {
    if (!unsure(outcomes_[i]) || now_said[i].outcome == Outcome::pending) continue;
    outcomes_[i] = now_said[i];
    // "Not present" on a retry, where an earlier round of this release may
    // have run (its answer timed out or was lost): most likely that round
    // deleted it — a loaded client times out on deletes that happened.
    // Either way our value is gone from this master, which is what a
    // release is for: it counts as released, not as "not held" (which would
    // report a lock that was ours until now as lost).
    if (rounds_ > 1 && outcomes_[i].outcome == Outcome::held) {
      outcomes_[i].outcome = Outcome::ok;
      outcomes_[i].error = std::string(gone_on_retry_text);
    }
  }
}

// round_over: the round is decided and settled (or its settle time is up).
// Unless our value may still be on a majority (then the lock stays taken
// until its TTL) and retries are left, report. Else retry the unsure nodes.
// The round stays attached meanwhile: answers that come during the wait
// still count.
void ReleaseOperation::round_over() {
  merge_round();
  if (release_verdict(outcomes_) != Verdict::no_quorum || retries_left_ <= 0) return report();
  to(State::retry_wait);
  arm(options().retry_delay + engine_.runtime().random_delay(options().retry_jitter));
}

void ReleaseOperation::relaunch() {
  merge_round();
  drop_round();
  if (engine_.closing() || release_verdict(outcomes_) != Verdict::no_quorum) return report();
  --retries_left_;
  ++rounds_;
  std::vector<bool> skip(outcomes_.size());
  for (std::size_t i = 0; i < outcomes_.size(); ++i) skip[i] = !unsure(outcomes_[i]);
  to(State::releasing);
  launch(keys_.release_call(token_, true), RoundMode::release, skip);
}

void ReleaseOperation::report() {
  merge_round();
  drop_round();
  const QuorumTally tally = tally_of(outcomes_, lock_rule(RoundMode::release, outcomes_.size()));
  const Verdict verdict = decide(tally);
  ReleaseResult r;
  r.released = verdict == Verdict::yes;
  r.released_nodes = static_cast<int>(tally.ok());
  r.elapsed = std::chrono::duration_cast<microseconds>(now() - t1_);
  r.nodes = std::move(outcomes_);
  if (r.released) {
    tell_round(OpKind::release, nullptr, rounds_, r.elapsed, r.nodes);
  } else {
    const Error why = make_error(verdict == Verdict::refused ? Errc::not_held : Errc::no_quorum, "not released");
    tell_round(OpKind::release, &why, rounds_, r.elapsed, r.nodes);
  }
  finish(std::move(r));
}

void ReleaseOperation::finish(Result<ReleaseResult> r) {
  to(State::done);
  tell_finished(OpKind::release);
  ReleaseCallback done = std::move(done_);
  close();
  if (done) done(std::move(r));
}

}  // namespace redlock::detail
