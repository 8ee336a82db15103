// test_telemetry.cpp — the counters and the observer calls of a client
// (src/telemetry.hpp), and the public histogram helpers.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "telemetry.hpp"

using namespace redlock;
using redlock::detail::Telemetry;
using std::chrono::microseconds;
using std::chrono::milliseconds;

namespace {

struct Recorder final : Observer {
  std::vector<std::string> seen;
  bool throw_every_time = false;
  void on_connection(const ConnectionEvent& e) override {
    seen.push_back(std::string(e.address) + (e.subscriber ? " sub " : " lock ") +
                   std::string(connection_state_name(e.from)) + "->" + std::string(connection_state_name(e.to)) +
                   (e.reason.empty() ? "" : ": " + std::string(e.reason)));
    if (throw_every_time) throw std::runtime_error("observer failed");
  }
  void on_quarantine(const QuarantineEvent& e) override {
    seen.push_back(std::string(e.address) + (e.entered ? " quarantined " : " counts again ") +
                   std::to_string(e.remaining.count()) + " " + std::string(e.reason));
  }
  void on_round(const RoundEvent& e) override {
    const std::string kind = e.kind == LockKind::lock ? "" : " " + std::string(lock_kind_name(e.kind));
    seen.push_back(std::string(op_kind_name(e.op)) + kind + " " + std::string(e.resource) + " " +
                   (e.ok ? "ok" : std::string(errc_name(e.code))) + " #" + std::to_string(e.attempt) + " " +
                   std::to_string(e.nodes->size()) + " nodes");
  }
  void on_lease(const LeaseEvent& e) override {
    seen.push_back(std::string(e.kind == LeaseEvent::Kind::extended ? "extended " : "lost ") +
                   std::string(e.resource) + " " + std::to_string(e.validity.count()) + " " + std::string(e.reason));
  }
  void on_wake(const WakeEvent& e) override { seen.push_back("woken " + std::string(e.resource)); }
};

}  // namespace

TEST_CASE("the latency histogram: power-of-two buckets, and quantiles as their upper edges") {
  CHECK(LatencyHistogram::upper_bound(0) == microseconds{1});
  CHECK(LatencyHistogram::upper_bound(10) == microseconds{1024});
  CHECK(LatencyHistogram::upper_bound(LatencyHistogram::buckets - 1) == microseconds::max());
  Telemetry t(nullptr, {"a:1"});
  for (long long us : {0LL, 1LL, 3LL, 1000LL, 1023LL, 1024LL, 1LL << 40}) t.finished(OpKind::acquire, microseconds{us});
  const Stats s = t.snapshot();
  const LatencyHistogram& h = s.acquire_latency;
  CHECK(h.count == 7);
  CHECK(h.counts[0] == 1);   // 0 µs
  CHECK(h.counts[1] == 1);   // 1 µs: [1, 2)
  CHECK(h.counts[2] == 1);   // 3 µs: [2, 4)
  CHECK(h.counts[10] == 2);  // 1000 and 1023 µs: [512, 1024)
  CHECK(h.counts[11] == 1);  // 1024 µs
  CHECK(h.counts[LatencyHistogram::buckets - 1] == 1);  // 2^40 µs: the last bucket
  CHECK(h.sum == microseconds{0 + 1 + 3 + 1000 + 1023 + 1024 + (1LL << 40)});
  CHECK(h.quantile(0.5) == microseconds{1024});  // the 4th of 7 is 1000 µs
  CHECK(h.quantile(0.0) == microseconds{1});
  CHECK(h.quantile(1.0) == microseconds::max());
  CHECK(s.extend_latency.count == 0);
  CHECK(s.extend_latency.quantile(0.99) == microseconds{0});
}

TEST_CASE("rounds are counted by outcome, per operation; the observer hears each one") {
  auto rec = std::make_shared<Recorder>();
  Telemetry t(rec, {"a:1", "b:2", "c:3"});
  const std::vector<NodeOutcome> nodes(3);
  const Error held = make_error(Errc::held, "held");
  const Error no_quorum = make_error(Errc::no_quorum, "no quorum");
  const Error late = make_error(Errc::validity_too_short, "short");
  const Error closed = make_error(Errc::closed, "closed");
  t.round(OpKind::acquire, LockKind::lock, "r", nullptr, 1, microseconds{10}, nodes);
  t.round(OpKind::acquire, LockKind::lock, "r", &held, 2, microseconds{10}, nodes);
  t.round(OpKind::acquire, LockKind::lock, "r", &no_quorum, 3, microseconds{10}, nodes);
  t.round(OpKind::acquire, LockKind::lock, "r", &late, 4, microseconds{10}, nodes);
  t.round(OpKind::acquire, LockKind::lock, "r", &closed, 5, microseconds{10}, nodes);
  const Error not_held = make_error(Errc::not_held, "gone");
  t.round(OpKind::extend, LockKind::lock, "r", &not_held, 1, microseconds{10}, nodes);
  t.round(OpKind::release, LockKind::lock, "r", nullptr, 1, microseconds{10}, nodes);
  const Stats s = t.snapshot();
  CHECK(s.acquire_rounds.ok == 1);
  CHECK(s.acquire_rounds.held == 1);
  CHECK(s.acquire_rounds.no_quorum == 1);
  CHECK(s.acquire_rounds.too_late == 1);
  CHECK(s.acquire_rounds.other == 1);
  CHECK(s.extend_rounds.held == 1);
  CHECK(s.release_rounds.ok == 1);
  REQUIRE(rec->seen.size() == 7);
  CHECK(rec->seen[0] == "acquire r ok #1 3 nodes");
  CHECK(rec->seen[1] == "acquire r redlock.held #2 3 nodes");
  CHECK(rec->seen[5] == "extend r redlock.not_held #1 3 nodes");
  CHECK(s.read_lock_acquire_rounds.ok + s.read_lock_acquire_rounds.held == 0);
  CHECK(s.permit_acquire_rounds.ok + s.permit_acquire_rounds.held == 0);
}

