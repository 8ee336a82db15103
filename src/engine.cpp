// engine.cpp — argument checks, the list of live operations, cancellation
// and shutdown. The algorithm itself is in the operations
// (src/acquire.cpp, src/extend.cpp, src/release.cpp).
#include "engine.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include "keys.hpp"
#include "operation.hpp"
#include "telemetry.hpp"
#include "timer_queue.hpp"
#include "token.hpp"
#include "validity.hpp"

namespace redlock::detail {

namespace {

constexpr std::size_t max_resource_bytes = 1024;

// check_ttl returns the problem with a TTL, or an empty string.
std::string check_ttl(milliseconds ttl, const Options& o) {
  if (ttl <= milliseconds{0}) return "ttl " + std::to_string(ttl.count()) + " ms: must be > 0";
  if (ttl > o.max_ttl) {
    return "ttl " + std::to_string(ttl.count()) + " ms exceeds max_ttl " + std::to_string(o.max_ttl.count()) +
           " ms";
  }
  const milliseconds floor = o.node_timeout + drift_allowance(ttl, o.drift_factor) + o.min_validity;
  if (ttl <= floor) {
    return "ttl " + std::to_string(ttl.count()) + " ms leaves no validity: must exceed node_timeout + drift + " +
           "min_validity (" + std::to_string(floor.count()) + " ms)";
  }
  return {};
}

std::string check_token(const std::string& token) {
  return valid_token(token) ? std::string() : "token: must be 1-128 characters of [0-9A-Za-z_-]";
}

// first_problem: the first non-empty of the checks, in order.
template <typename... Checks>
std::string first_problem(Checks&&... checks) {
  std::string problem;
  ((problem.empty() ? void(problem = checks()) : void()), ...);
  return problem;
}

// check_permits: a semaphore's P, and what does not go with one yet.
std::string check_permits(const AcquireOptions& opts) {
  if (opts.permits == 0) return {};
  if (opts.permits > max_permits) {
    return "permits: " + std::to_string(opts.permits) + " (at most " + std::to_string(max_permits) + ")";
  }
  if (!opts.token.empty()) return "permits: needs a value drawn by the library (no token)";
  return {};
}

// check_shared: what does not go with a read lock yet.
std::string check_shared(const AcquireOptions& opts) {
  if (!opts.shared) return {};
  if (!opts.token.empty()) return "shared: needs a value drawn by the library (no token)";
  if (opts.fence) return "shared: not with fence (a reader has no fence)";
  if (opts.fair) return "shared: not with fair";
  if (opts.permits > 0) return "shared: not with permits";
  return {};
}

// check_permit: a held permit's number (Lock::permit).
std::string check_permit(std::optional<std::uint32_t> permit, const std::vector<std::string>& more) {
  if (!permit) return {};
  if (*permit >= max_permits) {
    return "permit: " + std::to_string(*permit) + " (a permit is 0 to " + std::to_string(max_permits - 1) + ")";
  }
  return more.empty() ? "" : "permit: a semaphore's permit is of one resource";
}

// check_held_kind: a held lock is a permit, a reader's, or a lock of
// one or more resources — never two of those.
std::string check_held_kind(std::optional<std::uint32_t> permit, bool shared, const std::vector<std::string>& more) {
  if (!shared) return {};
  if (permit) return "shared: a read lock has no permit";
  return more.empty() ? "" : "shared: a read lock is of one resource";
}

// check_acquire: the checks of an acquire that do not depend on the
// resource names.
std::string check_acquire(milliseconds ttl, const AcquireOptions& opts, const Options& options) {
  constexpr auto max_wait = std::numeric_limits<std::int32_t>::max();
  return first_problem([&] { return check_ttl(ttl, options); },
                       [&] { return opts.wait < milliseconds{0} ? "wait: must be >= 0" : ""; },
                       [&] { return opts.wait > milliseconds{max_wait} ? "wait: must be <= " + std::to_string(max_wait) + " ms" : ""; },
                       [&] { return opts.token.empty() ? "" : check_token(opts.token); },
                       [&] { return opts.fair && !opts.token.empty() ? "fair: needs a value drawn by the library (no token)" : ""; },
                       [&] { return opts.fair && opts.fence ? "fair: not with fence" : ""; },
                       [&] { return check_permits(opts); },
                       [&] { return check_shared(opts); });
}

// semaphore_keys_of: what a semaphore's acquire names (permits: 1 to
// max_permits), or the extend or release of its permit `slot`.
LockKeys semaphore_keys_of(const std::string& prefix, std::string resource, std::size_t permits) {
  LockKeys keys;
  keys.key = permits_key(prefix, resource);
  keys.channel = permits_channel(prefix, resource);
  keys.permit = true;
  keys.permit_keys.reserve(permits);
  for (std::size_t i = 0; i < permits; ++i) keys.permit_keys.push_back(permit_key(prefix, resource, i));
  keys.resource = std::move(resource);
  return keys;
}
LockKeys permit_keys_of(const std::string& prefix, std::string resource, std::size_t slot) {
  LockKeys keys;
  keys.key = permit_key(prefix, resource, slot);
  keys.channel = permits_channel(prefix, resource);
  keys.permit = true;
  keys.resource = std::move(resource);
  return keys;
}

LockKeys keys_of(const std::string& prefix, std::string resource, const std::vector<std::string>& more) {
  LockKeys keys;
  keys.key = lock_key(prefix, resource);
  keys.resource = std::move(resource);
  for (const std::string& r : more) keys.more_keys.push_back(lock_key(prefix, r));
  return keys;
}

}  // namespace

std::string check_resource(const std::string& resource) {
  if (resource.empty()) return "resource: empty";
  if (resource.size() > max_resource_bytes) {
    return "resource: " + std::to_string(resource.size()) + " bytes (at most " +
           std::to_string(max_resource_bytes) + ")";
  }
  // The resource is the Redis Cluster hash tag of its keys (src/keys.hpp),
  // and a tag ends at the first '}'.
  if (const std::size_t at = resource.find('}'); at != std::string::npos) {
    return "resource: '}' at byte " + std::to_string(at) +
           " (a resource names the hash tag of its keys and may not contain '}')";
  }
  return {};
}

Engine::Engine(Runtime& runtime, Transport& transport, const Options& options)
    : runtime_(runtime),
      transport_(transport),
      options_(options),
      owner_suffix_(runtime.owner_suffix(options.owner)),
      telemetry_(transport.telemetry()) {}

Engine::~Engine() = default;

void Engine::enlist(Operation* op) noexcept {
  op->next = head_;
  if (head_ != nullptr) head_->prev = op;
  head_ = op;
  ++live_;
}

void Engine::delist(Operation* op) noexcept {
  if (op->prev != nullptr) op->prev->next = op->next;
  if (op->next != nullptr) op->next->prev = op->prev;
  if (head_ == op) head_ = op->next;
  --live_;
  maybe_idle();
}

// leave_line: a line is short-lived and rarely long (one client's waiters
// of one resource), so a search is fine; an empty line is erased.
void Engine::leave_line(const std::string& key, AcquireOperation* op, bool took) {
  auto it = lines_.find(key);
  if (it == lines_.end()) return;
  std::vector<AcquireOperation*>& line = it->second;
  const auto at = std::find(line.begin(), line.end(), op);
  if (at == line.end()) return;
  const bool was_first = at == line.begin();
  line.erase(at);
  if (line.empty()) {
    lines_.erase(it);
    return;
  }
  if (was_first) line.front()->your_turn(took);
}

// maybe_idle: closing, and no operation left — drop the cancellation
// signal (no stop callback can raise it any more: each was destroyed with
// its operation), so that no handle of the engine's keeps the loop, and
// report idle.
void Engine::maybe_idle() {
  if (!closing_ || live_ != 0) return;
  cancel_signal_.reset();
  if (on_idle_) std::exchange(on_idle_, nullptr)();
}

// watch_cancel: the acquire ends with Errc::cancelled once `token` is
// requested. The request may come from any thread: it queues the
// operation's id and raises one Signal (made on first use).
void Engine::watch_cancel(Operation* op, const std::stop_token& token) {
  if (!token.stop_possible()) return;
  if (cancel_signal_ == nullptr) cancel_signal_ = runtime_.signal([this] { drain_cancels(); });
  op->id = ++next_id_;
  op->on_cancel.emplace(token, std::function<void()>([queue = cancels_, signal = cancel_signal_.get(), id = op->id] {
    std::lock_guard<std::mutex> lock(queue->mu);
    queue->ids.push_back(id);
    signal->raise();
  }));
}

void Engine::drain_cancels() {
  std::vector<std::uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(cancels_->mu);
    ids.swap(cancels_->ids);
  }
  for (std::uint64_t id : ids) {
    for (Operation* op = head_; op != nullptr; op = op->next) {
      if (op->id == id) {
        op->step(Operation::Event::cancel);
        break;
      }
    }
  }
}

