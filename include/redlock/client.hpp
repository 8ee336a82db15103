// redlock/client.hpp — the blocking, thread-safe facade.
//
// A Client runs its own loop thread with an AsyncClient on it. Every member
// may be called from any thread at once; a call blocks until the operation
// completes (each is bounded: a round by the node timeout, a lock() by its
// wait deadline) or returns a std::future for it. Destroying the Client
// closes the connections and joins the thread; operations still in flight
// complete with Errc::closed first.
#pragma once

#include <future>
#include <memory>
#include <string_view>

#include "redlock/async_client.hpp"
#include "redlock/config.hpp"
#include "redlock/error.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"

namespace redlock {

class Client {
 public:
  // create validates the config (Errc::config), starts the loop thread and
  // begins connecting. It does not wait for the nodes: an operation issued
  // before a connection is up waits for it within its node deadline.
  static Result<std::unique_ptr<Client>> create(Config config);

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // lock acquires `resource`, retrying until opts.wait has passed.
  Result<Lock> lock(std::string_view resource, AcquireOptions opts = {});
  // try_lock makes one attempt (wait = 0) with the given ttl (0: default).
  Result<Lock> try_lock(std::string_view resource, milliseconds ttl = milliseconds{0});
  // extend: see AsyncClient::extend.
  Result<Lock> extend(const Lock& lock, milliseconds ttl = milliseconds{0});
  // unlock releases a lock; see AsyncClient::release.
  Result<ReleaseResult> unlock(const Lock& lock);
  Result<ReleaseResult> unlock(std::string_view resource, std::string_view token);

  // The same, as futures; the future becomes ready on the loop thread.
  std::future<Result<Lock>> lock_async(std::string_view resource, AcquireOptions opts = {});
  std::future<Result<Lock>> extend_async(const Lock& lock, milliseconds ttl = milliseconds{0});
  std::future<Result<ReleaseResult>> unlock_async(std::string_view resource, std::string_view token);

  // config returns the validated config in use.
  const Config& config() const noexcept;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace redlock