TEST_CASE("read locks' and permits' rounds: their kind in the event, their acquires counted apart as well") {
  auto rec = std::make_shared<Recorder>();
  Telemetry t(rec, {"a:1"});
  const std::vector<NodeOutcome> nodes(1);
  const Error held = make_error(Errc::held, "held");
  t.round(OpKind::acquire, LockKind::read_lock, "r", nullptr, 1, microseconds{10}, nodes);
  t.round(OpKind::acquire, LockKind::read_lock, "r", &held, 2, microseconds{10}, nodes);
  t.round(OpKind::acquire, LockKind::permit, "s", &held, 1, microseconds{10}, nodes);
  t.round(OpKind::release, LockKind::permit, "s", nullptr, 1, microseconds{10}, nodes);
  const Stats s = t.snapshot();
  CHECK(s.acquire_rounds.ok == 1);
  CHECK(s.acquire_rounds.held == 2);
  CHECK(s.read_lock_acquire_rounds.ok == 1);
  CHECK(s.read_lock_acquire_rounds.held == 1);
  CHECK(s.permit_acquire_rounds.held == 1);
  CHECK(s.permit_acquire_rounds.ok == 0);  // the release is no acquire
  CHECK(s.release_rounds.ok == 1);
  REQUIRE(rec->seen.size() == 4);
  CHECK(rec->seen[0] == "acquire read_lock r ok #1 1 nodes");
  CHECK(rec->seen[2] == "acquire permit s redlock.held #1 1 nodes");
  CHECK(lock_kind_name(LockKind::lock) == "lock");
}

TEST_CASE("connections: handshakes and drops of the lock connection are counted; subscribers are only told") {
  auto rec = std::make_shared<Recorder>();
  Telemetry t(rec, {"a:1", "b:2"});
  t.connection(1, false, ConnectionState::handshaking, ConnectionState::ready, "");
  t.connection(1, false, ConnectionState::ready, ConnectionState::backing_off, "connection reset by peer");
  t.connection(1, false, ConnectionState::handshaking, ConnectionState::ready, "");
  t.connection(1, false, ConnectionState::ready, ConnectionState::closing, "");  // a close is not a drop
  t.connection(0, true, ConnectionState::ready, ConnectionState::backing_off, "gone");
  t.stalled(1);
  t.node_timeout(1);
  t.node_timeout(1);
  t.node_error(0);
  t.quarantine(0, true, milliseconds{61000}, "restarted recently");
  t.quarantine(0, false, milliseconds{0}, "restarted recently");
  const Stats s = t.snapshot();
  REQUIRE(s.nodes.size() == 2);
  CHECK(s.nodes[0].address == "a:1");
  CHECK(s.nodes[0].connects == 0);
  CHECK(s.nodes[0].drops == 0);
  CHECK(s.nodes[0].errors == 1);
  CHECK(s.nodes[0].quarantines == 1);
  CHECK(s.nodes[1].connects == 2);
  CHECK(s.nodes[1].drops == 1);
  CHECK(s.nodes[1].stalls == 1);
  CHECK(s.nodes[1].timeouts == 2);
  REQUIRE(rec->seen.size() == 7);
  CHECK(rec->seen[1] == "b:2 lock ready->backing_off: connection reset by peer");
  CHECK(rec->seen[4] == "a:1 sub ready->backing_off: gone");
  CHECK(rec->seen[5] == "a:1 quarantined 61000 restarted recently");
  CHECK(rec->seen[6] == "a:1 counts again 0 restarted recently");
}

TEST_CASE("leases and wake-ups are counted and told; an observer that throws changes nothing") {
  auto rec = std::make_shared<Recorder>();
  rec->throw_every_time = true;
  Telemetry t(rec, {"a:1"});
  t.connection(0, false, ConnectionState::handshaking, ConnectionState::ready, "");  // throws inside
  t.lease_extended("job", milliseconds{9800});
  t.lease_lost("job", "lease on job lost: validity deadline passed");
  t.woken("job");
  const Stats s = t.snapshot();
  CHECK(s.nodes[0].connects == 1);
  CHECK(s.leases_extended == 1);
  CHECK(s.leases_lost == 1);
  CHECK(s.wake_ups == 1);
  REQUIRE(rec->seen.size() == 4);
  CHECK(rec->seen[1] == "extended job 9800 ");
  CHECK(rec->seen[2] == "lost job 0 lease on job lost: validity deadline passed");
  CHECK(rec->seen[3] == "woken job");
}

TEST_CASE("without an observer the counters still count") {
  Telemetry t(nullptr, {"a:1"});
  CHECK_FALSE(t.observed());
  t.round(OpKind::release, LockKind::lock, "r", nullptr, 1, microseconds{5}, std::vector<NodeOutcome>(1));
  t.woken("r");
  CHECK(t.snapshot().release_rounds.ok == 1);
  CHECK(t.snapshot().wake_ups == 1);
}
