// lease.cpp — the Lease handle and its watchdog.
#include "redlock/lease.hpp"

#include <algorithm>
#include <future>
#include <utility>

#include "lease_state.hpp"
#include "engine.hpp"
#include "quorum.hpp"
#include "timer_queue.hpp"
#include "telemetry.hpp"

namespace redlock {

namespace detail {

namespace {

using std::chrono::duration_cast;

// Timers fire this much before the validity deadline: uv timers count whole
// milliseconds from the loop's cached time, so the signal may run a little
// late; the drift allowance already covers the rest.
constexpr auto deadline_margin = milliseconds{2};

// Rounded up: a timer armed for less than the time left fires early and
// re-arms; rounded down, the last millisecond before a deadline would be a
// busy loop of 0 ms timers (the simulator found it).
milliseconds until(TimePoint t, TimePoint now) {
  return std::max(std::chrono::ceil<milliseconds>(t - now), milliseconds{0});
}

}  // namespace

std::string lease_options_problem(const LeaseOptions& opts) {
  if (!(opts.extend_at > 0.0 && opts.extend_at < 1.0)) {
    return "extend_at: " + std::to_string(opts.extend_at) + " (must be between 0 and 1, exclusive)";
  }
  if (opts.max_extensions < 0) return "max_extensions: must be >= 0";
  if (opts.max_hold < milliseconds{0}) return "max_hold: must be >= 0";
  return {};
}

const std::vector<std::string>& LeaseState::resources() const {
  std::lock_guard<std::mutex> lock(mu);
  if (all == nullptr) {
    auto list = std::make_unique<std::vector<std::string>>();
    list->reserve(1 + more.size());
    list->push_back(resource);
    list->insert(list->end(), more.begin(), more.end());
    all = std::move(list);
  }
  return *all;  // never changed once made
}

std::stop_token LeaseState::stop_token() const {
  std::lock_guard<std::mutex> lock(mu);
  if (!stop.stop_possible()) {
    stop = std::stop_source();
    if (lost != nullptr) stop.request_stop();
  }
  return stop.get_token();
}

bool LeaseState::lose_locked(const Error& e) {
  if (lost != nullptr || released) return false;
  lost = std::make_unique<Error>(e);
  return true;
}

std::shared_ptr<LeaseState> make_lease(Lock taken, LeaseOptions opts, std::string owner,
                                       std::shared_ptr<LeaseHost> host, std::vector<std::string> more) {
  auto state = std::make_shared<LeaseState>();
  state->more = std::move(more);
  state->resource = std::move(taken.resource);
  state->token = std::move(taken.token);
  state->fence = taken.fence;
  state->attempts = taken.attempts;
  state->ttl = taken.ttl;
  state->owner = std::move(owner);
  state->taken = taken.validity_deadline - taken.validity;  // about when the round began
  state->deadline = taken.validity_deadline;
  state->host = std::move(host);
  state->rules = LeaseRules{opts.auto_extend, opts.fence,           opts.extend_at,
                            opts.max_extensions, opts.max_hold, std::move(opts.on_lost)};
  return state;
}

void release_lease(AsyncClient& client, const std::shared_ptr<LeaseState>& state, ReleaseCallback done) {
  if (state->watchdog != nullptr) state->watchdog->stop();
  if (!state->more.empty()) return client.release_many(state->resources(), state->token, std::move(done));
  client.release(state->resource, state->token, std::move(done));
}

Watchdog::Watchdog(Engine& engine, std::shared_ptr<LeaseState> state, Gone gone, void* host)
    : engine_(engine), options_(engine.options()), state_(std::move(state)), gone_(gone), host_(host) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    deadline_ = state_->deadline;
  }
  timer_ = engine_.timers().timer([this] { on_timer(); });
  state_->watchdog = this;
}

void Watchdog::start() {
  const TimePoint now = engine_.runtime().now();
  if (state_->rules.auto_extend) {
    arm_extend(now, duration_cast<Clock::duration>((deadline_ - now) * state_->rules.extend_at));
  } else {
    stopped_extending_ = Cap::auto_extend_off;
    rearm(now);
  }
}

