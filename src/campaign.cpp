// campaign.cpp — see campaign.hpp.
#include "campaign.hpp"

#include <algorithm>

#include "leader.hpp"
#include "lease_service.hpp"
#include "survey.hpp"

namespace redlock::detail {

namespace {

// campaign_round: the longest acquire wait of one round of a campaign; a
// campaign that waits longer runs more rounds.
constexpr std::chrono::milliseconds campaign_round{60000};

Error cancelled_error(const std::string& name) {
  return make_error(Errc::cancelled, "campaign for " + name + " cancelled by the caller");
}

}  // namespace

std::string identity_of(std::string_view token) {
  const std::optional<Owner> o = owner_of(token);
  if (!o) return {};
  return o->host + ":" + std::to_string(o->pid) + (o->label.empty() ? "" : ":" + o->label);
}

Campaign::Campaign(Runtime& runtime, LeaseService& leases, Reports& reports, const Options& options,
                   std::shared_ptr<LeaseHost> host, std::string name, CampaignOptions opts, Done done,
                   std::function<void()> on_end)
    : runtime_(runtime),
      leases_(leases),
      reports_(reports),
      options_(options),
      host_(std::move(host)),
      name_(std::move(name)),
      opts_(std::move(opts)),
      done_(std::move(done)),
      on_end_(std::move(on_end)),
      timer_(runtime.timer([this] { step({.kind = Kind::timer}); })) {}

void Campaign::step(Event e) {
  switch (state_) {
    case State::idle:
      if (e.kind == Kind::start) return begin();
      if (e.kind == Kind::refused) return finish(std::move(*e.failure));
      if (e.kind == Kind::cancel) return finish(cancelled_error(name_));
      return;
    case State::locking:
      // (A cancel reaches the acquire through its own token; a close, as
      // the lease service closes.)
      if (e.kind != Kind::leased) return;
      if (!*e.leased) return failed(std::move(*e.leased).error());
      lease_ = std::move(**e.leased);
      return proclaim();
    case State::proclaiming:
      if (e.kind != Kind::recorded) return;
      if (!e.failure && leading()) return finish(std::move(lease_));
      // On too few masters — or in time on a majority, but the lease is
      // over now (the process was stopped while the record travelled):
      // never told "elected" with a leadership that has ended.
      why_ = e.failure ? std::move(*e.failure)
                       : make_error(Errc::too_late, "campaign for " + name_ +
                                                        ": the lease ended before its record was written "
                                                        "(the process stopped, or the round was slow)");
      return take_back();
    case State::taking_back:
      if (e.kind != Kind::taken_back) return;
      lease_.reset();
      return failed(std::move(why_));
    case State::backing_off:
      if (e.kind == Kind::timer) return lock_round();
      if (e.kind == Kind::cancel) return finish(cancelled_error(name_));
      if (e.kind == Kind::close) return finish(make_error(Errc::closed, "the client was closed"));
      return;
    case State::done:
      return;
  }
}

void Campaign::begin() {
  std::string problem = leader_problem(opts_.identity, opts_.value);
  if (problem.empty() && opts_.wait < std::chrono::milliseconds{0}) problem = "wait must not be negative";
  if (!problem.empty()) {
    Error e = make_error(Errc::invalid_argument, "campaign for " + name_ + ": " + problem);
    runtime_.post([self = shared_from_this(), e = std::move(e)]() mutable {
      self->step({.kind = Kind::refused, .failure = std::move(e)});
    });
    return;
  }
  forever_ = opts_.wait == CampaignOptions::forever;
  if (!forever_) until_ = runtime_.now() + opts_.wait;
  if (opts_.cancel.stop_possible()) {
    cancel_signal_ = runtime_.signal([this] { step({.kind = Kind::cancel}); });
    on_cancel_.emplace(opts_.cancel, std::function<void()>([signal = cancel_signal_.get()] { signal->raise(); }));
  }
  lock_round();
}

void Campaign::lock_round() {
  state_ = State::locking;
  LeaseOptions lo;
  lo.acquire.ttl = opts_.ttl;
  lo.acquire.fence = true;
  lo.acquire.cancel = opts_.cancel;
  lo.on_lost = opts_.on_deposed;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until_ - runtime_.now());
  lo.acquire.wait = forever_ ? campaign_round : std::clamp(left, std::chrono::milliseconds{0}, campaign_round);
  if (std::string problem = lease_options_problem(lo); !problem.empty()) {
    return finish(make_error(Errc::invalid_argument, "campaign for " + name_ + ": " + problem));
  }
  leases_.lock({name_}, std::move(lo), {}, host_, [self = shared_from_this()](Result<std::shared_ptr<LeaseState>> r) {
    self->step({.kind = Kind::leased, .leased = std::move(r)});
  });
}

void Campaign::proclaim() {
  state_ = State::proclaiming;
  identity_ = opts_.identity.empty() ? identity_of(lease_->token()) : opts_.identity;
  reports_.proclaim({.resource = name_,
                     .token = std::string(lease_->token()),
                     .term = lease_->fence(),
                     .rev = 1,
                     .identity = identity_,
                     .value = opts_.value},
                    [self = shared_from_this()](Result<void> w) {
                      Event e{.kind = Kind::recorded};
                      if (!w) e.failure = std::move(w).error();
                      self->step(std::move(e));
                    });
}

// leading: the lease is not lost and its deadline is ahead (as
// LeaseView::valid says it for the handle).
bool Campaign::leading() const {
  std::lock_guard lock(lease_->mu);
  return !lease_->lost && runtime_.now() < lease_->deadline();
}

// take_back: the record reached too few masters — no leader observers can
// see. It goes where it landed, then the lock, and the campaign goes on.
void Campaign::take_back() {
  state_ = State::taking_back;
  reports_.resign(name_, std::string(lease_->token()), [self = shared_from_this()](Result<void>) {
    self->leases_.release(self->lease_,
                          [self](Result<ReleaseResult>) { self->step({.kind = Kind::taken_back}); });
  });
}

void Campaign::failed(Error why) {
  const bool curable = why.code == Errc::held || why.code == Errc::no_quorum || why.code == Errc::validity_too_short ||
                       why.code == Errc::too_late;
  if (!curable) return finish(std::move(why));
  if (opts_.cancel.stop_requested()) return finish(cancelled_error(name_));
  const TimePoint now = runtime_.now();
  if (!forever_ && now >= until_) return finish(std::move(why));
  if (why.code == Errc::held) {
    backoff_ = std::chrono::milliseconds{0};
    return lock_round();
  }
  const Options& o = options_;
  backoff_ = std::clamp(backoff_ * 2, o.retry_delay + o.retry_jitter, std::max(o.wake_safety_net, o.retry_delay));
  auto sleep = backoff_;
  if (!forever_) sleep = std::min(sleep, std::chrono::ceil<std::chrono::milliseconds>(until_ - now));
  state_ = State::backing_off;
  timer_->start(sleep);
}

void Campaign::finish(Result<std::shared_ptr<LeaseState>> r) {
  auto self = shared_from_this();  // on_end may drop the owner's hold
  state_ = State::done;
  // Its handles go now, not when the last hold on it does (a callback
  // stored until the client is freed): a closed client leaves none open.
  timer_.reset();  // (allowed inside its own fire)
  on_cancel_.reset();
  cancel_signal_.reset();
  if (Done d = std::move(done_)) d(std::move(r));
  if (auto end = std::move(on_end_)) end();
}

}  // namespace redlock::detail
