// async_client.cpp — ClientCore: the nodes, the engine, and the order in
// which they are shut down. AsyncClient is its owning handle.
#include "redlock/async_client.hpp"

#include <uv.h>

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "lease_state.hpp"
#include "engine.hpp"
#include "keys.hpp"
#include "node_set.hpp"
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
      : loop_(loop),
        config_(std::move(config)),
        runtime_(loop),
        tls_(std::move(tls)),
        wires_(loop, tls_.get()),
        nodes_(runtime_, wires_, config_),
        engine_(runtime_, nodes_, config_.options) {
    uv_timer_init(loop_, &reaper_);
    reaper_.data = this;
    nodes_.start();
  }

  detail::Engine& engine() noexcept { return engine_; }

  // start_watchdog: a lease taken through this client now keeps itself
  // extended. After close() it is lost at once.
  void start_watchdog(std::shared_ptr<detail::LeaseState> state) {
    auto* dog = new detail::Watchdog(engine_, std::move(state), [this](detail::Watchdog* w) { watchdog_gone(w); });
    dog->next = watchdogs_;
    if (watchdogs_ != nullptr) watchdogs_->prev = dog;
    watchdogs_ = dog;
    ++live_watchdogs_;
    if (closing_) {
      dog->shutdown();
    } else {
      dog->start();
    }
  }
  const Config& config() const noexcept { return config_; }

  // status: every node's view of `resource` (inspect script), on the loop.
  void status(std::string resource, std::function<void(ResourceStatus)> done) {
    detail::Call call{detail::CommandId::inspect, detail::lock_key(config_.options.prefix, resource), {}, {},
                      {detail::fence_key(config_.options.prefix, resource)}, {}};
    start_survey(std::move(call), [this, resource = std::move(resource), done = std::move(done)](
                                      std::vector<detail::SurveyAnswer> answers) mutable {
      ResourceStatus st;
      st.resource = std::move(resource);
      st.nodes.resize(answers.size());
      for (std::size_t i = 0; i < answers.size(); ++i) {
        NodeHolding& h = st.nodes[i];
        detail::SurveyAnswer& a = answers[i];
        h.address = nodes_.address(i);
        h.rtt = a.rtt;
        h.quarantined = a.quarantined;
        if (!a.answered) {
          h.error = std::move(a.text);
        } else if (a.reply_type == detail::ReplyView::Type::error) {
          h.error = "error reply: " + a.text;
        } else if (a.reply_type != detail::ReplyView::Type::string) {
          h.error = "unexpected reply to the inspect script";
        } else {
          detail::parse_inspect(a.text, h);
        }
      }
      detail::summarize(st);
      done(std::move(st));
    });
  }

  // probe: PING every node; report it with what the last handshake read.
  void probe(std::function<void(NodesReport)> done) {
    detail::Call call{detail::CommandId::ping, {}, {}, {}, {}, {}};
    start_survey(std::move(call), [this, done = std::move(done)](std::vector<detail::SurveyAnswer> answers) {
      NodesReport report;
      report.quorum = detail::majority_of(nodes_.size());
      report.nodes.resize(answers.size());
      const auto now = runtime_.now();
      for (std::size_t i = 0; i < answers.size(); ++i) {
        NodeHealth& h = report.nodes[i];
        const detail::NodeSession& node = nodes_.node(i);
        detail::SurveyAnswer& a = answers[i];
        h.address = node.address();
        h.version = node.server_version();
        h.run_id = node.run_id();
        h.uptime = node.uptime(now);
        h.quarantine_left = node.quarantine_left(now);
        h.excluded = node.excluded();
        h.quarantined = h.quarantine_left.count() > 0 || !h.excluded.empty();
        if (a.answered && a.reply_type == detail::ReplyView::Type::status) {
          h.reachable = true;
          h.rtt = a.rtt;
        } else if (a.answered) {
          h.error = "error reply to PING: " + a.text;
        } else {
          h.error = std::move(a.text);
        }
      }
      done(std::move(report));
    });
  }

  void close(std::function<void()> on_closed) {
    if (on_closed) closed_callbacks_.push_back(std::move(on_closed));
    if (fully_closed_) {
      run_closed_callbacks();
      return;
    }
    if (closing_) return;
    closing_ = true;
    for (detail::Watchdog* w = watchdogs_; w != nullptr;) {
      detail::Watchdog* next = w->next;  // shutdown may not unlink yet (its timers close first)
      w->shutdown();
      w = next;
    }
    engine_.shutdown([this] {
      engine_idle_ = true;
      maybe_finish();
    });
    nodes_.close([this] {
      nodes_closed_ = true;
      maybe_finish();
    });
  }

  // owner_gone: the AsyncClient was destroyed.
  void owner_gone() {
    owner_gone_ = true;
    close({});
    if (fully_closed_) delete this;
  }

 private:
  ~ClientCore() = default;

  void start_survey(detail::Call call, detail::Survey::Done done) {
    ++live_surveys_;
    detail::Survey::launch(loop_, nodes_, std::move(call), std::move(done), [this] {
      --live_surveys_;
      maybe_finish();
    });
  }

  void watchdog_gone(detail::Watchdog* w) {
    if (w->prev != nullptr) w->prev->next = w->next;
    if (w->next != nullptr) w->next->prev = w->prev;
    if (watchdogs_ == w) watchdogs_ = w->next;
    --live_watchdogs_;
    maybe_finish();
  }

  void maybe_finish() {
    if (!engine_idle_ || !nodes_closed_ || live_watchdogs_ != 0 ||
        live_surveys_ != 0 || reaping_) {
      return;
    }
    reaping_ = true;
    // Finish in a close callback of our own, never inside a node's.
    uv_close(reinterpret_cast<uv_handle_t*>(&reaper_), [](uv_handle_t* h) {
      auto* core = static_cast<ClientCore*>(h->data);
      core->fully_closed_ = true;
      core->run_closed_callbacks();
      if (core->owner_gone_) delete core;
    });
  }

  void run_closed_callbacks() {
    auto callbacks = std::move(closed_callbacks_);
    closed_callbacks_.clear();
    for (auto& cb : callbacks) cb();
  }

  uv_loop_t* loop_;
  Config config_;
  detail::UvRuntime runtime_;  // the loop's clock, timers and randomness, for everything below
  std::unique_ptr<detail::TlsContext> tls_;  // null unless a node is rediss://
  detail::SocketWireFactory wires_;
  detail::NodeSet nodes_;
  detail::Engine engine_;
  uv_timer_t reaper_;
  std::vector<std::function<void()>> closed_callbacks_;
  detail::Watchdog* watchdogs_ = nullptr;  // intrusive list of live watchdogs
  std::size_t live_watchdogs_ = 0;
  std::size_t live_surveys_ = 0;
  bool nodes_closed_ = false, closing_ = false, engine_idle_ = false, reaping_ = false, fully_closed_ = false, owner_gone_ = false;
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

