// redlock/mutex.hpp — a Client and a resource as a standard mutex, for
// std::scoped_lock, std::unique_lock and std::lock:
//
//   redlock::Mutex m(*client, "nightly-report", {.acquire = {.ttl = 10s}});
//   {
//     std::scoped_lock guard(m);  // waits until the lease is held
//     if (m.stop_token().stop_requested()) …  // lost: stop touching the resource
//   }                             // released
//
// It meets the standard's Lockable and TimedLockable requirements, whose
// lock() returns only once the lock is held and cannot report a failure.
// So:
//   lock()           waits until the lease is held, however long that takes:
//                    failures that waiting can cure (held elsewhere, no
//                    quorum, validity too short, a lost race) are retried,
//                    each round waiting the options' acquire.wait (60 s
//                    when it is 0). A failure that no retry can cure —
//                    invalid options (a reentrant Mutex included), a call
//                    on the client's loop thread, the client closed,
//                    acquire.cancel requested, an internal error — is a
//                    contract violation: one line on stderr naming the
//                    resource, the error's code and message, then
//                    std::abort(), as for a wrong access to a Result
//                    (error.hpp). Never an exception.
//   try_lock()       one attempt (no wait): false when not taken;
//                    last_error() says why. Never aborts.
//   try_lock_for(d)  waits at most d (try_lock_until: until a time):
//                    false when not taken, last_error() says why. Never
//                    aborts: the form for a caller who must handle every
//                    failure (with std::unique_lock(m, d) or std::try_lock).
//   unlock()         releases the lease and waits for the release, bounded
//                    as Lease::release; an error (the lease was lost before
//                    it, say) goes to last_error().
// While held the lease is kept extended by its watchdog and may still be
// lost (lease.hpp): watch stop_token() or lease().valid() in the critical
// section — a std::mutex is never lost, a distributed lock can be.
//
// Threads: like a std::mutex, one Mutex may be shared by the threads of a
// process; they take it in turn locally (a process-local timed mutex)
// before the lease is taken, and the thread that locked it unlocks it.
// Not recursive (LeaseOptions::reentrant is refused). Destroying a Mutex
// that is held releases the lease, and is a bug as for a std::mutex.
// The Client must outlive the Mutex.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>

#include "redlock/client.hpp"
#include "redlock/error.hpp"
#include "redlock/export.hpp"
#include "redlock/lease.hpp"

namespace redlock {

class REDLOCK_API Mutex {
 public:
  // Mutex names `resource` on `client`, taken with `options` (acquire.ttl,
  // acquire.wait per round of lock(), fence, fair, the watchdog's
  // settings…). Takes nothing yet.
  Mutex(Client& client, std::string resource, LeaseOptions options = {});
  ~Mutex();
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // lock waits until held; a failure no retry can cure aborts (above).
  void lock();
  // try_lock: one attempt; false (last_error() says why) when not taken.
  bool try_lock();
  // try_lock_for / try_lock_until: wait at most that long; false (and
  // last_error()) when not taken.
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& d) {
    return try_lock_within(std::chrono::ceil<milliseconds>(d));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& t) {
    return try_lock_within(std::chrono::ceil<milliseconds>(t - Clock::now()));
  }
  // unlock releases the lease (its error, if any, to last_error()).
  void unlock();

  // lease is the lease while held (empty otherwise): fence(), remaining(),
  // valid(). Read it only in the thread that holds the Mutex.
  const Lease& lease() const noexcept { return lease_; }
  // stop_token is requested when the held lease is lost (lease.hpp).
  std::stop_token stop_token() const noexcept { return lease_.stop_token(); }
  // last_error: why the latest try_lock / try_lock_for / unlock (or a
  // retried round of lock()) of this Mutex failed, by any thread; nullopt
  // when none has.
  std::optional<Error> last_error() const;

  const std::string& resource() const noexcept { return resource_; }

 private:
  bool try_lock_within(milliseconds wait);
  Result<Lease> take(milliseconds wait);
  void remember(const Error& e);

  Client& client_;
  const std::string resource_;
  const LeaseOptions options_;
  std::timed_mutex local_;  // the process's threads take turns here first
  Lease lease_;             // the holder of local_'s
  mutable std::mutex error_mu_;
  std::optional<Error> last_error_;  // (error_mu_)
};

}  // namespace redlock