void Watchdog::arm_extend(TimePoint now, Clock::duration in) {
  extend_due_ = now + std::max(in, Clock::duration::zero());
  rearm(now);
}

void Watchdog::rearm(TimePoint now) {
  if (stopped_) return;
  const TimePoint wake = std::min(extend_due_, deadline_ - deadline_margin);
  timer_->start(until(wake, now));
}

void Watchdog::on_timer() {
  if (stopped_) return maybe_free();
  const TimePoint now = engine_.runtime().now();
  if (now + deadline_margin >= deadline_) return on_deadline();
  if (extend_due_ <= now) {
    extend_due_ = TimePoint::max();
    extend_now(now);
  }
  rearm(now);  // woke early, or for the next of the two
}

Watchdog::Cap Watchdog::cap_reached(TimePoint now) const {
  const LeaseRules& r = state_->rules;
  if (r.max_extensions > 0) {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->extensions >= r.max_extensions) return Cap::max_extensions;
  }
  if (r.max_hold.count() > 0 && now + state_->ttl > state_->taken + r.max_hold) return Cap::max_hold;
  return Cap::none;
}

std::string Watchdog::cap_text() const {
  switch (stopped_extending_) {
    case Cap::none: return {};
    case Cap::auto_extend_off: return "auto_extend is off";
    case Cap::max_extensions: return "max_extensions (" + std::to_string(state_->rules.max_extensions) + ") reached";
    case Cap::max_hold: return "max_hold (" + std::to_string(state_->rules.max_hold.count()) + " ms) reached";
  }
  return {};
}

void Watchdog::extend_now(TimePoint now) {
  if (stopped_ || extending_) return;
  if (Cap cap = cap_reached(now); cap != Cap::none) {
    stopped_extending_ = cap;
    return;  // the deadline declares the loss
  }
  extending_ = true;
  // A lease of one resource (also one built without make_lease: no list)
  // rides a batch round; a multi-resource lease extends every key in one
  // round of its own.
  if (state_->more.empty()) return engine_.batcher().submit(this);
  Lock lock;
  lock.resource = state_->resource;
  lock.token = state_->token;
  lock.ttl = state_->ttl;
  lock.fence = state_->fence;
  lock.validity_deadline = deadline_;
  engine_.extend(
      std::move(lock), state_->ttl,
      [this](Result<Lock> r) {
        if (!r) return on_extended(std::move(r).error());
        on_extended(Extension{r->validity_deadline, r->validity});
      },
      state_->more);
}

void Watchdog::on_extended(Result<Extension> r) {
  extending_ = false;
  if (stopped_) return maybe_free();
  const TimePoint now = engine_.runtime().now();
  if (r) {
    deadline_ = r->validity_deadline;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->deadline = deadline_;
      ++state_->extensions;
    }
    last_failure_.reset();
    if (Telemetry* t = engine_.telemetry()) t->lease_extended(state_->resource, r->validity);
    return arm_extend(now, duration_cast<Clock::duration>((deadline_ - now) * state_->rules.extend_at));
  }
  Error e = std::move(r).error();
  if (e.code == Errc::closed) return;  // shutdown() reports it
  if (e.code == Errc::too_late) {
    return lose("extension answered by a majority only after the validity deadline: " + e.message,
                std::move(e.nodes));
  }
  if (refused_for_good(e.nodes)) {
    // Extend never recreates a key: these nodes will never say yes again.
    return lose("extension refused: our token is gone from too many nodes for a majority (" + e.message + ")",
                std::move(e.nodes));
  }
  // Not decided yet (timeouts, errors): try again while there is time —
  // after a quarter of the time left (at least retry_delay), plus jitter:
  // a lease with seconds left does not retry every 50 ms, and a crowd of
  // leases that failed together (an overloaded client, a slow master) does
  // not retry together. About a dozen retries before the deadline.
  last_failure_ = std::make_unique<Error>(std::move(e));
  const TimePoint deadline = deadline_;
  const Clock::duration left = deadline - deadline_margin - now;
  const Clock::duration wait = std::max<Clock::duration>(options_.retry_delay, left / 4) +
                               engine_.runtime().random_delay(options_.retry_jitter);
  if (now + wait < deadline - deadline_margin) return arm_extend(now, wait);
  if (now + options_.retry_delay < deadline - deadline_margin) arm_extend(now, options_.retry_delay);
}

