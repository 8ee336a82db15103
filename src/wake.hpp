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
//
// Like the node sessions, subscribers do no I/O of their own: they run on
// a Wire (src/wire.hpp; in subscribed mode every pub/sub message arrives
// through on_reply) and take timers and jitter from the Runtime, so the
// simulator runs wake-ups too.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "redlock/config.hpp"
#include "runtime.hpp"
#include "transport.hpp"
#include "wire.hpp"

namespace redlock::detail {

class WakeHub;

// Subscriber — one master's pub/sub connection. on_closed runs once, on a
// later loop turn than close(), after it has let go of its Wire and timer.
class Subscriber final : private WireEvents {
 public:
  Subscriber(Runtime& runtime, WireFactory& wires, NodeAddress address, const Options& options, WakeHub& hub,
             std::function<void()> on_closed);
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  void start();
  void subscribe(const std::string& channel);
  void unsubscribe(const std::string& channel);
  void close();

 private:
  // WireEvents
  void on_connected() override;
  void on_reply(const WireReply& reply) override;
  void on_flush() override {}
  void on_lost(std::string_view why) override;

  void connect();
  void drop();
  void schedule_reconnect();
  void on_timer();

  Runtime& runtime_;
  WireFactory& wires_;
  NodeAddress address_;
  const Options& options_;
  WakeHub& hub_;
  std::function<void()> on_closed_;
  std::unique_ptr<Wire> wire_;
  bool connected_ = false;             // the Wire said on_connected
  unsigned auth_pending_ = 0;          // AUTH replies still due (they come before any message)
  unsigned connections_ = 0;           // connections opened so far
  unsigned failures_ = 0;
  bool closing_ = false;
  bool finished_ = false;              // closed: on_closed_ is due on the timer
  std::string anchor_;                 // a channel always subscribed (see connect())
  std::set<std::string> confirmed_;    // channels this connection confirmed
  std::unique_ptr<Timer> timer_;       // connect timeout, reconnect backoff, on_closed
};

class WakeHub {
 public:
  // WakeHub keeps `runtime`, `wires` and `options`, which must outlive it.
  WakeHub(Runtime& runtime, WireFactory& wires, const std::vector<NodeAddress>& nodes, const Options& options);
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

  Runtime& runtime_;
  WireFactory& wires_;
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
