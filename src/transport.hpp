// transport.hpp — what the quorum logic needs from "a set of N nodes", and
// nothing about hiredis: so every combination of replies, timeouts and late
// replies can be driven by a fake in unit tests.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "scripts.hpp"

namespace redlock::detail {

// ReplyView — a borrowed view of one server reply (valid during the event).
struct ReplyView {
  enum class Type : std::uint8_t { status, string, integer, nil, error, array, other };
  Type type = Type::other;
  long long integer = 0;
  std::string_view str;  // status, string and error text
  // array of integers only (the fenced acquire's [1, counter] or
  // [0, counter, pttl], a fair acquire's [taken, ticket, pttl, rank], a
  // fair semaphore's with the permit after them): its elements, and how
  // many (0 for any other array, or one longer than items holds).
  std::array<long long, 5> items{};
  std::uint8_t item_count = 0;
};

// EventKind — what happened to one command on one node.
//   reply    the server answered (final)
//   timeout  the per-node deadline passed without an answer (not final: a
//            late reply or failure still follows)
//   failed   the command will never be answered: connection refused or
//            lost, or the client closing (final)
enum class EventKind : std::uint8_t { reply, timeout, failed };

struct NodeEvent {
  EventKind kind = EventKind::failed;
  ReplyView reply;           // kind == reply
  bool quarantined = false;  // kind == reply: the node is in restart quarantine
  std::chrono::microseconds rtt{0};
  std::string_view text;     // failed: why; reply + quarantined: until when
  // server: which server answered (a hash of its run id; 0 when unknown).
  // A round counts one yes per server, so one server reached under two
  // names never votes twice, even before the client has noticed.
  std::uint64_t server = 0;
};

// Call — one command, the same for every node of a round: EVALSHA <sha> K
// <key> <more_keys…> <arg1> [<arg2> <more_args…>] (arg2 and what follows
// are left out when arg2 is empty), or for set_nx SET <key> <arg1> NX PX
// <arg2>. Every name comes from src/keys.hpp. The caller keeps it alive
// until the node's final event (a NOSCRIPT reply is retried with EVAL from
// it).
struct Call {
  CommandId command = CommandId::acquire;
  std::string key;
  std::string arg1;
  std::string arg2;
  std::vector<std::string> more_keys;  // multi_*: the keys after `key`; fenced: the fence counter
  std::vector<std::string> more_args;  // multi_release: the channels after arg2
  // extend_batch: its keys and its arguments (value and TTL per lease), as
  // RESP bulk strings in place of key… and arg1…: encoded once by the
  // round, the same bytes written to every master (src/extend_batch.cpp).
  std::string encoded_keys;
  std::string encoded_args;
  std::size_t encoded_key_count = 0;  // 0: not encoded
  std::size_t encoded_arg_count = 0;
};

// ReplySink — receives a command's events. For every accepted send the sink
// gets, for that slot, at most one `timeout` and then exactly one final
// event (`reply` or `failed`), on the loop thread, never inside send().
class ReplySink {
 public:
  virtual void on_node_event(std::size_t slot, const NodeEvent& event) = 0;

 protected:
  ~ReplySink() = default;
};

// WakeListener — a waiter told that the resource it waits for may be free.
//   subscribed    every node reachable when the wait began confirmed the
//                 subscription: a release from now on will be heard
//   released      some node published a release on the channel
//   resubscribed  a subscriber connection came back: notifications may
//                 have been missed while it was down
class WakeListener {
 public:
  enum class Why : std::uint8_t { subscribed, released, resubscribed };
  // `message`: what the release published (released only; valid during the
  // call): a value, or a fair release's "turn HEAD SECOND".
  virtual void on_wake(Why why, std::string_view message) = 0;

 protected:
  ~WakeListener() = default;
};

// WatchState — what watch() could promise: no wake-ups at all (poll
// instead), a subscription still being confirmed (a `subscribed` wake-up
// follows), or one already confirmed.
enum class WatchState : std::uint8_t { unavailable, pending, ready };

class Telemetry;

// Transport — N nodes addressed by index.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::size_t size() const = 0;
  // address is the node's display address (no credentials).
  virtual const std::string& address(std::size_t node) const = 0;
  // send queues `call` on `node`. It returns false and sets `why` when the
  // command cannot be queued (not connected, backpressure, closing); then
  // the sink gets no event for it.
  virtual bool send(std::size_t node, const Call& call, ReplySink* sink, std::size_t slot,
                    std::string& why) = 0;
  // watch subscribes `listener` to release notifications on `channel` from
  // every node until unwatch; wake-ups come on the loop, never inside
  // watch(). The default offers none.
  virtual WatchState watch(const std::string& channel, WakeListener* listener) {
    (void)channel;
    (void)listener;
    return WatchState::unavailable;
  }
  virtual void unwatch(const std::string& channel, WakeListener* listener) {
    (void)channel;
    (void)listener;
  }
  // heard is the channel's hearing mark: a value that changes whenever a
  // message on `channel` arrives or a master confirms or loses its
  // subscription, whoever watches; none while no master has confirmed it.
  // An unchanged mark between two moments says no release was published to
  // this client in between (a release on a confirmed master is delivered).
  // The default offers none.
  virtual std::optional<std::uint64_t> heard(const std::string& channel) const {
    (void)channel;
    return std::nullopt;
  }
  // telemetry: the client's counters and observer (src/telemetry.hpp);
  // none by default (a test's fake transport).
  virtual Telemetry* telemetry() noexcept { return nullptr; }
};

}  // namespace redlock::detail
