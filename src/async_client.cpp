// async_client.cpp — ClientCore: the nodes, the engine, the reports and
// the leases on a uv loop's runtime and sockets; it closes by a ClientClose
// (src/client_close.hpp). AsyncClient is its owning handle.
#include "redlock/async_client.hpp"

#include <uv.h>

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "lease_state.hpp"
#include "client_close.hpp"
#include "engine.hpp"
#include "keys.hpp"
#include "node_set.hpp"
#include "telemetry.hpp"
#include "socket_wire.hpp"
#include "survey.hpp"
#include "uv_runtime.hpp"

namespace redlock {

// ClientCore — the engine, its watchdogs and surveys over a NodeSet (one
// NodeSession and one pub/sub Subscriber per master, on SocketWires). It lives
// until everything is closed and its AsyncClient is gone; it frees itself
// in whichever of the two comes last.
class ClientCore final {
 public:
  ClientCore(uv_loop_t* loop, Config config, std::unique_ptr<detail::TlsContext> tls)
      : config_(std::move(config)),
        runtime_(loop),
        tls_(std::move(tls)),
        wires_(loop, tls_.get()),
        nodes_(runtime_, wires_, config_),
        engine_(runtime_, nodes_, config_.options) {
    close_.stop_leases = [this] {
      {
        std::lock_guard<std::mutex> lock(lease_host_->mu);
        lease_host_->post = nullptr;  // leases still held are lost below; a later release has nothing to go through
      }
      if (detail::LeaseKeeper* keeper = engine_.leases_if_any()) keeper->shutdown_all();
    };
    close_.busy = [this] {
      const detail::LeaseKeeper* keeper = engine_.leases_if_any();
      return (keeper != nullptr && keeper->live() != 0) || deferred_ != 0;
    };
    close_.finished = [this] {
      resume_.close();
      if (owner_gone_) delete this;
    };
    // AsyncLease::release reaches the client through this until it closes
    // (on the loop thread: the task runs at once).
    lease_host_->post = [this](detail::LeaseHost::Task task) {
      if (owner_ != nullptr) task(*owner_);
    };
    nodes_.start();
  }

  void set_owner(AsyncClient* owner) noexcept { owner_ = owner; }

  detail::Engine& engine() noexcept { return engine_; }

  // start_watchdog: a lease taken through this client now keeps itself
  // extended. After close() it is lost at once.
  void start_watchdog(const std::shared_ptr<detail::LeaseState>& state) {
    detail::LeaseKeeper& keeper = leases();
    keeper.keep(state);
    if (close_.closing()) keeper.shutdown(*state);
  }

  // leases: the engine's lease keeper, told to call maybe_finish once its
  // last lease is let go.
  detail::LeaseKeeper& leases() {
    detail::LeaseKeeper& keeper = engine_.leases();
    if (!keeper.on_idle) keeper.on_idle = [this] { maybe_finish(); };
    return keeper;
  }
  const Config& config() const noexcept { return config_; }

  // lock: acquire (`resources` sorted; several: acquire_many), then a
  // lease kept by a watchdog on this loop.
  void lock(std::vector<std::string> resources, LeaseOptions opts, LeaseCallback done) {
    std::string problem = detail::lease_options_problem(opts);
    if (problem.empty() && opts.reentrant) {
      problem = "reentrant: reentrancy is per owner thread, a Client feature; an AsyncClient runs on one thread";
    }
    if (!problem.empty()) return complete_later(make_error(Errc::invalid_argument, std::move(problem)), std::move(done));
    if (close_.closing()) return complete_later(closed_error(), std::move(done));
    AcquireOptions acquire_opts = opts.acquire;
    std::vector<std::string> more(resources.size() > 1 ? resources.begin() + 1 : resources.end(), resources.end());
    auto taken_cb = [this, opts = std::move(opts), more, done = std::move(done)](Result<Lock> taken) mutable {
      if (!taken) return done(std::move(taken).error());
      std::shared_ptr<detail::LeaseState> state =
          detail::make_lease(std::move(*taken), std::move(opts), {}, lease_host_, std::move(more));
      start_watchdog(state);
      done(AsyncLease(std::move(state)));
    };
    if (resources.size() == 1) return engine_.acquire(std::move(resources.front()), std::move(acquire_opts), std::move(taken_cb));
    engine_.acquire_many(std::move(resources), std::move(acquire_opts), std::move(taken_cb));
  }
  Stats stats() const { return nodes_.shared_telemetry()->snapshot(); }

