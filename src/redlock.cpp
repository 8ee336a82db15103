// redlock.cpp — acquire, extend and release as operations on rounds.
//
// Safety rests on three rules kept here:
//  1. elapsed is measured on steady_clock from T1, taken before the first
//     send of a round, to the moment the outcome is evaluated, and
//     validity = ttl − elapsed − drift must stay above min_validity;
//  2. an acquire round that fails is released on every node — a timeout
//     means "maybe applied" — and the release goes down the same connection
//     behind the SET, so a SET that lands late is deleted right after;
//  3. extend succeeds only if a majority answered before the lock's
//     validity deadline.
#include "redlock.hpp"

#include <algorithm>
#include <functional>
#include <mutex>
#include <optional>
#include <stop_token>
#include <utility>

#include "quorum.hpp"
#include "sabotage.hpp"
#include "token.hpp"
#include "validity.hpp"

namespace redlock::detail {

namespace {

using clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::microseconds;

constexpr std::size_t max_resource_bytes = 1024;

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

std::string count_of(const QuorumTally& t) {
  return std::to_string(t.ok()) + "/" + std::to_string(t.nodes());
}

}  // namespace

class Operation final : public RoundListener, public WakeListener {
 public:
  enum class Kind : std::uint8_t { acquire, extend, release };

  Operation(Engine& engine, Kind kind) : engine_(engine), kind_(kind) {
    uv_timer_init(engine_.loop_, &timer_);
    timer_.data = this;
    engine_.enlist(this);
  }

  // begin starts the first round, or schedules the early error / closure.
  void begin() {
    if (early_.has_value() || engine_.closing_) {
      aborted_ = engine_.closing_;
      arm(milliseconds{0});
      return;
    }
    start_round();
  }

  // A release reports how many nodes released: once its outcome is certain
  // it waits up to release_settle for the stragglers of a healthy cluster,
  // so the count is exact there, while a hung minority costs at most that.
  void on_round_decided() override {
    const bool wait_for_rest = kind_ == Kind::release && !round_->settled();
    arm(wait_for_rest ? engine_.options_.release_settle : milliseconds{0});
  }
  void on_round_settled() override {
    if (kind_ == Kind::release) arm(milliseconds{0});
  }

  // A release was published (or the subscription came up, or came back):
  // retry soon. During an attempt, remember it for when the attempt ends.
  void on_wake(WakeListener::Why why) override {
    if (finished_) return;
    if (round_ != nullptr) {
      if (why != WakeListener::Why::subscribed) woken_ = true;
      return;
    }
    if (why == WakeListener::Why::subscribed) {
      if (!awaiting_subscription_) return;
      awaiting_subscription_ = false;
      arm(milliseconds{0});
      return;
    }
    const auto left = std::chrono::ceil<milliseconds>(wait_deadline_ - clock::now());
    arm(std::clamp(wake_jitter(), milliseconds{0}, std::max(left, milliseconds{0})));
  }

  // cancel: the caller's stop token was requested (delivered on the loop).
  void cancel() {
    if (finished_ || kind_ != Kind::acquire) return;
    cancelled_ = true;
    if (round_ == nullptr) arm(milliseconds{0});  // else: when the attempt ends
  }

  Error cancelled_error() const {
    Error e = make_error(Errc::cancelled, "acquire of " + resource_ + " cancelled by the caller");
    e.attempts = attempts_;
    return e;
  }

  void abort() {
    if (finished_) return;
    aborted_ = true;
    arm(milliseconds{0});
  }

  Engine& engine_;
  Kind kind_;
  Operation* prev_ = nullptr;
  Operation* next_ = nullptr;

  std::string resource_;
  std::string token_;
  std::string key_;
  milliseconds ttl_{0};
  clock::time_point wait_deadline_{};
  clock::time_point lock_deadline_{};  // extend: the lock's current validity deadline
  LockCallback lock_done_;
  ReleaseCallback release_done_;
  std::optional<Error> early_;  // an argument error, reported on the first timer tick
  bool fresh_token_ = false;    // acquire: the token was drawn here, not given
  bool fence_ = false;          // acquire: a fenced acquire (two phases)
  std::uint64_t id_ = 0;        // for cancellation from other threads
  std::optional<std::stop_callback<std::function<void()>>> on_cancel_;
  std::vector<std::string> more_keys_;  // a multi-resource lock: the keys after key_ (sorted)
  std::uint64_t fence_value_ = 0;  // acquire: F once phase 1 succeeded; extend: the lock's fence