void Watchdog::on_deadline() {
  std::string why = "validity deadline passed";
  if (stopped_extending_ != Cap::none) {
    why += " (the watchdog stopped extending: " + cap_text() + ")";
  } else if (last_failure_) {
    why += "; the last extension failed: " + last_failure_->message;
  } else if (extending_) {
    why += " while an extension was still unanswered";
  }
  lose(std::move(why), last_failure_ ? last_failure_->nodes : std::vector<NodeOutcome>{});
}

void Watchdog::lose(std::string why, std::vector<NodeOutcome> nodes) {
  Error e = make_error(Errc::lost, "lease on " + state_->resource + " lost: " + why);
  e.nodes = std::move(nodes);
  bool first = false;
  std::stop_source signal{std::nostopstate};
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    first = state_->lose_locked(e);
    if (first) signal = state_->stop;  // requested outside the lock: its callbacks may read the lease
  }
  if (first) {
    if (signal.stop_possible()) signal.request_stop();
    if (Telemetry* t = engine_.telemetry()) t->lease_lost(state_->resource, e.message);
    if (state_->rules.on_lost) state_->rules.on_lost(e);
  }
  stop();
}

void Watchdog::stop() {
  if (stopped_) return;
  stopped_ = true;
  state_->watchdog = nullptr;
  timer_->start(milliseconds{0});  // maybe_free, on a later loop turn
}

// maybe_free: once stopped and no extension in flight (its callback holds
// `this`), unlink from the client and free — never inside stop() itself.
void Watchdog::maybe_free() {
  if (!stopped_ || extending_ || timer_->active()) return;
  if (gone_ != nullptr) gone_(host_, this);
  delete this;
}

void Watchdog::shutdown() {
  if (stopped_) return;
  lose("the client was closed; the lease is no longer extended");
}

}  // namespace detail

// ---- Lease -------------------------------------------------------------------------

namespace {

const std::string empty_string;

Result<ReleaseResult> release_state(const std::shared_ptr<detail::LeaseState>& s) {
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->released) return make_error(Errc::not_held, "lease on " + s->resource + " already released");
    if (--s->holds > 0) return ReleaseResult{};  // a reentrant hold: the count only
    s->released = true;
  }
  detail::LeaseHost& host = *s->host;
  auto promise = std::make_shared<std::promise<Result<ReleaseResult>>>();
  auto future = promise->get_future();
  bool posted = false;
  {
    std::lock_guard<std::mutex> lock(host.mu);
    if (!s->owner.empty()) {
      auto it = host.reentrant.find({s->resource, s->owner});
      if (it != host.reentrant.end() && !it->second.acquiring && it->second.lease.lock() == s) {
        host.reentrant.erase(it);
      }
    }
    if (host.post) {
      host.post([s, promise](AsyncClient& client) {
        detail::release_lease(client, s, [promise](Result<ReleaseResult> r) { promise->set_value(std::move(r)); });
      });
      posted = true;
    }
  }
  if (!posted) return make_error(Errc::closed, "the client is gone; the lock on " + s->resource + " expires by its TTL");
  // Never wait on the loop thread itself: the release could not run.
  if (std::this_thread::get_id() == host.loop_thread) {
    return make_error(Errc::internal, "release of " + s->resource + " started on the loop thread; not waited for");
  }
  if (future.wait_for(host.release_bound) != std::future_status::ready) {
    return make_error(Errc::no_quorum, "release of " + s->resource + " not confirmed within " +
                                           std::to_string(host.release_bound.count()) + " ms");
  }
  return future.get();
}

}  // namespace

Lease::Lease() noexcept = default;
Lease::Lease(std::shared_ptr<detail::LeaseState> state) noexcept : LeaseView(std::move(state)) {}
Lease::Lease(Lease&& other) noexcept = default;

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) (void)release_state(state_);
    state_ = std::move(other.state_);
  }
  return *this;
}

