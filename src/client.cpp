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
  auto promise = std::make_shared<std::promise<Result<Lock>>>();
  auto future = promise->get_future();
  impl_->post([p = impl_.get(), resource = std::string(resource), opts = std::move(opts), promise]() mutable {
    p->async->acquire(std::move(resource), std::move(opts),
                      [promise](Result<Lock> r) { promise->set_value(std::move(r)); });
  });
  return future;
}

std::future<Result<Lock>> Client::extend_async(const Lock& lock, milliseconds ttl) {
  auto promise = std::make_shared<std::promise<Result<Lock>>>();
  auto future = promise->get_future();
  impl_->post([p = impl_.get(), lock, ttl, promise]() mutable {
    p->async->extend(std::move(lock), ttl, [promise](Result<Lock> r) { promise->set_value(std::move(r)); });
  });
  return future;
}

std::future<Result<ReleaseResult>> Client::unlock_async(std::string_view resource, std::string_view token) {
  auto promise = std::make_shared<std::promise<Result<ReleaseResult>>>();
  auto future = promise->get_future();
  impl_->post([p = impl_.get(), resource = std::string(resource), token = std::string(token), promise]() mutable {
    p->async->release(std::move(resource), std::move(token),
                      [promise](Result<ReleaseResult> r) { promise->set_value(std::move(r)); });
  });
  return future;
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
