// waiter.cpp — see waiter.hpp.
#include "waiter.hpp"

#include <algorithm>

#include "engine.hpp"
#include "keys.hpp"
#include "operation.hpp"
#include "sabotage.hpp"

namespace redlock::detail {

namespace {

// max_fair_spread: a fair waiter's safety net is wake_safety_net × its
// place, up to this many; waiters up to this place also check on a queue
// that stopped moving (Waiter::queue_moved).
constexpr long long max_fair_spread = 8;

}  // namespace

Waiter::Waiter(Engine& engine, AcquireOperation& op, const LockKeys& keys, TimePoint deadline, bool fair,
               bool tries_once, bool caller_token)
    : engine_(engine),
      op_(op),
      keys_(keys),
      deadline_(deadline),
      fair_(fair),
      tries_once_(tries_once),
      caller_token_(caller_token) {}

const Options& Waiter::options() const noexcept { return engine_.options(); }

Waiter::Next Waiter::step(const Event& e) {
  switch (e.kind) {
    case Kind::begin: return begin(e);
    case Kind::sent: sent(); return {};
    case Kind::fence: to(State::fencing); return {};
    case Kind::failed: return failed(e);
    case Kind::released: return fair_ ? fair_released(e) : woken(e);
    case Kind::subscribed: listening_ = true; return woken(e);
    case Kind::resubscribed: return woken(e);
    case Kind::turn: return line_turn(e);
    case Kind::end: end(e.took); return {};
  }
  return {};
}

// begin: no barging — while this client's line for the lock is not empty,
// a new waiter joins its end instead of trying ahead of it. A fair
// waiter's first round already joins the queues: it listens from the
// start, so that a release naming it is heard (with the channel still
// subscribed — WakeHub::linger — at no cost).
Waiter::Next Waiter::begin(const Event& e) {
  if (uses_line() && engine_.line_busy(keys_.key) && e.now < deadline_) return queue_up(wait_left(e.now));
  if (fair_ && options().wake_ups && e.now < deadline_) watch_all();
  return {Next::Do::attempt};
}

void Waiter::sent() {
  woken_attempt_ = wake_pending_;
  wake_pending_ = false;
  named_head_ = false;
  need_fix_ = false;
  sent_listening_ = listening_;
  // Confirmed on a master before the attempt is written there, a channel's
  // subscription was made before the attempt ran there: a release after
  // the attempt is then published to this client (wait_for_release).
  if (!fair_ && !tries_once_ && options().wake_ups) sent_heard_ = heard();
  const std::size_t n = engine_.transport().size();
  turns_ = QuorumTally(n, lock_rule(RoundMode::majority, n));
  to(State::attempting);
}

// failed: the attempt failed; plan the next while the wait lasts.
Waiter::Next Waiter::failed(const Event& e) {
  const Failure& f = *e.failure;
  const Options& o = options();
  if (fair_) {
    need_fix_ = f.fix_ticket;
    rank_ = f.rank;
  }
  const milliseconds left = wait_left(e.now);
  to(State::sleeping);
  // Some masters said yes, yet no majority: contenders split the votes and
  // perhaps nobody holds the lock. Their rollbacks announce nothing, so a
  // waiter does not only wait for a release: it retries after a random,
  // growing delay (reset by a clean "held" or a notification).
  const bool split = f.code == Errc::held && f.yes > 0;
  if (f.code == Errc::held && watching_ && woken_attempt_) {
    // A woken attempt lost the race: somebody else reacts to the same
    // releases. Until then the waiter reacted at once (spread 0). The
    // widest spread is the safety net's period: a waiter tries about that
    // often anyway.
    wake_spread_ = std::clamp(wake_spread_ * 2, o.wake_jitter + milliseconds{1}, std::max(o.wake_safety_net, o.wake_jitter));
  }
  split_backoff_ = split ? std::min(std::max(split_backoff_ * 2, o.retry_delay + o.retry_jitter), o.wake_safety_net)
                         : milliseconds{0};
  if (f.code == Errc::held) {
    const std::optional<Next> next = fair_ ? fair_wait(*f.nodes, left) : wait_for_release(*f.nodes, left);
    if (next) return *next;
  }
  return arm(std::min(o.retry_delay + engine_.runtime().random_delay(o.retry_jitter), left));
}

// wait_for_release: the lock is held elsewhere; wait for it without polling
// (docs/design.md, "Waiting").
std::optional<Waiter::Next> Waiter::wait_for_release(const std::vector<NodeOutcome>& nodes, milliseconds left) {
  const Options& o = options();
  if (!o.wake_ups) return std::nullopt;
  if (!watching_) {
    // Another waiter of this client is first in line: sleep behind it.
    if (uses_line() && !in_line_ && engine_.line_busy(keys_.key)) return queue_up(left);
    const WatchState watch = watch_all();
    if (watch == WatchState::unavailable) return std::nullopt;
    if (uses_line() && !in_line_) enter_line();  // first: the line was empty
    if (watch == WatchState::pending) {
      // Retry once the subscription is confirmed (a release from then on is
      // heard), or after one node timeout at the latest.
      to(State::subscribing);
      return arm(std::min(o.node_timeout, left));
    }
    // Already subscribed. A release between our attempt and now was
    // published before we listened: retry once at once — unless the
    // channels were heard from before the attempt went out and nothing
    // came since (their mark is unchanged): every release after the
    // attempt is then still to come, to this waiter, and it waits for it.
    if (!sent_heard_ || heard() != sent_heard_) return arm(milliseconds{0});
  }
  if (woken_) {  // a release was published while our attempt was on its way
    woken_ = false;
    wake_pending_ = true;
    return arm(std::min(wake_jitter(), left));
  }
  // Wait for a notification, the holder's TTL, or the safety net.
  milliseconds wait = o.wake_safety_net;
  if (const std::optional<milliseconds> free_in = quorum_free_in(nodes, majority_of(nodes.size()))) {
    wait = std::min(wait, *free_in + milliseconds{1} + wake_jitter());
  }
  if (split_backoff_ > milliseconds{0}) wait = std::min(wait, engine_.runtime().random_delay(split_backoff_));
  return arm(std::min(wait, left));
}

// fair_wait: the sleep of a fair waiter after an attempt that did not take
// the lock (its first round joined the queues). It subscribed before that
// round; if the subscription was not confirmed when the round went out, it
// waits for the confirmation and tries again (a turn named before it
// listened went unheard). The head waits for its turn's message or the
// holder's TTL; the second the same plus the head's grace (then it checks
// whether the head came); the others for a message naming them — their
// safety net grows with their place up to 8× (a waiter far back is named
// long before it). No sleep is longer than fair_refresh: each round
// re-stamps the waiter's place, which lapses fair_life after the last one
// (a killed waiter's).
std::optional<Waiter::Next> Waiter::fair_wait(const std::vector<NodeOutcome>& nodes, milliseconds left) {
  const Options& o = options();
  if (!o.wake_ups) return std::nullopt;
  if (!watching_ && watch_all() == WatchState::unavailable) return std::nullopt;
  if (!listening_ && !subscribe_waited_) {
    // Try again once the subscription is confirmed (a release from then on
    // is heard), or after one node timeout at the latest — once: a
    // subscription that no master confirms (pub/sub refused, subscribers
    // down) leaves the waiter to its safety net, not to a poll every node
    // timeout.
    subscribe_waited_ = true;
    to(State::subscribing);
    return arm(std::min(o.node_timeout, left));
  }
  // Not yet listening when the attempt went out: a release since then that
  // named it as the head went unheard — it tries once more at once.
  if (!sent_listening_ && rank_ <= 0) woken_ = true;
  if (woken_ || need_fix_) {  // named the head while the attempt was on its way; or the ticket needs fixing
    woken_ = false;
    return arm(milliseconds{0});
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
  return arm(std::min({wait, fair_refresh(o), left}));
}

// woken: a release was published (or the subscription came up, or came
// back): retry soon. During an attempt, remember it for when it ends.
Waiter::Next Waiter::woken(const Event& e) {
  switch (state_) {
    case State::attempting:
    case State::fencing:
      if (e.kind != Kind::subscribed) woken_ = true;
      return {};
    case State::subscribing:
      to(State::sleeping);
      if (e.kind == Kind::subscribed) return arm(milliseconds{0});  // a release from now on is heard
      [[fallthrough]];
    case State::sleeping: {
      if (e.kind == Kind::subscribed) return {};
      // One reaction per failed attempt: a waiter whose retry a notification
      // already brought forward ignores the next ones (in a crowd, handoffs
      // come faster than a wide spread: re-drawing on each would try every
      // waiter about every √(2 · handoff · spread), not every spread).
      if (wake_pending_) return {};
      wake_pending_ = true;
      // A retry already due sooner stays: in a crowd every release would
      // otherwise push back the waiters whose turn was coming.
      const milliseconds left = wait_left(e.now);
      const milliseconds delay = std::clamp(wake_jitter(), milliseconds{0}, left);
      if (e.due <= e.now + delay) return {};
      return arm(delay);
    }
    case State::idle:
    case State::queued:  // not watching: nothing to wake
    case State::done: return {};
  }
  return {};
}

// fair_released: "turn HEAD SECOND" names the next two of a master's
// queue: the head tries at once, the second checks once the head's turn
// (grace) is over — it takes the head out of the queue if that one never
// came. Every other fair waiter sleeps on: a release wakes one client, not
// all. Any other message is a release by a holder that was not fair, which
// names nobody: the waiter that was the head at its last attempt tries.
Waiter::Next Waiter::fair_released(const Event& e) {
  std::string_view message = e.message;
  bool head = false, second = false;
  if (sabotage().fair_no_turn && message.starts_with("turn ")) return {};
  if (message.starts_with("turn ")) {
    // Every master publishes the same text for one release: a new text is
    // a new release, and the queue moved up by one.
    const bool moved = message != last_turn_;
    if (moved) last_turn_ = message;
    message.remove_prefix(5);
    const std::size_t space = message.find(' ');
    const std::string_view id = op_.fair_id();
    head = message.substr(0, space) == id;
    second = space != std::string_view::npos && message.substr(space + 1) == id;
    if (!head && !second && moved) return queue_moved(e);
  } else {
    head = rank_ == 0;
  }
  if (!head && !second) return {};
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
      return {};
    case State::sleeping:
    case State::subscribing: {
      const milliseconds delay = majority ? milliseconds{0}
                                 : head   ? options().node_timeout
                                          : options().fair_grace + milliseconds{1};
      named_head_ = named_head_ || head;
      if (e.due <= e.now + delay) return {};
      return arm(std::min(delay, wait_left(e.now)));
    }
    case State::idle:
    case State::fencing:
    case State::queued:
    case State::done: return {};
  }
  return {};
}

// queue_moved: a release named two others. A waiter near the front (by its
// place at its last attempt, less one per release since) checks, if the
// queue stops moving, after one grace per place ahead of it: so behind
// waiters that cannot come (dead, paused: nobody takes the lock, nobody
// releases) the first live one takes them out within a few graces, while a
// queue that moves never lets the check fire. Waiters further back than
// max_fair_spread sleep their longest safety net again, capped at a
// refresh: while the queue moves they send only the rounds that keep
// their places. It never puts off the try of a waiter that a master named
// the head since its last attempt: masters whose queues differ name
// different heads for one release, and the head's try must not wait for
// the queue to stop moving (others would end its turn meanwhile).
Waiter::Next Waiter::queue_moved(const Event& e) {
  const TimePoint now = e.now;
  if (rank_ > 2) --rank_;
  if (rank_ < 2) return {};
  if (state_ != State::sleeping && state_ != State::subscribing) return {};
  // The queue moves: whatever this waiter meant to check (a head that had
  // not come yet) is moot; it sleeps by its new place.
  const milliseconds wait = rank_ <= max_fair_spread ? options().fair_grace * rank_ + milliseconds{1}
                                                     : options().wake_safety_net * max_fair_spread;
  if (named_head_ && e.due > now) return {};
  return arm(std::min({wait, fair_refresh(options()), wait_left(now)}));
}

// line_turn: the waiter before this one left the line, so this one is
// first now: it listens for releases from here on. If the one before left
// holding the lock, its release will be published: wait for it (or the
// safety net). Otherwise the lock may be free: try at once. A queued
// waiter trying at its deadline (attempting) just carries on.
Waiter::Next Waiter::line_turn(const Event& e) {
  if (state_ != State::queued) return {};
  to(State::sleeping);
  const milliseconds left = wait_left(e.now);
  if (watch_all() == WatchState::ready && e.took) return arm(std::min(options().wake_safety_net, left));
  return arm(milliseconds{0});
}

// end: the next in line starts listening before this one stops, so the
// channel stays subscribed between them.
void Waiter::end(bool took) {
  to(State::done);
  if (in_line_) {
    in_line_ = false;
    engine_.leave_line(keys_.key, &op_, took);
  }
  stop_watching();
}

bool Waiter::uses_line() const noexcept {
  // (A semaphore frees one of P permits at a time: a line, which lets one
  // waiter of this client try at a time, would hold back the others.)
  return options().wake_ups && !keys_.multi() && !keys_.semaphore() && !caller_token_ && !fair_;
}

void Waiter::enter_line() {
  in_line_ = true;
  engine_.join_line(keys_.key, &op_);
}

Waiter::Next Waiter::queue_up(milliseconds left) {
  enter_line();
  to(State::queued);
  return arm(left);
}

milliseconds Waiter::wait_left(TimePoint at) const {
  return std::max(std::chrono::ceil<milliseconds>(deadline_ - at), milliseconds{0});
}

milliseconds Waiter::wake_jitter() { return engine_.runtime().random_delay(wake_spread_); }

WatchState Waiter::watch_all() {
  // Every resource's channel (a multi-resource lock frees when any of its
  // parts does); ready only when all of them are.
  const std::vector<std::string>& all = channels();
  WatchState watch = WatchState::ready;
  for (std::size_t i = 0; i < all.size(); ++i) {
    const WatchState w = engine_.transport().watch(all[i], &op_);
    if (w == WatchState::unavailable) {
      for (std::size_t j = 0; j < i; ++j) engine_.transport().unwatch(all[j], &op_);
      return WatchState::unavailable;
    }
    if (w == WatchState::pending) watch = WatchState::pending;
  }
  watching_ = true;
  woken_ = false;
  listening_ = watch == WatchState::ready;
  return watch;
}

void Waiter::stop_watching() {
  if (!watching_) return;
  for (const std::string& c : channels()) engine_.transport().unwatch(c, &op_);
  watching_ = false;
}

const std::vector<std::string>& Waiter::channels() {
  if (channels_.empty()) {
    channels_.push_back(keys_.channel_name());
    for (const std::string& key : keys_.more_keys) channels_.push_back(channel_of(key));
  }
  return channels_;
}

std::optional<std::uint64_t> Waiter::heard() {
  std::optional<std::uint64_t> mark;
  for (const std::string& channel : channels()) {
    const std::optional<std::uint64_t> one = engine_.transport().heard(channel);
    if (!one) return std::nullopt;
    mark = std::max(mark.value_or(0), *one);
  }
  return mark;
}

}  // namespace redlock::detail
