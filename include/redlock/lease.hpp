// redlock/lease.hpp — a lock that keeps itself held and says when it is lost.
//
// A Lease comes from Client::lock(), an AsyncLease from AsyncClient::lock(). While it lives, a watchdog on the
// client's loop extends it (a quorum round, token-checked, never recreating
// a missing key) once `extend_at` of its validity has passed. It is lost when
// an extension is refused by so many nodes that no majority can say yes any
// more, when an extension's majority comes after the validity deadline, or
// when the deadline passes with no successful extension — whichever comes
// first, and never later than the local validity deadline on the monotonic
// clock, so the holder learns of the loss before anyone else can hold the
// lock. Then, once: the stop token is requested and `on_lost` runs (on the
// client's loop thread), with an Error of code Errc::lost saying why.
//
// Destroying a Lease releases the lock (it never throws; it waits at most
// (release_retries + 1) × (node_timeout + release_settle) + release_retries ×
// (retry_delay + retry_jitter) + 250 ms for the release to complete — 600 ms
// with the defaults — and not at all when called on the client's loop
// thread). Move-only. (An AsyncLease starts the release and never waits.)
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "redlock/error.hpp"
#include "redlock/export.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

namespace detail {
struct LeaseState;
}

// LostCallback — told once, on the client's loop thread, why a lease was
// lost. Keep it short; it must not block (the loop serves every lock).
// Blocking Client calls made in it fail at once with invalid_argument
// instead of waiting for the loop they block; it may destroy the Client
// (client.hpp: "The loop thread").
using LostCallback = std::function<void(const Error&)>;

// LeaseOptions — how to take a lease (`acquire`, the very AcquireOptions
// of an acquire: ttl, wait, token, fence, fair, cancel) and how to keep it
// (the rest). `cancel` ends a waiting acquire only: it has no effect once
// the lease is held. A given `acquire.token` is the lease's value; it is
// extended and released under it.
struct REDLOCK_API LeaseOptions {
  AcquireOptions acquire;
  // The watchdog: extend once this fraction of the current validity has
  // passed (default 1/3, leaving 2/3 of it for retries of a failed round;
  // with batched extensions up to 1/16 of that time sooner, on a grid
  // shared with other leases: Options::extend_batch_window).
  // 0 < extend_at < 1. With auto_extend off the lease only expires.
  bool auto_extend = true;
  double extend_at = 1.0 / 3.0;
  // Caps (zero: none): at most this many extensions; no extension that
  // would let the lease run past max_hold from when it was taken. When a
  // cap stops the watchdog the lease runs out at its deadline (and is lost
  // then, with a message that names the cap).
  int max_extensions = 0;
  milliseconds max_hold{0};
  // Reentrancy: a second lock() of the same resource by the same owner while
  // the first lease is held succeeds at once, with no network round, and
  // adds a hold; the lock is released when the last hold is. A lock() by
  // the owner while another of its threads is still taking the lease waits
  // for that outcome (acquire.cancel ends the wait) and joins the lease it gets; if
  // that one fails, it tries itself. Other owners contend as usual.
  //
  // The inner lock() gets the held lease as it is, so it must not ask for
  // more: a fence the lease was taken without, a longer ttl (zero means
  // Options::default_ttl here too), a token other than the lease's,
  // auto_extend on an unextended lease, more extensions than the lease's
  // max_extensions or max_hold allow (no cap counts as more), or an
  // on_lost of its own (only the first lock()'s is told; watch
  // stop_token()) — each fails with invalid_argument, naming it. Asking
  // for less (a shorter ttl, no extension) is fine.
  //
  // `owner` names the owner; empty means the calling thread
  // ("thread:<id>"). In a thread pool give each task its own owner (a
  // request or job id): with the default, a later task that runs on the
  // same thread would re-enter a lease that an earlier task still holds
  // and never meant to share.
  bool reentrant = false;
  std::string owner;
  // Told once, on the loop thread, when the lease is lost.
  LostCallback on_lost;
};

// LeaseView — what a held lease tells, for both handles: Lease (Client)
// and AsyncLease (AsyncClient). Every member may be called from any thread.
class REDLOCK_API LeaseView {
 public:
  // valid: held, not lost, not released, and before the local validity
  // deadline (read from the monotonic clock now: true to the moment, even
  // with the network gone).
  bool valid() const noexcept;
  bool empty() const noexcept { return state_ == nullptr; }

