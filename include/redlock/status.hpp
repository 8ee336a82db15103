// redlock/status.hpp — looking without locking: what each master says about
// one resource (`redlock status`), and how each master is doing (`redlock
// nodes`). Both ask every master once, in parallel, within node_timeout, and
// change nothing on any of them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/export.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

// NodeHealth — one master, as of one PING.
//   reachable        it answered the PING within node_timeout
//   rtt              the PING's round trip (reachable only)
//   error            why it is not reachable (refused, timed out, error reply)
//   version, run_id  redis_version and run_id from INFO server, read when the
//                    connection was set up ("" when it never was)
//   uptime           the server's uptime now (-1 s: unknown)
//   quarantined      restarted recently: it does not count toward a majority
//   quarantine_left  for how much longer (zero when it counts)
//   replicas         connected_slaves from INFO at the last reading (the
//                    handshake; a replicated member: behind every flush of
//                    acquires); -1 when never read or not shown
struct REDLOCK_API NodeHealth {
  std::string address;
  bool reachable = false;
  std::chrono::microseconds rtt{0};
  std::string error;
  std::string version;
  std::string run_id;
  std::chrono::seconds uptime{-1};
  bool quarantined = false;
  milliseconds quarantine_left{0};
  // excluded: why this master never counts, whatever its uptime (an
  // eviction policy that may drop lock keys; the same server as another
  // configured master); empty when it counts. quarantined is then true.
  std::string excluded;
  int replicas = -1;
  // primary: a sentinel member's primary as the sentinels last named it
  // ("127.0.0.1:6380"; "" before they have); a cluster member's shard
  // primaries in its last slot map, separated by spaces
  // ("127.0.0.1:7000 127.0.0.1:7001 127.0.0.1:7002"); "" for the others.
  std::string primary;
};

// NodesReport — every master's health, and whether a lock can be taken now.
struct REDLOCK_API NodesReport {
  std::vector<NodeHealth> nodes;
  std::size_t quorum = 0;  // N/2 + 1
  // usable: reachable and not quarantined.
  std::size_t usable() const noexcept {
    std::size_t n = 0;
    for (const NodeHealth& h : nodes) n += h.reachable && !h.quarantined ? 1 : 0;
    return n;
  }
  bool can_lock() const noexcept { return usable() >= quorum; }
};

// NodeHolding — what one master holds for a resource.
//   state        free, held (token set), shared (held by readers: the lock
//                key holds the readers' mark, no token; `readers` says
//                how many), wrong_type (the lock key or the
//                fence counter holds something else than a string — a list,
//                a hash: no lock can be taken there; error names the key
//                and its type), or unreachable (error set: no answer within
//                node_timeout, refused, error reply)
//   token        the holder's value on this master (held only): what
//                release and extend take
//   owner        who that value names as its holder (redlock/lock.hpp,
//                owner_of), when it names one
//   ttl          its remaining time to live (-1 ms: the key has no expiry);
//                shared: the readers' mark's, which lives as long as the
//                latest reader there
//   fence        this master's fence counter for the resource (0: none)
//   quarantined  the master restarted recently: its answer does not count
//   queued       how many live fair waiters wait in the resource's fair
//                queue on this master ({prefix}{resource}:queue, a sorted
//                set; a semaphore's: {…}:permits:queue): those whose place has not lapsed (each round of a
//                waiter stamps it a bounded time ahead in {…}:expiry;
//                docs/design.md, "Fair order"); 0: no live waiter, no
//                queue, or not read — unreachable, wrong_type, or a user
//                whose ACL lacks ZCARD
//   queue_head   the waiter id (16 hex digits: those after the 'Q' of the
//                fair token it will hold) of the first live waiter of that
//                queue, the next to take the lock there; empty when queued
//                is 0 ("?" for a member that holds blanks, which no
//                redlock client writes)
//   lapsed       waiters still in that queue whose place lapsed: they sent
//                no round within their life (a killed process), or have no
//                stamp at all — nobody serves them and the next fair script
//                there takes them out; they hold back no one
//   readers      read locks (AcquireOptions::shared) live on this master:
//                entries of the resource's readers set whose end is after
//                the master's now; 0: none, or not read (an ACL without
//                ZRANGE)
//   permits      the resource is a semaphore of that many permits, by this
//                master's permits key ({…}:permits, AcquireOptions::permits);
//                0: none, or not read
//   writers_waiting  writers waiting on those readers: live intents in
//                the resource's writers set (docs/design.md, "Writer
//                preference"); while there is one, no new reader joins
// A queue key, expiry set, readers or writers set that holds something
// else than a sorted set makes the state wrong_type, as the lock key or
// the fence counter do (no fair acquire or read lock works there).
struct REDLOCK_API NodeHolding {
  enum class State : std::uint8_t { free, held, unreachable, wrong_type, shared };
  std::string address;
  State state = State::unreachable;
  std::string token;
  std::optional<Owner> owner;
  milliseconds ttl{0};
  std::uint64_t fence = 0;
  bool quarantined = false;
  std::chrono::microseconds rtt{0};
  std::string error;
  std::size_t queued = 0;
  std::string queue_head;
  std::size_t lapsed = 0;
  std::size_t readers = 0;
  std::size_t writers_waiting = 0;
  std::size_t permits = 0;
};

