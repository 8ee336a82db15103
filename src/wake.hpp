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
// A subscriber's connection is a Connection (src/connection.hpp), the same
// state machine as the node sessions': AUTH, the connect deadline, backoff
// and close are its. The subscriber's handshake is its first SUBSCRIBE: the
// connection is ready when the server confirmed it. No I/O of its own, so
// the simulator runs wake-ups too.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "connection.hpp"
#include "redlock/config.hpp"
#include "runtime.hpp"
#include "telemetry.hpp"
#include "transport.hpp"
#include "wire.hpp"

namespace redlock::detail {

class WakeHub;

// Subscriber — one master's pub/sub connection. on_closed runs once, on a
// later loop turn than close(), after it has let go of its Wire and timer.
class Subscriber final : private ConnectionOwner {
 public:
  // `index`: the master's place in the configured list (for the observer).
  Subscriber(Runtime& runtime, WireFactory& wires, NodeAddress address, std::size_t index, const Options& options,
             WakeHub& hub, std::function<void()> on_closed);
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  void start();
  // retarget: a sentinel member's primary moved (NodeSession::retarget),
  // or a cluster member's subscriber goes to another node; `why` is the
  // reason the live connection is dropped for.
  void retarget(const Endpoint& primary, std::string_view why);
  void subscribe(const std::string& channel);
  void unsubscribe(const std::string& channel);
  void close();

 private:
  // ConnectionOwner
  bool on_open() override;
  void on_reply(const WireReply& reply) override;
  void on_down(std::string_view why) override;
  void on_state(Connection::State from, Connection::State to, std::string_view reason) override;

  NodeAddress address_;  // serving_address of the member (a sentinel member's moves)
  std::size_t index_;
  WakeHub& hub_;
  unsigned connections_ = 0;           // connections opened so far
  std::string anchor_;                 // a channel always subscribed (see on_open())
  std::set<std::string> confirmed_;    // channels this connection confirmed
  Connection conn_;                    // last: destroyed first
};

class WakeHub {
 public:
  // WakeHub keeps `runtime`, `wires` and `options`, which must outlive it.
  WakeHub(Runtime& runtime, WireFactory& wires, const std::vector<NodeAddress>& nodes, const Options& options);
  WakeHub(const WakeHub&) = delete;
  WakeHub& operator=(const WakeHub&) = delete;

  WatchState watch(const std::string& channel, WakeListener* listener);
  void unwatch(const std::string& channel, WakeListener* listener);
  // heard: the channel's hearing mark (Transport::heard).
  std::optional<std::uint64_t> heard(const std::string& channel) const;

  // retarget: member `index`'s primary moved (a sentinel named another);
  // its subscriber, if any, follows.
  void retarget(std::size_t index, const Endpoint& primary, std::string_view why);
  // target: where member `index`'s subscriber connects.
  const NodeAddress& target(std::size_t index) const { return nodes_[index]; }

  // close closes every subscriber; on_closed runs once all are gone (at
  // once if none was started).
  void close(std::function<void()> on_closed);

  // From the subscribers.
  const std::map<std::string, std::vector<WakeListener*>>& listeners() const noexcept { return listeners_; }
  void confirmed(const std::string& channel, bool resubscribed);
  void unconfirmed(const std::string& channel);
  void released(const std::string& channel, std::string_view message);
  // observe: report the subscribers' connections to `telemetry` (may be null).
  void observe(Telemetry* telemetry) noexcept { telemetry_ = telemetry; }
  Telemetry* telemetry() const noexcept { return telemetry_; }

  // A channel nobody watches any more stays subscribed this long: a waiter
  // that comes back soon (a busy loop's next acquire, a crowd between two
  // turns) finds it confirmed, and the masters see no SUBSCRIBE and
  // UNSUBSCRIBE per handoff. It costs a master one entry in its dict.
  static constexpr std::chrono::milliseconds linger{500};

 private:
  void subscriber_closed();
  // sweep unsubscribes the channels whose linger is over.
  void sweep();
  void wake(const std::string& channel, WakeListener::Why why, std::string_view message = {});

  Runtime& runtime_;
  WireFactory& wires_;
  std::vector<NodeAddress> nodes_;
  const Options& options_;
  Telemetry* telemetry_ = nullptr;
  std::vector<std::unique_ptr<Subscriber>> subscribers_;
  std::map<std::string, std::vector<WakeListener*>> listeners_;
  // Hearing — a subscribed channel: how many subscribers confirmed it, and
  // its mark, the client-wide count of hearing events at its last one (so a
  // channel dropped and subscribed again never shows an earlier mark).
  struct Hearing {
    int confirmations = 0;
    std::uint64_t mark = 0;
  };
  std::uint64_t hearing_events_ = 0;
  std::map<std::string, Hearing> hearing_;  // channel → its subscription's state
  std::map<std::string, TimePoint> lingering_;  // channels nobody watches: unsubscribed at that time
  std::unique_ptr<Timer> linger_timer_;
  std::size_t open_subscribers_ = 0;
  bool closing_ = false;
  std::function<void()> on_closed_;
};

}  // namespace redlock::detail