  // resource: the (first, for a multi-resource lease) resource;
  // resources: all of them, sorted.
  const std::string& resource() const noexcept;
  const std::vector<std::string>& resources() const noexcept;
  const std::string& token() const noexcept;
  // fence is the fencing token (LeaseOptions::acquire.fence), 0 without fencing.
  std::uint64_t fence() const noexcept;
  // permit: which permit of the semaphore resource() it holds
  // (LeaseOptions::acquire.permits; Lock::permit); none for a lock.
  std::optional<std::uint32_t> permit() const noexcept;
  // shared: a read lock's lease (LeaseOptions::acquire.shared): its
  // watchdog extends this reader's own entry.
  bool shared() const noexcept;
  // attempts: the acquire rounds it took to get the lease (Lock::attempts).
  int attempts() const noexcept;
  // deadline is the current validity deadline (BootClock); each
  // extension moves it.
  BootClock::time_point deadline() const noexcept;
  milliseconds remaining() const noexcept;
  int extensions() const noexcept;
  // holds counts this owner's holds of a reentrant lease (1 otherwise).
  int holds() const noexcept;

  // stop_token is requested once, when the lease is lost (also when the
  // client closes under it); not when it is released.
  std::stop_token stop_token() const noexcept;
  // lost says why the lease was lost (empty while it is not). A lease
  // whose deadline has passed is lost, whatever the loop thread has seen
  // yet (after the process was stopped, say): lost() then records the
  // loss and requests the stop token itself, and on_lost is told once the
  // loop runs again; lost(), valid() and release() agree from then on.
  std::optional<Error> lost() const;

 protected:
  LeaseView() noexcept = default;
  REDLOCK_LOCAL explicit LeaseView(std::shared_ptr<detail::LeaseState> state) noexcept : state_(std::move(state)) {}
  ~LeaseView() = default;
  LeaseView(LeaseView&&) noexcept = default;
  LeaseView& operator=(LeaseView&&) noexcept = default;

  std::shared_ptr<detail::LeaseState> state_;
};

class REDLOCK_API Lease : public LeaseView {
 public:
  Lease() noexcept;  // empty: holds nothing
  ~Lease();
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  // release gives this hold back: the last hold of a lease stops the
  // watchdog and releases the lock on every node (waiting for the result,
  // bounded as for the destructor). An earlier hold of a reentrant lease
  // only drops the count (released = false, no nodes). Afterwards the Lease
  // is empty. Errors: not_held (an empty Lease), closed (the client is gone),
  // invalid_argument (called on the client's loop thread, as every blocking
  // Client call there: the release was started but not waited for), lost (the lease was lost before this release —
  // as lost() says, its deadline passing included; the release still
  // deletes what is left of the key).
  Result<ReleaseResult> release();
  // release_async: release() as a future (client.hpp: every operation's
  // _async form), ready when the release is done, with the same results;
  // on the loop thread it is ready at once with invalid_argument (the
  // release started). Afterwards the Lease is empty.
  std::future<Result<ReleaseResult>> release_async();

 private:
  friend class Client;
  REDLOCK_LOCAL explicit Lease(std::shared_ptr<detail::LeaseState> state) noexcept;
};

// AsyncLease — a lease from AsyncClient::lock(): the same watchdog and lost
// signal (on_lost and the stop token, on the client's loop), but nothing
// blocks. Loop thread only, apart from the LeaseView members. Destroying
// it starts the release and does not wait for it (call release() to hear
// the outcome); once the client is closed there is nothing to release
// with, and the key expires by its TTL. Not reentrant. Move-only.
class REDLOCK_API AsyncLease : public LeaseView {
 public:
  AsyncLease() noexcept;  // empty: holds nothing
  ~AsyncLease();
  AsyncLease(AsyncLease&& other) noexcept;
  AsyncLease& operator=(AsyncLease&& other) noexcept;
  AsyncLease(const AsyncLease&) = delete;
  AsyncLease& operator=(const AsyncLease&) = delete;

  // release stops the watchdog and releases the lock on every master;
  // `done` (may be empty) gets the result on a later loop turn, like any
  // AsyncClient operation — Errc::not_held for an empty or already
  // released lease, Errc::closed once the client is closed, Errc::lost
  // for a lease lost before this release (as Lease::release). Afterwards
  // the AsyncLease is empty.
  void release(std::function<void(Result<ReleaseResult>)> done = {});

 private:
  friend class ClientCore;
  REDLOCK_LOCAL explicit AsyncLease(std::shared_ptr<detail::LeaseState> state) noexcept;
};

}  // namespace redlock
