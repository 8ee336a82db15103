// redlock/election.hpp — leader election over the same N masters: one
// leader of a name at a time, its term, its identity and its value, and
// who reads them.
//
// A leader of `name` is the fenced holder of the lock `name` (a Lease with
// AcquireOptions::fence) whose record on the masters names it: the term is
// the lease's fence — strictly greater than every earlier leader's — and
// the record (identity, value) is written only where the lock holds the
// leader's token. It leads while its lease is valid: it is deposed on the
// lease's own deadline (lease.hpp: never later than the moment another
// candidate could take the lock), when the client closes, or when it
// resigns. Client::campaign blocks; AsyncClient::campaign calls back with
// an AsyncLeadership. Anyone may read who leads (Client::leader,
// AsyncClient::leader) and watch it change (observe):
// a leader counts only where a majority of the masters hold its token in
// the lock and name it in the record (docs/design.md, "Elections").
//
//   redlock::CampaignOptions c{.value = "10.0.0.7:8080"};
//   redlock::Result<redlock::Leadership> lead = client->campaign("scheduler", c);
//   if (lead) {
//     while (!lead->stop_token().stop_requested()) do_leader_work(lead->term());
//   }  // resigned when `lead` goes
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "redlock/error.hpp"
#include "redlock/export.hpp"
#include "redlock/lease.hpp"

namespace redlock {

class AsyncClient;
class Client;
class ClientCore;

namespace detail {
struct LeaseHost;
struct WatchLink;
}

// LeaderInfo — a leader as the masters' records tell it.
//   identity  who it says it is (CampaignOptions::identity)
//   term      its lease's fence: every later leader's is greater
//   value     what it proclaimed last (CampaignOptions::value, proclaim)
//   led_for   how long its term has run, by a master's clock
//   token     its lease's value (status shows it as the lock's holder)
struct REDLOCK_API LeaderInfo {
  std::string identity;
  std::uint64_t term = 0;
  std::string value;
  std::chrono::milliseconds led_for{0};
  std::string token;
};

// LeaderStatus — one reading of an election (Client::leader).
//   leader      the leader now: a majority of the masters hold its token in
//               the lock and name it in the record; none: no leader
//   last        without a leader: the newest record any master keeps — the
//               last leader known (it died, resigned, or never got a
//               majority); none if no master has one
//   expires_in  with a leader: how long until its lock runs out on a
//               majority unless it is extended (a leader extends long
//               before; a dead one does not — look again then)
//   quorum      masters needed; answered: masters that answered (a reading
//               with fewer than a quorum is an error, not "no leader")
struct REDLOCK_API LeaderStatus {
  std::string name;
  std::optional<LeaderInfo> leader;
  std::optional<LeaderInfo> last;
  std::chrono::milliseconds expires_in{0};
  std::size_t quorum = 0;
  std::size_t answered = 0;
};

// LeadershipView — what a leadership tells, for both handles: Leadership
// (Client) and AsyncLeadership (AsyncClient), over their lease (Lease,
// AsyncLease).
//   leading    elected, not deposed, not resigned, before the lease's
//              deadline (lease.hpp: valid()): act as leader only while true
//   term       its lease's fence; pass it with every write the leader makes
//              (fenced_store.hpp)
//   value      the value last proclaimed
//   stop_token requested once the leadership is lost (on_deposed's moment),
//              not on resign; deposed says why (empty while it is not)
template <class L>
class LeadershipView {
 public:
  bool leading() const noexcept { return lease_.valid(); }
  bool empty() const noexcept { return lease_.empty(); }
  const std::string& name() const noexcept { return name_; }
  std::uint64_t term() const noexcept { return lease_.fence(); }
  const std::string& identity() const noexcept { return identity_; }
  const std::string& value() const noexcept { return value_; }
  std::stop_token stop_token() const noexcept { return lease_.stop_token(); }
  std::optional<Error> deposed() const { return lease_.lost(); }
  const L& lease() const noexcept { return lease_; }

 protected:
  LeadershipView() noexcept = default;
  LeadershipView(std::string name, std::string identity, std::string value, L lease) noexcept
      : name_(std::move(name)), identity_(std::move(identity)), value_(std::move(value)), lease_(std::move(lease)) {}
  ~LeadershipView() = default;
  LeadershipView(LeadershipView&&) noexcept = default;
  LeadershipView& operator=(LeadershipView&&) noexcept = default;

  std::string name_;
  std::string identity_;
  std::string value_;
  std::uint64_t rev_ = 1;  // proclaims so far (the campaign's is the first)
  L lease_;
};

// AsyncLeadership — a Leadership from AsyncClient::campaign: the same
// members, on the client's loop thread only, and nothing blocks: proclaim
// and resign take a callback (may be empty), called once on a later loop
// turn with what the blocking forms return. Destroying it starts the
// resign and does not wait for it. Once the client is closed the
// leadership is over (deposed: "the client was closed"); proclaim and
// resign then answer Errc::closed.
class REDLOCK_API AsyncLeadership : public LeadershipView<AsyncLease> {
 public:
  AsyncLeadership() noexcept;
  ~AsyncLeadership();
  AsyncLeadership(AsyncLeadership&& other) noexcept;
  AsyncLeadership& operator=(AsyncLeadership&& other) noexcept;
  AsyncLeadership(const AsyncLeadership&) = delete;
  AsyncLeadership& operator=(const AsyncLeadership&) = delete;