// ResourceStatus — every master's view of one resource, and the verdict.
//   token        the token held on the most counted masters (quarantined
//                ones do not count); empty when no counted master holds one
//   owner        who `token` names as its holder, when it names one
//   agreeing     how many counted masters hold `token`
//   held         agreeing ≥ quorum: a majority agrees on one holder
//   shared       a majority of the masters are held by readers (state
//                shared): read locks hold the resource, no writer does
//   ttl          held or shared only: how long that majority still lasts
//                (the quorum-th longest TTL among the agreeing masters,
//                or among those held by readers)
//   free_nodes   counted masters where the key is absent
//   queued       the fair queue's length a majority agrees on at least: the
//                quorum-th largest `queued` among the counted masters (an
//                unreachable or wrong_type one counts as 0), so a quorum
//                of masters reports that many waiters or more; 0 when
//                fewer than a quorum are counted. A queue on only a
//                minority shows in nodes[i].queued alone.
//   queue_head   the head waiter id named by at least a quorum of counted
//                masters (the waiter next in fair order); empty when no
//                quorum names the same one
//   lapsed       the lapsed places a majority still keeps at least (the
//                quorum-th largest nodes[i].lapsed, as for queued). A
//                queue whose waiters all died shows queued 0 (its keys
//                expire with its last place); places without a stamp,
//                left by a version without them, show here until a fair
//                script takes them out
//   readers      the live readers a majority reports at least (the
//                quorum-th largest nodes[i].readers, as for queued)
//   writers_waiting  the waiting writers a majority reports at least
//   permits      a semaphore: its number of permits, as a majority of the
//                counted masters report it (0: not a semaphore, or no
//                majority says so; a count above the most a semaphore may
//                have, 100, is not believed)
//   permit_status  a semaphore: one status per permit, in permit order —
//                each permit is a lock of its own, so each says who holds
//                it on each master and whether a majority agrees (`held`,
//                `token`, `owner`, `agreeing`, `ttl`; `nodes[i].fence`: the
//                permit's fence counter there); empty when
//                `permits` is 0. The resource's own lock key is none of
//                them: a semaphore never uses it.
struct REDLOCK_API ResourceStatus {
  std::string resource;
  std::vector<NodeHolding> nodes;
  std::size_t quorum = 0;
  std::string token;
  std::optional<Owner> owner;
  std::size_t agreeing = 0;
  bool held = false;
  milliseconds ttl{0};
  std::size_t free_nodes = 0;
  std::size_t queued = 0;
  std::string queue_head;
  std::size_t lapsed = 0;
  bool shared = false;
  std::size_t readers = 0;
  std::size_t writers_waiting = 0;
  std::size_t permits = 0;
  std::vector<ResourceStatus> permit_status;
};

// state_name returns "free", "held", "shared", "unreachable" or
// "wrong_type".
REDLOCK_API std::string_view state_name(NodeHolding::State s) noexcept;

}  // namespace redlock
