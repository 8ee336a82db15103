// operation.cpp — what the operations share, and the two small ones:
// extend and release. Acquire is in src/acquire.cpp.
#include "operation.hpp"

#include <utility>

#include "keys.hpp"
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

Call LockKeys::release_call(const std::string& value, bool announce) const {
  if (!multi()) return {CommandId::release, key, value, announce ? channel_of(key) : std::string(), {}, {}};
  Call call{CommandId::multi_release, key, value, {}, more_keys, {}};
  if (announce) {
    call.arg2 = channel_of(key);
    for (const std::string& k : more_keys) call.more_args.push_back(channel_of(k));
  }
  return call;
}

// ---- Operation ---------------------------------------------------------------------

Operation::Operation(Engine& engine, LockKeys keys, std::string token)
    : engine_(engine), keys_(std::move(keys)), token_(std::move(token)) {
  timer_ = engine_.runtime().timer([this] {
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

void Operation::launch(Call call, RoundMode mode) {
  round_ = QuorumRound::launch(engine_.transport(), std::move(call), mode, this);
  if (round_->decided()) arm(milliseconds{0});
}

void Operation::drop_round() noexcept {
  if (round_ == nullptr) return;
  round_->detach();
  round_ = nullptr;
}

std::vector<NodeOutcome> Operation::take_outcomes() {
  std::vector<NodeOutcome> nodes = round_->outcomes();
  drop_round();
  return nodes;
}

void Operation::close() {
  closed_ = true;
  drop_round();
  on_cancel.reset();
  arm(milliseconds{0});
}

std::optional<Error> Operation::early_error() const {
  if (!problem.empty()) return make_error(Errc::invalid_argument, problem);
  if (engine_.closing()) return closed_error();
  return std::nullopt;
}

Error Operation::round_error(const QuorumTally& tally, const std::vector<NodeOutcome>& nodes, microseconds validity,
                             bool in_time, bool extend) const {
  const std::string detail = describe(nodes);
  const std::string tail = detail.empty() ? "" : ": " + detail;
  if (tally.success() && !in_time) {
    return make_error(Errc::too_late, "majority " + count_of(tally) +
                                          " answered after the lock's validity deadline had passed" + tail);
  }
  if (tally.success()) {
    return make_error(Errc::validity_too_short,
                      "majority " + count_of(tally) + " reached but only " + std::to_string(validity.count() / 1000) +
                          " ms of validity left (minimum " + std::to_string(options().min_validity.count()) +
                          " ms)" + tail);
  }
  if (tally.held() > 0) {
    if (extend) return make_error(Errc::not_held, "lock not held " + count_of(tally) + tail);
    return make_error(Errc::held, "held elsewhere " + count_of(tally) + tail);
  }
  return make_error(Errc::no_quorum, "no quorum " + count_of(tally) + tail);
}

// ---- ExtendOperation ---------------------------------------------------------------

ExtendOperation::ExtendOperation(Engine& engine, LockKeys keys, Lock lock, milliseconds ttl, LockCallback done)
    : Operation(engine, std::move(keys), std::move(lock.token)),
      ttl_(ttl),
      // A lock value that never came from acquire (CLI extend) has no
      // deadline of its own: then the extension must land within its new ttl.
      lock_deadline_(lock.validity_deadline == TimePoint{} ? TimePoint::max() : lock.validity_deadline),
      fence_(lock.fence),
      done_(std::move(done)) {}

void ExtendOperation::step(Event event) {
  switch (state_) {
    case State::starting:
      if (event != Event::timer) return;
      if (std::optional<Error> e = early_error()) return finish(std::move(*e));
      state_ = State::extending;
      t1_ = now();
      launch({keys_.multi() ? CommandId::multi_extend : CommandId::extend, keys_.key, token_,
              std::to_string(ttl_.count()), keys_.more_keys, {}},
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
  const microseconds validity = validity_left(ttl_, elapsed, options().drift_factor);
  const bool in_time = at < lock_deadline_;
  if (tally.success() && validity > microseconds{options().min_validity} && in_time) {
    Lock lock;
    lock.resource = keys_.resource;
    lock.token = token_;
    lock.ttl = ttl_;
    lock.validity = std::chrono::duration_cast<milliseconds>(validity);
    lock.validity_deadline = at + validity;  // = T1 + ttl − drift
    lock.elapsed = elapsed;
    lock.attempts = 1;
    lock.fence = fence_;
    if (options().node_outcomes) lock.nodes = round_->outcomes();
    return finish(std::move(lock));
  }
  std::vector<NodeOutcome> nodes = take_outcomes();
  Error e = round_error(tally, nodes, validity, in_time, true);
  e.nodes = std::move(nodes);
  e.attempts = 1;
  e.elapsed = elapsed;
  finish(std::move(e));
}

void ExtendOperation::finish(Result<Lock> r) {
  state_ = State::done;
  LockCallback done = std::move(done_);
  close();
  if (done) done(std::move(r));
}

// ---- ReleaseOperation --------------------------------------------------------------

ReleaseOperation::ReleaseOperation(Engine& engine, LockKeys keys, std::string token, ReleaseCallback done)
    : Operation(engine, std::move(keys), std::move(token)), done_(std::move(done)) {}

void ReleaseOperation::step(Event event) {
  switch (state_) {
    case State::starting:
      if (event != Event::timer) return;
      if (std::optional<Error> e = early_error()) return finish(std::move(*e));
      state_ = State::releasing;
      t1_ = now();
      launch(keys_.release_call(token_, true), RoundMode::release);
      return;
    case State::releasing:
      if (event == Event::abort) return arm(milliseconds{0});
      if (event == Event::timer && engine_.closing()) return finish(closed_error());
      if (event == Event::decided || (event == Event::timer && round_->decided())) {
        // Certain now; wait a little for the rest (exact counts when healthy).
        state_ = State::settling;
        return arm(round_->settled() ? milliseconds{0} : options().release_settle);
      }
      return;
    case State::settling:
      if (event == Event::settled || event == Event::abort) return arm(milliseconds{0});
      if (event == Event::timer && engine_.closing()) return finish(closed_error());
      if (event == Event::timer) return report();
      return;
    case State::done: return;
  }
}

void ReleaseOperation::report() {
  const QuorumTally tally = round_->tally();
  ReleaseResult r;
  r.released = tally.success();
  r.released_nodes = static_cast<int>(tally.ok());
  r.elapsed = std::chrono::duration_cast<microseconds>(now() - t1_);
  r.nodes = take_outcomes();
  finish(std::move(r));
}

void ReleaseOperation::finish(Result<ReleaseResult> r) {
  state_ = State::done;
  ReleaseCallback done = std::move(done_);
  close();
  if (done) done(std::move(r));
}

}  // namespace redlock::detail
