// election.cpp — Client's elections (client.hpp, election.hpp): campaign,
// leader, and a Leadership's proclaim and resign, over the lease service
// and Reports' election rounds (src/leader.cpp).
#include <algorithm>
#include <condition_variable>

#include "client_core.hpp"
#include "client_impl.hpp"
#include "keys.hpp"
#include "leader.hpp"
#include "leader_watch.hpp"
#include "survey.hpp"

namespace redlock {

namespace {

// campaign_round: the longest lock() wait of one round of a campaign; a
// campaign that waits longer runs more rounds (a fresh attempt, which also
// re-reads the options' deadline and the cancel token).
constexpr milliseconds campaign_round{60000};

// identity_of: the identity a campaign names when it gives none — its
// lease value's owner, "host:pid" or "host:pid:label" (Options::owner).
std::string identity_of(const std::string& token) {
  const std::optional<Owner> o = owner_of(token);
  if (!o) return {};
  return o->host + ":" + std::to_string(o->pid) + (o->label.empty() ? "" : ":" + o->label);
}

// pause sleeps `d` unless `cancel` is requested first (→ false).
bool pause(milliseconds d, const std::stop_token& cancel) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock<std::mutex> lock(mu);
  return !cv.wait_for(lock, cancel, d, [] { return false; }) && !cancel.stop_requested();
}

}  // namespace

Result<Leadership> Client::campaign(std::string_view name, CampaignOptions opts) {
  if (impl_->on_loop_thread()) return Impl::on_loop_error("campaign");
  if (std::string problem = detail::leader_problem(opts.identity, opts.value); !problem.empty()) {
    return make_error(Errc::invalid_argument, "campaign for " + std::string(name) + ": " + problem);
  }
  if (opts.wait < milliseconds{0}) return make_error(Errc::invalid_argument, "campaign: wait must not be negative");
  const bool forever = opts.wait == CampaignOptions::forever;
  const auto until = std::chrono::steady_clock::now() + (forever ? milliseconds{0} : opts.wait);
  const Options& o = config().options;
  milliseconds backoff{0};
  for (;;) {
    const milliseconds left =
        forever ? campaign_round
                : std::max(milliseconds{0}, std::chrono::ceil<milliseconds>(until - std::chrono::steady_clock::now()));
    LeaseOptions lo;
    lo.acquire.ttl = opts.ttl;
    lo.acquire.wait = std::min(left, campaign_round);
    lo.acquire.fence = true;
    lo.acquire.cancel = opts.cancel;
    lo.on_lost = opts.on_deposed;
    Result<Lease> lease = lock(name, std::move(lo));
    Error why;
    if (lease) {
      std::string identity = opts.identity.empty() ? identity_of(lease->token()) : opts.identity;
      Leadership l(*this, std::string(name), std::move(identity), opts.value, std::move(*lease));
      Result<void> written = write_record(l, 1, opts.value);
      if (written) return l;
      why = std::move(written).error();
      // Not proclaimed on a majority: no leader observers can see. Take
      // the record back where it landed, and give the lock back.
      (void)delete_record(l);
      (void)l.lease_.release();
      l.lease_ = Lease();
    } else {
      why = std::move(lease).error();
    }
    const bool curable = why.code == Errc::held || why.code == Errc::no_quorum ||
                         why.code == Errc::validity_too_short || why.code == Errc::too_late;
    if (!curable) return why;
    if (!forever && std::chrono::steady_clock::now() >= until) return why;
    // "held": lock() waited for the holder already; anything else is a
    // cluster in trouble: back off, growing up to the safety net's period.
    if (why.code == Errc::held) {
      backoff = milliseconds{0};
      continue;
    }
    backoff = std::clamp(backoff * 2, o.retry_delay + o.retry_jitter, std::max(o.wake_safety_net, o.retry_delay));
    milliseconds sleep = backoff;
    if (!forever) sleep = std::min(sleep, std::chrono::ceil<milliseconds>(until - std::chrono::steady_clock::now()));
    if (sleep > milliseconds{0} && !pause(sleep, opts.cancel)) {
      return make_error(Errc::cancelled, "campaign for " + std::string(name) + " cancelled by the caller");
    }
  }
}

Result<LeaderStatus> Client::leader(std::string_view name) { return leader_async(name).get(); }

std::future<Result<LeaderStatus>> Client::leader_async(std::string_view name) {
  return impl_->call_async<LeaderStatus>(
      "leader", [name = std::string(name)](AsyncClient& c, LeaderCallback done) mutable {
        c.leader(std::move(name), std::move(done));
      });
}

