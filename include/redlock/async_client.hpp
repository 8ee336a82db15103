// redlock/async_client.hpp — the asynchronous core on a caller's uv loop.
//
// One shape for every operation. AsyncClient: `op(args…, callback)`, the
// callback taking a Result<T>. Client (client.hpp): `op(args…)` returns the
// Result<T>, blocking; `op_async(args…)` returns a std::future<Result<T>>.
// The operations, with the same arguments on both: acquire, try_acquire,
// extend, release (a Lock, or resource and token), acquire_many,
// extend_many, release_many (a MultiLock, or resources and token), lock,
// lock_many (T: AsyncLease here, Lease on a Client), status, nodes,
// leader, and campaign (T: AsyncLeadership here, Leadership on a Client;
// blocking only on a Client).
//
// Callback contract (as hiredis states its own): every operation that was
// started completes exactly once, by calling its callback on the loop thread,
// never on the stack of the call that started it. If the client is closed
// while operations are in flight, they complete with Errc::closed. A
// callback may start new operations or call close().
//
// Handle lifetime: the client owns one connection (a uv poll handle and two
// timers) per master plus one timer per operation; all of them are closed by
// close() and freed in their close callbacks. After close() (or destruction,
// which calls close()), running the loop until uv_run returns leaves no
// handle of ours on it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/config.hpp"
#include "redlock/election.hpp"
#include "redlock/error.hpp"
#include "redlock/export.hpp"
#include "redlock/lease.hpp"
#include "redlock/lock.hpp"
#include "redlock/observer.hpp"
#include "redlock/options.hpp"
#include "redlock/status.hpp"

struct uv_loop_s;

namespace redlock {

class ClientCore;
class Client;

using LockCallback = std::function<void(Result<Lock>)>;
using ReleaseCallback = std::function<void(Result<ReleaseResult>)>;
using MultiLockCallback = std::function<void(Result<MultiLock>)>;
using StatusCallback = std::function<void(Result<ResourceStatus>)>;
using NodesCallback = std::function<void(Result<NodesReport>)>;
using LeaseCallback = std::function<void(Result<AsyncLease>)>;
using LeaderCallback = std::function<void(Result<LeaderStatus>)>;
using LeadershipCallback = std::function<void(Result<AsyncLeadership>)>;

// AsyncClient — the Redlock algorithm over N masters on one uv loop. Not
// thread-safe: every member must be called on the loop's thread. Move and
// copy are deleted (it owns uv handles).
class REDLOCK_API AsyncClient {
 public:
  // create validates the config (Errc::config) and starts connecting to every
  // node. The loop must outlive the client's handles (run it after close()).
  static Result<std::unique_ptr<AsyncClient>> create(uv_loop_s* loop, Config config);

  // ~AsyncClient closes the client if close() was not called; pending
  // operations complete with Errc::closed when the loop next runs.
  ~AsyncClient();
  AsyncClient(const AsyncClient&) = delete;
  AsyncClient& operator=(const AsyncClient&) = delete;

  // acquire takes `resource` on a majority of nodes: one round per attempt,
  // retried with jitter until opts.wait has passed. On failure the attempt is
  // released on all nodes (a timeout means "maybe applied"). Errors: held,
  // no_quorum, validity_too_short, invalid_argument, closed.
  void acquire(std::string resource, AcquireOptions opts, LockCallback done);
  // try_acquire makes one attempt (wait = 0) with the given ttl (0: default).
  void try_acquire(std::string resource, milliseconds ttl, LockCallback done);

  // extend moves the lock's expiry to ttl from now (zero: the lock's own
  // ttl) on the nodes where our token still is; it never recreates a missing
  // key. Succeeds only with a majority before the lock's validity deadline;
  // the returned Lock has the new validity. Errors: not_held, too_late,
  // no_quorum, validity_too_short, invalid_argument, closed.
  void extend(Lock lock, milliseconds ttl, LockCallback done);

