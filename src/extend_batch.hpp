// extend_batch.hpp — the leases' extensions, many leases per round.
//
// A lease watchdog (src/lease_service.cpp) does not start an operation of
// its own to extend its lease: it submits itself (an Extendee) to its
// service's ExtendBatcher, which tells each verdict to an ExtendSink. Once the window has passed (or `max` leases wait) the
// batcher starts one ExtendRound for up to `max` leases: one Call, sent to
// every master at once — the extend_batch script, one key, value and TTL
// per lease and resource (src/scripts.hpp; a round of one lease of one
// resource sends the plain extend). Each master answers one flag per key;
// the round keeps each lease's tally (its yes) and decides each lease on
// its own, exactly as an extend round of its own would:
//   extended       a majority said yes (once each server, never from a
//                  master in restart quarantine), with validity
//                  ttl − (now − T1) − drift left above min_validity, before
//                  the lease's current validity deadline;
//   failed         yes + masters yet to answer < majority: the error names
//                  every master's answer for that lease, as an extend
//                  round's does (so "refused for good" reads the same).
// Verdicts are delivered on a loop turn of their own (never inside a
// master's reply, never inside submit), all of one round's that are ready
// at once. T1 is when the round was sent; the validity is measured when
// the verdict is delivered, as an operation measures it when it evaluates.
// The safety argument of extend is unchanged (docs/design.md, "Batched
// extensions"): per lease, the same majority over the same answers.
//
// Flow control: at most keys_in_flight leases' keys are outstanding per
// master (in rounds sent and not finally answered). A round is made only
// when a majority of masters can take it at once; until then its leases
// wait in the batcher, as pointers, and T1 is taken when they can go (so a
// burst of 100,000 leases falling due together is not made into 200
// rounds in one loop turn). A master that cannot take a round yet gets it
// from its own queue (at most rounds_waiting deep; beyond, the round is
// not sent there) as its answers come back; the others are not held up,
// so a slow or hung minority costs nothing. 200 calls of 512 keys queued
// in each master at once made the last of them miss node_timeout behind
// the others, and every lease's retry then failed.
//
// A lease of several resources rides the same rounds: one key per
// resource, each checked on its own by the script, and a master's yes for
// the lease needs every one of its keys' flags (docs/design.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/error.hpp"
#include "runtime.hpp"
#include "transport.hpp"

namespace redlock::detail {

using std::chrono::milliseconds;

class Engine;

// Extension — a lease extended: its new validity deadline, and the
// validity it had when the verdict was delivered.
struct Extension {
  TimePoint validity_deadline{};
  milliseconds validity{0};
};

// Extendee — a lease's side of a batched extension (a LeaseState). The
// strings must stay valid while it is queued or in a round (until its
// verdict): the round reads them when it is built.
// no_permit: a lease of a lock, not of a semaphore's permit (permits are
// fewer than max_permits).
inline constexpr std::uint8_t no_permit = 0xff;
static_assert(max_permits < no_permit);

class Extendee {
 public:
  virtual std::string_view extend_resource() const = 0;
  // extend_more: the other resources of a lease of several (lock_many):
  // their keys go in the same round, with the same value and TTL, and a
  // master says yes for the lease only if it extended every one of them.
  virtual std::span<const std::string> extend_more() const { return {}; }
  virtual std::string_view extend_token() const = 0;
  // extend_permit: the permit of a semaphore's lease (its key is that
  // permit's), no_permit for a lock.
  virtual std::uint8_t extend_permit() const { return no_permit; }
  // extend_shared: a read lock's lease — its entry among the readers is
  // extended by read_extend, in a round of its own (the batch script
  // knows lock keys only).
  virtual bool extend_shared() const { return false; }
  virtual milliseconds extend_ttl() const = 0;
  // extend_deadline: the lease's current validity deadline; an extension
  // decided later is too late (Errc::too_late).
  virtual TimePoint extend_deadline() const = 0;

 protected:
  ~Extendee() = default;
};

// ExtendSink — where a batcher's verdicts go (the lease service).
class ExtendSink {
 public:
  // on_batch_extended: the verdict for `lease`, exactly once per submit
  // (`now`: the clock when the verdict was made).
  virtual void on_batch_extended(Extendee& lease, TimePoint now, Result<Extension> r) = 0;

 protected:
  ~ExtendSink() = default;
};

class ExtendRound;

class ExtendBatcher {
 public:
  // `window`: how long the first queued lease waits for others (0: the
  // next loop turn); `max`: keys per round, one per lease and resource (1:
  // a round per lease); `sink` hears every verdict, also from rounds that
  // outlive the batcher (until silence()).
  ExtendBatcher(Engine& engine, milliseconds window, std::size_t max, ExtendSink& sink);
  ExtendBatcher(const ExtendBatcher&) = delete;
  ExtendBatcher& operator=(const ExtendBatcher&) = delete;
  // Leases still queued get Errc::closed at once, and so do rounds that
  // wait for a master; rounds in flight finish without the batcher.
  ~ExtendBatcher();

  // submit: `lease` is due for an extension at `now` (the caller's reading
  // of the runtime's clock; the latency is measured from it).
  void submit(Extendee* lease, TimePoint now);

  // silence: verdicts still to come (queued leases, rounds in flight) go
  // nowhere and touch no lease — the sink is going away with its leases.
  void silence() noexcept { flow_->sink = nullptr; }

  // queued: leases waiting for a round (tests).
  std::size_t queued() const noexcept { return queue_.size(); }
  // in_flight: keys sent to `node` in rounds not yet finally answered there.
  std::size_t in_flight(std::size_t node) const noexcept;
  // waiting: rounds waiting to be sent to `node`.
  std::size_t waiting(std::size_t node) const noexcept { return waiting_[node].size(); }

  static constexpr std::size_t keys_in_flight = 2048;  // per node
  static constexpr std::size_t rounds_waiting = 4;     // per node; more are not sent there

  // Flow — what the batcher shares with its rounds, which may outlive it:
  // the keys in flight per node, the batcher while it lives, the sink
  // until silenced.
  struct Flow {
    ExtendBatcher* owner;
    ExtendSink* sink;
    std::vector<std::size_t> in_flight;
  };
  // send sends `round` to `node` now, or queues it there until the node
  // can take it (from the round, at its launch).
  void send(ExtendRound* round, std::size_t node);
  // node_done: a round's node gave its final event (from the round); what
  // waits for the node goes on the next loop turn.
  void node_done(std::size_t node);
  // recycle: a round is over (every verdict told, every final event come):
  // kept for the next one, up to spare_rounds, with the room of its buffers.
  void recycle(ExtendRound* round);
  static constexpr std::size_t spare_rounds = 8;

 private:
  void flush();
  void drain();
  // can_take: `node` can be sent a round of `keys` at once.
  bool can_take(std::size_t node, std::size_t keys) const noexcept;

  Engine& engine_;
  milliseconds window_;
  std::size_t max_;
  std::deque<Extendee*> queue_;
  std::deque<TimePoint> submitted_;  // when each queued lease was submitted (its latency)
  std::size_t queued_keys_ = 0;      // the queued leases' keys (one per resource)
  std::vector<std::deque<ExtendRound*>> waiting_;  // per node: rounds it could not take yet
  std::vector<ExtendRound*> spare_;               // rounds over, to be used again
  std::shared_ptr<Flow> flow_;
  std::unique_ptr<Timer> timer_;  // the window: flush
  std::unique_ptr<Timer> drain_;  // a node can take more: drain
};

}  // namespace redlock::detail
