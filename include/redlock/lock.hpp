// redlock/lock.hpp — what a lock operation returns: the lock itself and the
// outcome on every node.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/clock.hpp"
#include "redlock/export.hpp"

namespace redlock {

// Outcome — how one node took part in one round.
//   ok          the node did what was asked (set / refreshed / extended / released)
//   held        the node answered, but the resource is held by another token
//               (acquire) or our token is not there (extend / release)
//   timeout     no answer within the per-node deadline (Options::node_timeout);
//               the command may still have been applied
//   error       connection refused or lost, not connected, or an error reply
//   quarantined the node answered yes but restarted recently (uptime below the
//               quarantine period), so it does not count toward the majority
//   pending     no answer yet when the round was decided by the other nodes;
//               the answer is still processed when it comes
enum class Outcome : std::uint8_t { ok, held, timeout, error, quarantined, pending };

// outcome_name returns "ok", "held", "timeout", "error", "quarantined" or "pending".
REDLOCK_API std::string_view outcome_name(Outcome outcome) noexcept;

// quorum_of: how many of `nodes` masters a lock's round needs — a
// majority, nodes / 2 + 1 (the library's one rule, e.g. to read the
// per-node outcomes of an error: "2 of 5 answered, 3 needed").
REDLOCK_API std::size_t quorum_of(std::size_t nodes) noexcept;

// NodeOutcome — one node's part in a round. `address` is the node's display
// address without credentials ("127.0.0.1:7001", "[::1]:7001",
// "unix:///tmp/r.sock"); `rtt` the time from send to answer (0 when none);
// `error` says why for timeout / error / quarantined / held (empty for ok);
// `holder_ttl` is the remaining TTL reported by a node that answered `held`
// to an acquire (-1 when unknown or the key has no expiry).
struct REDLOCK_API NodeOutcome {
  std::string address;
  Outcome outcome = Outcome::pending;
  std::chrono::microseconds rtt{0};
  std::string error;
  std::chrono::milliseconds holder_ttl{-1};
};

// Owner — who holds a lock, as its value says: a value drawn by the library
// is the token, '~', then "host:pid" or "host:pid:label" (Options::owner;
// docs/design.md, "Owner"). It is what the holder wrote, not a proof: any
// client that can write the keys can write any owner.
//   host   the holder's host name (bytes outside [0-9A-Za-z._-] as '_')
//   pid    its process id
//   label  Options::owner ("" when none)
struct REDLOCK_API Owner {
  std::string host;
  std::uint64_t pid = 0;
  std::string label;
};

// owner_of reads the owner a value names; nullopt when it names none (a
// caller's token, a value from an older version) or one not of that shape.
REDLOCK_API std::optional<Owner> owner_of(std::string_view value);

// LockTerms — what a held lock is, whichever resources it covers: Lock and
// MultiLock are this and their resource names, so that both have the same
// members. A plain value: copying it does not copy ownership of anything;
// it is what extend/release need (with the names: the token is the value
// written, with its Owner when the library drew it). `validity_deadline`
// is on redlock::BootClock (a clock that counts system suspend,
// redlock/clock.hpp): the holder may act as owner only before it.
// `validity` is the validity at the moment the lock was acquired or last
// extended (ttl − elapsed − drift).
struct REDLOCK_API LockTerms {
  std::string token;
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds validity{0};
  BootClock::time_point validity_deadline{};
  std::chrono::microseconds elapsed{0};  // duration of the deciding round
  // The fencing token (AcquireOptions::fence), 0 without fencing: strictly
  // greater than the fence of every earlier fenced holder of this resource
  // (of each of the resources of a MultiLock: one fence for the set).
  // Pass it along with every write to the protected resource, which rejects
  // a write whose fence is below the highest it has seen. At most 2^53
  // (9007199254740992): the masters' scripts compute in Lua numbers
  // (doubles), exact only up to there, so a counter at or beyond it is
  // refused rather than rounded (AcquireOptions::fence).
  std::uint64_t fence = 0;
  // The outcomes of the deciding round, one per node — only with
  // Options::node_outcomes on; empty otherwise.
  std::vector<NodeOutcome> nodes;
  // Acquire rounds tried (1 for extend). Last: a Lock's own small fields
  // fill the padding after it (a held Lock is 144 bytes, not 152).
  int attempts = 0;

  // valid says whether the validity deadline is still ahead.
  bool valid() const noexcept { return BootClock::now() < validity_deadline; }
  // remaining is the validity left now (zero once it has passed).
  std::chrono::milliseconds remaining() const noexcept;
};

// Lock — one resource held on a majority of nodes (Client::acquire,
// AsyncClient::acquire).
struct REDLOCK_API Lock : LockTerms {
  // A permit of the semaphore `resource` (AcquireOptions::permits): which
  // one, 0 to P − 1; none for a lock. Extend and release act on it.
  std::optional<std::uint32_t> permit;
  // A read lock (AcquireOptions::shared): held with other readers, never
  // with a writer. Extend and release act on this reader's own entry.
  bool shared = false;
  std::string resource;
};

// MultiLock — several resources held together (acquire_many): on each
// master one script took all of them or none, and a majority of masters
// said yes. `resources` are sorted and without duplicates.
struct REDLOCK_API MultiLock : LockTerms {
  std::vector<std::string> resources;
};

// ReleaseResult — what a release did. `released_nodes` counts the nodes that
// deleted our token by the time the release was decided — and the nodes
// that, asked again after an earlier round's answer was lost (a timeout, a
// dropped connection), no longer had it: that round most likely deleted it,
// and either way it is gone (their outcome is ok, with a note saying so).
// `released` is true when at least one node counts and fewer than a majority
// may still hold it (nodes that timed out or errored may), i.e. the lock is
// free.
struct REDLOCK_API ReleaseResult {
  bool released = false;
  int released_nodes = 0;
  std::chrono::microseconds elapsed{0};
  std::vector<NodeOutcome> nodes;
};

}  // namespace redlock
