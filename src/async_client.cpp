// async_client.cpp — AsyncClient: the owning handle of a ClientCore
// (src/client_core.hpp), and the shapes of its calls.
#include "redlock/async_client.hpp"

#include <algorithm>
#include <memory>
#include <vector>

#include "client_core.hpp"
#include "config_text.hpp"
#include "leader_watch.hpp"
#include "keys.hpp"

namespace redlock {

Result<std::unique_ptr<AsyncClient>> AsyncClient::create(uv_loop_s* loop, Config config) {
  if (loop == nullptr) return make_error(Errc::invalid_argument, "loop: null");
  Result<void> valid = validate_config(config);
  if (!valid) return valid.error();
  if (Result<void> served = detail::refuse_unsupported_members(config); !served) return served.error();
  std::unique_ptr<detail::TlsContext> tls;
  if (std::any_of(config.nodes.begin(), config.nodes.end(), [](const NodeAddress& n) { return n.tls; })) {
    Result<std::unique_ptr<detail::TlsContext>> made = detail::TlsContext::create(config.tls);
    if (!made) return made.error();
    tls = std::move(*made);
  }
  return std::unique_ptr<AsyncClient>(new AsyncClient(new ClientCore(loop, std::move(config), std::move(tls))));
}

AsyncClient::AsyncClient(ClientCore* core) noexcept : core_(core) { core_->set_owner(this); }

AsyncClient::~AsyncClient() { core_->owner_gone(); }

void AsyncClient::lock(std::string resource, LeaseOptions opts, LeaseCallback done) {
  core_->lock({std::move(resource)}, std::move(opts), std::move(done));
}

void AsyncClient::acquire(std::string resource, AcquireOptions opts, LockCallback done) {
  core_->engine().acquire(std::move(resource), std::move(opts), std::move(done));
}

void AsyncClient::extend(Lock lock, milliseconds ttl, LockCallback done) {
  core_->engine().extend(std::move(lock), ttl, std::move(done));
}

void AsyncClient::try_acquire(std::string resource, milliseconds ttl, LockCallback done) {
  AcquireOptions opts;
  opts.ttl = ttl;
  acquire(std::move(resource), std::move(opts), std::move(done));
}

void AsyncClient::release(std::string resource, std::string token, ReleaseCallback done) {
  core_->engine().release(std::move(resource), std::move(token), std::move(done));
}

void AsyncClient::release(const Lock& lock, ReleaseCallback done) {
  core_->engine().release(lock.resource, lock.token, std::move(done), {}, lock.permit, lock.shared);
}

namespace {

// deliver_multi turns the engine's Lock of a multi-resource round into the
// MultiLock the caller sees.
void deliver_multi(const MultiLockCallback& done, std::vector<std::string> resources,
                                             Result<Lock> r) {
  if (!r) return done(std::move(r).error());
  MultiLock m;
  static_cast<LockTerms&>(m) = std::move(*r);
  m.resources = std::move(resources);
  done(std::move(m));
}

}  // namespace

void AsyncClient::acquire_many(std::vector<std::string> resources, AcquireOptions opts, MultiLockCallback done) {
  std::vector<std::string> sorted = detail::resource_set(std::move(resources));
  core_->engine().acquire_many(sorted, std::move(opts),
                               [done = std::move(done), sorted](Result<Lock> r) mutable {
                                 deliver_multi(done, std::move(sorted), std::move(r));
                               });
}

void AsyncClient::lock_many(std::vector<std::string> resources, LeaseOptions opts, LeaseCallback done) {
  core_->lock(detail::resource_set(std::move(resources)), std::move(opts), std::move(done));
}

void AsyncClient::extend_many(MultiLock lock, milliseconds ttl, MultiLockCallback done) {
  std::vector<std::string> sorted = detail::resource_set(std::move(lock.resources));
  Lock first;
  static_cast<LockTerms&>(first) = std::move(lock);
  first.resource = sorted.empty() ? std::string() : sorted.front();
  const std::vector<std::string> more(sorted.size() > 1 ? sorted.begin() + 1 : sorted.end(), sorted.end());
  core_->engine().extend(
      std::move(first), ttl,
      [done = std::move(done), sorted](Result<Lock> r) mutable { deliver_multi(done, std::move(sorted), std::move(r)); },
      more);
}

void AsyncClient::release_many(std::vector<std::string> resources, std::string token, ReleaseCallback done) {
  std::vector<std::string> sorted = detail::resource_set(std::move(resources));
  std::string first = sorted.empty() ? std::string() : sorted.front();
  const std::vector<std::string> more(sorted.size() > 1 ? sorted.begin() + 1 : sorted.end(), sorted.end());
  core_->engine().release(std::move(first), std::move(token), std::move(done), more);
}

void AsyncClient::release_many(const MultiLock& lock, ReleaseCallback done) {
  release_many(lock.resources, lock.token, std::move(done));
}

void AsyncClient::status(std::string resource, StatusCallback done) {
  if (std::string problem = detail::check_resource(resource); !problem.empty()) {
    return done(make_error(Errc::invalid_argument, std::move(problem)));
  }
  core_->status(std::move(resource), std::move(done));
}

void AsyncClient::leader(std::string name, LeaderCallback done) {
  if (std::string problem = detail::check_resource(name); !problem.empty()) {
    return done(make_error(Errc::invalid_argument, std::move(problem)));
  }
  core_->leader(std::move(name), std::move(done));
}

void AsyncClient::campaign(std::string name, CampaignOptions opts, LeadershipCallback done) {
  if (std::string problem = detail::check_resource(name); !problem.empty()) {
    return done(make_error(Errc::invalid_argument, std::move(problem)));
  }
  core_->campaign(std::move(name), std::move(opts), std::move(done));
}

Result<LeaderWatch> AsyncClient::observe(std::string name, LeaderWatchCallback on_change) {
  if (std::string problem = detail::check_resource(name); !problem.empty()) {
    return make_error(Errc::invalid_argument, std::move(problem));
  }
  auto link = std::make_shared<detail::WatchLink>();
  const std::uint64_t id = core_->observe(std::move(name), link, std::move(on_change));
  std::lock_guard<std::mutex> lock(link->mu);
  // (unless the watch already ended: a client closing)
  if (!link->stopped.load()) link->teardown = [core = core_, id] { core->unobserve(id); };
  return LeaderWatch(link);
}

void AsyncClient::nodes(NodesCallback done) {
  core_->probe(std::move(done));
}

void AsyncClient::close(std::function<void()> on_closed) { core_->close(std::move(on_closed)); }

const Config& AsyncClient::config() const noexcept { return core_->config(); }

Stats AsyncClient::stats() const { return core_->stats(); }

}  // namespace redlock