AsyncClient::AsyncClient(ClientCore* core) noexcept : core_(core) {}

AsyncClient::~AsyncClient() { core_->owner_gone(); }

void AsyncClient::acquire(std::string resource, AcquireOptions opts, LockCallback done) {
  core_->engine().acquire(std::move(resource), std::move(opts), std::move(done));
}

void AsyncClient::extend(Lock lock, milliseconds ttl, LockCallback done) {
  core_->engine().extend(std::move(lock), ttl, std::move(done));
}

void AsyncClient::release(std::string resource, std::string token, ReleaseCallback done) {
  core_->engine().release(std::move(resource), std::move(token), std::move(done));
}

namespace {

// deliver_multi turns the engine's Lock of a multi-resource round into the
// MultiLock the caller sees.
void deliver_multi(const MultiLockCallback& done, std::vector<std::string> resources,
                                             Result<Lock> r) {
  if (!r) return done(std::move(r).error());
  Lock& l = *r;
  MultiLock m;
  m.resources = std::move(resources);
  m.token = std::move(l.token);
  m.ttl = l.ttl;
  m.validity = l.validity;
  m.validity_deadline = l.validity_deadline;
  m.elapsed = l.elapsed;
  m.attempts = l.attempts;
  m.nodes = std::move(l.nodes);
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

void AsyncClient::extend_many(MultiLock lock, milliseconds ttl, MultiLockCallback done) {
  std::vector<std::string> sorted = sorted_unique(std::move(lock.resources));
  Lock first;
  first.resource = sorted.empty() ? std::string() : sorted.front();
  first.token = std::move(lock.token);
  first.ttl = lock.ttl;
  first.validity_deadline = lock.validity_deadline;
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

void AsyncClient::status(std::string resource, StatusCallback done) {
  if (std::string problem = detail::check_resource(resource); !problem.empty()) {
    return done(make_error(Errc::invalid_argument, std::move(problem)));
  }
  core_->status(std::move(resource), [done = std::move(done)](ResourceStatus st) { done(std::move(st)); });
}

void AsyncClient::nodes(NodesCallback done) {
  core_->probe([done = std::move(done)](NodesReport r) { done(std::move(r)); });
}

void AsyncClient::close(std::function<void()> on_closed) { core_->close(std::move(on_closed)); }

const Config& AsyncClient::config() const noexcept { return core_->config(); }

namespace detail {

void start_watchdog(AsyncClient& client, std::shared_ptr<LeaseState> state) {
  client.core_->start_watchdog(std::move(state));
}

}  // namespace detail

}  // namespace redlock
