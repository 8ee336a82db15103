// wake.hpp — release notifications for waiters: one pub/sub connection per
// master, shared by every resource the client waits on.
//
// A release publishes on {prefix}{resource}:released on each master where
// it deleted the key. A waiting acquire watches that channel (WakeHub::
// watch); the hub keeps one Subscriber per master, started on the first
// watch, subscribes a channel while anyone watches it and unsubscribes it
// with the last watcher. Any master's notification wakes every watcher of
// the channel. Subscribers reconnect like the command connections, and
// resubscribe; watchers are then told to retry once, since notifications
// may have been missed meanwhile.
#pragma once

#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "redlock/config.hpp"
#include "transport.hpp"

struct redisAsyncContext;
struct redisReply;

namespace redlock::detail {

class WakeHub;

// Subscriber — one master's pub/sub connection.
class Subscriber {
 public:
  Subscriber(uv_loop_t* loop, NodeAddress address, const Options& options, WakeHub& hub,
             std::function<void()> on_closed);
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  void start();
  void subscribe(const std::string& channel);
  void unsubscribe(const std::string& channel);
  void close();

  // hiredis callbacks (public for the trampolines).
  void handle_reply(redisAsyncContext* ac, redisReply* reply);
  void handle_auth(redisAsyncContext* ac, redisReply* reply);
  void connection_lost(const redisAsyncContext* ac);
  void connected(const redisAsyncContext* ac);

 private:
  void connect();
  void drop();
  void schedule_reconnect();
  void on_timer();
  void finish_close();

  uv_loop_t* loop_;
  NodeAddress address_;
  const Options& options_;
  WakeHub& hub_;
  std::function<void()> on_closed_;
  redisAsyncContext* ac_ = nullptr;
  bool connected_ = false;             // the connect callback said yes
  unsigned connections_ = 0;           // contexts opened so far
  unsigned failures_ = 0;
  bool closing_ = false;
  bool timer_closed_ = false;
  std::string anchor_;                 // a channel always subscribed (see connect())
  std::set<std::string> confirmed_;    // channels this connection confirmed
  uv_timer_t timer_;                   // connect timeout and reconnect backoff
};

class WakeHub {
 public:
  WakeHub(uv_loop_t* loop, const std::vector<NodeAddress>& nodes, const Options& options);
  WakeHub(const WakeHub&) = delete;
  WakeHub& operator=(const WakeHub&) = delete;

  WatchState watch(const std::string& channel, WakeListener* listener);
  void unwatch(const std::string& channel, WakeListener* listener);

  // close closes every subscriber; on_closed runs once all are gone (at
  // once if none was started).
  void close(std::function<void()> on_closed);

  // From the subscribers.
  const std::map<std::string, std::vector<WakeListener*>>& listeners() const noexcept { return listeners_; }
  void confirmed(const std::string& channel, bool resubscribed);
  void unconfirmed(const std::string& channel);
  void released(const std::string& channel);

 private:
  void subscriber_closed();
  void wake(const std::string& channel, WakeListener::Why why);

  uv_loop_t* loop_;
  std::vector<NodeAddress> nodes_;
  const Options& options_;
  std::vector<std::unique_ptr<Subscriber>> subscribers_;
  std::map<std::string, std::vector<WakeListener*>> listeners_;
  std::map<std::string, int> confirmations_;  // channel → subscribers that confirmed it
  std::size_t open_subscribers_ = 0;
  bool closing_ = false;
  std::function<void()> on_closed_;
};

}  // namespace redlock::detail
