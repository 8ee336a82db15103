// client.cpp — the blocking facade: an AsyncClient on a private loop thread.
// Calls from any thread are posted to the loop through a uv_async handle and
// answered through promises.
#include "redlock/client.hpp"

#include <uv.h>

#include <mutex>
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
  impl->thread = std::thread([p = impl.get()] { uv_run(&p->loop, UV_RUN_DEFAULT); });
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}

Client::~Client() {
  Impl* p = impl_.get();
  p->post([p] {
    p->async->close([p] { uv_close(reinterpret_cast<uv_handle_t*>(&p->wake), nullptr); });
    p->async.reset();
  });
  p->thread.join();
  uv_loop_close(&p->loop);
}

std::future<Result<Lock>> Client::lock_async(std::string_view resource, AcquireOptions opts) {
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

std::future<Result<ReleaseResult>> Client::unlock_async(std::string_view resource, std::string_view token) {
  return impl_->call<ReleaseResult>([resource = std::string(resource), token = std::string(token)](
                                        AsyncClient& c, ReleaseCallback done) mutable {
    c.release(std::move(resource), std::move(token), std::move(done));
  });
}

Result<Lock> Client::lock(std::string_view resource, AcquireOptions opts) {
  return lock_async(resource, std::move(opts)).get();
}

Result<Lock> Client::try_lock(std::string_view resource, milliseconds ttl) {
  AcquireOptions opts;
  opts.ttl = ttl;
  return lock_async(resource, std::move(opts)).get();
}

Result<Lock> Client::extend(const Lock& lock, milliseconds ttl) { return extend_async(lock, ttl).get(); }

Result<ReleaseResult> Client::unlock(const Lock& lock) { return unlock_async(lock.resource, lock.token).get(); }

Result<ReleaseResult> Client::unlock(std::string_view resource, std::string_view token) {
  return unlock_async(resource, token).get();
}

const Config& Client::config() const noexcept { return impl_->config; }

}  // namespace redlock
