// wake.cpp — the pub/sub side of waiting. See wake.hpp.
#include "wake.hpp"
#include "resp.hpp"
#include "sentinel_watch.hpp"

#include <algorithm>


namespace redlock::detail {

// ---- Subscriber -----------------------------------------------------------------

Subscriber::Subscriber(Runtime& runtime, WireFactory& wires, NodeAddress address, std::size_t index,
                       const Options& options, WakeHub& hub, std::function<void()> on_closed)
    : address_(std::move(address)),
      index_(index),
      hub_(hub),
      anchor_(options.prefix + "wake-anchor"),
      conn_(runtime, wires, address_, options, *this, std::move(on_closed)) {}

void Subscriber::start() {
  if (has_target(address_)) conn_.start();
}

void Subscriber::retarget(const Endpoint& primary, std::string_view why) {
  const bool same = address_.host == primary.host && address_.port == primary.port;
  address_.host = primary.host;
  address_.port = primary.port;
  if (same && conn_.state() != Connection::State::idle) return;
  conn_.redial(std::string(why) + ", " + address_.display());
}

// on_open: the anchor, and everything watched right now, in one SUBSCRIBE.
// The anchor stays subscribed for the connection's life, so the connection
// never leaves subscribed mode (an UNSUBSCRIBE reply counting 0 would end
// it), and its confirmation completes the handshake.
bool Subscriber::on_open() {
  ++connections_;
  std::vector<std::string_view> argv{"SUBSCRIBE", anchor_};
  for (const auto& [channel, listeners] : hub_.listeners()) argv.push_back(channel);
  return conn_.write(argv);
}

void Subscriber::subscribe(const std::string& channel) {
  if (!conn_.live()) return;  // subscribed on the next connect
  const std::string_view argv[2] = {"SUBSCRIBE", channel};
  if (!conn_.write(argv)) conn_.drop("cannot queue SUBSCRIBE");
}

void Subscriber::unsubscribe(const std::string& channel) {
  if (channel == anchor_) return;
  confirmed_.erase(channel);
  const std::string_view argv[2] = {"UNSUBSCRIBE", channel};
  conn_.write(argv);  // refused only without a connection, or by a failing one, whose loss is reported anyway
}

// on_reply: pub/sub messages: ["subscribe", channel, count], ["message",
// channel, payload], ["unsubscribe", …] (AUTH's answer is the
// Connection's). Anything else is no answer to what this connection sends
// (a server that is broken, or not a Redis): it ends the connection.
void Subscriber::on_reply(const WireReply& reply) {
  if (reply.type == WireReply::Type::error) return conn_.drop("SUBSCRIBE failed: " + resp::server_text(reply.str));
  const bool pushed = reply.type == WireReply::Type::array && reply.elements.size() == 3 &&
                      reply.elements[0].type == WireReply::Type::string;
  const std::string_view kind = pushed ? reply.elements[0].str : std::string_view();
  if (kind != "message" && kind != "subscribe" && kind != "unsubscribe") {
    return conn_.drop("unsolicited reply on the pub/sub connection (not a subscribe, unsubscribe or message); "
                      "reconnecting");
  }
  const std::string channel(reply.elements[1].str);
  if (kind == "message") {
    hub_.released(channel, reply.elements[2].str);
  } else if (kind == "subscribe" && channel == anchor_) {
    conn_.ready();
  } else if (kind == "subscribe") {
    if (hub_.listeners().count(channel) == 0) {
      unsubscribe(channel);  // its last watcher left before the confirmation came
    } else if (confirmed_.insert(channel).second) {
      hub_.confirmed(channel, /*resubscribed=*/connections_ > 1);
    }
  }
}

// on_down: the connection went; the watchers of what it had confirmed can
// no longer count on it. The Connection reconnects after its backoff.
void Subscriber::on_down(std::string_view) {
  for (const std::string& channel : confirmed_) hub_.unconfirmed(channel);
  confirmed_.clear();
}

void Subscriber::on_state(Connection::State from, Connection::State to, std::string_view reason) {
  if (Telemetry* t = hub_.telemetry()) {
    t->connection(index_, true, static_cast<ConnectionState>(from), static_cast<ConnectionState>(to), reason);
  }
}

void Subscriber::close() { conn_.close(std::chrono::milliseconds{0}); }  // pub/sub has nothing to flush

// ---- WakeHub --------------------------------------------------------------------

WakeHub::WakeHub(Runtime& runtime, WireFactory& wires, const std::vector<NodeAddress>& nodes,
                 const Options& options)
    : runtime_(runtime), wires_(wires), options_(options) {
  for (const NodeAddress& node : nodes) nodes_.push_back(serving_address(node));
}

void WakeHub::retarget(std::size_t index, const Endpoint& primary, std::string_view why) {
  if (index >= nodes_.size() || closing_) return;
  nodes_[index].host = primary.host;
  nodes_[index].port = primary.port;
  if (index < subscribers_.size()) subscribers_[index]->retarget(primary, why);
}

WatchState WakeHub::watch(const std::string& channel, WakeListener* listener) {
  if (!options_.wake_ups || closing_) return WatchState::unavailable;
  if (subscribers_.empty()) {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      subscribers_.push_back(std::make_unique<Subscriber>(runtime_, wires_, nodes_[i], i, options_, *this,
                                                          [this] { subscriber_closed(); }));
      ++open_subscribers_;
    }
    for (auto& s : subscribers_) s->start();
  }
  auto [it, fresh] = listeners_.try_emplace(channel);
  it->second.push_back(listener);
  if (!lingering_.empty()) lingering_.erase(channel);
  if (fresh) {
    for (auto& s : subscribers_) s->subscribe(channel);
    return WatchState::pending;
  }
  return hearing_[channel].confirmations > 0 ? WatchState::ready : WatchState::pending;
}

