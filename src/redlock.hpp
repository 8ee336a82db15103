// redlock.hpp — the Redlock algorithm over a Transport on a uv loop.
//
// Engine runs acquire, extend and release operations. Each operation owns
// one uv timer: it defers every completion to the loop (so no callback runs
// on the caller's stack), batches the replies that arrive in the same loop
// iteration as the deciding one, and spaces acquire retries. The engine
// knows nothing of hiredis; unit tests drive it with a fake Transport.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "redlock/async_client.hpp"
#include "redlock/options.hpp"
#include "transport.hpp"

namespace redlock::detail {

class Operation;

// check_resource: "" when `resource` is a usable name, else why not
// (empty, or longer than 1024 bytes).
std::string check_resource(const std::string& resource);

class Engine {
 public:
  // Engine keeps references to all three; they must outlive it.
  Engine(uv_loop_t* loop, Transport& transport, const Options& options) noexcept;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void acquire(std::string resource, AcquireOptions opts, LockCallback done);
  // acquire_many takes every resource or none (one script per master).
  // `resources` must be sorted and without duplicates (AsyncClient does it):
  // the same set is then the same keys in the same order on every master.
  // The Lock's resource is the first of them.
  void acquire_many(std::vector<std::string> resources, AcquireOptions opts, LockCallback done);
  // `more`: the other resources of a multi-resource lock (sorted, after
  // lock.resource / resource).
  void extend(Lock lock, milliseconds ttl, LockCallback done, const std::vector<std::string>& more = {});
  void release(std::string resource, std::string token, ReleaseCallback done,
               const std::vector<std::string>& more = {});

  // shutdown makes every live operation (and any started later) complete
  // with Errc::closed on the next loop iteration; on_idle runs once no
  // operation is left (at once if none is). Idempotent.
  void shutdown(std::function<void()> on_idle);

  std::size_t live_operations() const noexcept { return live_; }

 private:
  friend class Operation;
  void setup_acquire(Operation* op, std::string resource, AcquireOptions opts, std::string problem);
  void watch_cancel(Operation* op, const std::stop_token& token);
  void drain_cancels();
  void maybe_idle();
  void enlist(Operation* op) noexcept;
  void delist(Operation* op) noexcept;

  uv_loop_t* loop_;
  Transport& transport_;
  const Options& options_;
  Operation* head_ = nullptr;  // intrusive list of live operations
  std::size_t live_ = 0;
  bool closing_ = false;
  std::function<void()> on_idle_;
  // Cancellation requests from other threads: operation ids, drained on the
  // loop (src/redlock.cpp, watch_cancel).
  struct CancelQueue {
    std::mutex mu;
    std::vector<std::uint64_t> ids;
  };
  std::shared_ptr<CancelQueue> cancels_ = std::make_shared<CancelQueue>();
  uv_async_t* cancel_async_ = nullptr;
  bool cancel_closing_ = false;
  std::uint64_t next_id_ = 0;
};

}  // namespace redlock::detail