Result<LeaderWatch> Client::observe(std::string_view name, LeaderWatchCallback on_change) {
  if (std::string problem = detail::check_resource(std::string(name)); !problem.empty()) {
    return make_error(Errc::invalid_argument, std::move(problem));
  }
  auto link = std::make_shared<detail::WatchLink>();
  Impl* impl = impl_.get();
  impl->post([impl, link, name = std::string(name), on_change = std::move(on_change)]() mutable {
    if (!impl->async) return;
    const std::uint64_t id = impl->async->core_->observe(std::move(name), link, std::move(on_change));
    std::lock_guard<std::mutex> lock(link->mu);
    // A stop from another thread reaches the loop by a post, while the
    // client lives (its lease host's post is cleared as it goes).
    link->teardown = [host = impl->host, impl, id] {
      std::lock_guard<std::mutex> alive(host->mu);
      if (!host->post) return;
      impl->post([impl, id] {
        if (impl->async) impl->async->core_->unobserve(id);
      });
    };
  });
  return LeaderWatch(link);
}

Result<void> Client::write_record(const Leadership& l, std::uint64_t rev, const std::string& value) {
  detail::Reports::Proclaim p{.resource = l.name_,
                              .token = l.lease_.token(),
                              .term = l.term(),
                              .rev = rev,
                              .identity = l.identity_,
                              .value = value};
  return impl_->wait<void>("proclaim", [p = std::move(p)](AsyncClient& c, std::function<void(Result<void>)> done) mutable {
    c.core_->proclaim(std::move(p), std::move(done));
  });
}

Result<void> Client::delete_record(const Leadership& l) {
  return impl_->wait<void>("resign", [name = l.name_, token = l.lease_.token()](
                                         AsyncClient& c, std::function<void(Result<void>)> done) mutable {
    c.core_->resign(std::move(name), std::move(token), std::move(done));
  });
}

// ---- LeaderWatch ---------------------------------------------------------------

LeaderWatch::LeaderWatch() noexcept = default;
LeaderWatch::~LeaderWatch() { stop(); }
LeaderWatch::LeaderWatch(LeaderWatch&& other) noexcept = default;
LeaderWatch& LeaderWatch::operator=(LeaderWatch&& other) noexcept {
  if (this != &other) {
    stop();
    link_ = std::move(other.link_);
  }
  return *this;
}

void LeaderWatch::stop() noexcept {
  if (!link_) return;
  link_->stopped.store(true);
  std::function<void()> teardown;
  {
    std::lock_guard<std::mutex> lock(link_->mu);
    teardown = std::move(link_->teardown);
    link_->teardown = nullptr;
  }
  if (teardown) teardown();
}

bool LeaderWatch::active() const noexcept {
  if (!link_ || link_->stopped.load()) return false;
  std::lock_guard<std::mutex> lock(link_->mu);
  return static_cast<bool>(link_->teardown);
}

// ---- Leadership ----------------------------------------------------------------

Leadership::Leadership() noexcept = default;

Leadership::Leadership(Client& client, std::string name, std::string identity, std::string value, Lease lease) noexcept
    : client_(&client),
      name_(std::move(name)),
      identity_(std::move(identity)),
      value_(std::move(value)),
      lease_(std::move(lease)) {}

Leadership::~Leadership() {
  if (!lease_.empty()) (void)resign();
}

Leadership::Leadership(Leadership&& other) noexcept = default;

Leadership& Leadership::operator=(Leadership&& other) noexcept {
  if (this == &other) return *this;
  if (!lease_.empty()) (void)resign();
  client_ = other.client_;
  name_ = std::move(other.name_);
  identity_ = std::move(other.identity_);
  value_ = std::move(other.value_);
  rev_ = other.rev_;
  lease_ = std::move(other.lease_);
  return *this;
}

Result<void> Leadership::proclaim(std::string value) {
  if (lease_.empty()) return make_error(Errc::not_held, "proclaim: this leadership is empty (resigned, or never elected)");
  if (std::string problem = detail::leader_problem(identity_, value); !problem.empty()) {
    return make_error(Errc::invalid_argument, "proclaim on " + name_ + ": " + problem);
  }
  if (std::optional<Error> lost = lease_.lost()) return std::move(*lost);
  // Every proclaim outranks the ones before, also one that failed: where
  // it landed, a later one must replace it, never the other way round.
  Result<void> written = client_->write_record(*this, ++rev_, value);
  if (written) value_ = std::move(value);
  return written;
}

Result<void> Leadership::resign() {
  if (lease_.empty()) return make_error(Errc::not_held, "resign: this leadership is empty (resigned, or never elected)");
  // The record first (observers hear "no leader" at once), then the lock
  // (a waiting candidate is woken by its release).
  (void)client_->delete_record(*this);
  Result<ReleaseResult> released = lease_.release();
  lease_ = Lease();
  if (!released) return std::move(released).error();
  return {};
}

}  // namespace redlock
