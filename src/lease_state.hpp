// lease_state.hpp — what a Lease shares with its client's loop.
//
// LeaseState is shared (shared_ptr) by the Lease handles of the user's
// threads and by the Watchdog on the loop thread; its mutable fields are
// guarded by its mutex. LeaseHost is the client's side of the link: it
// posts work to the loop for as long as the client lives (the Client clears
// it before it closes), and it keeps the reentrancy registry.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "redlock/async_client.hpp"
#include "redlock/lease.hpp"
#include "runtime.hpp"

namespace redlock::detail {

class Engine;
class Watchdog;

struct LeaseHost {
  using Task = std::function<void(AsyncClient&)>;
  std::mutex mu;
  // post runs a task on the loop thread; empty once the client is gone.
  std::function<void(Task)> post;                               // guarded by mu
  std::thread::id loop_thread;                                  // set once, before any lease exists
  milliseconds release_bound{0};                                // how long a release may block a caller
  std::map<std::string, std::weak_ptr<struct LeaseState>> reentrant;  // resource → held reentrant lease; mu
};

struct LeaseState {
  // Fixed when the lease is taken.
  std::string resource;
  std::string token;
  std::uint64_t fence = 0;
  int attempts = 0;  // the acquire's rounds
  milliseconds ttl{0};
  LeaseOptions options;
  std::string owner;  // reentrant leases: their owner
  std::chrono::steady_clock::time_point taken{};
  std::shared_ptr<LeaseHost> host;

  // Shared with the user's threads; guarded by mu.
  mutable std::mutex mu;
  std::chrono::steady_clock::time_point deadline{};
  std::optional<Error> lost;
  bool released = false;  // the last hold was given back: nothing more happens
  int extensions = 0;
  int holds = 1;
  std::stop_source stop;

  // Loop thread only.
  Watchdog* watchdog = nullptr;
};

// Watchdog — keeps one lease extended and declares it lost. Lives on the
// loop, on the engine's Runtime (so it runs in the simulator too); owns two
// timers and frees itself once stopped and no extension is in flight,
// telling `gone` (its client) last, never inside a call of its own owner.
class Watchdog {
 public:
  Watchdog(Engine& engine, std::shared_ptr<LeaseState> state, std::function<void(Watchdog*)> gone);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void start();
  // stop: the lease was released; no signal. Idempotent.
  void stop();
  // shutdown: the client closes under the lease; it is lost (Errc::lost,
  // "client closed"), then stopped.
  void shutdown();

  Watchdog* prev = nullptr;  // the client's intrusive list
  Watchdog* next = nullptr;

 private:
  ~Watchdog() = default;
  void arm_extend(Clock::duration in);
  void arm_deadline();
  void on_extend_timer();
  void on_extended(Result<Lock> r);
  void on_deadline_timer();
  void lose(std::string why, std::vector<NodeOutcome> nodes = {});
  void maybe_free();
  TimePoint current_deadline() const;
  std::string cap_reached(TimePoint now) const;

  Engine& engine_;
  const Options& options_;
  std::shared_ptr<LeaseState> state_;
  std::function<void(Watchdog*)> gone_;
  std::unique_ptr<Timer> extend_timer_;
  std::unique_ptr<Timer> deadline_timer_;
  std::unique_ptr<Timer> free_timer_;  // frees the stopped watchdog on a later loop turn
  bool stopped_ = false;
  bool extending_ = false;
  std::string stopped_extending_;  // why the watchdog no longer extends (a cap)
  std::optional<Error> last_failure_;
};

// start_watchdog puts a watchdog on `client`'s loop for `state` (loop
// thread only). Without a live client the lease is lost at once.
void start_watchdog(AsyncClient& client, std::shared_ptr<LeaseState> state);

}  // namespace redlock::detail
