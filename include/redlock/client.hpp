// redlock/client.hpp — the blocking, thread-safe facade.
//
// A Client runs its own loop thread with an AsyncClient on it. Every member
// may be called from any thread at once; a call blocks until the operation
// completes (each is bounded: a round by the node timeout, an acquire by its
// wait deadline) or returns a std::future for it. Destroying the Client
// closes the connections and joins the thread; operations still in flight
// complete with Errc::closed first, and live leases are lost (their watchdog
// stops; the locks expire by their TTL unless released before).
//
// The loop thread (where on_lost runs) is the one thread that must not wait
// for the client, and the client says so instead of deadlocking:
//   - every member except config() called on it fails at once with
//     Errc::invalid_argument ("... called on the client's own loop
//     thread"), starting nothing; an _async member's future is then
//     already ready with that error. Hand the work to another thread.
//   - destroying the Client on it (inside on_lost) is allowed: the
//     destructor does not join its own thread but returns at once; leases
//     are lost as above, and the thread closes the connections and the
//     loop, frees what is left and ends by itself once on_lost returns.
//   - Lease::release and ~Lease there start the release without waiting.
//
// Every operation comes in two forms with the same arguments: `op(args…)`
// blocks and returns a Result<T>; `op_async(args…)` returns a
// std::future<Result<T>> at once, made ready on the loop thread (the shape
// of every operation: async_client.hpp). with_lock, which runs the
// caller's function under the lock, is blocking only.
//
// Two ways to hold a lock:
//   lock()     a Lease: RAII, kept extended by a watchdog, with a lost
//              signal, optional fencing token and reentrancy (lease.hpp);
//   acquire()  a plain Lock value that you extend and release yourself.
#pragma once

#include <future>
#include <memory>
#include <optional>
#include <stop_token>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "redlock/async_client.hpp"
#include "redlock/config.hpp"
#include "redlock/election.hpp"
#include "redlock/error.hpp"
#include "redlock/export.hpp"
#include "redlock/lease.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

class REDLOCK_API Client {
 public:
  // create validates the config (Errc::config), starts the loop thread and
  // begins connecting. It does not wait for the nodes: an operation issued
  // before a connection is up waits for it within its node deadline.
  static Result<std::unique_ptr<Client>> create(Config config);

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // lock takes `resource` as a Lease (see lease.hpp): released when the
  // Lease is destroyed, extended by a watchdog while it lives. Errors: as
  // acquire(); invalid_argument for bad LeaseOptions and for a reentrant
  // lock() that asks for more than the held lease gives (lease.hpp);
  // cancelled when opts.acquire.cancel ends it, also while it waits for
  // another thread of its owner. lock_async: the same as a future; a
  // reentrant lock_async waits (in the call) while another thread of its
  // owner is taking the lease, as lock() does, and is ready at once when
  // it re-enters a held one.
  Result<Lease> lock(std::string_view resource, LeaseOptions opts = {});
  std::future<Result<Lease>> lock_async(std::string_view resource, LeaseOptions opts = {});
  // lock_many: a Lease on several resources together (acquire_many: each
  // master takes all or none; the watchdog extends them all in one round
  // per master; the release frees all). Not reentrant (invalid_argument);
  // with fence, one fence for the set (Lease::fence()). Lease::resources()
  // lists them, sorted.
  Result<Lease> lock_many(std::vector<std::string> resources, LeaseOptions opts = {});
  std::future<Result<Lease>> lock_many_async(std::vector<std::string> resources, LeaseOptions opts = {});

  // with_lock runs fn(std::stop_token) under a lease on `resource` and
  // releases it afterwards (also when fn throws). The token is requested
  // if the lease is lost while fn runs: fn should stop touching the
  // resource then. Returns fn's result, or the error that kept the lock
  // from being taken, or Errc::lost if the lease was lost before fn
  // returned — its deadline passed (also while the whole process was
  // stopped, before any thread of it could notice), an extension was
  // refused, or the release found the lock gone from a majority (fn's
  // work may then have overlapped another holder's).
  template <class F>
  auto with_lock(std::string_view resource, LeaseOptions opts, F&& fn)
      -> Result<std::invoke_result_t<F, std::stop_token>>;

  // acquire takes `resource` as a plain Lock, retrying until opts.wait has
  // passed (AsyncClient::acquire).
  Result<Lock> acquire(std::string_view resource, AcquireOptions opts = {});
  std::future<Result<Lock>> acquire_async(std::string_view resource, AcquireOptions opts = {});
  // try_acquire makes one attempt (wait = 0) with the given ttl (0: default).
  Result<Lock> try_acquire(std::string_view resource, milliseconds ttl = milliseconds{0});
  std::future<Result<Lock>> try_acquire_async(std::string_view resource, milliseconds ttl = milliseconds{0});
  // extend: see AsyncClient::extend.
  Result<Lock> extend(const Lock& lock, milliseconds ttl = milliseconds{0});
  std::future<Result<Lock>> extend_async(const Lock& lock, milliseconds ttl = milliseconds{0});
  // release releases a plain lock; see AsyncClient::release.
  Result<ReleaseResult> release(const Lock& lock);
  Result<ReleaseResult> release(std::string_view resource, std::string_view token);
  std::future<Result<ReleaseResult>> release_async(const Lock& lock);
  std::future<Result<ReleaseResult>> release_async(std::string_view resource, std::string_view token);