 private:
  void arm(milliseconds delay) {
    uv_timer_start(
        &timer_, [](uv_timer_t* t) { static_cast<Operation*>(t->data)->on_timer(); },
        static_cast<std::uint64_t>(delay.count()), 0);
  }

  void on_timer() {
    if (finished_) return;
    if (early_.has_value()) return fail(std::move(*early_));
    if (aborted_) return fail(make_error(Errc::closed, "the client was closed"));
    if (cancelled_ && round_ == nullptr) return fail(cancelled_error());
    if (round_ == nullptr) return start_round();  // a retry delay has passed
    if (round_->decided()) evaluate();
  }

  Call make_call() const {
    if (!more_keys_.empty()) {  // a multi-resource lock: every key at once
      const std::string ttl = std::to_string(ttl_.count());
      switch (kind_) {
        case Kind::acquire: return {CommandId::multi_acquire, key_, token_, ttl, more_keys_};
        case Kind::extend: return {CommandId::multi_extend, key_, token_, ttl, more_keys_};
        case Kind::release: break;
      }
      return release_call();
    }
    switch (kind_) {
      case Kind::acquire: {
        // The first attempt with a token we just drew is a plain SET NX PX:
        // no key can hold that token yet. A retry uses the script, which
        // also refreshes our own key if an earlier attempt's SET landed.
        const CommandId id = fence_                             ? CommandId::fenced_acquire
                             : attempts_ == 1 && fresh_token_ ? CommandId::set_nx
                                                              : CommandId::acquire;
        return {id, key_, token_, std::to_string(ttl_.count()), {}};
      }
      case Kind::extend: return {CommandId::extend, key_, token_, std::to_string(ttl_.count()), {}};
      case Kind::release: break;
    }
    return release_call();
  }

  Call release_call() const {
    if (!more_keys_.empty()) return {CommandId::multi_release, key_, token_, {}, more_keys_};
    return {CommandId::release, key_, token_, {}, {}};  // the script names the channel
  }

  void start_round() {
    awaiting_subscription_ = false;
    ++attempts_;
    phase_ = 1;
    t1_ = clock::now();
    if (sabotage().wall_clock) t1_wall_ = std::chrono::system_clock::now();
    const RoundMode mode = kind_ == Kind::release ? RoundMode::release : RoundMode::majority;
    round_ = QuorumRound::launch(engine_.transport_, make_call(), mode, this);
    if (round_->decided()) arm(milliseconds{0});
  }

