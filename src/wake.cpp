// wake.cpp — the pub/sub side of waiting. See wake.hpp.
#include "wake.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstring>

#include "connection.hpp"
#include "poll_adapter.hpp"
#include "token.hpp"

namespace redlock::detail {

namespace {

void reply_trampoline(redisAsyncContext* ac, void* reply, void*) {
  static_cast<Subscriber*>(ac->data)->handle_reply(ac, static_cast<redisReply*>(reply));
}

void auth_trampoline(redisAsyncContext* ac, void* reply, void*) {
  static_cast<Subscriber*>(ac->data)->handle_auth(ac, static_cast<redisReply*>(reply));
}

void connect_trampoline(const redisAsyncContext* ac, int status) {
  auto* self = static_cast<Subscriber*>(ac->data);
  if (status != REDIS_OK) {
    self->connection_lost(ac);
  } else {
    self->connected(ac);
  }
}

void disconnect_trampoline(const redisAsyncContext* ac, int) {
  static_cast<Subscriber*>(ac->data)->connection_lost(ac);
}

bool is(const redisReply* r, const char* text) {
  return r != nullptr && r->type == REDIS_REPLY_STRING && r->len == std::strlen(text) &&
         std::memcmp(r->str, text, r->len) == 0;
}

}  // namespace

// ---- Subscriber -----------------------------------------------------------------

Subscriber::Subscriber(uv_loop_t* loop, NodeAddress address, const Options& options, WakeHub& hub,
                       std::function<void()> on_closed)
    : loop_(loop),
      address_(std::move(address)),
      options_(options),
      hub_(hub),
      on_closed_(std::move(on_closed)),
      anchor_(options.prefix + "wake-anchor") {
  uv_timer_init(loop_, &timer_);
  timer_.data = this;
}

void Subscriber::start() { connect(); }

void Subscriber::connect() {
  if (closing_) return;
  redisAsyncContext* ac = address_.kind == NodeAddress::Kind::tcp
                              ? redisAsyncConnect(address_.host.c_str(), address_.port)
                              : redisAsyncConnectUnix(address_.path.c_str());
  if (ac == nullptr || ac->err != 0 || !attach_to_loop(ac, loop_)) {
    if (ac != nullptr) redisAsyncFree(ac);
    return schedule_reconnect();
  }
  ac->data = this;
  ac_ = ac;
  connected_ = false;
  ++connections_;
  redisAsyncSetConnectCallback(ac, connect_trampoline);
  redisAsyncSetDisconnectCallback(ac, disconnect_trampoline);
  uv_timer_start(
      &timer_, [](uv_timer_t* t) { static_cast<Subscriber*>(t->data)->on_timer(); },
      static_cast<std::uint64_t>(options_.connect_timeout.count()), 0);
  if (const AuthCommand auth(address_); auth.argc > 0) {
    redisAsyncCommandArgv(ac, auth_trampoline, nullptr, auth.argc, const_cast<const char**>(auth.argv), auth.lens);
  }
  // The anchor, and everything watched right now, in one SUBSCRIBE. The
  // anchor stays subscribed for the connection's life: hiredis 0.14 leaves
  // subscribed mode when an UNSUBSCRIBE reply counts 0 subscriptions, and a
  // SUBSCRIBE reply already on its way would then find no callback and
  // abort the process (async.c's assertion).
  std::vector<const char*> argv{"SUBSCRIBE", anchor_.c_str()};
  std::vector<std::size_t> lens{9, anchor_.size()};
  for (const auto& [channel, listeners] : hub_.listeners()) {
    argv.push_back(channel.c_str());
    lens.push_back(channel.size());
  }
  redisAsyncCommandArgv(ac, reply_trampoline, nullptr, static_cast<int>(argv.size()), argv.data(), lens.data());
}

void Subscriber::subscribe(const std::string& channel) {
  if (ac_ == nullptr) return;  // subscribed on the next connect
  const char* argv[2] = {"SUBSCRIBE", channel.c_str()};
  const std::size_t lens[2] = {9, channel.size()};
  redisAsyncCommandArgv(ac_, reply_trampoline, nullptr, 2, argv, lens);
}

void Subscriber::unsubscribe(const std::string& channel) {
  if (channel == anchor_) return;
  confirmed_.erase(channel);
  if (ac_ == nullptr || !(ac_->c.flags & REDIS_SUBSCRIBED)) return;
  const char* argv[2] = {"UNSUBSCRIBE", channel.c_str()};
  const std::size_t lens[2] = {11, channel.size()};
  redisAsyncCommandArgv(ac_, reply_trampoline, nullptr, 2, argv, lens);
}

void Subscriber::handle_auth(redisAsyncContext* ac, redisReply* reply) {
  if (ac != ac_ || reply == nullptr) return;
  if (reply->type == REDIS_REPLY_ERROR) drop();  // the command connection reports the reason
}

void Subscriber::connected(const redisAsyncContext* ac) {
  if (ac != ac_) return;
  connected_ = true;
  failures_ = 0;
  uv_timer_stop(&timer_);
}

void Subscriber::handle_reply(redisAsyncContext* ac, redisReply* reply) {
  if (ac != ac_ || reply == nullptr || reply->type != REDIS_REPLY_ARRAY || reply->elements < 3) return;
  const std::string channel(reply->element[1]->str != nullptr ? reply->element[1]->str : "",
                            reply->element[1]->len);
  if (is(reply->element[0], "message")) {
    hub_.released(channel);
  } else if (is(reply->element[0], "subscribe") && channel != anchor_) {
    if (hub_.listeners().count(channel) == 0) {
      unsubscribe(channel);  // its last watcher left before the confirmation came
    } else if (confirmed_.insert(channel).second) {
      hub_.confirmed(channel, /*resubscribed=*/connections_ > 1);
    }
  }
}

void Subscriber::connection_lost(const redisAsyncContext* ac) {
  if (ac != ac_) return;
  ac_ = nullptr;
  connected_ = false;
  for (const std::string& channel : confirmed_) hub_.unconfirmed(channel);
  confirmed_.clear();
  if (closing_) return finish_close();
  schedule_reconnect();
}

void Subscriber::drop() {
  if (ac_ == nullptr) return;
  redisAsyncContext* ac = ac_;
  connection_lost(ac);  // forget it first: hiredis's callbacks for it are ignored
  redisAsyncFree(ac);
}

void Subscriber::schedule_reconnect() {
  if (closing_) return;
  uv_timer_start(
      &timer_, [](uv_timer_t* t) { static_cast<Subscriber*>(t->data)->on_timer(); },
      reconnect_delay(options_, failures_), 0);
}

void Subscriber::on_timer() {
  if (closing_) return;
  if (ac_ == nullptr) return connect();
  if (!connected_) drop();  // the connect (or its first answer) took too long
}

void Subscriber::close() {
  if (closing_) return;
  closing_ = true;
  uv_timer_stop(&timer_);
  if (ac_ != nullptr) {
    redisAsyncContext* ac = ac_;
    redisAsyncFree(ac);  // pub/sub has nothing to flush; the disconnect callback finishes
    if (ac_ == nullptr) return;
    ac_ = nullptr;  // freed without a callback (never connected)
  }
  finish_close();
}

void Subscriber::finish_close() {
  if (timer_closed_) return;
  timer_closed_ = true;
  uv_close(reinterpret_cast<uv_handle_t*>(&timer_), [](uv_handle_t* h) {
    auto* self = static_cast<Subscriber*>(h->data);
    if (self->on_closed_) self->on_closed_();
  });
}

// ---- WakeHub --------------------------------------------------------------------

WakeHub::WakeHub(uv_loop_t* loop, const std::vector<NodeAddress>& nodes, const Options& options)
    : loop_(loop), nodes_(nodes), options_(options) {}

WatchState WakeHub::watch(const std::string& channel, WakeListener* listener) {
  if (!options_.wake_ups || closing_) return WatchState::unavailable;
  if (subscribers_.empty()) {
    for (const NodeAddress& address : nodes_) {
      subscribers_.push_back(
          std::make_unique<Subscriber>(loop_, address, options_, *this, [this] { subscriber_closed(); }));
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