  // status, probe: Errc::closed after close(), or when the client closes
  // while they are on their way, like every other operation.
  void status(std::string resource, StatusCallback done) { reports_.status(std::move(resource), std::move(done)); }
  void probe(NodesCallback done) { reports_.nodes(std::move(done)); }

  void close(std::function<void()> on_closed) { close_.close(std::move(on_closed)); }

  // owner_gone: the AsyncClient was destroyed.
  void owner_gone() {
    owner_gone_ = true;
    owner_ = nullptr;
    close({});
    if (close_.closed()) delete this;
  }

 private:
  ~ClientCore() = default;

  static Error closed_error() { return make_error(Errc::closed, "the client was closed"); }

  // complete_later: `done` gets `e` on a later loop turn, never on the
  // caller's stack; counted, so that close() waits for it.
  template <class Done>
  void complete_later(Error e, Done done) {
    ++deferred_;
    runtime_.post([this, e = std::move(e), done = std::move(done)]() mutable {
      done(std::move(e));  // the count keeps the core alive through it
      --deferred_;
      maybe_finish();
    });
  }

  void maybe_finish() { close_.maybe_finish(); }

  Config config_;
  detail::UvRuntime runtime_;  // the loop's clock, timers and randomness, for everything below
  detail::ResumeWatch resume_{runtime_};  // fires overdue timers at a resume from suspend
  std::unique_ptr<detail::TlsContext> tls_;  // null unless a node is rediss://
  detail::SocketWireFactory wires_;
  detail::NodeSet nodes_;
  detail::Engine engine_;
  detail::Reports reports_{runtime_, nodes_, config_.options.prefix};
  detail::ClientClose close_{runtime_, engine_, nodes_, reports_};  // the order of the close, and its end
  AsyncClient* owner_ = nullptr;
  std::shared_ptr<detail::LeaseHost> lease_host_ = std::make_shared<detail::LeaseHost>();
  std::size_t deferred_ = 0;  // complete_later's completions still to come
  bool owner_gone_ = false;
};

Result<std::unique_ptr<AsyncClient>> AsyncClient::create(uv_loop_s* loop, Config config) {
  if (loop == nullptr) return make_error(Errc::invalid_argument, "loop: null");
  Result<void> valid = validate_config(config);
  if (!valid) return valid.error();
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

void AsyncClient::release(const Lock& lock, ReleaseCallback done) { release(lock.resource, lock.token, std::move(done)); }

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

std::vector<std::string> sorted_unique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

void AsyncClient::acquire_many(std::vector<std::string> resources, AcquireOptions opts, MultiLockCallback done) {
  std::vector<std::string> sorted = sorted_unique(std::move(resources));
  core_->engine().acquire_many(sorted, std::move(opts),
                               [done = std::move(done), sorted](Result<Lock> r) mutable {
                                 deliver_multi(done, std::move(sorted), std::move(r));
                               });
}

void AsyncClient::lock_many(std::vector<std::string> resources, LeaseOptions opts, LeaseCallback done) {
  core_->lock(sorted_unique(std::move(resources)), std::move(opts), std::move(done));
}

void AsyncClient::extend_many(MultiLock lock, milliseconds ttl, MultiLockCallback done) {
  std::vector<std::string> sorted = sorted_unique(std::move(lock.resources));
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
  std::vector<std::string> sorted = sorted_unique(std::move(resources));
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

void AsyncClient::nodes(NodesCallback done) {
  core_->probe(std::move(done));
}

void AsyncClient::close(std::function<void()> on_closed) { core_->close(std::move(on_closed)); }

const Config& AsyncClient::config() const noexcept { return core_->config(); }

Stats AsyncClient::stats() const { return core_->stats(); }

namespace detail {

void start_watchdog(AsyncClient& client, std::shared_ptr<LeaseState> state) { client.core_->start_watchdog(state); }

void stop_watchdog(AsyncClient& client, LeaseState& state) { client.core_->leases().stop(state); }

}  // namespace detail

}  // namespace redlock
