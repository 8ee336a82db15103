// telemetry.cpp — counters and observer calls (telemetry.hpp), and the
// public helpers of redlock/observer.hpp.
#include "telemetry.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <utility>

namespace redlock {

std::string_view connection_state_name(ConnectionState state) noexcept {
  switch (state) {
    case ConnectionState::idle: return "idle";
    case ConnectionState::connecting: return "connecting";
    case ConnectionState::handshaking: return "handshaking";
    case ConnectionState::ready: return "ready";
    case ConnectionState::backing_off: return "backing_off";
    case ConnectionState::closing: return "closing";
    case ConnectionState::closed: return "closed";
  }
  return "unknown";
}

std::string_view op_kind_name(OpKind kind) noexcept {
  switch (kind) {
    case OpKind::acquire: return "acquire";
    case OpKind::extend: return "extend";
    case OpKind::release: return "release";
  }
  return "unknown";
}

std::string_view lock_kind_name(LockKind kind) noexcept {
  switch (kind) {
    case LockKind::lock: return "lock";
    case LockKind::read_lock: return "read_lock";
    case LockKind::permit: return "permit";
  }
  return "unknown";
}

Observer::~Observer() = default;
void Observer::on_connection(const ConnectionEvent&) {}
void Observer::on_quarantine(const QuarantineEvent&) {}
void Observer::on_round(const RoundEvent&) {}
void Observer::on_lease(const LeaseEvent&) {}
void Observer::on_wake(const WakeEvent&) {}

std::chrono::microseconds LatencyHistogram::upper_bound(std::size_t i) noexcept {
  if (i + 1 >= buckets) return std::chrono::microseconds::max();
  return std::chrono::microseconds{1LL << i};
}

std::chrono::microseconds LatencyHistogram::quantile(double q) const noexcept {
  if (count == 0 || !(q >= 0.0)) return std::chrono::microseconds{0};
  const double wanted = std::ceil(std::min(q, 1.0) * static_cast<double>(count));
  const std::uint64_t rank = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(wanted));
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < buckets; ++i) {
    seen += counts[i];
    if (seen >= rank) return upper_bound(i);
  }
  return upper_bound(buckets - 1);
}

}  // namespace redlock

