// lease_service.cpp — LeaseService: taking, keeping (the watchdogs) and
// releasing one client's leases over its engine.
#include "lease_service.hpp"

#include <algorithm>
#include <bit>
#include <optional>
#include <utility>

#include "quorum.hpp"
#include "sabotage.hpp"
#include "telemetry.hpp"

namespace redlock::detail {

namespace {

using std::chrono::duration_cast;

// Timers fire this much before the validity deadline: uv timers count whole
// milliseconds from the loop's cached time, so the signal may run a little
// late; the drift allowance already covers the rest.
constexpr auto deadline_margin = milliseconds{2};

}  // namespace

LeaseService::LeaseService(Engine& engine) : engine_(engine) {}

// wheel: made at the first lease (its ticks count from then).
LeaseWheel& LeaseService::wheel() {
  if (!wheel_) wheel_.emplace(engine_.runtime(), &LeaseService::fire, this);
  return *wheel_;
}

// A client waits for live() to be zero before it closes; a service that
// goes with leases still kept (a test, the simulator) lets them go: each
// is stopped and its hold on itself dropped. Verdicts still to come would
// find them gone: the batcher is silenced first.
LeaseService::~LeaseService() {
  if (batcher_ != nullptr) {
    batcher_->silence();
    batcher_.reset();
  }
  std::vector<WheelEntry*> left;
  if (wheel_) wheel_->take_all(left);
  for (WheelEntry* e : left) {
    auto& s = *static_cast<LeaseState*>(e);
    s.stopped = true;
    std::shared_ptr<LeaseState> self = std::move(s.self);
  }
}

ExtendBatcher& LeaseService::batcher() {
  if (batcher_ == nullptr) {
    const Options& o = engine_.options();
    batcher_ = std::make_unique<ExtendBatcher>(engine_, o.extend_batch_window, o.extend_batch_max, *this);
  }
  return *batcher_;
}

void LeaseService::lock(std::vector<std::string> resources, LeaseOptions opts, std::string owner,
                        std::shared_ptr<LeaseHost> host, LeaseDone done) {
  AcquireOptions acquire = opts.acquire;
  std::vector<std::string> more(resources.size() > 1 ? resources.begin() + 1 : resources.end(), resources.end());
  auto taken = [this, opts = std::move(opts), owner = std::move(owner), host = std::move(host), more,
                done = std::move(done)](Result<Lock> r) mutable {
    if (!r) return done(std::move(r).error());
    std::shared_ptr<LeaseState> state =
        make_lease(std::move(*r), std::move(opts), std::move(owner), std::move(host), std::move(more));
    keep(state);
    done(std::move(state));
  };
  if (resources.size() == 1) return engine_.acquire(std::move(resources.front()), std::move(acquire), std::move(taken));
  engine_.acquire_many(std::move(resources), std::move(acquire), std::move(taken));
}

void LeaseService::release(const std::shared_ptr<LeaseState>& s, ReleaseCallback done) {
  stop(*s);
  if (s->multi()) {
    const std::vector<std::string>& all = s->resources();
    return engine_.release(all.front(), s->token_string(), std::move(done),
                           std::vector<std::string>(all.begin() + 1, all.end()));
  }
  engine_.release(std::string(s->resource()), std::string(s->token()), std::move(done), {},
                  s->permit() == no_permit ? std::nullopt : std::optional<std::uint32_t>(s->permit()), s->shared());
}

void LeaseService::on_batch_extended(Extendee& lease, TimePoint now, Result<Extension> r) {
  on_extended(static_cast<LeaseState&>(lease), now, std::move(r));
}

void LeaseService::fire(void* keeper, WheelEntry* entry, TimePoint now) {
  static_cast<LeaseService*>(keeper)->on_timer(*static_cast<LeaseState*>(entry), now);
}

void LeaseService::keep(const std::shared_ptr<LeaseState>& s) {
  s->self = s;
  ++live_;
  if (closed_) return shutdown(*s);
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
void LeaseService::arm_extend(LeaseState& s, TimePoint now, Clock::duration in) {
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
  wheel().arm(&s, due);
}

// grid_point: the slot of `point` in grid_points_ (a multiplicative hash of
// its time, so points of every grid spread over the slots).
LeaseService::GridPoint& LeaseService::grid_point(TimePoint point) {
  const auto t = static_cast<std::uint64_t>(point.time_since_epoch().count());
  return grid_points_[(t * 0x9E3779B97F4A7C15ULL) >> 58];  // 64 slots
}

void LeaseService::arm_deadline(LeaseState& s) {
  s.extend_planned = false;
  wheel().arm(&s, s.deadline() - deadline_margin);
}

void LeaseService::on_timer(LeaseState& s, TimePoint now) {
  if (s.stopped) {
    if (!s.extending) {
      tell_loss(s);  // lost on another thread, then released before the loop saw it
      finish(s);
    }
    return;  // else the verdict lets it go
  }
  if (now + deadline_margin >= s.deadline()) {
    if (!sabotage().deposed_on_notice) return on_deadline(s);
    // The broken variant: past its deadline the lease goes on extending,
    // and is lost only when an answer says so (refused, or too late).
    extend_now(s, now);
    return wheel().arm(&s, now + engine_.options().retry_delay);
  }
  if (s.extend_planned) extend_now(s, now);
  if (!s.stopped) arm_deadline(s);  // while the extension travels (or never comes: a cap)
}

LeaseState::Cap LeaseService::cap_reached(const LeaseState& s, TimePoint now) const {
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

void LeaseService::extend_now(LeaseState& s, TimePoint now) {
  if (s.stopped || s.extending) return;
  if (LeaseState::Cap cap = cap_reached(s, now); cap != LeaseState::Cap::none) {
    s.cap = cap;
    return;  // the deadline declares the loss
  }
  s.extending = true;
  batcher().submit(&s, now);  // `self` holds the record while extending
}

// on_extended: `now` is when the verdict was made (the round's reading of
// the clock, a moment ago): the next extension is planned from it.
void LeaseService::on_extended(LeaseState& s, TimePoint now, Result<Extension> r) {
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

void LeaseService::on_deadline(LeaseState& s) {
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

void LeaseService::lose(LeaseState& s, std::string why, std::vector<NodeOutcome> nodes) {
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
void LeaseService::tell_loss(LeaseState& s) {
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

void LeaseService::stop(LeaseState& s) {
  if (s.stopped || s.self == nullptr) return;
  s.stopped = true;
  wheel().arm(&s, engine_.runtime().now());  // finish, on a later loop turn
}

// finish: stopped, no extension in flight, its timer gone — let the record
// go (the last reference may be this one: nothing touches it after).
void LeaseService::finish(LeaseState& s) {
  wheel().disarm(&s);
  std::shared_ptr<LeaseState> self = std::move(s.self);
  --live_;
  self.reset();
  if (live_ == 0 && on_idle) on_idle();
}

void LeaseService::shutdown(LeaseState& s) {
  if (s.stopped) return;
  lose(s, "the client was closed; the lease is no longer extended");
}

// close: every lease kept is lost (a stopped one still had its finish in
// the wheel: it goes back there); the batcher goes, telling the leases it
// still queues Errc::closed (their watchdogs are stopped: nothing more).
void LeaseService::close() {
  if (closed_) return;
  closed_ = true;
  std::vector<WheelEntry*> kept;
  if (wheel_) wheel_->take_all(kept);
  const TimePoint now = engine_.runtime().now();
  for (WheelEntry* e : kept) {
    auto& s = *static_cast<LeaseState*>(e);
    if (s.stopped) {
      wheel().arm(&s, now);
    } else {
      shutdown(s);
    }
  }
  batcher_.reset();
}

}  // namespace redlock::detail