  // Multi-resource locks: see AsyncClient::acquire_many.
  Result<MultiLock> acquire_many(std::vector<std::string> resources, AcquireOptions opts = {});
  std::future<Result<MultiLock>> acquire_many_async(std::vector<std::string> resources, AcquireOptions opts = {});
  Result<MultiLock> extend_many(const MultiLock& lock, milliseconds ttl = milliseconds{0});
  std::future<Result<MultiLock>> extend_many_async(const MultiLock& lock, milliseconds ttl = milliseconds{0});
  Result<ReleaseResult> release_many(const MultiLock& lock);
  Result<ReleaseResult> release_many(std::vector<std::string> resources, std::string_view token);
  std::future<Result<ReleaseResult>> release_many_async(const MultiLock& lock);
  std::future<Result<ReleaseResult>> release_many_async(std::vector<std::string> resources, std::string_view token);

  // Looking without locking: see AsyncClient::status and nodes.
  Result<ResourceStatus> status(std::string_view resource);
  std::future<Result<ResourceStatus>> status_async(std::string_view resource);
  Result<NodesReport> nodes();
  std::future<Result<NodesReport>> nodes_async();

  // Elections (election.hpp). campaign runs for leader of `name` and
  // returns once elected: the lease on `name` taken with a fence (the
  // term), then the leader's record written on a majority. While waiting
  // it retries what waiting can cure — held by another leader (it waits
  // for the release or the TTL, woken by notifications), no quorum, too
  // little validity, a record that reached too few masters — backing off
  // after a failure that was no "held"; until opts.wait has passed
  // (Errc::held, or that round's error) or opts.cancel (Errc::cancelled).
  // Errors: those, invalid_argument (a bad name, identity or value size,
  // ttl; on the loop thread), closed. campaign_async: the same as a
  // future (a Leadership in a future never read resigns when the future
  // goes).
  Result<Leadership> campaign(std::string_view name, CampaignOptions opts = {});
  std::future<Result<Leadership>> campaign_async(std::string_view name, CampaignOptions opts = {});
  // leader: who leads `name` now (AsyncClient::leader).
  Result<LeaderStatus> leader(std::string_view name);
  std::future<Result<LeaderStatus>> leader_async(std::string_view name);
  // observe watches the election `name` (AsyncClient::observe; the
  // callback runs on the client's loop thread); stop or destroy the
  // LeaderWatch from any thread. Errors: invalid_argument.
  Result<LeaderWatch> observe(std::string_view name, LeaderWatchCallback on_change);

  // config returns the validated config in use.
  const Config& config() const noexcept;

  // stats: the client's counters since it was created (redlock/observer.hpp);
  // any thread, also inside callbacks on the loop thread; never waits.
  Stats stats() const;

 private:
  friend class Leadership;
  struct Impl;
  REDLOCK_LOCAL explicit Client(std::unique_ptr<Impl> impl) noexcept;
  // A leadership's rounds: its record written (leader_proclaim) or
  // deleted (leader_resign) on every master (src/election.cpp).
  REDLOCK_LOCAL Result<void> write_record(const Leadership& l, std::uint64_t rev, const std::string& value);
  REDLOCK_LOCAL Result<void> delete_record(const Leadership& l);
  std::unique_ptr<Impl> impl_;
};

template <class F>
auto Client::with_lock(std::string_view resource, LeaseOptions opts, F&& fn)
    -> Result<std::invoke_result_t<F, std::stop_token>> {
  using R = std::invoke_result_t<F, std::stop_token>;
  Result<Lease> lease = lock(resource, std::move(opts));
  if (!lease) return std::move(lease).error();
  // After fn: a lease lost by any means (its deadline passed, even while
  // the process was stopped and nothing else has seen it yet) makes its
  // release say Errc::lost; a release that finds our token gone from so
  // many masters that no majority can still hold it means it was lost
  // too, without our knowing when.
  const auto lost = [&lease]() -> std::optional<Error> {
    const std::string name = lease->resource();
    Result<ReleaseResult> released = lease->release();
    if (!released.ok()) {
      if (released.error().code == Errc::lost) return std::move(released).error();
      return std::nullopt;
    }
    std::size_t gone = 0;
    for (const NodeOutcome& n : released->nodes) gone += n.outcome == Outcome::held ? 1 : 0;
    const std::size_t all = released->nodes.size();
    // Deleting it somewhere does not make up for its absence from the rest.
    if (all == 0 || gone <= all - quorum_of(all)) return std::nullopt;
    Error e = make_error(Errc::lost, "lease on " + name + " lost: its release found it no longer held (our token gone from " +
                                         std::to_string(gone) + " of " + std::to_string(all) + " masters)");
    e.nodes = std::move(released->nodes);
    return e;
  };
  if constexpr (std::is_void_v<R>) {
    std::forward<F>(fn)(lease->stop_token());
    if (std::optional<Error> e = lost()) return std::move(*e);
    return Result<void>{};
  } else {
    R value = std::forward<F>(fn)(lease->stop_token());
    if (std::optional<Error> e = lost()) return std::move(*e);
    return Result<R>(std::move(value));
  }
}

}  // namespace redlock