namespace redlock::detail {

namespace {

constexpr auto relaxed = std::memory_order_relaxed;

std::size_t index_of(OpKind op) noexcept { return static_cast<std::size_t>(op); }

// bucket_of: the histogram bucket of a duration (see LatencyHistogram).
std::size_t bucket_of(std::chrono::microseconds d) noexcept {
  if (d.count() <= 0) return 0;
  const auto width = static_cast<std::size_t>(std::bit_width(static_cast<std::uint64_t>(d.count())));
  return std::min(width, LatencyHistogram::buckets - 1);
}

}  // namespace

Telemetry::Telemetry(std::shared_ptr<Observer> observer, std::vector<std::string> addresses)
    : observer_(std::move(observer)), nodes_(addresses.size()) {
  for (std::size_t i = 0; i < addresses.size(); ++i) nodes_[i].address = std::move(addresses[i]);
}

void Telemetry::connection(std::size_t node, bool subscriber, ConnectionState from, ConnectionState to,
                           std::string_view reason) noexcept {
  if (!subscriber) {
    if (to == ConnectionState::ready) nodes_[node].connects.fetch_add(1, relaxed);
    if (from == ConnectionState::ready && to != ConnectionState::closing && to != ConnectionState::closed)
      nodes_[node].drops.fetch_add(1, relaxed);
  }
  if (!observer_) return;
  tell([&](Observer& o) {
    o.on_connection(ConnectionEvent{node, nodes_[node].address, subscriber, from, to, reason});
  });
}

void Telemetry::quarantine(std::size_t node, bool entered, std::chrono::milliseconds remaining,
                           std::string_view reason) noexcept {
  if (entered) nodes_[node].quarantines.fetch_add(1, relaxed);
  if (!observer_) return;
  tell([&](Observer& o) { o.on_quarantine(QuarantineEvent{node, nodes_[node].address, entered, remaining, reason}); });
}

namespace {

void count(Telemetry::Rounds& r, const Error* failure) noexcept {
  if (failure == nullptr) {
    r.ok.fetch_add(1, relaxed);
    return;
  }
  switch (failure->code) {
    case Errc::held:
    case Errc::not_held: r.held.fetch_add(1, relaxed); break;
    case Errc::no_quorum: r.no_quorum.fetch_add(1, relaxed); break;
    case Errc::validity_too_short:
    case Errc::too_late: r.too_late.fetch_add(1, relaxed); break;
    default: r.other.fetch_add(1, relaxed); break;
  }
}

RoundCounts load(const Telemetry::Rounds& r) noexcept {
  return {r.ok.load(relaxed), r.held.load(relaxed), r.no_quorum.load(relaxed), r.too_late.load(relaxed),
          r.other.load(relaxed)};
}

}  // namespace

void Telemetry::round(OpKind op, LockKind kind, std::string_view resource, const Error* failure, int attempt,
                      std::chrono::microseconds elapsed, const std::vector<NodeOutcome>& nodes) noexcept {
  count(rounds_[index_of(op)], failure);
  if (op == OpKind::acquire && kind != LockKind::lock) {
    count(kind == LockKind::read_lock ? read_lock_acquires_ : permit_acquires_, failure);
  }
  if (!observer_) return;
  tell([&](Observer& o) {
    RoundEvent ev;
    ev.op = op;
    ev.kind = kind;
    ev.resource = resource;
    ev.ok = failure == nullptr;
    ev.code = failure == nullptr ? Errc::internal : failure->code;
    ev.attempt = attempt;
    ev.elapsed = elapsed;
    ev.nodes = &nodes;
    o.on_round(ev);
  });
}

void Telemetry::finished(OpKind op, std::chrono::microseconds elapsed) noexcept {
  Histogram& h = latency_[index_of(op)];
  h.counts[bucket_of(elapsed)].fetch_add(1, relaxed);
  h.count.fetch_add(1, relaxed);
  h.sum_us.fetch_add(static_cast<std::uint64_t>(std::max<long long>(elapsed.count(), 0)), relaxed);
}

void Telemetry::lease_extended(std::string_view resource, std::chrono::milliseconds validity) noexcept {
  leases_extended_.fetch_add(1, relaxed);
  if (!observer_) return;
  tell([&](Observer& o) { o.on_lease(LeaseEvent{LeaseEvent::Kind::extended, resource, validity, {}}); });
}

void Telemetry::lease_lost(std::string_view resource, std::string_view reason) noexcept {
  leases_lost_.fetch_add(1, relaxed);
  if (!observer_) return;
  tell([&](Observer& o) {
    o.on_lease(LeaseEvent{LeaseEvent::Kind::lost, resource, std::chrono::milliseconds{0}, reason});
  });
}

void Telemetry::woken(std::string_view resource) noexcept {
  wake_ups_.fetch_add(1, relaxed);
  if (!observer_) return;
  tell([&](Observer& o) { o.on_wake(WakeEvent{resource}); });
}

Stats Telemetry::snapshot() const {
  Stats s;
  RoundCounts* counts[3] = {&s.acquire_rounds, &s.extend_rounds, &s.release_rounds};
  LatencyHistogram* hist[3] = {&s.acquire_latency, &s.extend_latency, &s.release_latency};
  for (std::size_t op = 0; op < 3; ++op) {
    *counts[op] = load(rounds_[op]);
    const Histogram& h = latency_[op];
    for (std::size_t i = 0; i < LatencyHistogram::buckets; ++i) hist[op]->counts[i] = h.counts[i].load(relaxed);
    hist[op]->count = h.count.load(relaxed);
    hist[op]->sum = std::chrono::microseconds{static_cast<long long>(h.sum_us.load(relaxed))};
  }
  s.read_lock_acquire_rounds = load(read_lock_acquires_);
  s.permit_acquire_rounds = load(permit_acquires_);
  s.leases_extended = leases_extended_.load(relaxed);
  s.leases_lost = leases_lost_.load(relaxed);
  s.wake_ups = wake_ups_.load(relaxed);
  s.nodes.reserve(nodes_.size());
  for (const Node& n : nodes_) {
    s.nodes.push_back({n.address, n.timeouts.load(relaxed), n.errors.load(relaxed), n.connects.load(relaxed),
                       n.drops.load(relaxed), n.stalls.load(relaxed), n.quarantines.load(relaxed)});
  }
  return s;
}

}  // namespace redlock::detail
