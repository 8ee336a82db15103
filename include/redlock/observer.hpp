// redlock/observer.hpp — what a client tells its host program: events as
// they happen (an Observer set in Options::observer) and counters read at
// any time (Client::stats(), AsyncClient::stats()).
//
// The observer contract, in one paragraph: every callback runs on the
// client's loop thread, in the order the events happen, and must not block
// (it holds up every lock of that client) or call the client's blocking
// API (that would wait for the loop it runs on; it fails with
// invalid_argument). An exception thrown by a callback is caught and
// dropped. The string_views and the node vector of an event live only for
// the call: copy what you keep. With no observer set, no event is built:
// the hot path pays one pointer test.
//
// Stats are counted whether or not an observer is set (relaxed atomic
// increments), and stats() reads them from any thread without stopping
// the loop; the numbers of one snapshot are each exact, but not a single
// instant's (one counter may be read just before an event, another just
// after it).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/error.hpp"
#include "redlock/export.hpp"
#include "redlock/lock.hpp"

namespace redlock {

// ConnectionState — one master connection's state (docs/design.md §5).
enum class ConnectionState : std::uint8_t { idle, connecting, handshaking, ready, backing_off, closing, closed };

// connection_state_name: "idle", "connecting", "handshaking", "ready",
// "backing_off", "closing", "closed".
REDLOCK_API std::string_view connection_state_name(ConnectionState state) noexcept;

// ConnectionEvent — a master's connection changed state. `reason` is set
// on the moves to backing_off and closed: what went wrong (a refused
// connect, a failed AUTH, "no reply for 1000 ms (stalled); reconnecting",
// …), or "client closed" when the client closed it — a normal close
// has a reason too. Empty on the other moves (connecting, handshaking,
// ready, closing). `subscriber`: the wake-up (pub/sub) connection to that
// master, not the lock connection.
struct ConnectionEvent {
  std::size_t node = 0;  // index in the configured node list
  std::string_view address;
  bool subscriber = false;
  ConnectionState from = ConnectionState::idle;
  ConnectionState to = ConnectionState::idle;
  std::string_view reason;
};

// QuarantineEvent — a master stopped counting toward majorities
// (`entered`, for `remaining`, and why: restarted recently, lost its
// data, …), or counts again (its quarantine ran out).
struct QuarantineEvent {
  std::size_t node = 0;
  std::string_view address;
  bool entered = false;
  std::chrono::milliseconds remaining{0};
  std::string_view reason;
};

// OpKind — the three operations.
enum class OpKind : std::uint8_t { acquire, extend, release };

// op_kind_name: "acquire", "extend", "release".
REDLOCK_API std::string_view op_kind_name(OpKind kind) noexcept;

// LockKind — what a round is about: a lock (also a read-write lock's
// writer), a read lock (AcquireOptions::shared) or a semaphore's permit
// (AcquireOptions::permits).
enum class LockKind : std::uint8_t { lock, read_lock, permit };
// lock_kind_name: "lock", "read_lock", "permit".
REDLOCK_API std::string_view lock_kind_name(LockKind kind) noexcept;
// RoundEvent — one round was decided: an acquire attempt (each retry is a
// round; a fenced acquire's attempt counts once, with both phases), an
// extend, or a release (once, with every retry round folded in). `ok`:
// acquire and extend won a majority in time; release left the lock free.
// `code` says why not when !ok (held, not_held, no_quorum,
// validity_too_short, too_late, …). `attempt`: 1 for an operation's first
// round. `nodes`: every master's outcome. `kind`: of a lock, a read lock
// or a permit.
struct RoundEvent {
  OpKind op = OpKind::acquire;
  LockKind kind = LockKind::lock;
  std::string_view resource;
  bool ok = false;
  Errc code = Errc::internal;
  int attempt = 1;
  std::chrono::microseconds elapsed{0};
  const std::vector<NodeOutcome>* nodes = nullptr;
};

// LeaseEvent — a lease's watchdog extended it (`validity`: what the
// extension gave), or the lease was lost (`reason`: the Errc::lost text
// that on_lost also gets).
struct LeaseEvent {
  enum class Kind : std::uint8_t { extended, lost };
  Kind kind = Kind::extended;
  std::string_view resource;
  std::chrono::milliseconds validity{0};
  std::string_view reason;
};

// WakeEvent — a waiter on `resource` was woken by a release notification.
struct WakeEvent {
  std::string_view resource;
};

// Observer — override what you want; the rest do nothing.
class REDLOCK_API Observer {
 public:
  virtual ~Observer();
  virtual void on_connection(const ConnectionEvent& event);
  virtual void on_quarantine(const QuarantineEvent& event);
  virtual void on_round(const RoundEvent& event);
  virtual void on_lease(const LeaseEvent& event);
  virtual void on_wake(const WakeEvent& event);
};

// LatencyHistogram — durations of one operation, from the call to its
// completion, in power-of-two buckets: counts[0] holds those under 1 µs,
// counts[i] those in [2^(i−1), 2^i) µs, the last bucket everything from
// 2^(buckets−2) µs (about 33 s) up.
struct REDLOCK_API LatencyHistogram {
  static constexpr std::size_t buckets = 27;
  std::array<std::uint64_t, buckets> counts{};
  std::uint64_t count = 0;
  std::chrono::microseconds sum{0};
  // upper_bound: the exclusive upper edge of bucket i (max for the last).
  static std::chrono::microseconds upper_bound(std::size_t i) noexcept;
  // quantile: the upper edge of the bucket that holds the q-quantile
  // (0 ≤ q ≤ 1); zero when empty. An overestimate by less than 2×.
  std::chrono::microseconds quantile(double q) const noexcept;
};

// RoundCounts — rounds by outcome. `too_late`: a majority that came with
// too little validity left (validity_too_short, too_late); `other`:
// everything else (invalid arguments, closed, …).
struct RoundCounts {
  std::uint64_t ok = 0;
  std::uint64_t held = 0;  // held by another (acquire), not held (extend, release)
  std::uint64_t no_quorum = 0;
  std::uint64_t too_late = 0;
  std::uint64_t other = 0;
};

// NodeStats — one master. `timeouts`: commands that missed node_timeout;
// `errors`: error replies and failed sends; `connects`: handshakes
// completed (the first and every reconnect); `drops`: connections lost
// after they were ready; `stalls`: of those, dropped for a command
// unanswered for stall_timeout; `quarantines`: quarantines entered.
struct NodeStats {
  std::string address;
  std::uint64_t timeouts = 0;
  std::uint64_t errors = 0;
  std::uint64_t connects = 0;
  std::uint64_t drops = 0;
  std::uint64_t stalls = 0;
  std::uint64_t quarantines = 0;
};

// Stats — a client's counters since it was created.
struct Stats {
  RoundCounts acquire_rounds, extend_rounds, release_rounds;
  // The acquire rounds of read locks and of permits, apart (they are in
  // acquire_rounds too): how often readers, or a semaphore's waiters, find
  // it held.
  RoundCounts read_lock_acquire_rounds, permit_acquire_rounds;
  LatencyHistogram acquire_latency, extend_latency, release_latency;
  std::uint64_t leases_extended = 0;
  std::uint64_t leases_lost = 0;
  std::uint64_t wake_ups = 0;  // waiters woken by a release notification
  std::vector<NodeStats> nodes;
};

}  // namespace redlock
