// lease.cpp — the Lease handle and its watchdog.
#include "redlock/lease.hpp"

#include <algorithm>
#include <bit>
#include <future>
#include <utility>

#include "lease_state.hpp"
#include "engine.hpp"
#include "quorum.hpp"
#include "slab_pool.hpp"
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


}  // namespace

std::string lease_options_problem(const LeaseOptions& opts) {
  if (!(opts.extend_at > 0.0 && opts.extend_at < 1.0)) {
    return "extend_at: " + std::to_string(opts.extend_at) + " (must be between 0 and 1, exclusive)";
  }
  if (opts.max_extensions < 0) return "max_extensions: must be >= 0";
  if (opts.max_hold < milliseconds{0}) return "max_hold: must be >= 0";
  return {};
}

static_assert(sizeof(LeaseState) <= 184, "a held lease's record grew: docs/benchmarks.md counts on about 200 bytes");

LeaseState::~LeaseState() {
  if (!inline_fits()) delete[] heap_;
  delete cold_.load(std::memory_order_relaxed);
}

void LeaseState::set_names(std::string_view resource, std::string_view token) {
  resource_size_ = static_cast<std::uint16_t>(resource.size());
  token_size_ = static_cast<std::uint16_t>(token.size());
  char* out = inline_;
  if (!inline_fits()) out = heap_ = new char[resource.size() + token.size()];
  std::copy(resource.begin(), resource.end(), out);
  std::copy(token.begin(), token.end(), out + resource.size());
}

LeaseCold& LeaseState::cold_locked() const {
  LeaseCold* c = cold_.load(std::memory_order_relaxed);
  if (c == nullptr) {
    c = new LeaseCold;
    cold_.store(c, std::memory_order_release);
  }
  return *c;
}

const std::vector<std::string>& LeaseState::more() const noexcept {
  static const std::vector<std::string> none;
  const LeaseCold* c = cold();
  return c != nullptr ? c->more : none;
}

const std::vector<std::string>& LeaseState::resources() const {
  std::lock_guard lock(mu);
  LeaseCold& c = cold_locked();
  if (c.all == nullptr) {
    auto list = std::make_unique<std::vector<std::string>>();
    list->reserve(1 + c.more.size());
    list->emplace_back(resource());
    list->insert(list->end(), c.more.begin(), c.more.end());
    c.all = std::move(list);
  }
  return *c.all;  // never changed once made
}

const std::string& LeaseState::resource_string() const {
  std::lock_guard lock(mu);
  LeaseCold& c = cold_locked();
  if (c.resource == nullptr) c.resource = std::make_unique<std::string>(resource());
  return *c.resource;
}

const std::string& LeaseState::token_string() const {
  std::lock_guard lock(mu);
  LeaseCold& c = cold_locked();
  if (c.token == nullptr) c.token = std::make_unique<std::string>(token());
  return *c.token;
}

std::stop_token LeaseState::stop_token() const {
  std::lock_guard lock(mu);
  LeaseCold& c = cold_locked();
  if (!c.stop.stop_possible()) {
    c.stop = std::stop_source();
    if (lost) c.stop.request_stop();
  }
  return c.stop.get_token();
}

bool LeaseState::lose_locked(const Error& e) {
  if (lost || released) return false;
  cold_locked().lost = std::make_unique<Error>(e);
  lost = true;
  return true;
}

bool LeaseState::lose_if_expired(TimePoint now) {
  std::stop_source signal{std::nostopstate};
  {
    std::lock_guard lock(mu);
    if (lost) return true;
    if (released || now < deadline()) return false;
    const auto late = std::chrono::floor<milliseconds>(now - deadline()).count();
    lose_locked(make_error(Errc::lost, "lease on " + std::string(resource()) + " lost: validity deadline passed " +
                                           std::to_string(late) +
                                           " ms ago, before the client's loop could act (the process or its "
                                           "loop thread was stopped)"));
    signal = cold()->stop;
  }
  if (signal.stop_possible()) signal.request_stop();
  return true;
}

void LeaseState::on_batch_extended(Engine& engine, TimePoint now, Result<Extension> r) {
  engine.leases().on_extended(*this, now, std::move(r));
}