  void evaluate() {
    const clock::time_point now = clock::now();
    const auto elapsed = measured_elapsed(now);
    const QuorumTally tally = round_->tally();
    const Options& o = engine_.options_;
    // The per-node outcomes are copied only where they are reported.
    auto take_outcomes = [this] {
      std::vector<NodeOutcome> nodes = round_->outcomes();
      round_->detach();
      round_ = nullptr;
      return nodes;
    };

    if (kind_ == Kind::release) {
      ReleaseResult r;
      r.released = tally.success();
      r.released_nodes = static_cast<int>(tally.ok());
      r.elapsed = elapsed;
      r.nodes = take_outcomes();
      return finish_release(std::move(r));
    }

    const microseconds validity = validity_left(ttl_, elapsed, o.drift_factor);
    const bool in_time = kind_ != Kind::extend || now < lock_deadline_;
    if (tally.success() && validity > microseconds{o.min_validity} && in_time) {
      if (kind_ == Kind::acquire && cancelled_) {
        // Taken after all, but the caller has gone: give it back.
        QuorumRound::launch(engine_.transport_, release_call(), RoundMode::release, nullptr)->detach();
        return fail(cancelled_error());
      }
      if (kind_ == Kind::acquire && fence_ && phase_ == 1) return start_fence_phase();
      Lock lock;
      lock.resource = resource_;
      lock.token = token_;
      lock.ttl = ttl_;
      lock.validity = duration_cast<milliseconds>(validity);
      lock.validity_deadline = now + validity;  // = T1 + ttl − drift
      lock.elapsed = elapsed;
      lock.attempts = attempts_;
      lock.fence = fence_value_;  // F after phase 2; an extend keeps the lock's
      if (o.node_outcomes) lock.nodes = round_->outcomes();
      return finish_lock(std::move(lock));
    }

    std::vector<NodeOutcome> nodes = take_outcomes();
    Error e = round_error(tally, nodes, validity, in_time);
    e.nodes = std::move(nodes);
    e.attempts = attempts_;
    e.elapsed = elapsed;
    if (kind_ == Kind::extend) return fail(std::move(e));

    // A failed acquire round may have set the key anywhere: release everywhere.
    if (!sabotage().no_rollback) {
      QuorumRound::launch(engine_.transport_, release_call(), RoundMode::release, nullptr)->detach();
    }
    if (cancelled_) return fail(cancelled_error());
    if (now >= wait_deadline_ || aborted_) return fail(std::move(e));
    const auto left = std::chrono::ceil<milliseconds>(wait_deadline_ - now);
    if (e.code == Errc::held && wait_for_release(e.nodes, left)) return;
    const auto jitter = milliseconds{static_cast<long long>(
        random_below(static_cast<unsigned long long>(o.retry_jitter.count()) + 1))};
    arm(std::min(o.retry_delay + jitter, left));
  }

  // wait_for_release: the lock is held elsewhere; wait for it without
  // polling (docs/design.md, "Waiting"). False when wake-ups are off or
  // unavailable: then the caller polls.
  bool wait_for_release(const std::vector<NodeOutcome>& nodes, milliseconds left) {
    const Options& o = engine_.options_;
    if (!o.wake_ups || !more_keys_.empty()) return false;  // multi-resource waiters poll
    if (!watching_) {
      const WatchState state = engine_.transport_.watch(channel(), this);
      if (state == WatchState::unavailable) return false;
      watching_ = true;
      woken_ = false;
      if (state == WatchState::pending) {
        // Retry once the subscription is confirmed (a release from then on
        // is heard), or after one node timeout at the latest.
        awaiting_subscription_ = true;
        arm(std::min(o.node_timeout, left));
        return true;
      }
      // Already subscribed: retry once at once — a release between our
      // attempt and now was published before we listened.
      arm(milliseconds{0});
      return true;
    }
    if (woken_) {  // a release was published while our attempt was on its way
      woken_ = false;
      arm(std::min(wake_jitter(), left));
      return true;
    }
    // Wait for a notification, the holder's TTL, or the safety net.
    milliseconds wait = o.wake_safety_net;
    if (const std::optional<milliseconds> free_in = majority_free_in(nodes)) {
      wait = std::min(wait, *free_in + milliseconds{1} + wake_jitter());
    }
    arm(std::min(wait, left));
    return true;
  }

  // majority_free_in: when the key will be gone from a majority, from the
  // TTLs the nodes reported (a node that said yes is free now); none when
  // fewer than a majority reported one.
  std::optional<milliseconds> majority_free_in(const std::vector<NodeOutcome>& nodes) const {
    std::vector<long long> free_in;
    for (const NodeOutcome& n : nodes) {
      if (n.outcome == Outcome::ok) free_in.push_back(0);
      if (n.outcome == Outcome::held && n.holder_ttl.count() >= 0) free_in.push_back(n.holder_ttl.count());
    }
    const std::size_t quorum = nodes.size() / 2 + 1;
    if (free_in.size() < quorum) return std::nullopt;
    std::nth_element(free_in.begin(), free_in.begin() + static_cast<std::ptrdiff_t>(quorum - 1), free_in.end());
    return milliseconds{free_in[quorum - 1]};
  }

  milliseconds wake_jitter() const {
    return milliseconds{static_cast<long long>(
        random_below(static_cast<unsigned long long>(engine_.options_.wake_jitter.count()) + 1))};
  }

  std::string channel() const { return key_ + ":released"; }