void Engine::shutdown(std::function<void()> on_idle) {
  if (closing_) return;
  closing_ = true;
  on_idle_ = std::move(on_idle);
  for (Operation* op = head_; op != nullptr; op = op->next) op->step(Operation::Event::abort);
  maybe_idle();
}

void Engine::start(Operation* op) { op->begin(); }

void Engine::acquire(std::string resource, AcquireOptions opts, LockCallback done) {
  const milliseconds ttl = opts.ttl.count() == 0 ? options_.default_ttl : opts.ttl;
  std::string problem = first_problem([&] { return check_resource(resource); },
                                      [&] { return check_acquire(ttl, opts, options_); });
  const std::stop_token cancel = opts.cancel;
  // (A semaphore's keys only once its P is known good: it sizes them.)
  LockKeys keys = opts.permits > 0 && problem.empty() ? semaphore_keys_of(options_.prefix, std::move(resource), opts.permits)
                                                      : keys_of(options_.prefix, std::move(resource), {});
  keys.shared = opts.shared;
  auto* op = new AcquireOperation(*this, std::move(keys), std::move(opts), ttl, std::move(done));
  op->problem = std::move(problem);
  watch_cancel(op, cancel);
  start(op);
}

void Engine::acquire_many(std::vector<std::string> resources, AcquireOptions opts, LockCallback done) {
  const milliseconds ttl = opts.ttl.count() == 0 ? options_.default_ttl : opts.ttl;
  std::string problem = resources.empty() ? "resources: empty" : "";
  for (std::size_t i = 0; i < resources.size() && problem.empty(); ++i) {
    if (std::string p = check_resource(resources[i]); !p.empty()) {
      problem = "resources[" + std::to_string(i) + "]" + p.substr(8);  // "resource: …" → "resources[i]: …"
    }
  }
  if (problem.empty()) problem = check_acquire(ttl, opts, options_);
  if (problem.empty() && opts.fair) problem = "fair: one resource only (not acquire_many)";
  if (problem.empty() && opts.permits > 0) problem = "permits: one semaphore only (not acquire_many)";
  if (problem.empty() && opts.shared) problem = "shared: one resource only (not acquire_many)";
  std::string first = resources.empty() ? std::string() : resources.front();
  const std::vector<std::string> more(resources.begin() + (resources.empty() ? 0 : 1), resources.end());
  const std::stop_token cancel = opts.cancel;
  auto* op = new AcquireOperation(*this, keys_of(options_.prefix, std::move(first), more), std::move(opts), ttl,
                                  std::move(done));
  op->problem = std::move(problem);
  watch_cancel(op, cancel);
  start(op);
}

