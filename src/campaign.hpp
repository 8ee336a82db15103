// campaign.hpp — one campaign for leader on the client's loop (election.hpp;
// docs/design.md, "Elections"): a fenced lease on the name, then the
// leader's record on a majority. The blocking Client and the AsyncClient
// both run it; so can the simulator (no I/O of its own).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "redlock/election.hpp"
#include "lease_state.hpp"
#include "runtime.hpp"

namespace redlock::detail {

class LeaseService;
class Reports;

// identity_of: the identity a campaign names when it gives none — its lease
// value's owner, "host:pid" or "host:pid:label" ("" for a value naming none).
std::string identity_of(std::string_view token);

// Campaign — one enum and one transition function, step(Event).
//   idle          made; `start` checks the options and takes the first lock
//   locking       the lease's acquire is on its way (it waits, as any
//                 waiter does, at most one round of the campaign's wait)
//   proclaiming   held; the record is being written
//   taking_back   the record reached too few masters, or the lease ended
//                 while it travelled: it is deleted and the lease released
//                 before the campaign goes on
//   backing_off   after a failure waiting can cure other than "held"
//   done          `done` was called (once)
// A failure that waiting can cure (held, no quorum, too little validity or
// time, a record on too few masters) is retried: after "held" at once (the
// acquire waited already), else after a backoff growing from retry_delay +
// jitter to the wake-up safety net — until the wait's deadline. The cancel
// token ends it in any state (an acquire by the engine's own cancel; a
// backoff at once); so does the client's close (close()). Loop thread only.
class Campaign final : public std::enable_shared_from_this<Campaign> {
 public:
  using Done = std::function<void(Result<std::shared_ptr<LeaseState>>)>;
  // `host`: the lease handles' link to the client (null: the simulator);
  // `on_end` runs once `done` has been called (the owner forgets it).
  Campaign(Runtime& runtime, LeaseService& leases, Reports& reports, const Options& options,
           std::shared_ptr<LeaseHost> host, std::string name, CampaignOptions opts, Done done,
           std::function<void()> on_end);
  Campaign(const Campaign&) = delete;
  Campaign& operator=(const Campaign&) = delete;

  // start: the options checked (a problem: invalid_argument, on a later
  // loop turn), then the first acquire.
  void start() { step({.kind = Kind::start}); }
  // close: the client closes. A backoff ends at once with Errc::closed; an
  // acquire or a record on its way completes with it.
  void close() { step({.kind = Kind::close}); }
  // identity: the identity the record names (known once leased).
  const std::string& identity() const noexcept { return identity_; }

 private:
  enum class State : std::uint8_t { idle, locking, proclaiming, taking_back, backing_off, done };
  // Event — every input:
  //   start       the owner starts it
  //   refused     the options were refused (`failure`), a loop turn later
  //   leased      the lease's acquire came back (`leased`)
  //   recorded    the record's round came back (`failure`: on too few)
  //   taken_back  the record deleted and the lease released
  //   timer       the backoff passed
  //   cancel      the caller's cancel token (delivered on the loop)
  //   close       the client closes
  enum class Kind : std::uint8_t { start, refused, leased, recorded, taken_back, timer, cancel, close };
  struct Event {
    Kind kind;
    std::optional<Result<std::shared_ptr<LeaseState>>> leased{};
    std::optional<Error> failure{};
  };
  void step(Event e);
  // The steps' actions (called only from step).
  void begin();
  void lock_round();
  void proclaim();
  void take_back();
  bool leading() const;
  void failed(Error why);
  void finish(Result<std::shared_ptr<LeaseState>> r);

  Runtime& runtime_;
  LeaseService& leases_;
  Reports& reports_;
  const Options& options_;
  std::shared_ptr<LeaseHost> host_;
  std::string name_;
  CampaignOptions opts_;
  Done done_;
  std::function<void()> on_end_;
  State state_ = State::idle;
  bool forever_ = false;
  TimePoint until_{};
  std::chrono::milliseconds backoff_{0};
  std::string identity_;
  std::shared_ptr<LeaseState> lease_;  // proclaiming, taking_back
  Error why_;                          // taking_back: the failure to act on once taken back
  std::unique_ptr<Timer> timer_;
  std::unique_ptr<Signal> cancel_signal_;  // before the callback that raises it
  std::optional<std::stop_callback<std::function<void()>>> on_cancel_;
};

}  // namespace redlock::detail