std::optional<std::uint64_t> WakeHub::heard(const std::string& channel) const {
  auto it = hearing_.find(channel);
  if (it == hearing_.end() || it->second.confirmations <= 0) return std::nullopt;
  return it->second.mark;
}

void WakeHub::unwatch(const std::string& channel, WakeListener* listener) {
  auto it = listeners_.find(channel);
  if (it == listeners_.end()) return;
  auto& v = it->second;
  v.erase(std::remove(v.begin(), v.end(), listener), v.end());
  if (!v.empty() || closing_) return;
  // Its last watcher left: subscribed a little longer (see linger).
  lingering_[channel] = runtime_.now() + linger;
  if (!linger_timer_) linger_timer_ = runtime_.timer([this] { sweep(); });
  if (!linger_timer_->active()) linger_timer_->start(linger);
}

void WakeHub::sweep() {
  const TimePoint now = runtime_.now();
  TimePoint next = TimePoint::max();
  for (auto it = lingering_.begin(); it != lingering_.end();) {
    if (it->second > now) {
      next = std::min(next, it->second);
      ++it;
      continue;
    }
    const std::string channel = it->first;
    it = lingering_.erase(it);
    listeners_.erase(channel);
    hearing_.erase(channel);
    for (auto& s : subscribers_) s->unsubscribe(channel);
  }
  if (next != TimePoint::max()) {
    linger_timer_->start(std::chrono::ceil<std::chrono::milliseconds>(next - now));
  }
}

void WakeHub::confirmed(const std::string& channel, bool resubscribed) {
  Hearing& h = hearing_[channel];
  const int before = h.confirmations++;
  h.mark = ++hearing_events_;
  if (resubscribed) {
    wake(channel, WakeListener::Why::resubscribed);
  } else if (before == 0) {
    wake(channel, WakeListener::Why::subscribed);
  }
}

void WakeHub::unconfirmed(const std::string& channel) {
  auto it = hearing_.find(channel);
  if (it == hearing_.end()) return;
  if (it->second.confirmations > 0) --it->second.confirmations;
  it->second.mark = ++hearing_events_;
}

void WakeHub::released(const std::string& channel, std::string_view message) {
  if (auto it = hearing_.find(channel); it != hearing_.end()) it->second.mark = ++hearing_events_;
  wake(channel, WakeListener::Why::released, message);
}

void WakeHub::wake(const std::string& channel, WakeListener::Why why, std::string_view message) {
  auto it = listeners_.find(channel);
  if (it == listeners_.end()) return;
  const std::vector<WakeListener*> listeners = it->second;  // a listener only arms a timer, but be safe
  for (WakeListener* l : listeners) l->on_wake(why, message);
}

void WakeHub::close(std::function<void()> on_closed) {
  closing_ = true;
  lingering_.clear();
  // The timer goes now, not with the hub: a closed client leaves no
  // handle open on its loop (a channel unwatched just before the close
  // made it).
  linger_timer_.reset();
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
