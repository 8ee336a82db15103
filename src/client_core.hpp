// client_core.hpp — ClientCore: one client's nodes, engine, lease service
// and reports on a uv loop's runtime and sockets; it closes by a
// ClientClose (src/client_close.hpp). AsyncClient is its owning handle; the
// blocking Client runs one on a loop thread of its own and takes its
// leases through its lease service.
#pragma once

#include <uv.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "redlock/async_client.hpp"
#include "campaign.hpp"
#include "client_close.hpp"
#include "engine.hpp"
#include "lease_service.hpp"
#include "node_set.hpp"
#include "socket_wire.hpp"
#include "survey.hpp"
#include "telemetry.hpp"
#include "uv_runtime.hpp"

namespace redlock {

// ClientCore — the engine, the lease service and the surveys over a NodeSet (one
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
        map_wires_(loop, tls_.get(), nullptr, detail::cluster_slots_limits),
        nodes_(runtime_, wires_, config_, &map_wires_),
        engine_(runtime_, nodes_, config_.options) {
    close_.stop_leases = [this] {
      {
        std::lock_guard<std::mutex> lock(lease_host_->mu);
        lease_host_->post = nullptr;  // leases still held are lost below; a later release has nothing to go through
      }
      // Campaigns backing off end now (closed); the rest as what they wait for does.
      const auto campaigns = campaigns_;
      for (const auto& [key, c] : campaigns) c->close();
      leases_.close();
    };
    close_.busy = [this] { return leases_.live() != 0 || deferred_ != 0 || !campaigns_.empty(); };
    leases_.on_idle = [this] { maybe_finish(); };
    close_.finished = [this] {
      resume_.close();
      if (owner_gone_) delete this;
    };
    // AsyncLease::release reaches the lease service through this until the
    // client closes (on the loop thread: the task runs at once).
    lease_host_->post = [this](detail::LeaseHost::Task task) { task(leases_); };
    nodes_.start();
  }

  void set_owner(AsyncClient* owner) noexcept { owner_ = owner; }

  detail::Engine& engine() noexcept { return engine_; }

  // leases: the client's lease service (the blocking Client takes its
  // leases through it, with a host of its own).
  detail::LeaseService& leases() noexcept { return leases_; }
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
    leases_.lock(std::move(resources), std::move(opts), {}, lease_host_,
                 [done = std::move(done)](Result<std::shared_ptr<detail::LeaseState>> r) {
                   if (!r) return done(std::move(r).error());
                   done(AsyncLease(std::move(*r)));
                 });
  }
  Stats stats() const { return nodes_.shared_telemetry()->snapshot(); }

  // status, probe: Errc::closed after close(), or when the client closes
  // while they are on their way, like every other operation.
  void status(std::string resource, StatusCallback done) { reports_.status(std::move(resource), std::move(done)); }
  void probe(NodesCallback done) { reports_.nodes(std::move(done)); }
  // leader, proclaim, resign: an election's rounds (src/leader.cpp).
  void leader(std::string name, LeaderCallback done) { reports_.leader(std::move(name), std::move(done)); }
  void proclaim(detail::Reports::Proclaim p, std::function<void(Result<void>)> done) {
    reports_.proclaim(std::move(p), std::move(done));
  }
  void resign(std::string name, std::string token, std::function<void(Result<void>)> done) {
    reports_.resign(std::move(name), std::move(token), std::move(done));
  }
  // campaign: a Campaign of `name` (src/campaign.hpp) whose lease links
  // to `host` (the blocking Client's; null: this core's, for an
  // AsyncLeadership).
  void campaign(std::string name, CampaignOptions opts, std::shared_ptr<detail::LeaseHost> host,
                detail::Campaign::Done done) {
    if (close_.closing()) return complete_later(closed_error(), std::move(done));
    const std::uint64_t key = ++next_campaign_;
    auto c = std::make_shared<detail::Campaign>(runtime_, leases_, reports_, config_.options,
                                                host ? std::move(host) : lease_host_, std::move(name), std::move(opts),
                                                std::move(done), [this, key] {
                                                  campaigns_.erase(key);
                                                  maybe_finish();
                                                });
    campaigns_.emplace(key, c);
    c->start();
  }
  void campaign(std::string name, CampaignOptions opts, LeadershipCallback done) {
    std::string identity = opts.identity, value = opts.value, named = name;
    campaign(std::move(name), std::move(opts), nullptr,
             [this, named = std::move(named), identity = std::move(identity), value = std::move(value),
              done = std::move(done)](Result<std::shared_ptr<detail::LeaseState>> r) mutable {
               if (!r) return done(std::move(r).error());
               std::string id = identity.empty() ? detail::identity_of((*r)->token()) : std::move(identity);
               done(AsyncLeadership(this, lease_host_, std::move(named), std::move(id), std::move(value),
                                    AsyncLease(std::move(*r))));
             });
  }
  // observe: a LeaderWatcher of `name`; `link`'s teardown is set by the
  // caller (AsyncClient: on this loop; Client: posted to it).
  std::uint64_t observe(std::string name, std::shared_ptr<detail::WatchLink> link, LeaderWatchCallback callback) {
    const Options& o = config_.options;
    return reports_.observe(std::move(name), o.retry_delay + o.retry_jitter, 10 * o.wake_safety_net, std::move(link),
                            std::move(callback));
  }
  void unobserve(std::uint64_t id) { reports_.unobserve(id); }

  void close(std::function<void()> on_closed) { close_.close(std::move(on_closed)); }

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


  // owner_gone: the AsyncClient was destroyed.
  void owner_gone() {
    owner_gone_ = true;
    owner_ = nullptr;
    close({});
    if (close_.can_free()) delete this;  // else `finished` frees it
  }

 private:
  ~ClientCore() = default;

  static Error closed_error() { return make_error(Errc::closed, "the client was closed"); }

  void maybe_finish() { close_.maybe_finish(); }

  Config config_;
  detail::UvRuntime runtime_;  // the loop's clock, timers and randomness, for everything below
  detail::ResumeWatch resume_{runtime_};  // fires overdue timers at a resume from suspend
  std::unique_ptr<detail::TlsContext> tls_;  // null unless a node is rediss://
  detail::SocketWireFactory wires_;
  detail::SocketWireFactory map_wires_;  // a cluster member's CLUSTER SLOTS (larger replies)
  detail::NodeSet nodes_;
  detail::Engine engine_;
  detail::LeaseService leases_{engine_};  // after the engine, which it uses
  detail::Reports reports_{runtime_, nodes_, config_.options.prefix};
  detail::ClientClose close_{runtime_, engine_, nodes_, reports_};  // the order of the close, and its end
  std::map<std::uint64_t, std::shared_ptr<detail::Campaign>> campaigns_;
  std::uint64_t next_campaign_ = 0;
  AsyncClient* owner_ = nullptr;
  std::shared_ptr<detail::LeaseHost> lease_host_ = std::make_shared<detail::LeaseHost>();
  std::size_t deferred_ = 0;  // complete_later's completions still to come
  bool owner_gone_ = false;
};

}  // namespace redlock
