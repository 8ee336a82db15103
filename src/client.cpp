// client.cpp — the blocking facade: an AsyncClient on a private loop thread.
// Calls from any thread are posted to the loop through a uv_async handle and
// answered through promises.
#include "redlock/client.hpp"

#include "client_core.hpp"
#include "client_impl.hpp"
#include "keys.hpp"

#include <sstream>
#include <utility>

namespace redlock {

Result<std::unique_ptr<Client>> Client::create(Config config) {
  auto impl = std::make_unique<Impl>();
  if (int rc = uv_loop_init(&impl->loop); rc != 0) {
    return make_error(Errc::internal, std::string("uv_loop_init: ") + uv_strerror(rc));
  }
  // The loop thread has not started yet: set it up from here.
  Result<std::unique_ptr<AsyncClient>> async = AsyncClient::create(&impl->loop, config);
  if (!async) {
    uv_loop_close(&impl->loop);
    return async.error();
  }
  impl->async = std::move(*async);
  impl->config = std::move(config);
  uv_async_init(&impl->loop, &impl->wake, [](uv_async_t* h) { static_cast<Impl*>(h->data)->drain(); });
  impl->wake.data = impl.get();
  if (std::optional<Error> failed = impl->start_thread()) return std::move(*failed);
  impl->loop_id = impl->thread.get_id();
  {
    std::lock_guard<std::mutex> lock(impl->host->mu);
    impl->host->loop_thread = impl->loop_id;
    const Options& o = impl->config.options;
    // Every round of a release: a node timeout and the settle time; between
    // rounds, the retry delay and its jitter; and room for a busy loop.
    const auto rounds = static_cast<long long>(o.release_retries) + 1;
    impl->host->release_bound = (o.node_timeout + o.release_settle) * rounds +
                                (o.retry_delay + o.retry_jitter) * (rounds - 1) + milliseconds{250};
    impl->host->default_ttl = o.default_ttl;
    impl->host->post = [p = impl.get()](detail::LeaseHost::Task task) {
      p->post([p, task = std::move(task)] {
        if (p->async) task(p->async->core_->leases());
      });
    };
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

Client::~Client() {
  Impl* p = impl_.release();
  {
    // Leases that outlive the client can no longer reach the loop.
    std::lock_guard<std::mutex> lock(p->host->mu);
    p->host->post = nullptr;
  }
  p->post([p] {
    p->async->close([p] { uv_close(reinterpret_cast<uv_handle_t*>(&p->wake), nullptr); });
    p->async.reset();
  });
  if (p->on_loop_thread()) {
    // Destroyed inside on_lost (or another callback on the loop thread):
    // the thread cannot join itself. The close above runs once this
    // callback returns; the thread then closes the loop, frees the rest and
    // ends on its own.
    p->destroyed_on_loop = true;
    p->thread.detach();
    return;
  }
  p->thread.join();
  Impl::finish(p);
}

// Each operation's start on the loop, written once: the blocking member
// waits for it (Impl::wait), the _async member returns its future
// (Impl::call_async).
namespace {

auto start_acquire(std::string_view resource, AcquireOptions opts) {
  return [resource = std::string(resource), opts = std::move(opts)](AsyncClient& c, LockCallback done) mutable {
    c.acquire(std::move(resource), std::move(opts), std::move(done));
  };
}

AcquireOptions one_try(milliseconds ttl) {
  AcquireOptions opts;
  opts.ttl = ttl;
  return opts;
}

auto start_extend(const Lock& lock, milliseconds ttl) {
  return [lock, ttl](AsyncClient& c, LockCallback done) mutable { c.extend(std::move(lock), ttl, std::move(done)); };
}

auto start_release(std::string_view resource, std::string_view token) {
  return [resource = std::string(resource), token = std::string(token)](AsyncClient& c, ReleaseCallback done) mutable {
    c.release(std::move(resource), std::move(token), std::move(done));
  };
}

// start_release_lock: a Lock's release (a semaphore's permit included).
auto start_release_lock(const Lock& lock) {
  return [lock](AsyncClient& c, ReleaseCallback done) { c.release(lock, std::move(done)); };
}

auto start_acquire_many(std::vector<std::string> resources, AcquireOptions opts) {
  return [resources = std::move(resources), opts = std::move(opts)](AsyncClient& c, MultiLockCallback done) mutable {
    c.acquire_many(std::move(resources), std::move(opts), std::move(done));
  };
}

auto start_extend_many(const MultiLock& lock, milliseconds ttl) {
  return [lock, ttl](AsyncClient& c, MultiLockCallback done) mutable {
    c.extend_many(std::move(lock), ttl, std::move(done));
  };
}

auto start_release_many(std::vector<std::string> resources, std::string_view token) {
  return [resources = std::move(resources), token = std::string(token)](AsyncClient& c, ReleaseCallback done) mutable {
    c.release_many(std::move(resources), std::move(token), std::move(done));
  };
}

auto start_status(std::string_view resource) {
  return [resource = std::string(resource)](AsyncClient& c, StatusCallback done) mutable {
    c.status(std::move(resource), std::move(done));
  };
}

auto start_nodes() {
  return [](AsyncClient& c, NodesCallback done) { c.nodes(std::move(done)); };
}

}  // namespace

Result<Lock> Client::acquire(std::string_view resource, AcquireOptions opts) {
  return impl_->wait<Lock>("acquire", start_acquire(resource, std::move(opts)));
}
std::future<Result<Lock>> Client::acquire_async(std::string_view resource, AcquireOptions opts) {
  return impl_->call_async<Lock>("acquire_async", start_acquire(resource, std::move(opts)));
}

Result<Lock> Client::try_acquire(std::string_view resource, milliseconds ttl) {
  return impl_->wait<Lock>("try_acquire", start_acquire(resource, one_try(ttl)));
}
std::future<Result<Lock>> Client::try_acquire_async(std::string_view resource, milliseconds ttl) {
  return impl_->call_async<Lock>("try_acquire_async", start_acquire(resource, one_try(ttl)));
}

Result<Lock> Client::extend(const Lock& lock, milliseconds ttl) {
  return impl_->wait<Lock>("extend", start_extend(lock, ttl));
}
std::future<Result<Lock>> Client::extend_async(const Lock& lock, milliseconds ttl) {
  return impl_->call_async<Lock>("extend_async", start_extend(lock, ttl));
}

Result<ReleaseResult> Client::release(const Lock& lock) {
  return impl_->wait<ReleaseResult>("release", start_release_lock(lock));
}
Result<ReleaseResult> Client::release(std::string_view resource, std::string_view token) {
  return impl_->wait<ReleaseResult>("release", start_release(resource, token));
}
std::future<Result<ReleaseResult>> Client::release_async(const Lock& lock) {
  return impl_->call_async<ReleaseResult>("release_async", start_release_lock(lock));
}
std::future<Result<ReleaseResult>> Client::release_async(std::string_view resource, std::string_view token) {
  return impl_->call_async<ReleaseResult>("release_async", start_release(resource, token));
}

Result<MultiLock> Client::acquire_many(std::vector<std::string> resources, AcquireOptions opts) {
  return impl_->wait<MultiLock>("acquire_many", start_acquire_many(std::move(resources), std::move(opts)));
}
std::future<Result<MultiLock>> Client::acquire_many_async(std::vector<std::string> resources, AcquireOptions opts) {
  return impl_->call_async<MultiLock>("acquire_many_async", start_acquire_many(std::move(resources), std::move(opts)));
}

Result<MultiLock> Client::extend_many(const MultiLock& lock, milliseconds ttl) {
  return impl_->wait<MultiLock>("extend_many", start_extend_many(lock, ttl));
}
std::future<Result<MultiLock>> Client::extend_many_async(const MultiLock& lock, milliseconds ttl) {
  return impl_->call_async<MultiLock>("extend_many_async", start_extend_many(lock, ttl));
}

Result<ReleaseResult> Client::release_many(const MultiLock& lock) { return release_many(lock.resources, lock.token); }
Result<ReleaseResult> Client::release_many(std::vector<std::string> resources, std::string_view token) {
  return impl_->wait<ReleaseResult>("release_many", start_release_many(std::move(resources), token));
}
std::future<Result<ReleaseResult>> Client::release_many_async(const MultiLock& lock) {
  return release_many_async(lock.resources, lock.token);
}
std::future<Result<ReleaseResult>> Client::release_many_async(std::vector<std::string> resources, std::string_view token) {
  return impl_->call_async<ReleaseResult>("release_many_async", start_release_many(std::move(resources), token));
}

Result<ResourceStatus> Client::status(std::string_view resource) {
  return impl_->wait<ResourceStatus>("status", start_status(resource));
}
std::future<Result<ResourceStatus>> Client::status_async(std::string_view resource) {
  return impl_->call_async<ResourceStatus>("status_async", start_status(resource));
}

Result<NodesReport> Client::nodes() { return impl_->wait<NodesReport>("nodes", start_nodes()); }
std::future<Result<NodesReport>> Client::nodes_async() {
  return impl_->call_async<NodesReport>("nodes_async", start_nodes());
}

Stats Client::stats() const { return impl_->async->stats(); }

namespace {

std::string this_thread_owner() {
  std::ostringstream out;
  out << "thread:" << std::this_thread::get_id();
  return out.str();
}

std::string ms(milliseconds d) { return std::to_string(d.count()) + " ms"; }

// reentry_problem: why a re-entry with `inner` would get less than it asks
// of the held lease `held` (its options are fixed once taken), or "".
std::string reentry_problem(const detail::LeaseState& held, const LeaseOptions& inner, milliseconds default_ttl,
                            BootClock::time_point now) {
  const detail::LeaseCold* cold = held.cold();
  const int max_extensions = cold != nullptr ? cold->max_extensions : 0;
  const milliseconds max_hold = cold != nullptr ? cold->max_hold : milliseconds{0};
  const milliseconds ttl = inner.acquire.ttl.count() == 0 ? default_ttl : inner.acquire.ttl;
  if (inner.acquire.fence && !held.fenced) return "asks for a fencing token; the held lease was taken without one";
  if (!inner.acquire.token.empty() && inner.acquire.token != held.token()) {
    return "asks for another token than the held lease's";
  }
  if (ttl > held.ttl) return "asks for a ttl of " + ms(ttl) + "; the held lease has " + ms(held.ttl);
  if (inner.on_lost) {
    return "gives its own on_lost; only the lock() that took the lease is told of a loss (watch stop_token() "
           "instead)";
  }
  if (!inner.auto_extend) return {};  // asks for no extension: any lease gives at least that
  if (!held.auto_extend) return "asks for auto_extend; the held lease is not extended";
  if (max_extensions > 0 && (inner.max_extensions == 0 || inner.max_extensions > max_extensions)) {
    return "asks for " + (inner.max_extensions == 0 ? std::string("unlimited") : std::to_string(inner.max_extensions)) +
           " extensions; the held lease stops at max_extensions " + std::to_string(max_extensions);
  }
  if (max_hold.count() > 0 && (inner.max_hold.count() == 0 || now + inner.max_hold > cold->taken + max_hold)) {
    return "asks to be extended " +
           (inner.max_hold.count() == 0 ? std::string("without a max_hold") : "for up to " + ms(inner.max_hold)) +
           "; the held lease stops at its max_hold (" + ms(max_hold) + " from when it was taken)";
  }
  return {};
}

// AcquiringMark — this thread is taking (resource, owner) for its owner: the
// owner's other threads wait for the outcome (Client::lock). Cleared on
// every way out, and the waiters told.
class AcquiringMark {
 public:
  AcquiringMark(detail::LeaseHost& host, detail::LeaseHost::ReentryKey key) : host_(host), key_(std::move(key)) {}
  AcquiringMark(const AcquiringMark&) = delete;
  AcquiringMark& operator=(const AcquiringMark&) = delete;
  ~AcquiringMark() {
    std::lock_guard<std::mutex> lock(host_.mu);
    auto it = host_.reentrant.find(key_);
    if (it != host_.reentrant.end() && it->second.acquiring) host_.reentrant.erase(it);
    host_.reentry_settled.notify_all();
  }
  const detail::LeaseHost::ReentryKey& key() const noexcept { return key_; }

 private:
  detail::LeaseHost& host_;
  detail::LeaseHost::ReentryKey key_;
};

}  // namespace

namespace {

std::future<Result<Lease>> ready(Result<Lease> r) {
  std::promise<Result<Lease>> p;
  p.set_value(std::move(r));
  return p.get_future();
}

}  // namespace

Result<Lease> Client::lock(std::string_view resource, LeaseOptions opts) {
  if (std::string problem = detail::lease_options_problem(opts); !problem.empty()) {
    return make_error(Errc::invalid_argument, std::move(problem));
  }
  if (impl_->on_loop_thread()) return Impl::on_loop_error("lock");
  return lock_async(resource, std::move(opts)).get();
}

std::future<Result<Lease>> Client::lock_async(std::string_view resource, LeaseOptions opts) {
  if (std::string problem = detail::lease_options_problem(opts); !problem.empty()) {
    return ready(make_error(Errc::invalid_argument, std::move(problem)));
  }
  if (impl_->on_loop_thread()) return ready(Impl::on_loop_error("lock_async"));
  detail::LeaseHost& host = *impl_->host;
  std::string owner;
  std::shared_ptr<AcquiringMark> mark;  // until the lease is registered or the acquire failed
  if (opts.reentrant) {
    owner = opts.owner.empty() ? this_thread_owner() : opts.owner;
    detail::LeaseHost::ReentryKey key{std::string(resource), owner};
    std::unique_lock<std::mutex> lock(host.mu);
    for (;;) {
      auto it = host.reentrant.find(key);
      if (it == host.reentrant.end()) break;
      if (it->second.acquiring) {
        // Another thread of this owner is taking it: wait for its outcome
        // and join the lease it gets (or, if it fails, try ourselves).
        const bool settled = host.reentry_settled.wait(lock, opts.acquire.cancel, [&] {
          auto now_at = host.reentrant.find(key);
          return now_at == host.reentrant.end() || !now_at->second.acquiring;
        });
        if (!settled) {
          return ready(make_error(Errc::cancelled, "lock of " + key.first + " cancelled while another thread of owner " +
                                                       owner + " was taking it"));
        }
        continue;
      }
      if (std::shared_ptr<detail::LeaseState> held = it->second.lease.lock()) {
        std::lock_guard state_lock(held->mu);
        const auto now = BootClock::now();
        if (!held->released && !held->lost && now < held->deadline()) {
          if (std::string problem = reentry_problem(*held, opts, host.default_ttl, now); !problem.empty()) {
            return ready(make_error(Errc::invalid_argument,
                                    "reentrant lock of " + key.first + " by owner " + owner + ": " + problem));
          }
          ++held->holds;  // re-entered: no network round
          return ready(Lease(held));
        }
      }
      host.reentrant.erase(it);  // released, lost or expired: take it anew
      break;
    }
    host.reentrant[key].acquiring = true;
    mark = std::make_shared<AcquiringMark>(host, std::move(key));
  }
  auto promise = std::make_shared<std::promise<Result<Lease>>>();
  std::future<Result<Lease>> future = promise->get_future();
  impl_->post([p = impl_.get(), resource = std::string(resource), opts = std::move(opts), owner = std::move(owner),
               mark = std::move(mark), promise]() mutable {
    p->async->core_->leases().lock({std::move(resource)}, std::move(opts), std::move(owner), p->host,
                                   [p, mark = std::move(mark), promise](Result<std::shared_ptr<detail::LeaseState>> r) mutable {
                                     if (!r) {
                                       mark.reset();  // tells the owner's waiters
                                       return promise->set_value(std::move(r).error());
                                     }
                                     if (mark) {
                                       std::lock_guard<std::mutex> lock(p->host->mu);
                                       p->host->reentrant[mark->key()] = detail::Reentry{*r, false};
                                     }
                                     mark.reset();  // wakes the owner's waiters, who join it
                                     promise->set_value(Lease(std::move(*r)));
                                   });
  });
  return future;
}

namespace {

std::string many_problem(const LeaseOptions& opts) {
  std::string problem = detail::lease_options_problem(opts);
  if (problem.empty() && opts.reentrant) problem = "reentrant: a multi-resource lease is not reentrant";
  return problem;
}

}  // namespace

Result<Lease> Client::lock_many(std::vector<std::string> resources, LeaseOptions opts) {
  if (std::string problem = many_problem(opts); !problem.empty()) {
    return make_error(Errc::invalid_argument, std::move(problem));
  }
  if (impl_->on_loop_thread()) return Impl::on_loop_error("lock_many");
  return lock_many_async(std::move(resources), std::move(opts)).get();
}

std::future<Result<Lease>> Client::lock_many_async(std::vector<std::string> resources, LeaseOptions opts) {
  if (std::string problem = many_problem(opts); !problem.empty()) {
    return ready(make_error(Errc::invalid_argument, std::move(problem)));
  }
  if (impl_->on_loop_thread()) return ready(Impl::on_loop_error("lock_many_async"));
  auto promise = std::make_shared<std::promise<Result<Lease>>>();
  std::future<Result<Lease>> future = promise->get_future();
  impl_->post([p = impl_.get(), resources = std::move(resources), opts = std::move(opts), promise]() mutable {
    p->async->core_->leases().lock(detail::resource_set(std::move(resources)), std::move(opts), {}, p->host,
                                   [promise](Result<std::shared_ptr<detail::LeaseState>> r) {
                                     if (!r) return promise->set_value(std::move(r).error());
                                     promise->set_value(Lease(std::move(*r)));
                                   });
  });
  return future;
}

const Config& Client::config() const noexcept { return impl_->config; }

}  // namespace redlock
