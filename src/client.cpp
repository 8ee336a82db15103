// client.cpp — the blocking facade: an AsyncClient on a private loop thread.
// Calls from any thread are posted to the loop through a uv_async handle and
// answered through promises.
#include "redlock/client.hpp"

#include <pthread.h>
#include <signal.h>
#include <uv.h>

#include "lease_state.hpp"

#include <cassert>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

namespace redlock {

struct Client::Impl {
  uv_loop_t loop;
  uv_async_t wake;
  std::mutex mu;
  std::vector<std::function<void()>> tasks;  // guarded by mu
  std::unique_ptr<AsyncClient> async;        // loop thread only (after start)
  Config config;
  std::thread thread;
  // The leases' link to this client (outlives it; cleared in ~Client).
  std::shared_ptr<detail::LeaseHost> host = std::make_shared<detail::LeaseHost>();

  void post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu);
      tasks.push_back(std::move(task));
    }
    uv_async_send(&wake);
  }

  // call runs `start(async, done)` on the loop thread and returns a future
  // that `done` fulfils.
  template <class T, class Start>
  std::future<Result<T>> call(Start start) {
    auto promise = std::make_shared<std::promise<Result<T>>>();
    auto future = promise->get_future();
    post([this, start = std::move(start), promise]() mutable {
      start(*async, [promise](Result<T> r) { promise->set_value(std::move(r)); });
    });
    return future;
  }

  void drain() {
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard<std::mutex> lock(mu);
      batch.swap(tasks);
    }
    for (auto& task : batch) task();
  }
};

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
  impl->thread = std::thread([p = impl.get()] {
    // A master that vanishes mid-write must cost an EPIPE, not the program
    // (src/poll_adapter.cpp): SIGPIPE stays blocked on the loop thread.
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
    uv_run(&p->loop, UV_RUN_DEFAULT);
  });
  {
    std::lock_guard<std::mutex> lock(impl->host->mu);
    impl->host->loop_thread = impl->thread.get_id();
    const Options& o = impl->config.options;
    impl->host->release_bound = o.node_timeout + o.release_settle + milliseconds{250};
    impl->host->post = [p = impl.get()](detail::LeaseHost::Task task) {
      p->post([p, task = std::move(task)] {
        if (p->async) task(*p->async);
      });
    };
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

Client::~Client() {
  Impl* p = impl_.get();
  {
    // Leases that outlive the client can no longer reach the loop.
    std::lock_guard<std::mutex> lock(p->host->mu);
    p->host->post = nullptr;
  }
  p->post([p] {
    p->async->close([p] { uv_close(reinterpret_cast<uv_handle_t*>(&p->wake), nullptr); });
    p->async.reset();
  });
  p->thread.join();
  // Every handle of ours is closed by now; the tests run with asserts on.
  const int rc = uv_loop_close(&p->loop);
  assert(rc == 0 && "a uv handle was left open on the client's loop");
  (void)rc;
}

std::future<Result<Lock>> Client::acquire_async(std::string_view resource, AcquireOptions opts) {
  return impl_->call<Lock>([resource = std::string(resource), opts = std::move(opts)](
                               AsyncClient& c, LockCallback done) mutable {
    c.acquire(std::move(resource), std::move(opts), std::move(done));
  });
}

std::future<Result<Lock>> Client::extend_async(const Lock& lock, milliseconds ttl) {
  return impl_->call<Lock>([lock, ttl](AsyncClient& c, LockCallback done) mutable {
    c.extend(std::move(lock), ttl, std::move(done));
  });
}

std::future<Result<ReleaseResult>> Client::release_async(std::string_view resource, std::string_view token) {
  return impl_->call<ReleaseResult>([resource = std::string(resource), token = std::string(token)](
                                        AsyncClient& c, ReleaseCallback done) mutable {
    c.release(std::move(resource), std::move(token), std::move(done));
  });
}

Result<Lock> Client::acquire(std::string_view resource, AcquireOptions opts) {
  return acquire_async(resource, std::move(opts)).get();
}

Result<Lock> Client::try_acquire(std::string_view resource, milliseconds ttl) {
  AcquireOptions opts;
  opts.ttl = ttl;
  return acquire_async(resource, std::move(opts)).get();
}

Result<Lock> Client::extend(const Lock& lock, milliseconds ttl) { return extend_async(lock, ttl).get(); }

Result<ReleaseResult> Client::release(const Lock& lock) { return release_async(lock.resource, lock.token).get(); }

Result<ReleaseResult> Client::release(std::string_view resource, std::string_view token) {
  return release_async(resource, token).get();
}

Result<MultiLock> Client::acquire_many(std::vector<std::string> resources, AcquireOptions opts) {
  return impl_->call<MultiLock>([resources = std::move(resources), opts = std::move(opts)](
                                    AsyncClient& c, MultiLockCallback done) mutable {
           c.acquire_many(std::move(resources), std::move(opts), std::move(done));
         })
      .get();
}

Result<MultiLock> Client::extend_many(const MultiLock& lock, milliseconds ttl) {
  return impl_->call<MultiLock>([lock, ttl](AsyncClient& c, MultiLockCallback done) mutable {
           c.extend_many(std::move(lock), ttl, std::move(done));
         })
      .get();
}

Result<ReleaseResult> Client::release_many(const MultiLock& lock) {
  return impl_->call<ReleaseResult>([resources = lock.resources, token = lock.token](
                                        AsyncClient& c, ReleaseCallback done) mutable {
           c.release_many(std::move(resources), std::move(token), std::move(done));
         })
      .get();
}

Result<ResourceStatus> Client::status(std::string_view resource) {
  return impl_->call<ResourceStatus>([resource = std::string(resource)](AsyncClient& c, StatusCallback done) mutable {
           c.status(std::move(resource), std::move(done));
         })
      .get();
}

Result<NodesReport> Client::nodes() {
  return impl_->call<NodesReport>([](AsyncClient& c, NodesCallback done) { c.nodes(std::move(done)); }).get();
}

namespace {

std::string this_thread_owner() {
  std::ostringstream out;
  out << "thread:" << std::this_thread::get_id();
  return out.str();
}

}  // namespace

Result<Lease> Client::lock(std::string_view resource, LeaseOptions opts) {
  if (!(opts.extend_at > 0.0 && opts.extend_at < 1.0)) {
    return make_error(Errc::invalid_argument,
                      "extend_at: " + std::to_string(opts.extend_at) + " (must be between 0 and 1, exclusive)");
  }
  if (opts.max_extensions < 0) return make_error(Errc::invalid_argument, "max_extensions: must be >= 0");
  if (opts.max_hold < milliseconds{0}) return make_error(Errc::invalid_argument, "max_hold: must be >= 0");
  detail::LeaseHost& host = *impl_->host;
  std::string owner;
  if (opts.reentrant) {
    owner = opts.owner.empty() ? this_thread_owner() : opts.owner;
    std::lock_guard<std::mutex> lock(host.mu);
    auto it = host.reentrant.find(std::string(resource));
    if (it != host.reentrant.end()) {
      if (std::shared_ptr<detail::LeaseState> held = it->second.lock(); held && held->owner == owner) {
        std::lock_guard<std::mutex> state_lock(held->mu);
        if (!held->released && !held->lost && std::chrono::steady_clock::now() < held->deadline) {
          ++held->holds;  // re-entered: no network round
          return Lease(held);
        }
      }
    }
  }
  AcquireOptions acquire_opts;
  acquire_opts.ttl = opts.ttl;
  acquire_opts.wait = opts.wait;
  acquire_opts.fence = opts.fence;
  acquire_opts.cancel = opts.cancel;
  Result<Lock> taken = acquire(resource, std::move(acquire_opts));
  if (!taken) return std::move(taken).error();

  auto state = std::make_shared<detail::LeaseState>();
  state->resource = std::move(taken->resource);
  state->token = std::move(taken->token);
  state->fence = taken->fence;
  state->attempts = taken->attempts;
  state->ttl = taken->ttl;
  state->owner = std::move(owner);
  state->taken = taken->validity_deadline - taken->validity;  // about when the round began
  state->deadline = taken->validity_deadline;
  state->host = impl_->host;
  state->options = std::move(opts);
  {
    std::lock_guard<std::mutex> lock(host.mu);
    if (!state->owner.empty()) host.reentrant[state->resource] = state;
    impl_->post([p = impl_.get(), state] {
      if (p->async) detail::start_watchdog(*p->async, state);
    });
  }
  return Lease(std::move(state));
}

const Config& Client::config() const noexcept { return impl_->config; }

}  // namespace redlock