Lease::~Lease() {
  if (state_ == nullptr) return;
  try {
    (void)release_state(state_);
  } catch (...) {  // never throw from a destructor (bad_alloc in a message, say)
  }
}

bool LeaseView::valid() const noexcept {
  if (state_ == nullptr) return false;
  std::lock_guard<std::mutex> lock(state_->mu);
  return !state_->released && state_->lost == nullptr && std::chrono::steady_clock::now() < state_->deadline;
}

const std::string& LeaseView::resource() const noexcept { return state_ ? state_->resource : empty_string; }
const std::vector<std::string>& LeaseView::resources() const noexcept {
  static const std::vector<std::string> none;
  return state_ ? state_->resources() : none;
}
const std::string& LeaseView::token() const noexcept { return state_ ? state_->token : empty_string; }
std::uint64_t LeaseView::fence() const noexcept { return state_ ? state_->fence : 0; }
int LeaseView::attempts() const noexcept { return state_ ? state_->attempts : 0; }

std::chrono::steady_clock::time_point LeaseView::deadline() const noexcept {
  if (state_ == nullptr) return {};
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->deadline;
}

milliseconds LeaseView::remaining() const noexcept {
  const auto left = deadline() - std::chrono::steady_clock::now();
  return left > std::chrono::steady_clock::duration::zero() ? std::chrono::duration_cast<milliseconds>(left)
                                                            : milliseconds{0};
}

int LeaseView::extensions() const noexcept {
  if (state_ == nullptr) return 0;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->extensions;
}

int LeaseView::holds() const noexcept {
  if (state_ == nullptr) return 0;
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->holds;
}

std::stop_token LeaseView::stop_token() const noexcept {
  if (state_ == nullptr) return {};
  try {
    return state_->stop_token();
  } catch (...) {  // no memory for the stop state: a token that is never requested
    return {};
  }
}

std::optional<Error> LeaseView::lost() const {
  if (state_ == nullptr) return std::nullopt;
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->lost == nullptr) return std::nullopt;
  return *state_->lost;
}

Result<ReleaseResult> Lease::release() {
  if (state_ == nullptr) return make_error(Errc::not_held, "empty lease: nothing to release");
  auto state = std::move(state_);
  return release_state(state);
}

// ---- AsyncLease ----------------------------------------------------------------------

namespace {

// release_async: stop the watchdog and release, on the loop thread the
// caller is on. `done` may be empty.
void release_async(std::shared_ptr<detail::LeaseState> s, std::function<void(Result<ReleaseResult>)> done) {
  auto tell = [&done](Error e) {
    if (done) done(std::move(e));
  };
  if (s == nullptr) return tell(make_error(Errc::not_held, "empty lease: nothing to release"));
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->released) return tell(make_error(Errc::not_held, "lease on " + s->resource + " already released"));
    s->released = true;
  }
  std::function<void(detail::LeaseHost::Task)> post;
  {
    std::lock_guard<std::mutex> lock(s->host->mu);
    post = s->host->post;
  }
  if (!post) return tell(make_error(Errc::closed, "the client is closed; the lock on " + s->resource + " expires by its TTL"));
  post([s, done = std::move(done)](AsyncClient& client) mutable {
    detail::release_lease(client, s, [done = std::move(done)](Result<ReleaseResult> r) {
      if (done) done(std::move(r));
    });
  });
}

}  // namespace

AsyncLease::AsyncLease() noexcept = default;
AsyncLease::AsyncLease(std::shared_ptr<detail::LeaseState> state) noexcept : LeaseView(std::move(state)) {}
AsyncLease::AsyncLease(AsyncLease&& other) noexcept = default;

AsyncLease& AsyncLease::operator=(AsyncLease&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) release_async(std::move(state_), {});
    state_ = std::move(other.state_);
  }
  return *this;
}

AsyncLease::~AsyncLease() {
  if (state_ == nullptr) return;
  try {
    release_async(std::move(state_), {});
  } catch (...) {  // never throw from a destructor
  }
}

void AsyncLease::release(std::function<void(Result<ReleaseResult>)> done) {
  release_async(std::move(state_), std::move(done));
}

}  // namespace redlock
