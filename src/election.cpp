// election.cpp — Client's elections (client.hpp, election.hpp): campaign,
// leader, and a Leadership's proclaim and resign, over the lease service
// and Reports' election rounds (src/leader.cpp).
#include "campaign.hpp"
#include "client_core.hpp"
#include "client_impl.hpp"
#include "keys.hpp"
#include "leader.hpp"
#include "leader_watch.hpp"
#include "survey.hpp"

namespace redlock {


Result<Leadership> Client::campaign(std::string_view name, CampaignOptions opts) {
  if (impl_->on_loop_thread()) return Impl::on_loop_error("campaign");
  return campaign_async(name, std::move(opts)).get();
}

std::future<Result<Leadership>> Client::campaign_async(std::string_view name, CampaignOptions opts) {
  auto ready = [](Error e) {
    std::promise<Result<Leadership>> p;
    p.set_value(std::move(e));
    return p.get_future();
  };
  if (impl_->on_loop_thread()) return ready(Impl::on_loop_error("campaign_async"));
  if (std::string problem = detail::check_resource(std::string(name)); !problem.empty()) {
    return ready(make_error(Errc::invalid_argument, std::move(problem)));
  }
  // The handle is made on the loop thread as the campaign ends, so that a
  // future nobody reads still holds a leadership that resigns when it goes.
  return impl_->call<Leadership>([this, host = impl_->host, name = std::string(name), opts = std::move(opts)](
                                     AsyncClient& c, std::function<void(Result<Leadership>)> done) mutable {
    std::string identity = opts.identity, value = opts.value;
    c.core_->campaign(name, std::move(opts), host,
                      [this, name, identity = std::move(identity), value = std::move(value),
                       done = std::move(done)](Result<std::shared_ptr<detail::LeaseState>> won) mutable {
                        if (!won) return done(std::move(won).error());
                        if (identity.empty()) identity = detail::identity_of((*won)->token());
                        done(Leadership(*this, std::move(name), std::move(identity), std::move(value),
                                        Lease(std::move(*won))));
                      });
  });
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
  auto start = [name = l.name_, token = l.lease_.token()](AsyncClient& c,
                                                          std::function<void(Result<void>)> done) mutable {
    c.core_->resign(std::move(name), std::move(token), std::move(done));
  };
  // On the loop thread (a leadership that goes there: in a campaign_async
  // future never read) the deletion is started, not waited for; the
  // lease's release is posted after it, so it still goes first.
  if (impl_->on_loop_thread()) {
    (void)impl_->call<void>(std::move(start));
    return {};
  }
  return impl_->wait<void>("resign", std::move(start));
}

namespace {

// resigned: a resignation's outcome from its lease's release — an error
// unless the lock is free (`released`: fewer than a majority may still hold
// it); else the leadership may still be read as leading until its TTL.
Result<void> resigned(const std::string& name, Result<ReleaseResult> r) {
  if (!r) return std::move(r).error();
  if (r->released) return {};
  Error e = make_error(Errc::no_quorum, "resign of " + name + ": the lock was not freed on a majority (" +
                                            std::to_string(r->released_nodes) + " of " +
                                            std::to_string(r->nodes.size()) +
                                            " masters deleted it); it leads until its TTL runs out");
  e.nodes = std::move(r->nodes);
  return e;
}

}  // namespace

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

// ---- AsyncLeadership ------------------------------------------------------------

AsyncLeadership::AsyncLeadership() noexcept = default;

AsyncLeadership::AsyncLeadership(ClientCore* core, std::shared_ptr<detail::LeaseHost> host, std::string name,
                                 std::string identity, std::string value, AsyncLease lease) noexcept
    : LeadershipView(std::move(name), std::move(identity), std::move(value), std::move(lease)),
      core_(core),
      host_(std::move(host)) {}

AsyncLeadership::~AsyncLeadership() {
  if (!lease_.empty()) resign({});
}

AsyncLeadership::AsyncLeadership(AsyncLeadership&& other) noexcept = default;

AsyncLeadership& AsyncLeadership::operator=(AsyncLeadership&& other) noexcept {
  if (this == &other) return *this;
  if (!lease_.empty()) resign({});
  LeadershipView::operator=(std::move(other));
  core_ = other.core_;
  host_ = std::move(other.host_);
  return *this;
}

bool AsyncLeadership::alive() const {
  if (!host_) return false;
  std::lock_guard<std::mutex> lock(host_->mu);
  return static_cast<bool>(host_->post);
}

void AsyncLeadership::proclaim(std::string value, std::function<void(Result<void>)> done) {
  if (!done) done = [](Result<void>) {};
  const bool alive_now = alive();
  auto refuse = [&](Error e) {
    if (alive_now) return core_->complete_later(std::move(e), std::move(done));
    done(std::move(e));
  };
  if (lease_.empty()) return refuse(make_error(Errc::not_held, "proclaim: this leadership is empty (resigned, or never elected)"));
  if (std::string problem = detail::leader_problem(identity_, value); !problem.empty()) {
    return refuse(make_error(Errc::invalid_argument, "proclaim on " + name_ + ": " + problem));
  }
  if (std::optional<Error> lost = lease_.lost()) return refuse(std::move(*lost));
  if (!alive_now) return refuse(make_error(Errc::closed, "the client was closed"));
  value_ = value;
  core_->proclaim({.resource = name_,
                   .token = lease_.token(),
                   .term = term(),
                   .rev = ++rev_,
                   .identity = identity_,
                   .value = std::move(value)},
                  std::move(done));
}

void AsyncLeadership::resign(std::function<void(Result<void>)> done) {
  if (!done) done = [](Result<void>) {};
  if (lease_.empty()) {
    Error e = make_error(Errc::not_held, "resign: this leadership is empty (resigned, or never elected)");
    if (alive()) return core_->complete_later(std::move(e), std::move(done));
    return done(std::move(e));
  }
  // The record first (observers hear "no leader" at once), then the lock.
  auto lease = std::make_shared<AsyncLease>(std::move(lease_));
  auto release = [lease, name = name_, done = std::move(done)]() mutable {
    lease->release([name = std::move(name), done = std::move(done)](Result<ReleaseResult> r) {
      done(resigned(name, std::move(r)));
    });
  };
  if (!alive()) return release();
  core_->resign(name_, lease->token(), [release = std::move(release)](Result<void>) mutable { release(); });
}

// ---- Leadership ----------------------------------------------------------------

Leadership::Leadership() noexcept = default;

Leadership::Leadership(Client& client, std::string name, std::string identity, std::string value, Lease lease) noexcept
    : LeadershipView(std::move(name), std::move(identity), std::move(value), std::move(lease)), client_(&client) {}

Leadership::~Leadership() {
  if (!lease_.empty()) (void)resign();
}

Leadership::Leadership(Leadership&& other) noexcept = default;

Leadership& Leadership::operator=(Leadership&& other) noexcept {
  if (this == &other) return *this;
  if (!lease_.empty()) (void)resign();
  LeadershipView::operator=(std::move(other));
  client_ = other.client_;
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
  return resigned(name_, std::move(released));
}

}  // namespace redlock