std::shared_ptr<LeaseState> make_lease(Lock taken, LeaseOptions opts, std::string owner,
                                       std::shared_ptr<LeaseHost> host, std::vector<std::string> more) {
  auto state = std::allocate_shared<LeaseState>(SlabAllocator<LeaseState>{});
  state->set_names(taken.resource, taken.token);
  state->attempts = taken.attempts;
  state->ttl = taken.ttl;
  state->set_deadline(taken.validity_deadline);
  state->host = std::move(host);
  state->auto_extend = opts.auto_extend;
  state->fenced = opts.acquire.fence;
  state->extend_at = static_cast<float>(opts.extend_at);
  if (taken.fence != 0 || opts.max_extensions > 0 || opts.max_hold.count() > 0 || opts.on_lost || !owner.empty() ||
      !more.empty()) {
    LeaseCold& c = state->cold_locked();  // not shared yet
    c.fence = taken.fence;
    c.taken = taken.validity_deadline - taken.validity;  // about when the round began
    c.max_extensions = opts.max_extensions;
    c.max_hold = opts.max_hold;
    c.on_lost = std::move(opts.on_lost);
    c.owner = std::move(owner);
    c.more = std::move(more);
  }
  return state;
}

void release_lease(AsyncClient& client, const std::shared_ptr<LeaseState>& state, ReleaseCallback done) {
  stop_watchdog(client, *state);
  if (state->multi()) return client.release_many(state->resources(), state->token_string(), std::move(done));
  client.release(std::string(state->resource()), std::string(state->token()), std::move(done));
}

// ---- LeaseKeeper ---------------------------------------------------------------------

LeaseKeeper::LeaseKeeper(Engine& engine) : engine_(engine), wheel_(engine.runtime(), &LeaseKeeper::fire, this) {}

// A client waits for live() to be zero before it closes; an engine that
// goes with leases still kept (a test, the simulator) lets them go: each
// is stopped and its hold on itself dropped.
LeaseKeeper::~LeaseKeeper() {
  std::vector<WheelEntry*> left;
  wheel_.take_all(left);
  for (WheelEntry* e : left) {
    auto& s = *static_cast<LeaseState*>(e);
    s.stopped = true;
    std::shared_ptr<LeaseState> self = std::move(s.self);
  }
}

void LeaseKeeper::fire(void* keeper, WheelEntry* entry, TimePoint now) {
  static_cast<LeaseKeeper*>(keeper)->on_timer(*static_cast<LeaseState*>(entry), now);
}

void LeaseKeeper::keep(const std::shared_ptr<LeaseState>& s) {
  s->self = s;
  ++live_;
  const TimePoint now = engine_.runtime().now();
  if (s->auto_extend) {
    arm_extend(*s, now, duration_cast<Clock::duration>((s->deadline() - now) * s->extend_at));
  } else {
    s->cap = LeaseState::Cap::auto_extend_off;
    arm_deadline(*s);
  }
}

namespace {

// extension_grid: the grid a batched lease's extension is planned on, for
// an extension planned `in` from now, with `live` leases kept: the largest
// power of two of ms that is at most in / 16, at most max_extension_grid,
// and at most what lets one grid point gather about extend_batch_max
// leases (live leases falling due every `in` or so: about live × grid / in
// per point) — a fuller point only makes a burst of rounds that queue
// behind one another. Zero (no grid) when it would not be above the batch
// window, or when extensions are not batched (window 0 or
// extend_batch_max 1). Powers of two nest: a lease on a 512 ms grid meets
// those on a 256 ms one at every other point.
constexpr milliseconds max_extension_grid{1024};

milliseconds extension_grid(const Options& o, Clock::duration in, std::size_t live) {
  if (o.extend_batch_window <= milliseconds{0} || o.extend_batch_max <= 1) return milliseconds{0};
  const double in_ms = std::chrono::duration<double, std::milli>(in).count();
  const double fill_ms =
      in_ms * static_cast<double>(o.extend_batch_max) / static_cast<double>(std::max<std::size_t>(live, 1));
  const double bound = std::min({in_ms / 16, fill_ms, static_cast<double>(max_extension_grid.count())});
  if (bound < 1) return milliseconds{0};
  const milliseconds grid{static_cast<long long>(std::bit_floor(static_cast<unsigned long long>(bound)))};
  return grid > o.extend_batch_window ? grid : milliseconds{0};
}

}  // namespace