  // start_fence_phase: phase 1 reached a majority; F = the highest counter
  // any node reported + 1. Phase 2 raises the counter to F on the nodes
  // where our token still is; the lock (with F) is granted only if a
  // majority confirms within the validity that began at phase 1's T1.
  void start_fence_phase() {
    fence_value_ = static_cast<std::uint64_t>(std::max(round_->max_counter(), 0LL)) + 1;
    round_->detach();
    round_ = nullptr;
    phase_ = 2;
    round_ = QuorumRound::launch(engine_.transport_, {CommandId::fence_raise, key_, token_, std::to_string(fence_value_), {}},
                                 RoundMode::majority, this);
    if (round_->decided()) arm(milliseconds{0});
  }

  // measured_elapsed is now − T1 on steady_clock (the broken variants of
  // the chaos suite measure it wrongly on purpose).
  microseconds measured_elapsed(clock::time_point now) const {
    if (sabotage().no_elapsed) return microseconds{0};
    if (sabotage().wall_clock) return duration_cast<microseconds>(std::chrono::system_clock::now() - t1_wall_);
    return duration_cast<microseconds>(now - t1_);
  }

  Error round_error(const QuorumTally& tally, const std::vector<NodeOutcome>& nodes, microseconds validity,
                    bool in_time) const {
    const std::string detail = describe(nodes);
    const std::string tail = detail.empty() ? "" : ": " + detail;
    if (tally.success() && !in_time) {
      return make_error(Errc::too_late, "majority " + count_of(tally) +
                                            " answered after the lock's validity deadline had passed" + tail);
    }
    if (tally.success()) {
      return make_error(Errc::validity_too_short,
                        "majority " + count_of(tally) + " reached but only " +
                            std::to_string(validity.count() / 1000) + " ms of validity left (minimum " +
                            std::to_string(engine_.options_.min_validity.count()) + " ms)" + tail);
    }
    if (phase_ == 2) {
      return make_error(Errc::no_quorum, "fence " + std::to_string(fence_value_) + " not confirmed by a majority " +
                                             count_of(tally) + tail);
    }
    if (tally.held() > 0) {
      if (kind_ == Kind::extend) return make_error(Errc::not_held, "lock not held " + count_of(tally) + tail);
      return make_error(Errc::held, "held elsewhere " + count_of(tally) + tail);
    }
    return make_error(Errc::no_quorum, "no quorum " + count_of(tally) + tail);
  }

  void fail(Error e) {
    if (e.attempts == 0) e.attempts = attempts_;
    if (kind_ == Kind::release) return finish_release(std::move(e));
    finish_lock(std::move(e));
  }

  void finish_lock(Result<Lock> r) {
    finished_ = true;
    LockCallback done = std::move(lock_done_);
    close_soon();
    if (done) done(std::move(r));
  }

  void finish_release(Result<ReleaseResult> r) {
    finished_ = true;
    ReleaseCallback done = std::move(release_done_);
    close_soon();
    if (done) done(std::move(r));
  }

  // close_soon detaches from the round and closes the timer; the operation
  // frees itself in the close callback.
  void close_soon() {
    if (watching_) {
      engine_.transport_.unwatch(channel(), this);
      watching_ = false;
    }
    if (round_ != nullptr) {
      round_->detach();
      round_ = nullptr;
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), [](uv_handle_t* h) {
      auto* op = static_cast<Operation*>(h->data);
      op->engine_.delist(op);
      delete op;
    });
  }

  uv_timer_t timer_;
  QuorumRound* round_ = nullptr;
  clock::time_point t1_{};
  std::chrono::system_clock::time_point t1_wall_{};  // only for the wall_clock variant
  int attempts_ = 0;
  int phase_ = 1;                  // a fenced acquire's phase (1: take the lock, 2: raise the fence)
  bool watching_ = false;          // subscribed to the resource's releases
  bool awaiting_subscription_ = false;
  bool woken_ = false;             // a release was heard during an attempt
  bool cancelled_ = false;
  bool aborted_ = false;
  bool finished_ = false;
};

Engine::Engine(uv_loop_t* loop, Transport& transport, const Options& options) noexcept
    : loop_(loop), transport_(transport), options_(options) {}

