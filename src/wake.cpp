// wake.cpp — the pub/sub side of waiting. See wake.hpp.
#include "wake.hpp"

#include <algorithm>

#include "connection.hpp"

namespace redlock::detail {

// ---- Subscriber -----------------------------------------------------------------

Subscriber::Subscriber(Runtime& runtime, WireFactory& wires, NodeAddress address, const Options& options,
                       WakeHub& hub, std::function<void()> on_closed)
    : runtime_(runtime),
      wires_(wires),
      address_(std::move(address)),
      options_(options),
      hub_(hub),
      on_closed_(std::move(on_closed)),
      anchor_(options.prefix + "wake-anchor"),
      timer_(runtime.timer([this] { on_timer(); })) {}

void Subscriber::start() { connect(); }

void Subscriber::connect() {
  if (closing_) return;
  wire_ = wires_.connect(address_, *this);
  connected_ = false;
  auth_pending_ = 0;
  ++connections_;
  timer_->start(options_.connect_timeout);
  if (const AuthCommand auth(address_); auth.argc > 0) {
    if (!wire_->write(auth.args())) return drop();
    auth_pending_ = 1;
  }
  // The anchor, and everything watched right now, in one SUBSCRIBE. The
  // anchor stays subscribed for the connection's life: hiredis 0.14 leaves
  // subscribed mode when an UNSUBSCRIBE reply counts 0 subscriptions, and a
  // SUBSCRIBE reply already on its way would then find no callback and
  // abort the process (async.c's assertion).
  std::vector<std::string_view> argv{"SUBSCRIBE", anchor_};
  for (const auto& [channel, listeners] : hub_.listeners()) argv.push_back(channel);
  if (!wire_->write(argv)) drop();
}

void Subscriber::subscribe(const std::string& channel) {
  if (wire_ == nullptr) return;  // subscribed on the next connect
  const std::string_view argv[2] = {"SUBSCRIBE", channel};
  if (!wire_->write(argv)) drop();
}

void Subscriber::unsubscribe(const std::string& channel) {
  if (channel == anchor_) return;
  confirmed_.erase(channel);
  if (wire_ == nullptr) return;
  const std::string_view argv[2] = {"UNSUBSCRIBE", channel};
  wire_->write(argv);  // refused only by a failing connection, whose loss is reported anyway
}

void Subscriber::on_connected() {
  connected_ = true;
  failures_ = 0;
  timer_->stop();
}

// on_reply: AUTH's answer first, then pub/sub messages: ["subscribe",
// channel, count], ["message", channel, payload], ["unsubscribe", …].
void Subscriber::on_reply(const WireReply& reply) {
  if (auth_pending_ > 0) {
    --auth_pending_;
    if (reply.type == WireReply::Type::error) drop();  // the command connection reports the reason
    return;
  }
  if (reply.type != WireReply::Type::array || reply.elements.size() < 3) return;
  const std::string_view kind = reply.elements[0].str;
  const std::string channel(reply.elements[1].str);
  if (kind == "message") {
    hub_.released(channel);
  } else if (kind == "subscribe" && channel != anchor_) {
    if (hub_.listeners().count(channel) == 0) {
      unsubscribe(channel);  // its last watcher left before the confirmation came
    } else if (confirmed_.insert(channel).second) {
      hub_.confirmed(channel, /*resubscribed=*/connections_ > 1);
    }
  }
}

void Subscriber::on_lost(std::string_view) { drop(); }

// drop lets the connection go; the watchers of what it had confirmed can
// no longer count on it.
void Subscriber::drop() {
  if (wire_ == nullptr) return;
  wire_.reset();
  connected_ = false;
  for (const std::string& channel : confirmed_) hub_.unconfirmed(channel);
  confirmed_.clear();
  schedule_reconnect();
}

void Subscriber::schedule_reconnect() {
  if (closing_) return;
  timer_->start(reconnect_delay(options_, failures_, runtime_));
}

void Subscriber::on_timer() {
  if (finished_) return report_closed(timer_, on_closed_);  // on a later turn than close()
  if (closing_) return;
  if (wire_ == nullptr) return connect();
  if (!connected_) drop();  // the connect took too long
}

void Subscriber::close() {
  if (closing_) return;
  closing_ = true;
  drop();  // pub/sub has nothing to flush
  finished_ = true;
  timer_->start(std::chrono::milliseconds{0});
}

// ---- WakeHub --------------------------------------------------------------------

WakeHub::WakeHub(Runtime& runtime, WireFactory& wires, const std::vector<NodeAddress>& nodes,
                 const Options& options)
    : runtime_(runtime), wires_(wires), nodes_(nodes), options_(options) {}

WatchState WakeHub::watch(const std::string& channel, WakeListener* listener) {
  if (!options_.wake_ups || closing_) return WatchState::unavailable;
  if (subscribers_.empty()) {
    for (const NodeAddress& address : nodes_) {
      subscribers_.push_back(
          std::make_unique<Subscriber>(runtime_, wires_, address, options_, *this, [this] { subscriber_closed(); }));
      ++open_subscribers_;
    }
    for (auto& s : subscribers_) s->start();
  }
  auto& listeners = listeners_[channel];
  listeners.push_back(listener);
  if (listeners.size() == 1) {
    for (auto& s : subscribers_) s->subscribe(channel);
    return WatchState::pending;
  }
  return confirmations_[channel] > 0 ? WatchState::ready : WatchState::pending;
}

void WakeHub::unwatch(const std::string& channel, WakeListener* listener) {
  auto it = listeners_.find(channel);
  if (it == listeners_.end()) return;
  auto& v = it->second;
  v.erase(std::remove(v.begin(), v.end(), listener), v.end());
  if (!v.empty()) return;
  listeners_.erase(it);
  confirmations_.erase(channel);
  for (auto& s : subscribers_) s->unsubscribe(channel);
}

void WakeHub::confirmed(const std::string& channel, bool resubscribed) {
  const int before = confirmations_[channel]++;
  if (resubscribed) {
    wake(channel, WakeListener::Why::resubscribed);
  } else if (before == 0) {
    wake(channel, WakeListener::Why::subscribed);
  }
}

void WakeHub::unconfirmed(const std::string& channel) {
  auto it = confirmations_.find(channel);
  if (it != confirmations_.end() && it->second > 0) --it->second;
}

void WakeHub::released(const std::string& channel) { wake(channel, WakeListener::Why::released); }

void WakeHub::wake(const std::string& channel, WakeListener::Why why) {
  auto it = listeners_.find(channel);
  if (it == listeners_.end()) return;
  const std::vector<WakeListener*> listeners = it->second;  // a listener only arms a timer, but be safe
  for (WakeListener* l : listeners) l->on_wake(why);
}

void WakeHub::close(std::function<void()> on_closed) {
  closing_ = true;
  on_closed_ = std::move(on_closed);
  if (open_subscribers_ == 0) {
    if (on_closed_) std::exchange(on_closed_, nullptr)();
    return;
  }
  for (auto& s : subscribers_) s->close();
}

void WakeHub::subscriber_closed() {
  if (--open_subscribers_ == 0 && on_closed_) std::exchange(on_closed_, nullptr)();
}

}  // namespace redlock::detail