// arm_extend plans the next extension `in` from now — unless the deadline
// (less the margin) comes first: then the timer is for the deadline. A
// lease that rides batch rounds is planned on a grid (extension_grid):
// its due is moved EARLIER, to the last grid point at or before it, at most
// in / 16 earlier. Leases whose extensions fall due spread in time (taken
// one by one, as a service takes them) then fall due together, at the same
// grid points, and share rounds of hundreds instead of a round per batch
// window with a few each: the cost of a round (a send and a wake per
// master) is what bounds the client's CPU (docs/benchmarks.md). An earlier
// extension is as safe as a planned one (only its validity counts, from its
// own round), and it costs at most 1/16 more extensions. A point gathers
// at most one full round's keys (grid_points_): leases taken in a burst,
// dense enough to fill rounds on their own, would otherwise meet in bursts
// of several rounds that queue per master (the extension p99 of 100,000
// bunched leases rose from 33 to 131 ms with the grid alone). A lease that
// finds its point full tries the finer grids' points (half the grid, a
// quarter, … while above the batch window), which fall between; where all
// are full it goes when planned, gathered by the window as without a grid.
void LeaseKeeper::arm_extend(LeaseState& s, TimePoint now, Clock::duration in) {
  in = std::max(in, Clock::duration::zero());
  TimePoint due = now + in;
  if (due >= s.deadline() - deadline_margin) return arm_deadline(s);
  const Options& o = engine_.options();
  const std::size_t keys = 1 + s.extend_more().size();
  // The grid's point, else a finer grid's (halves, above the window) that
  // has room; else the planned due.
  for (milliseconds grid = extension_grid(o, in, live_); grid > o.extend_batch_window; grid /= 2) {
    const Clock::duration since = due.time_since_epoch();
    const TimePoint point{since - since % grid};  // > now: grid <= in / 16
    GridPoint& p = grid_point(point);
    if (p.at != point) p = GridPoint{point, 0};
    if (p.keys + keys <= o.extend_batch_max) {
      p.keys += keys;
      due = point;
      break;
    }
  }
  s.extend_planned = true;
  wheel_.arm(&s, due);
}

// grid_point: the slot of `point` in grid_points_ (a multiplicative hash of
// its time, so points of every grid spread over the slots).
LeaseKeeper::GridPoint& LeaseKeeper::grid_point(TimePoint point) {
  const auto t = static_cast<std::uint64_t>(point.time_since_epoch().count());
  return grid_points_[(t * 0x9E3779B97F4A7C15ULL) >> 58];  // 64 slots
}

void LeaseKeeper::arm_deadline(LeaseState& s) {
  s.extend_planned = false;
  wheel_.arm(&s, s.deadline() - deadline_margin);
}

void LeaseKeeper::on_timer(LeaseState& s, TimePoint now) {
  if (s.stopped) {
    if (!s.extending) {
      tell_loss(s);  // lost on another thread, then released before the loop saw it
      finish(s);
    }
    return;  // else the verdict lets it go
  }
  if (now + deadline_margin >= s.deadline()) return on_deadline(s);
  if (s.extend_planned) extend_now(s, now);
  if (!s.stopped) arm_deadline(s);  // while the extension travels (or never comes: a cap)
}

LeaseState::Cap LeaseKeeper::cap_reached(const LeaseState& s, TimePoint now) const {
  const LeaseCold* c = s.cold();
  if (c == nullptr) return LeaseState::Cap::none;
  if (c->max_extensions > 0) {
    std::lock_guard lock(s.mu);
    if (s.extensions >= c->max_extensions) return LeaseState::Cap::max_extensions;
  }
  if (c->max_hold.count() > 0 && now + s.ttl > c->taken + c->max_hold) return LeaseState::Cap::max_hold;
  return LeaseState::Cap::none;
}

namespace {

std::string cap_text(const LeaseState& s) {
  switch (s.cap) {
    case LeaseState::Cap::none: return {};
    case LeaseState::Cap::auto_extend_off: return "auto_extend is off";
    case LeaseState::Cap::max_extensions:
      return "max_extensions (" + std::to_string(s.cold()->max_extensions) + ") reached";
    case LeaseState::Cap::max_hold: return "max_hold (" + std::to_string(s.cold()->max_hold.count()) + " ms) reached";
  }
  return {};
}

}  // namespace

