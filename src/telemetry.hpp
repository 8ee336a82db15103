// telemetry.hpp — a client's counters and its observer (redlock/observer.hpp).
//
// One Telemetry per client, owned by its NodeSet (the engine, the
// sessions, the subscribers and the watchdogs reach it through the
// Transport). The event methods run on the loop thread; each counts with
// relaxed atomic increments and, only when an observer is set, builds the
// event and calls it (an exception from the observer is dropped). snapshot()
// may run on any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/error.hpp"
#include "redlock/observer.hpp"

namespace redlock::detail {

class Telemetry {
 public:
  Telemetry(std::shared_ptr<Observer> observer, std::vector<std::string> addresses);
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;

  bool observed() const noexcept { return observer_ != nullptr; }

  // A master's lock connection (or, `subscriber`, its pub/sub one) changed state.
  void connection(std::size_t node, bool subscriber, ConnectionState from, ConnectionState to,
                  std::string_view reason) noexcept;
  void node_timeout(std::size_t node) noexcept { nodes_[node].timeouts.fetch_add(1, std::memory_order_relaxed); }
  void node_error(std::size_t node) noexcept { nodes_[node].errors.fetch_add(1, std::memory_order_relaxed); }
  void stalled(std::size_t node) noexcept { nodes_[node].stalls.fetch_add(1, std::memory_order_relaxed); }
  void quarantine(std::size_t node, bool entered, std::chrono::milliseconds remaining,
                  std::string_view reason) noexcept;
  // round: one decided round; `failure` null when it succeeded.
  void round(OpKind op, LockKind kind, std::string_view resource, const Error* failure, int attempt,
             std::chrono::microseconds elapsed, const std::vector<NodeOutcome>& nodes) noexcept;
  // finished: an operation completed (its latency, call to completion).
  void finished(OpKind op, std::chrono::microseconds elapsed) noexcept;
  void lease_extended(std::string_view resource, std::chrono::milliseconds validity) noexcept;
  void lease_lost(std::string_view resource, std::string_view reason) noexcept;
  void woken(std::string_view resource) noexcept;

  Stats snapshot() const;

  using Counter = std::atomic<std::uint64_t>;
  struct Rounds {
    Counter ok{0}, held{0}, no_quorum{0}, too_late{0}, other{0};
  };

 private:
  struct Histogram {
    std::array<Counter, LatencyHistogram::buckets> counts{};
    Counter count{0}, sum_us{0};
  };
  struct Node {
    std::string address;
    Counter timeouts{0}, errors{0}, connects{0}, drops{0}, stalls{0}, quarantines{0};
  };
  template <class F>
  void tell(F&& f) const noexcept {
    try {
      f(*observer_);
    } catch (...) {  // the observer's own failure; nothing of ours depends on it
    }
  }

  std::shared_ptr<Observer> observer_;
  Rounds rounds_[3];
  Rounds read_lock_acquires_, permit_acquires_;  // also in rounds_[acquire]
  Histogram latency_[3];
  Counter leases_extended_{0}, leases_lost_{0}, wake_ups_{0};
  std::vector<Node> nodes_;  // sized once; never resized (atomics)
};

}  // namespace redlock::detail
