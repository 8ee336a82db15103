// client_impl.hpp — the blocking Client's insides (src/client.cpp): an
// AsyncClient on a private loop thread, and how a blocking call reaches it.
// Shared by the files that implement Client's members (client.cpp,
// election.cpp).
#pragma once

#include <pthread.h>
#include <signal.h>
#include <uv.h>

#include <cassert>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "redlock/client.hpp"
#include "lease_state.hpp"

namespace redlock {

struct Client::Impl {
  uv_loop_t loop;
  uv_async_t wake;
  std::mutex mu;
  std::vector<std::function<void()>> tasks;  // guarded by mu
  std::unique_ptr<AsyncClient> async;        // loop thread only (after start)
  Config config;
  std::thread thread;
  std::thread::id loop_id;          // the thread's id, set once before create() returns
  bool destroyed_on_loop = false;   // loop thread only: ~Client ran on it; the thread frees this
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

  bool on_loop_thread() const noexcept { return std::this_thread::get_id() == loop_id; }

  // wait is call(start).get() for the blocking members — except on the loop
  // thread itself, where the operation could never run while we block it:
  // there it fails at once (Errc::invalid_argument), starting nothing.
  template <class T, class Start>
  Result<T> wait(const char* member, Start start) {
    if (on_loop_thread()) return on_loop_error(member);
    return call<T>(std::move(start)).get();
  }

  // call_async is call() for the _async members; on the loop thread the
  // future is ready at once with the refusal, so waiting for it there never
  // blocks.
  template <class T, class Start>
  std::future<Result<T>> call_async(const char* member, Start start) {
    if (!on_loop_thread()) return call<T>(std::move(start));
    std::promise<Result<T>> refused;
    refused.set_value(on_loop_error(member));
    return refused.get_future();
  }

  // start_thread starts the loop thread. The system may refuse a thread
  // (its limit of threads or memory reached): then the client, whose loop
  // never ran, is closed on this thread and the loop given back, and the
  // refusal is an error, not an exception out of Client::create.
  std::optional<Error> start_thread() {
    try {
      thread = std::thread([p = this] {
        // A master that vanishes mid-write must cost an EPIPE, not the program
        // (src/socket_wire.cpp): SIGPIPE stays blocked on the loop thread.
        sigset_t pipe_only;
        sigemptyset(&pipe_only);
        sigaddset(&pipe_only, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr);
        uv_run(&p->loop, UV_RUN_DEFAULT);
        if (p->destroyed_on_loop) Impl::finish(p);  // nobody joins us: free what ~Client left
      });
    } catch (const std::system_error& e) {
      async->close([this] { uv_close(reinterpret_cast<uv_handle_t*>(&wake), nullptr); });
      async.reset();
      uv_run(&loop, UV_RUN_DEFAULT);
      uv_loop_close(&loop);
      return make_error(Errc::internal, std::string("cannot start the client's loop thread: ") + e.what());
    }
    return std::nullopt;
  }

  // finish: the loop has run out (every handle closed); close it and free.
  static void finish(Impl* p) noexcept {
    // Every handle of ours is closed by now; the tests run with asserts on.
    const int rc = uv_loop_close(&p->loop);
    assert(rc == 0 && "a uv handle was left open on the client's loop");
    (void)rc;
    delete p;
  }

  static Error on_loop_error(const char* member) {
    return make_error(Errc::invalid_argument,
                      std::string("Client::") + member +
                          " called on the client's own loop thread (inside on_lost?): it would wait for the "
                          "loop it blocks; call it from another thread");
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

}  // namespace redlock