void LeaseKeeper::extend_now(LeaseState& s, TimePoint now) {
  if (s.stopped || s.extending) return;
  if (LeaseState::Cap cap = cap_reached(s, now); cap != LeaseState::Cap::none) {
    s.cap = cap;
    return;  // the deadline declares the loss
  }
  s.extending = true;
  engine_.batcher().submit(&s, now);  // `self` holds the record while extending
}

// on_extended: `now` is when the verdict was made (the round's reading of
// the clock, a moment ago): the next extension is planned from it.
void LeaseKeeper::on_extended(LeaseState& s, TimePoint now, Result<Extension> r) {
  s.extending = false;
  if (s.stopped) {
    if (!s.armed()) finish(s);  // else its timer lets it go
    return;
  }
  if (r) {
    bool expired = false;  // another thread saw the deadline pass first
    {
      std::lock_guard lock(s.mu);
      expired = s.lost;
      if (!expired) {
        s.set_deadline(r->validity_deadline);
        ++s.extensions;
      }
    }
    if (expired) return lose(s, "validity deadline passed before the extension's answer was applied");
    if (LeaseCold* c = s.cold(); c != nullptr) c->last_failure.reset();
    if (Telemetry* t = engine_.telemetry()) t->lease_extended(s.resource(), r->validity);
    return arm_extend(s, now, duration_cast<Clock::duration>((r->validity_deadline - now) * s.extend_at));
  }
  Error e = std::move(r).error();
  if (e.code == Errc::closed) return;  // shutdown() reports it
  if (e.code == Errc::too_late) {
    return lose(s, "extension answered by a majority only after the validity deadline: " + e.message,
                std::move(e.nodes));
  }
  if (refused_for_good(e.nodes, lock_rule(RoundMode::majority, e.nodes.size()))) {
    // Extend never recreates a key: these nodes will never say yes again.
    return lose(s, "extension refused: our token is gone from too many nodes for a majority (" + e.message + ")",
                std::move(e.nodes));
  }
  // Not decided yet (timeouts, errors): try again while there is time —
  // after a quarter of the time left (at least retry_delay), plus jitter:
  // a lease with seconds left does not retry every 50 ms, and a crowd of
  // leases that failed together (an overloaded client, a slow master) does
  // not retry together. About a dozen retries before the deadline.
  {
    std::lock_guard lock(s.mu);  // cold_ is made under the lock
    s.cold_locked().last_failure = std::make_unique<Error>(std::move(e));
  }
  const Options& options = engine_.options();
  const TimePoint end = s.deadline() - deadline_margin;
  const Clock::duration wait =
      std::max<Clock::duration>(options.retry_delay, (end - now) / 4) + engine_.runtime().random_delay(options.retry_jitter);
  if (now + wait < end) return arm_extend(s, now, wait);
  if (now + options.retry_delay < end) return arm_extend(s, now, options.retry_delay);
  // No time for another try: the timer stays on the deadline.
}

void LeaseKeeper::on_deadline(LeaseState& s) {
  std::string why = "validity deadline passed";
  const LeaseCold* c = s.cold();
  const Error* last = c != nullptr ? c->last_failure.get() : nullptr;
  if (s.cap != LeaseState::Cap::none) {
    why += " (the watchdog stopped extending: " + cap_text(s) + ")";
  } else if (last != nullptr) {
    why += "; the last extension failed: " + last->message;
  } else if (s.extending) {
    why += " while an extension was still unanswered";
  }
  lose(s, std::move(why), last != nullptr ? last->nodes : std::vector<NodeOutcome>{});
}

void LeaseKeeper::lose(LeaseState& s, std::string why, std::vector<NodeOutcome> nodes) {
  Error e = make_error(Errc::lost, "lease on " + std::string(s.resource()) + " lost: " + why);
  e.nodes = std::move(nodes);
  {
    std::lock_guard lock(s.mu);
    s.lose_locked(e);  // no-op if another thread recorded the loss first: its error is the one told
  }
  // The record stays held (self) until finish, on a later turn: the
  // callbacks below may drop every handle.
  stop(s);
  tell_loss(s);
}