void Engine::enlist(Operation* op) noexcept {
  op->next_ = head_;
  if (head_ != nullptr) head_->prev_ = op;
  head_ = op;
  ++live_;
}

void Engine::delist(Operation* op) noexcept {
  if (op->prev_ != nullptr) op->prev_->next_ = op->next_;
  if (op->next_ != nullptr) op->next_->prev_ = op->prev_;
  if (head_ == op) head_ = op->next_;
  --live_;
  maybe_idle();
}

// maybe_idle: closing, and no operation left — close the cancellation
// handle (if one was made) and then report idle.
void Engine::maybe_idle() {
  if (!closing_ || live_ != 0) return;
  if (cancel_async_ != nullptr) {
    if (!cancel_closing_) {
      cancel_closing_ = true;
      uv_close(reinterpret_cast<uv_handle_t*>(cancel_async_), [](uv_handle_t* h) {
        auto* engine = static_cast<Engine*>(h->data);
        delete reinterpret_cast<uv_async_t*>(h);
        engine->cancel_async_ = nullptr;
        engine->maybe_idle();
      });
    }
    return;
  }
  if (on_idle_) std::exchange(on_idle_, nullptr)();
}

// watch_cancel: the acquire ends with Errc::cancelled once `token` is
// requested. The request may come from any thread: it queues the
// operation's id and wakes the loop through one uv_async handle (made on
// first use, unreferenced so it never keeps the loop alive).
void Engine::watch_cancel(Operation* op, const std::stop_token& token) {
  if (!token.stop_possible()) return;
  if (cancel_async_ == nullptr) {
    cancel_async_ = new uv_async_t;
    uv_async_init(loop_, cancel_async_, [](uv_async_t* h) { static_cast<Engine*>(h->data)->drain_cancels(); });
    cancel_async_->data = this;
    uv_unref(reinterpret_cast<uv_handle_t*>(cancel_async_));
  }
  op->id_ = ++next_id_;
  op->on_cancel_.emplace(token, std::function<void()>([queue = cancels_, async = cancel_async_, id = op->id_] {
    std::lock_guard<std::mutex> lock(queue->mu);
    queue->ids.push_back(id);
    uv_async_send(async);
  }));
}

void Engine::drain_cancels() {
  std::vector<std::uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(cancels_->mu);
    ids.swap(cancels_->ids);
  }
  for (std::uint64_t id : ids) {
    for (Operation* op = head_; op != nullptr; op = op->next_) {
      if (op->id_ == id) op->cancel();
    }
  }
}

void Engine::shutdown(std::function<void()> on_idle) {
  if (closing_) return;
  closing_ = true;
  on_idle_ = std::move(on_idle);
  for (Operation* op = head_; op != nullptr; op = op->next_) op->abort();
  maybe_idle();
}

namespace {

// check_ttl returns the problem with a TTL, or an empty string.
std::string check_ttl(milliseconds ttl, const Options& o) {
  if (ttl <= milliseconds{0}) return "ttl " + std::to_string(ttl.count()) + " ms: must be > 0";
  if (ttl > o.max_ttl) {
    return "ttl " + std::to_string(ttl.count()) + " ms exceeds max_ttl " + std::to_string(o.max_ttl.count()) +
           " ms";
  }
  const milliseconds floor = o.node_timeout + drift_allowance(ttl, o.drift_factor) + o.min_validity;
  if (ttl <= floor) {
    return "ttl " + std::to_string(ttl.count()) + " ms leaves no validity: must exceed node_timeout + drift + " +
           "min_validity (" + std::to_string(floor.count()) + " ms)";
  }
  return {};
}

}  // namespace

std::string check_resource(const std::string& resource) {
  if (resource.empty()) return "resource: empty";
  if (resource.size() > max_resource_bytes) {
    return "resource: " + std::to_string(resource.size()) + " bytes (at most " +
           std::to_string(max_resource_bytes) + ")";
  }
  return {};
}

void Engine::acquire(std::string resource, AcquireOptions opts, LockCallback done) {
  auto* op = new Operation(*this, Operation::Kind::acquire);
  op->lock_done_ = std::move(done);
  std::string problem = check_resource(resource);
  setup_acquire(op, std::move(resource), std::move(opts), std::move(problem));
}