  // release deletes the key on every node where it holds `token`. The
  // result counts the nodes that released; a foreign or expired token
  // releases nothing (released = false, not an error). Errors:
  // invalid_argument, closed.
  void release(std::string resource, std::string token, ReleaseCallback done);
  void release(const Lock& lock, ReleaseCallback done);

  // lock takes `resource` as an AsyncLease: acquired as by acquire(), then
  // kept extended by a watchdog on this loop until it is released or lost
  // (lease.hpp: LeaseOptions, on_lost, the stop token). Errors: as
  // acquire(); invalid_argument for bad LeaseOptions, and for `reentrant`
  // (reentrancy is per thread: a Client feature). A lease still held when
  // the client closes is lost ("the client was closed").
  void lock(std::string resource, LeaseOptions opts, LeaseCallback done);
  // lock_many: a lease on several resources together (acquire_many; the
  // watchdog extends them all in one round per master).
  void lock_many(std::vector<std::string> resources, LeaseOptions opts, LeaseCallback done);

  // acquire_many takes several resources together — for a transfer
  // between two accounts, say: on each master one script takes all of them
  // or none, and the majority is counted over masters. Resources are sorted
  // (two clients locking overlapping sets ask for the keys in the same
  // order) and duplicates dropped. A waiter is woken by the release of any
  // of them (Options::wake_ups), as for acquire. With opts.fence the set
  // gets one fence (MultiLock::fence) above every earlier fence of each of
  // its resources. Errors as for acquire.
  void acquire_many(std::vector<std::string> resources, AcquireOptions opts, MultiLockCallback done);
  // extend_many / release_many act on every resource of the lock.
  void extend_many(MultiLock lock, milliseconds ttl, MultiLockCallback done);
  void release_many(std::vector<std::string> resources, std::string token, ReleaseCallback done);
  void release_many(const MultiLock& lock, ReleaseCallback done);

  // status reads what every master holds for `resource` (token, TTL,
  // fence counter), changing nothing, and whether a majority agrees on one
  // holder. nodes PINGs every master and reports its health and
  // quarantine. Both wait for every master's answer or node_timeout; an
  // unreachable master is part of the result, not an error. An invalid
  // resource name fails with invalid_argument (then `done` runs inside the
  // call). Issued after close(), or still in flight when it comes, they
  // complete with Errc::closed like every other operation.
  void status(std::string resource, StatusCallback done);
  void nodes(NodesCallback done);
  // leader reads who leads the election `name` (election.hpp): every
  // master's lock and leader record, judged by a majority. No leader is a
  // LeaderStatus without one, not an error; fewer than a majority of
  // masters answering is Errc::no_quorum. Waits as status does; errors as
  // status.
  void leader(std::string name, LeaderCallback done);
  // campaign runs for leader of `name` (Client::campaign, election.hpp):
  // `done` gets the AsyncLeadership once elected, or the error that ended
  // the campaign (its wait over, cancelled, invalid, closed).
  void campaign(std::string name, CampaignOptions opts, LeadershipCallback done);
  // observe watches the election `name` (election.hpp: LeaderWatch): the
  // callback is told the first reading, then every change, on this loop,
  // until the LeaderWatch is stopped or destroyed (on this loop) or the
  // client closes. Errors: invalid_argument (a bad name; nothing started).
  Result<LeaderWatch> observe(std::string name, LeaderWatchCallback on_change);

  // close stops accepting operations, completes the pending ones with
  // Errc::closed, and closes every handle; on_closed runs (on the loop) once
  // the last handle is freed. Idempotent; later calls' callbacks also run.
  void close(std::function<void()> on_closed = {});

  // config returns the validated config in use.
  const Config& config() const noexcept;

  // stats: the client's counters since it was created (redlock/observer.hpp).
  // Unlike the rest of AsyncClient it may be called from any thread, also
  // after close(); it reads atomic counters and never stops the loop.
  Stats stats() const;

 private:
  friend class Client;  // a blocking Client runs an AsyncClient and takes its leases through its core
  REDLOCK_LOCAL explicit AsyncClient(ClientCore* core) noexcept;
  ClientCore* core_;  // owned; frees itself after its handles have closed
};

}  // namespace redlock