// tell_loss: once per lease, on the loop thread, the recorded loss goes to
// the stop token, the telemetry and on_lost — whichever thread recorded it.
void LeaseKeeper::tell_loss(LeaseState& s) {
  std::stop_source signal{std::nostopstate};
  std::optional<Error> e;
  {
    std::lock_guard lock(s.mu);
    if (!s.lost || s.cold()->told) return;
    s.cold()->told = true;
    e = s.lost_error();
    signal = s.cold()->stop;  // requested outside the lock: its callbacks may read the lease
  }
  if (signal.stop_possible()) signal.request_stop();
  if (Telemetry* t = engine_.telemetry()) t->lease_lost(s.resource(), e->message);
  if (const LeaseCold* c = s.cold(); c != nullptr && c->on_lost) c->on_lost(*e);
}

void LeaseKeeper::stop(LeaseState& s) {
  if (s.stopped || s.self == nullptr) return;
  s.stopped = true;
  wheel_.arm(&s, engine_.runtime().now());  // finish, on a later loop turn
}

// finish: stopped, no extension in flight, its timer gone — let the record
// go (the last reference may be this one: nothing touches it after).
void LeaseKeeper::finish(LeaseState& s) {
  wheel_.disarm(&s);
  std::shared_ptr<LeaseState> self = std::move(s.self);
  --live_;
  self.reset();
  if (live_ == 0 && on_idle) on_idle();
}

void LeaseKeeper::shutdown(LeaseState& s) {
  if (s.stopped) return;
  lose(s, "the client was closed; the lease is no longer extended");
}

void LeaseKeeper::shutdown_all() {
  std::vector<WheelEntry*> kept;
  wheel_.take_all(kept);
  const TimePoint now = engine_.runtime().now();
  for (WheelEntry* e : kept) {
    auto& s = *static_cast<LeaseState*>(e);
    if (s.stopped) {
      wheel_.arm(&s, now);  // stopped before: its finish was in the wheel
    } else {
      shutdown(s);
    }
  }
}

}  // namespace detail

// ---- Lease -------------------------------------------------------------------------

