// lease_service.hpp — the leases of one client, above the engine.
//
// A lease is a lock the client keeps extended until it is released or
// lost. LeaseService takes it through the engine's public operations
// (acquire, acquire_many, release), keeps it with a watchdog per lease, and
// extends the watchdogs' leases through its own ExtendBatcher (many leases
// per round). The client core owns it (AsyncClient's ClientCore, the
// simulator's client); the engine knows nothing of it. Loop thread only.
#pragma once

#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine.hpp"
#include "extend_batch.hpp"
#include "lease_state.hpp"
#include "lease_wheel.hpp"

namespace redlock::detail {

// LeaseService — takes, keeps and releases one client's leases.
// A watchdog keeps its lease extended and declares it lost; its timer is
// the lease's entry of the service's LeaseWheel, armed for the earlier of
// the next extension and the deadline (less a margin). A lease being kept
// holds itself (`self`) until stopped with no extension in flight; it is
// then let go on a later loop turn, never inside a call of its own owner.
// It runs on the engine's Runtime, so in the simulator too.
class LeaseService final : public ExtendSink {
 public:
  explicit LeaseService(Engine& engine);
  LeaseService(const LeaseService&) = delete;
  LeaseService& operator=(const LeaseService&) = delete;
  // Leases still kept are let go (stopped, their hold on themselves
  // dropped); verdicts still to come go nowhere.
  ~LeaseService();

  using LeaseDone = std::function<void(Result<std::shared_ptr<LeaseState>>)>;
  // lock: acquire `resources` (sorted, unique; several: acquire_many, all
  // or none), then the lease is kept (keep). `owner`: a reentrant lease's
  // owner (else empty); `host`: the handles' link to the client (null: no
  // handles, the simulator). The options must have been checked
  // (lease_options_problem).
  void lock(std::vector<std::string> resources, LeaseOptions opts, std::string owner, std::shared_ptr<LeaseHost> host,
            LeaseDone done);
  // keep: the lease now keeps itself extended (with auto_extend off, it
  // runs out at its deadline, and is lost then). Once the service is
  // closed, it is lost at once.
  void keep(const std::shared_ptr<LeaseState>& s);
  // release: the watchdog stops, then every resource is released.
  void release(const std::shared_ptr<LeaseState>& s, ReleaseCallback done);
  // stop: the lease was released; no signal. Idempotent; a lease not kept
  // (no `self`) is left alone.
  void stop(LeaseState& s);
  // close: the client closes under its leases: each is lost (Errc::lost,
  // "the client was closed"), then stopped; extensions still queued are
  // told Errc::closed. Idempotent.
  void close();

  // live: leases kept and not yet let go; on_idle (set by the client) is
  // told each time it drops to zero.
  std::size_t live() const noexcept { return live_; }
  std::function<void()> on_idle;

  // batcher: the extensions' batcher (made at the first use; tests).
  ExtendBatcher& batcher();

 private:
  void on_batch_extended(Extendee& lease, TimePoint now, Result<Extension> r) override;
  static void fire(void* service, WheelEntry* entry, TimePoint now);
  LeaseWheel& wheel();
  void on_timer(LeaseState& s, TimePoint now);
  void on_extended(LeaseState& s, TimePoint now, Result<Extension> r);
  void arm_extend(LeaseState& s, TimePoint now, Clock::duration in);
  void arm_deadline(LeaseState& s);
  void extend_now(LeaseState& s, TimePoint now);
  void on_deadline(LeaseState& s);
  void lose(LeaseState& s, std::string why, std::vector<NodeOutcome> nodes = {});
  void tell_loss(LeaseState& s);
  void finish(LeaseState& s);
  void shutdown(LeaseState& s);
  LeaseState::Cap cap_reached(const LeaseState& s, TimePoint now) const;

  Engine& engine_;
  std::optional<LeaseWheel> wheel_;  // see wheel()
  std::unique_ptr<ExtendBatcher> batcher_;
  std::size_t live_ = 0;
  bool closed_ = false;
  // The grid points extensions were lately planned at (arm_extend), and the
  // keys each gathers: a point takes no more than one full round
  // (extend_batch_max keys); a lease beyond that goes when it was planned.
  // Direct-mapped (grid_point): a slot holding another point is reused.
  struct GridPoint {
    TimePoint at{};
    std::size_t keys = 0;
  };
  std::array<GridPoint, 64> grid_points_{};
  GridPoint& grid_point(TimePoint point);
};

}  // namespace redlock::detail