TimerQueue& Engine::timers() {
  if (timers_ == nullptr) timers_ = std::make_unique<TimerQueue>(runtime_);
  return *timers_;
}

void Engine::extend(Lock lock, milliseconds ttl, LockCallback done, const std::vector<std::string>& more) {
  const milliseconds new_ttl = ttl.count() == 0 ? (lock.ttl.count() == 0 ? options_.default_ttl : lock.ttl) : ttl;
  std::string problem = first_problem([&] { return check_resource(lock.resource); },
                                      [&] { return check_ttl(new_ttl, options_); },
                                      [&] { return check_token(lock.token); },
                                      [&] { return check_permit(lock.permit, more); },
                                      [&] { return check_held_kind(lock.permit, lock.shared, more); });
  LockKeys keys = lock.permit && problem.empty() ? permit_keys_of(options_.prefix, lock.resource, *lock.permit)
                                                 : keys_of(options_.prefix, lock.resource, more);
  auto* op = new ExtendOperation(*this, std::move(keys), std::move(lock), new_ttl, std::move(done));
  op->problem = std::move(problem);
  start(op);
}

void Engine::release(std::string resource, std::string token, ReleaseCallback done,
                     const std::vector<std::string>& more, std::optional<std::uint32_t> permit, bool shared) {
  std::string problem = first_problem([&] { return check_resource(resource); }, [&] { return check_token(token); },
                                      [&] { return check_permit(permit, more); },
                                      [&] { return check_held_kind(permit, shared, more); });
  LockKeys keys = permit && problem.empty() ? permit_keys_of(options_.prefix, std::move(resource), *permit)
                                            : keys_of(options_.prefix, std::move(resource), more);
  keys.shared = shared;
  auto* op = new ReleaseOperation(*this, std::move(keys), std::move(token), std::move(done));
  op->problem = std::move(problem);
  start(op);
}

}  // namespace redlock::detail