namespace {

const std::string empty_string;

// lost_before_release: the loss of a lease released after it was lost —
// by the watchdog, or by its deadline passing while nothing ran — is what
// a release reports (once the release itself is done: whatever is left of
// the key goes). Errc::lost, as lost() says.
std::optional<Error> lost_before_release(detail::LeaseState& s) {
  if (!s.lose_if_expired(detail::Clock::now())) return std::nullopt;
  std::lock_guard lock(s.mu);
  return s.lost_error();
}

// Release — a release begun: its outcome known at once (`now`), or its
// result to come (`later`, with `lost` overriding it, as it does at once).
struct Release {
  std::optional<Result<ReleaseResult>> now;
  std::future<Result<ReleaseResult>> later;
  std::optional<Error> lost;
};

Release begin_release(const std::shared_ptr<detail::LeaseState>& s, const char* member) {
  Release out;
  out.lost = lost_before_release(*s);
  {
    std::lock_guard lock(s->mu);
    if (s->released) {
      out.now = make_error(Errc::not_held, "lease on " + std::string(s->resource()) + " already released");
      return out;
    }
    if (--s->holds > 0) {
      out.now = ReleaseResult{};  // a reentrant hold: the count only
      return out;
    }
    s->released = true;
  }
  detail::LeaseHost& host = *s->host;
  auto promise = std::make_shared<std::promise<Result<ReleaseResult>>>();
  out.later = promise->get_future();
  bool posted = false;
  {
    std::lock_guard<std::mutex> lock(host.mu);
    if (const detail::LeaseCold* c = s->cold(); c != nullptr && !c->owner.empty()) {
      auto it = host.reentrant.find({std::string(s->resource()), c->owner});
      if (it != host.reentrant.end() && !it->second.acquiring && it->second.lease.lock() == s) {
        host.reentrant.erase(it);
      }
    }
    if (host.post) {
      host.post([s, promise, lost = out.lost](AsyncClient& client) {
        detail::release_lease(client, s, [promise, lost](Result<ReleaseResult> r) {
          if (lost) return promise->set_value(*lost);
          promise->set_value(std::move(r));
        });
      });
      posted = true;
    }
  }
  if (!posted) {
    out.now = make_error(Errc::closed, "the client is gone; the lock on " + std::string(s->resource()) + " expires by its TTL");
  } else if (std::this_thread::get_id() == host.loop_thread) {
    // Never wait on the loop thread itself: the release could not run.
    out.now = make_error(Errc::invalid_argument,
                         std::string("Lease::") + member + " called on the client's own loop thread (inside on_lost?): "
                         "the release of " + std::string(s->resource()) +
                         " was started but not waited for; call it from another thread to hear its outcome");
  }
  return out;
}

Result<ReleaseResult> release_state(const std::shared_ptr<detail::LeaseState>& s) {
  Release r = begin_release(s, "release");
  if (r.now) return std::move(*r.now);
  if (r.later.wait_for(s->host->release_bound) == std::future_status::ready) return r.later.get();
  if (r.lost) return std::move(*r.lost);
  return make_error(Errc::no_quorum, "release of " + std::string(s->resource()) + " not confirmed within " +
                                         std::to_string(s->host->release_bound.count()) + " ms");
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
  std::lock_guard lock(state_->mu);
  return !state_->released && !state_->lost && detail::Clock::now() < state_->deadline();
}

const std::string& LeaseView::resource() const noexcept { return state_ ? state_->resource_string() : empty_string; }
const std::vector<std::string>& LeaseView::resources() const noexcept {
  static const std::vector<std::string> none;
  return state_ ? state_->resources() : none;
}
const std::string& LeaseView::token() const noexcept { return state_ ? state_->token_string() : empty_string; }
std::uint64_t LeaseView::fence() const noexcept { return state_ ? state_->fence() : 0; }
int LeaseView::attempts() const noexcept { return state_ ? state_->attempts : 0; }

BootClock::time_point LeaseView::deadline() const noexcept {
  if (state_ == nullptr) return {};
  return state_->deadline();
}

milliseconds LeaseView::remaining() const noexcept {
  const auto left = deadline() - BootClock::now();
  return left > BootClock::duration::zero() ? std::chrono::duration_cast<milliseconds>(left)
                                                            : milliseconds{0};
}

int LeaseView::extensions() const noexcept {
  if (state_ == nullptr) return 0;
  std::lock_guard lock(state_->mu);
  return state_->extensions;
}

int LeaseView::holds() const noexcept {
  if (state_ == nullptr) return 0;
  std::lock_guard lock(state_->mu);
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
  state_->lose_if_expired(detail::Clock::now());
  std::lock_guard lock(state_->mu);
  if (!state_->lost) return std::nullopt;
  return state_->lost_error();
}

Result<ReleaseResult> Lease::release() {
  if (state_ == nullptr) return make_error(Errc::not_held, "empty lease: nothing to release");
  auto state = std::move(state_);
  return release_state(state);
}

std::future<Result<ReleaseResult>> Lease::release_async() {
  Release r;
  if (state_ == nullptr) {
    r.now = make_error(Errc::not_held, "empty lease: nothing to release");
  } else {
    const std::shared_ptr<detail::LeaseState> state = std::move(state_);
    r = begin_release(state, "release_async");
  }
  if (!r.now) return std::move(r.later);
  std::promise<Result<ReleaseResult>> ready;
  ready.set_value(std::move(*r.now));
  return ready.get_future();
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
  std::optional<Error> lost = lost_before_release(*s);
  {
    std::lock_guard lock(s->mu);
    if (s->released) return tell(make_error(Errc::not_held, "lease on " + std::string(s->resource()) + " already released"));
    s->released = true;
  }
  std::function<void(detail::LeaseHost::Task)> post;
  {
    std::lock_guard<std::mutex> lock(s->host->mu);
    post = s->host->post;
  }
  if (!post) return tell(make_error(Errc::closed, "the client is closed; the lock on " + std::string(s->resource()) + " expires by its TTL"));
  post([s, lost = std::move(lost), done = std::move(done)](AsyncClient& client) mutable {
    detail::release_lease(client, s, [lost = std::move(lost), done = std::move(done)](Result<ReleaseResult> r) {
      if (!done) return;
      if (lost) return done(std::move(*lost));
      done(std::move(r));
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
