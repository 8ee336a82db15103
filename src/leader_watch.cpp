// leader_watch.cpp — see leader_watch.hpp.
#include "leader_watch.hpp"

#include <algorithm>

#include "survey.hpp"

namespace redlock::detail {

using std::chrono::milliseconds;

LeaderWatcher::LeaderWatcher(Reports& reports, std::uint64_t id, Runtime& runtime, Transport& transport,
                             std::string name, std::string channel, milliseconds retry, milliseconds safety_net,
                             std::shared_ptr<WatchLink> link, LeaderWatchCallback callback)
    : reports_(reports),
      id_(id),
      transport_(transport),
      name_(std::move(name)),
      channel_(std::move(channel)),
      retry_(retry),
      safety_net_(safety_net),
      link_(std::move(link)),
      callback_(std::move(callback)),
      timer_(runtime.timer([this] { step({.kind = Kind::timer}); })) {}

void LeaderWatcher::step(Event e) {
  if (e.kind == Kind::end) return finish(e.closed);
  switch (state_) {
    case State::idle:
      if (e.kind == Kind::start) begin();
      return;
    case State::reading:
      if (e.kind == Kind::wake) state_ = State::reading_again;
      if (e.kind == Kind::read) on_read(*e.reading);
      return;
    case State::reading_again:
      if (e.kind == Kind::read) on_read(*e.reading);
      return;
    case State::waiting:
      if (e.kind == Kind::wake || e.kind == Kind::timer) read();
      return;
    case State::ended:
      return;
  }
}

void LeaderWatcher::begin() {
  // Without pub/sub (wake-ups off, or no subscriber possible) the watch
  // reads every retry period instead: slower to see, never blind.
  polling_ = transport_.watch(channel_, this) == WatchState::unavailable;
  watching_ = !polling_;
  read();
}

void LeaderWatcher::finish(bool closed) {
  if (state_ == State::ended) return;
  state_ = State::ended;
  if (closed && !link_->stopped.load()) call(make_error(Errc::closed, "the client was closed"));
  // Its handle goes now, not when the last hold on it does (a reading's
  // callback kept until the client is freed): a closed client leaves none.
  timer_.reset();  // (allowed inside its own fire)
  if (watching_) transport_.unwatch(channel_, this);
  watching_ = false;
  std::lock_guard<std::mutex> lock(link_->mu);
  link_->teardown = nullptr;
}

void LeaderWatcher::read() {
  // A Client's stop, seen here before its post: out of the reports (which
  // ends it, and may free this: nothing after).
  if (link_->stopped.load()) return reports_.unobserve(id_);
  timer_->stop();
  state_ = State::reading;
  reports_.leader(name_, [self = shared_from_this()](Result<LeaderStatus> r) {
    self->step({.kind = Kind::read, .reading = std::move(r)});
  });
}

void LeaderWatcher::on_read(const Result<LeaderStatus>& r) {
  const bool again = state_ == State::reading_again;
  if (link_->stopped.load()) return reports_.unobserve(id_);
  milliseconds next = polling_ ? std::min(safety_net_, retry_ * 10) : safety_net_;
  if (r) {
    backoff_ = milliseconds{0};
    // A dead leader publishes nothing: look again when its lock would run
    // out unless extended (a live one has extended it long before).
    if (r->leader) next = std::min(next, r->expires_in + milliseconds{1});
  } else {
    backoff_ = std::clamp(backoff_ * 2, retry_, safety_net_);
    next = backoff_;
  }
  tell(r);
  if (state_ == State::ended) return;  // the callback stopped it
  if (again) return read();
  state_ = State::waiting;
  timer_->start(next);
}

void LeaderWatcher::tell(const Result<LeaderStatus>& r) {
  if (link_->stopped.load() || !callback_) return;
  if (!r) {
    if (told_ == Told::error) return;
    told_ = Told::error;
  } else {
    std::optional<std::tuple<std::uint64_t, std::string, std::string, std::string>> now;
    if (r->leader) {
      // Never a term lower than one told: a reading that raced a newer
      // leader's election (no majority can back the older one since).
      if (r->leader->term < highest_term_) return;
      now.emplace(r->leader->term, r->leader->token, r->leader->identity, r->leader->value);
      highest_term_ = r->leader->term;
    }
    if (told_ == Told::reading && now == last_) return;
    told_ = Told::reading;
    last_ = std::move(now);
  }
  call(r);
}

void LeaderWatcher::call(const Result<LeaderStatus>& r) {
  if (!callback_) return;
  try {
    callback_(r);
  } catch (...) {
    // (a callback's exception is dropped, as an Observer's)
  }
}

}  // namespace redlock::detail
