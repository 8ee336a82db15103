// engine.hpp — the Redlock algorithm over a Transport and a Runtime.
//
// Engine starts acquire, extend and release operations (src/operation.hpp)
// and keeps the list of live ones, for cancellation and shutdown. It knows
// nothing of hiredis or uv: production runs it on a UvRuntime, the unit
// tests on a fake transport, the simulator (tools/sim) on simulated time
// and simulated masters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

#include "redlock/error.hpp"
#include "redlock/lock.hpp"
#include "redlock/options.hpp"
#include "runtime.hpp"
#include "transport.hpp"

namespace redlock::detail {

class Operation;
class AcquireOperation;
class TimerQueue;

// What an operation completes with (the same types as the public
// callbacks: the engine includes no client header).
using LockCallback = std::function<void(Result<Lock>)>;
using ReleaseCallback = std::function<void(Result<ReleaseResult>)>;

// check_resource: "" when `resource` is a usable name, else why not
// (empty, longer than 1024 bytes, or containing '}').
std::string check_resource(const std::string& resource);

class Engine {
 public:
  // Engine keeps references to all three; they must outlive it. Loop thread
  // only, apart from the cancellation of an acquire's stop token.
  Engine(Runtime& runtime, Transport& transport, const Options& options);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  void acquire(std::string resource, AcquireOptions opts, LockCallback done);
  // acquire_many takes every resource or none (one script per master).
  // `resources` must be sorted and without duplicates (AsyncClient does it):
  // the same set is then the same keys in the same order on every master.
  // The Lock's resource is the first of them.
  void acquire_many(std::vector<std::string> resources, AcquireOptions opts, LockCallback done);
  // `more`: the other resources of a multi-resource lock (sorted, after
  // lock.resource / resource). A lease's extensions go through its
  // service's batcher (src/lease_service.hpp) instead.
  void extend(Lock lock, milliseconds ttl, LockCallback done, const std::vector<std::string>& more = {});
  // `permit`: the release of a semaphore's permit (Lock::permit);
  // `shared`: of a read lock's entry (Lock::shared).
  void release(std::string resource, std::string token, ReleaseCallback done,
               const std::vector<std::string>& more = {}, std::optional<std::uint32_t> permit = {},
               bool shared = false);

  // shutdown makes every live operation (and any started later) complete
  // with Errc::closed on a later loop turn — an acquire attempt on its way
  // is rolled back first; on_idle runs once no operation is left (at once
  // if none is). Idempotent.
  void shutdown(std::function<void()> on_idle);

  std::size_t live_operations() const noexcept { return live_; }
  bool closing() const noexcept { return closing_; }
  Runtime& runtime() noexcept { return runtime_; }
  Transport& transport() noexcept { return transport_; }
  // timers: the operations' (and the extension batcher's) timers, one array heap on
  // one runtime timer (src/timer_queue.hpp; made at the first use, kept
  // until the engine goes, with no runtime timer of its own while it has
  // no timer).
  TimerQueue& timers();
  const Options& options() const noexcept { return options_; }
  // owner_suffix: appended to every value this engine draws (src/token.hpp).
  const std::string& owner_suffix() const noexcept { return owner_suffix_; }
  // telemetry: the transport's counters and observer (null: none).
  Telemetry* telemetry() const noexcept { return telemetry_; }

  // For Operation only: the list of live operations.
  void enlist(Operation* op) noexcept;
  void delist(Operation* op) noexcept;

  // Wait lines (docs/design.md, "A crowd in one client"): this client's
  // acquires that wait for one lock key, in arrival order. Only the first
  // of a line listens for releases and tries; the others sleep until their
  // turn (or their wait's deadline). Ordering only: who holds the lock is
  // still decided by the masters' majority alone.
  // line_busy: somebody of this client waits for `key`. Every acquire asks:
  // with nobody waiting at all (the usual case) it hashes nothing.
  bool line_busy(const std::string& key) const { return !lines_.empty() && lines_.contains(key); }
  // join_line puts `op` at the end of key's line.
  void join_line(const std::string& key, AcquireOperation* op) { lines_[key].push_back(op); }
  // leave_line takes `op` out of key's line; when it was first, the next
  // gets its turn (AcquireOperation::your_turn; `took`: `op` leaves holding
  // the lock). Never calls back the one leaving.
  void leave_line(const std::string& key, AcquireOperation* op, bool took);

 private:
  void start(Operation* op);
  void watch_cancel(Operation* op, const std::stop_token& token);
  void drain_cancels();
  void maybe_idle();

  Runtime& runtime_;
  Transport& transport_;
  std::unique_ptr<TimerQueue> timers_;
  const Options& options_;
  std::string owner_suffix_;
  Telemetry* telemetry_;
  Operation* head_ = nullptr;  // intrusive list of live operations
  // see join_line; a vector, not a deque: most lines hold one waiter, and a
  // deque's first block is 512 bytes
  std::unordered_map<std::string, std::vector<AcquireOperation*>> lines_;
  std::size_t live_ = 0;
  bool closing_ = false;
  std::function<void()> on_idle_;
  // Cancellation requests from other threads: operation ids, drained on the
  // loop (watch_cancel).
  struct CancelQueue {
    std::mutex mu;
    std::vector<std::uint64_t> ids;
  };
  std::shared_ptr<CancelQueue> cancels_ = std::make_shared<CancelQueue>();
  std::unique_ptr<Signal> cancel_signal_;
  std::uint64_t next_id_ = 0;
};

}  // namespace redlock::detail
