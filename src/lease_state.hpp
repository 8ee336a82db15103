// lease_state.hpp — what a Lease shares with its client's loop.
//
// LeaseState is shared (shared_ptr) by the Lease handles of the user's
// threads and by the Watchdog on the loop thread; its mutable fields are
// guarded by its mutex. LeaseHost is the client's side of the link: it
// posts work to the loop for as long as the client lives (the Client clears
// it before it closes), and it keeps the reentrancy registry.
//
// Lock order: LeaseHost::mu before LeaseState::mu, never the other way.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>
#include <thread>

#include "redlock/async_client.hpp"
#include "redlock/lease.hpp"
#include "extend_batch.hpp"
#include "runtime.hpp"

namespace redlock::detail {

class Engine;
class Watchdog;

// Reentry — one (resource, owner) of the reentrancy registry: the lease
// that owner holds, or `acquiring` while one of its threads is taking it
// (the owner's other threads wait for that outcome instead of contending
// with their own owner).
struct Reentry {
  std::weak_ptr<struct LeaseState> lease;
  bool acquiring = false;
};

struct LeaseHost {
  using Task = std::function<void(AsyncClient&)>;
  using ReentryKey = std::pair<std::string, std::string>;  // resource, owner
  std::mutex mu;
  // post runs a task on the loop thread; empty once the client is gone.
  std::function<void(Task)> post;                               // guarded by mu
  std::thread::id loop_thread;                                  // set once, before any lease exists
  milliseconds release_bound{0};                                // how long a release may block a caller
  milliseconds default_ttl{0};                                  // Options::default_ttl, for re-entry checks
  std::map<ReentryKey, Reentry> reentrant;                      // guarded by mu
  std::condition_variable_any reentry_settled;                  // an `acquiring` entry got its outcome
};

// LeaseRules — what a lease keeps of its LeaseOptions once taken: how the
// watchdog extends it, and whom it tells of a loss.
struct LeaseRules {
  bool auto_extend = true;
  bool fence = false;
  double extend_at = 1.0 / 3.0;
  int max_extensions = 0;
  milliseconds max_hold{0};
  LostCallback on_lost;
};

// LeaseState — one held lease. A program may hold 100,000 of them, so what
// most leases never use costs a pointer until used: the list of resources
// of a lease of one (made when resources() is first asked), the stop
// source (made when stop_token() is first asked, or at the loss), the
// error of a loss.
struct LeaseState {
  // Fixed when the lease is taken.
  std::string resource;
  std::string token;
  std::uint64_t fence = 0;
  int attempts = 0;  // the acquire's rounds
  milliseconds ttl{0};
  LeaseRules rules;
  std::string owner;  // reentrant leases: their owner
  std::chrono::steady_clock::time_point taken{};
  std::shared_ptr<LeaseHost> host;
  // more: the other resources of a multi-resource lease (sorted, after
  // `resource`); empty for one.
  std::vector<std::string> more;

  // Shared with the user's threads; guarded by mu.
  mutable std::mutex mu;
  std::chrono::steady_clock::time_point deadline{};
  std::unique_ptr<Error> lost;
  bool released = false;  // the last hold was given back: nothing more happens
  int extensions = 0;
  int holds = 1;
  mutable std::stop_source stop{std::nostopstate};       // see stop_token()
  mutable std::unique_ptr<std::vector<std::string>> all;  // see resources()

  // resources: every resource, sorted (made on first use; mu must not be held).
  const std::vector<std::string>& resources() const;
  // stop_token: requested once the lease is lost (mu must not be held).
  std::stop_token stop_token() const;
  // lose_locked: record the loss (mu held); false if already lost or
  // released. The caller requests `stop` after letting go of mu.
  bool lose_locked(const Error& e);

  // Loop thread only.
  Watchdog* watchdog = nullptr;
};

// lease_options_problem: what is wrong with `opts` (extend_at outside
// (0, 1), negative caps); empty when nothing is.
std::string lease_options_problem(const LeaseOptions& opts);

// make_lease: the state of a lease just taken as `taken`; `more`: the
// other resources of a multi-resource lease (sorted, after taken.resource).
std::shared_ptr<LeaseState> make_lease(Lock taken, LeaseOptions opts, std::string owner,
                                       std::shared_ptr<LeaseHost> host, std::vector<std::string> more = {});

// release_lease: release the lease's lock (every resource) through
// `client`, on its loop thread; the watchdog stops first.
void release_lease(AsyncClient& client, const std::shared_ptr<LeaseState>& state, ReleaseCallback done);

// Watchdog — keeps one lease extended and declares it lost. Lives on the
// loop, on the engine's Runtime (so it runs in the simulator too); owns one
// timer of the engine's timers() queue, armed for the earlier of the
// next extension and the deadline (a program holding 100,000 leases pays
// one entry of an array heap each, not three uv timers), and
// frees itself once stopped and no extension is in flight, telling `gone`
// (its client) last, never inside a call of its own owner.
class Watchdog final : public Extendee {
 public:
  // `gone(host, this)`: the watchdog frees itself (its client's list).
  using Gone = void (*)(void* host, Watchdog* dog);
  Watchdog(Engine& engine, std::shared_ptr<LeaseState> state, Gone gone, void* host);
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

  // Extendee: a single-resource lease extends through the engine's batcher.
  const std::string& extend_resource() const override { return state_->resource; }
  const std::string& extend_token() const override { return state_->token; }
  milliseconds extend_ttl() const override { return state_->ttl; }
  TimePoint extend_deadline() const override { return deadline_; }
  void on_batch_extended(Result<Extension> r) override { on_extended(std::move(r)); }

 private:
  ~Watchdog() = default;
  // arm_extend sets the next extension `in` from now; rearm (re)starts the
  // timer for the earlier of it and the deadline (less the margin).
  void arm_extend(TimePoint now, Clock::duration in);
  void rearm(TimePoint now);
  void on_timer();
  void extend_now(TimePoint now);
  void on_extended(Result<Extension> r);
  void on_deadline();
  void lose(std::string why, std::vector<NodeOutcome> nodes = {});
  void maybe_free();
  // Cap — why the watchdog no longer extends (none: it does).
  enum class Cap : std::uint8_t { none, auto_extend_off, max_extensions, max_hold };
  Cap cap_reached(TimePoint now) const;
  std::string cap_text() const;

  Engine& engine_;
  const Options& options_;
  std::shared_ptr<LeaseState> state_;
  Gone gone_;
  void* host_;
  std::unique_ptr<Timer> timer_;  // once stopped: frees the watchdog on a later loop turn
  TimePoint extend_due_ = TimePoint::max();  // max: no extension planned
  TimePoint deadline_{};  // the lease's validity deadline (only the watchdog moves it; state_->deadline is its copy for other threads)
  bool stopped_ = false;
  bool extending_ = false;
  Cap stopped_extending_ = Cap::none;
  std::unique_ptr<Error> last_failure_;  // the last extension's failure, while no later one succeeded
};

// start_watchdog puts a watchdog on `client`'s loop for `state` (loop
// thread only). Without a live client the lease is lost at once.
void start_watchdog(AsyncClient& client, std::shared_ptr<LeaseState> state);

}  // namespace redlock::detail