void Engine::acquire_many(std::vector<std::string> resources, AcquireOptions opts, LockCallback done) {
  auto* op = new Operation(*this, Operation::Kind::acquire);
  op->lock_done_ = std::move(done);
  std::string problem = resources.empty() ? "resources: empty" : "";
  for (std::size_t i = 0; i < resources.size() && problem.empty(); ++i) {
    if (std::string p = check_resource(resources[i]); !p.empty()) {
      problem = "resources[" + std::to_string(i) + "]" + p.substr(8);  // "resource: …" → "resources[i]: …"
    }
  }
  if (problem.empty() && opts.fence) problem = "fence: not available for multi-resource locks";
  std::string first = resources.empty() ? std::string() : resources.front();
  for (std::size_t i = 1; i < resources.size(); ++i) op->more_keys_.push_back(options_.prefix + resources[i]);
  opts.fence = false;
  setup_acquire(op, std::move(first), std::move(opts), std::move(problem));
}

void Engine::setup_acquire(Operation* op, std::string resource, AcquireOptions opts, std::string problem) {
  op->ttl_ = opts.ttl.count() == 0 ? options_.default_ttl : opts.ttl;
  if (problem.empty()) problem = check_ttl(op->ttl_, options_);
  if (problem.empty() && opts.wait < milliseconds{0}) problem = "wait: must be >= 0";
  if (problem.empty() && !opts.token.empty() && !valid_token(opts.token)) {
    problem = "token: must be 1-128 characters of [0-9A-Za-z_-]";
  }
  if (problem.empty() && opts.token.empty()) {
    Result<std::string> token = random_token();
    if (token) {
      opts.token = std::move(*token);
      op->fresh_token_ = true;
    } else {
      op->early_ = token.error();
    }
  }
  if (!problem.empty()) op->early_ = make_error(Errc::invalid_argument, problem);
  op->key_ = options_.prefix + resource;
  op->resource_ = std::move(resource);
  op->token_ = std::move(opts.token);
  op->wait_deadline_ = clock::now() + opts.wait;
  op->fence_ = opts.fence;
  watch_cancel(op, opts.cancel);
  op->begin();
}

void Engine::extend(Lock lock, milliseconds ttl, LockCallback done, const std::vector<std::string>& more) {
  auto* op = new Operation(*this, Operation::Kind::extend);
  for (const std::string& r : more) op->more_keys_.push_back(options_.prefix + r);
  op->lock_done_ = std::move(done);
  op->ttl_ = ttl.count() == 0 ? (lock.ttl.count() == 0 ? options_.default_ttl : lock.ttl) : ttl;
  std::string problem = check_resource(lock.resource);
  if (problem.empty()) problem = check_ttl(op->ttl_, options_);
  if (problem.empty() && !valid_token(lock.token)) problem = "token: must be 1-128 characters of [0-9A-Za-z_-]";
  if (!problem.empty()) op->early_ = make_error(Errc::invalid_argument, problem);
  op->key_ = options_.prefix + lock.resource;
  op->resource_ = std::move(lock.resource);
  op->token_ = std::move(lock.token);
  op->fence_value_ = lock.fence;
  // A lock value that never came from acquire (CLI extend) has no deadline
  // of its own: then the extension itself must land within its new ttl.
  op->lock_deadline_ = lock.validity_deadline == clock::time_point{} ? clock::time_point::max()
                                                                     : lock.validity_deadline;
  op->begin();
}

void Engine::release(std::string resource, std::string token, ReleaseCallback done,
                     const std::vector<std::string>& more) {
  auto* op = new Operation(*this, Operation::Kind::release);
  for (const std::string& r : more) op->more_keys_.push_back(options_.prefix + r);
  op->release_done_ = std::move(done);
  std::string problem = check_resource(resource);
  if (problem.empty() && !valid_token(token)) problem = "token: must be 1-128 characters of [0-9A-Za-z_-]";
  if (!problem.empty()) op->early_ = make_error(Errc::invalid_argument, problem);
  op->key_ = options_.prefix + resource;
  op->resource_ = std::move(resource);
  op->token_ = std::move(token);
  op->begin();
}

}  // namespace redlock::detail