  // value() is the value of the last proclaim started.
  void proclaim(std::string value, std::function<void(Result<void>)> done = {});
  void resign(std::function<void(Result<void>)> done = {});

 private:
  friend class ClientCore;
  REDLOCK_LOCAL AsyncLeadership(ClientCore* core, std::shared_ptr<detail::LeaseHost> host, std::string name,
                                std::string identity, std::string value, AsyncLease lease) noexcept;
  // alive: the core still runs (its lease host's post is set until it closes).
  REDLOCK_LOCAL bool alive() const;

  ClientCore* core_ = nullptr;
  std::shared_ptr<detail::LeaseHost> host_;
};

// LeaderWatchCallback — told, on the client's loop thread, each reading of
// a watched election that differs from the last one told (observe): a
// leader elected, deposed, resigned or replaced, a new value, "no leader";
// or an error (no quorum of masters answering), once, until a reading
// succeeds again. Never a term lower than one it was told. Short and
// non-blocking, as every callback on the loop; it may stop the watch.
using LeaderWatchCallback = std::function<void(const Result<LeaderStatus>&)>;

// LeaderWatch — an observation of one election (Client::observe,
// AsyncClient::observe): the callback is told the first reading, then
// every change. It is pub/sub, not polling: a master publishes on the
// election's channel when a leader proclaims or resigns, and the watch
// reads again then; one that dies publishes nothing, so the watch also
// reads when the leader's lock would run out unless extended
// (LeaderStatus::expires_in), and every safety net (10 ×
// Options::wake_safety_net) in case a message was lost. Destroying it, or
// stop(), ends it: no call of the callback starts afterwards (one already
// running may finish). From a Client, any thread; from an AsyncClient, the
// loop thread. When the client closes, the callback is told Errc::closed
// once, and the watch is over. Move-only.
class REDLOCK_API LeaderWatch {
 public:
  LeaderWatch() noexcept;
  ~LeaderWatch();
  LeaderWatch(LeaderWatch&& other) noexcept;
  LeaderWatch& operator=(LeaderWatch&& other) noexcept;
  LeaderWatch(const LeaderWatch&) = delete;
  LeaderWatch& operator=(const LeaderWatch&) = delete;

  void stop() noexcept;
  // active: started and neither stopped nor ended by the client's close.
  bool active() const noexcept;

 private:
  friend class Client;
  friend class AsyncClient;
  REDLOCK_LOCAL explicit LeaderWatch(std::shared_ptr<detail::WatchLink> link) noexcept : link_(std::move(link)) {}
  std::shared_ptr<detail::WatchLink> link_;
};

// max_identity_size, max_leader_value_size: the largest identity and value
// a campaign may give (invalid_argument beyond).
inline constexpr std::size_t max_identity_size = 1024;
inline constexpr std::size_t max_leader_value_size = 64 * 1024;

// CampaignOptions — how to run for leader of a name.
//   identity    who this candidate is; empty: its owner ("host:pid", with
//               Options::owner's label: "host:pid:label")
//   value       what it tells as leader (an address, say); proclaim changes it
//   ttl         its lease's TTL (zero: Options::default_ttl): a dead leader
//               is replaced about this long after it died
//   wait        how long campaign() waits to be elected: `forever` (the
//               default) until elected or cancelled; zero: one try
//   cancel      ends the wait (Errc::cancelled)
//   on_deposed  told once, on the client's loop thread, why the leadership
//               ended when it was lost — the lease lost (its deadline passed,
//               an extension refused) or the client closed; not on resign().
//               As LeaseOptions::on_lost: short, non-blocking.
struct REDLOCK_API CampaignOptions {
  static constexpr std::chrono::milliseconds forever = std::chrono::milliseconds::max();
  std::string identity;
  std::string value;
  std::chrono::milliseconds ttl{0};
  std::chrono::milliseconds wait = forever;
  std::stop_token cancel;
  LostCallback on_deposed;
};

// Leadership — this process leads a name (Client::campaign). Move-only;
// destroying it resigns (waiting as Lease::release does, never throwing).
// Its members may be called from any thread, one at a time while proclaim
// or resign runs (they change value() and the handle); proclaim and
// resign block (not on the client's loop thread: invalid_argument there).
// The Client must outlive it.
class REDLOCK_API Leadership : public LeadershipView<Lease> {
 public:
  Leadership() noexcept;  // empty: leads nothing
  ~Leadership();
  Leadership(Leadership&& other) noexcept;
  Leadership& operator=(Leadership&& other) noexcept;
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // proclaim makes `value` this leader's value on the masters where it
  // still holds the lock, and tells observers. Errors: not_held (empty,
  // resigned), lost (deposed), no_quorum (fewer than a majority wrote it;
  // the old value may still be read), invalid_argument (too large; on the
  // loop thread), closed.
  Result<void> proclaim(std::string value);
  // resign ends the leadership: the record goes (observers are told "no
  // leader"), then the lease is released (a waiting candidate is woken).
  // Afterwards the Leadership is empty. Errors: as Lease::release, and
  // no_quorum when the release did not free the lock on a majority
  // (masters that erred or timed out may still hold it: the leadership may
  // be read as leading until its TTL; ReleaseResult::released false).
  Result<void> resign();

 private:
  friend class Client;
  REDLOCK_LOCAL Leadership(Client& client, std::string name, std::string identity, std::string value,
                           Lease lease) noexcept;

  Client* client_ = nullptr;
};

}  // namespace redlock
