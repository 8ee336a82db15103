// test_observer.cpp — what a client tells its host program (issue 15): the
// observer's events and the stats() counters through a scripted fault on
// real masters — a master killed, one paused until its connection stalls,
// a lease extended then lost, a waiter woken, quarantines entered and over.
#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <sstream>

#include "cli_harness.hpp"
#include "helpers.hpp"

using namespace redlock;
using namespace redlock::test;
using namespace redlock::test::cli_harness;
using namespace std::chrono_literals;

namespace {

// Recorder keeps every event as one line of text (the observer runs on the
// client's loop thread; the test reads from its own).
class Recorder final : public Observer {
 public:
  void on_connection(const ConnectionEvent& e) override {
    add("conn " + std::to_string(e.node) + (e.subscriber ? " sub " : " lock ") +
        std::string(connection_state_name(e.from)) + "->" + std::string(connection_state_name(e.to)) +
        (e.reason.empty() ? "" : " (" + std::string(e.reason) + ")"));
  }
  void on_quarantine(const QuarantineEvent& e) override {
    add("quarantine " + std::to_string(e.node) + (e.entered ? " in " : " out ") + std::string(e.reason));
  }
  void on_round(const RoundEvent& e) override {
    add(std::string(op_kind_name(e.op)) + " " + std::string(e.resource) + " " +
        (e.ok ? "ok" : std::string(errc_name(e.code))) + " nodes=" + std::to_string(e.nodes->size()));
  }
  void on_lease(const LeaseEvent& e) override {
    add(std::string(e.kind == LeaseEvent::Kind::extended ? "lease extended " : "lease lost ") +
        std::string(e.resource) + (e.reason.empty() ? "" : " (" + std::string(e.reason) + ")"));
  }
  void on_wake(const WakeEvent& e) override { add("woken " + std::string(e.resource)); }

  // has: some event starts with `prefix` (and contains `part`).
  bool has(const std::string& prefix, const std::string& part = "") const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& line : lines_) {
      if (line.rfind(prefix, 0) == 0 && line.find(part) != std::string::npos) return true;
    }
    return false;
  }
  std::string all() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& line : lines_) out += line + "\n";
    return out;
  }

 private:
  void add(std::string line) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::move(line));
  }
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace

TEST_CASE("observer and stats: a scripted fault is told event by event and counted") {
  RedisGroup group(5);
  auto rec = std::make_shared<Recorder>();
  auto client = client_for(group, [&](Options& o) {
    o.observer = rec;
    o.stall_timeout = 300ms;
  });

  // Every lock connection comes up: told, and counted once per master.
  REQUIRE_MESSAGE(eventually([&] {
    for (int i = 0; i < 5; ++i) {
      if (!rec->has("conn " + std::to_string(i) + " lock handshaking->ready")) return false;
    }
    return true;
  }), rec->all());
  for (const NodeStats& n : client->stats().nodes) CHECK(n.connects == 1);

  // A round that wins: one acquire round, ok, over five nodes; a release.
  auto lock = client->try_acquire("job", 2000ms);
  REQUIRE(lock.ok());
  CHECK(rec->has("acquire job ok nodes=5"));
  REQUIRE(client->release(*lock).ok());
  CHECK(rec->has("release job ok nodes=5"));

  // Master 0 killed: its connection is lost (with the reason), counted as a
  // drop; a later round counts its failed send as an error.
  group[0].kill();
  CHECK_MESSAGE(eventually([&] { return rec->has("conn 0 lock ready->backing_off"); }), rec->all());
  CHECK(client->try_acquire("job", 2000ms).ok());  // 4 of 5 still answer
  Stats s = client->stats();
  CHECK(s.nodes[0].drops == 1);
  CHECK(s.nodes[0].errors >= 1);

  // Master 1 paused: its command times out (counted), and once the command
  // has gone unanswered for stall_timeout the connection is dropped as
  // stalled (told with the reason, counted).
  group[1].pause();
  auto other = client->try_acquire("other", 2000ms);
  CHECK(other.ok());  // 3 of 5
  CHECK(eventually([&] { return client->stats().nodes[1].stalls == 1; }));
  CHECK(client->stats().nodes[1].timeouts >= 1);
  // (The stall is counted just before the drop is told, on the loop thread.)
  CHECK_MESSAGE(eventually([&] { return rec->has("conn 1 lock ready->backing_off", "stalled"); }), rec->all());

  // A third master down: no quorum — the round says so, and is counted.
  group[2].pause();
  CHECK_FALSE(client->try_acquire("third", 2000ms).ok());
  CHECK(rec->has("acquire third redlock.no_quorum"));
  s = client->stats();
  CHECK(s.acquire_rounds.ok == 3);  // job, job again, other
  CHECK(s.acquire_rounds.no_quorum >= 1);
  CHECK(s.release_rounds.ok >= 1);
  CHECK(s.acquire_latency.count >= 3);
  CHECK(s.acquire_latency.quantile(0.5) > 0us);
  group[1].resume();
  group[2].resume();
}

TEST_CASE("observer and stats: leases extended and lost, a waiter woken, quarantines entered and over") {
  RedisGroup group(3);
  auto rec = std::make_shared<Recorder>();
  // Quarantine on, with a short max_ttl: the fresh masters sit out about
  // 1 s (max_ttl + drift), and the observer hears both ends.
  auto client = client_for(group, [&](Options& o) {
    o.observer = rec;
    o.quarantine = true;
    o.max_ttl = 1000ms;
    o.default_ttl = 500ms;
  });
  CHECK_MESSAGE(eventually([&] { return rec->has("quarantine 0 in"); }), rec->all());
  CHECK_MESSAGE(eventually([&] { return rec->has("quarantine 0 out"); }, 5000ms), rec->all());
  CHECK(client->stats().nodes[0].quarantines >= 1);

  // A lease kept for a few extensions, then lost with a majority paused.
  auto lease = client->lock("lease", {.acquire = {.ttl = 300ms, .wait = 3000ms}});
  REQUIRE(lease.ok());
  CHECK(eventually([&] { return client->stats().leases_extended >= 2; }));
  CHECK(rec->has("lease extended lease"));
  group[0].pause();
  group[1].pause();
  CHECK_MESSAGE(eventually([&] { return rec->has("lease lost lease"); }), rec->all());
  CHECK(client->stats().leases_lost == 1);
  group[0].resume();
  group[1].resume();

  // A waiter woken by a release notification. The holder has this
  // client's max_ttl: a larger one, declared on the masters, would (rightly)
  // quarantine them again for this client — each was met without a marker
  // above, which reads as a possible loss — for that longer period
  // (docs/design.md §5, "Quarantine"), and no majority would be left. Its
  // lease extends itself until the release, however slow the waiter.
  auto holder = client_for(group, [](Options& o) {
    o.max_ttl = 1000ms;
    o.default_ttl = 1000ms;
  });
  auto held = holder->lock("wake", {.acquire = {.ttl = 1000ms}});
  REQUIRE(held.ok());
  auto waiting = client->acquire_async("wake", {.ttl = 1000ms, .wait = 4000ms});
  // The waiter has tried once (held), and listens on every master, before
  // the holder lets go (a release published before it listened would go
  // unheard, and its next poll, not a notification, would take the lock).
  REQUIRE(eventually([&] { return rec->has("acquire wake redlock.held"); }));
  REQUIRE(eventually([&] { return listening(group, "redlock:{wake}:released"); }));
  REQUIRE(held->release().ok());
  auto woken = waiting.get();
  const std::string why = woken.ok() ? std::string() : woken.error().to_string() + "\n" + rec->all();
  REQUIRE_MESSAGE(woken.ok(), why);
  CHECK(client->stats().wake_ups >= 1);
  CHECK(rec->has("woken wake"));
}

namespace {

// http_get sends one GET to 127.0.0.1:port and returns the whole answer.
std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) answer.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return answer;
}

// metric: the value of one sample line `name` (with its labels), or -1.
long long metric(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stoll(line.substr(name.size() + 1));
  }
  return -1;
}

}  // namespace

TEST_CASE("examples/events_jsonl logs every event as one JSON object per line") {
  RedisGroup group(3);
  TempDir tmp;
  Child run(program("REDLOCK_EVENTS_JSONL"), {"2"}, {{"REDLOCK_CONFIG", config_file(tmp, group)}});
  const ProcResult r = run.wait();
  REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  int acquired = 0, released = 0, ready = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    const json event = json::parse(line);  // throws (fails the test) on a line that is not JSON
    REQUIRE(event.contains("at_ms"));
    if (event["event"] == "round" && event["op"] == "acquire" && event["ok"] == true) {
      ++acquired;
      CHECK(event["nodes"].size() == 3);
    }
    if (event["event"] == "round" && event["op"] == "release" && event["ok"] == true) ++released;
    if (event["event"] == "connection" && event["to"] == "ready" && event["subscriber"] == false) ++ready;
  }
  CHECK(acquired == 2);
  CHECK(released == 2);
  CHECK(ready == 3);
}

TEST_CASE("examples/metrics_prometheus serves stats() as Prometheus text on GET /metrics") {
  RedisGroup group(3);
  TempDir tmp;
  Child run(program("REDLOCK_METRICS_PROMETHEUS"), {"0"}, {{"REDLOCK_CONFIG", config_file(tmp, group)}});
  REQUIRE(run.wait_for("listening on 127.0.0.1:"));
  const std::string said = run.out_so_far();
  const int port = std::stoi(said.substr(said.find("127.0.0.1:") + 10));
  // Its worker takes and releases a lock every 100 ms: the counters grow. A
  // round is counted when it ends and the operation's latency a moment later
  // (when it completes), and stats() is read without stopping the loop, so one
  // read can fall between the two: wait for both.
  std::string text;
  CHECK(eventually([&] {
    text = http_get(port, "/metrics");
    return metric(text, R"(redlock_rounds_total{op="acquire",outcome="ok"})") >= 2 &&
           metric(text, R"(redlock_operation_duration_seconds_bucket{op="acquire",le="+Inf"})") >= 2;
  }));
  CHECK(text.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
  CHECK(text.find("# TYPE redlock_operation_duration_seconds histogram") != std::string::npos);
  CHECK(metric(text, R"(redlock_node_connects_total{node=")" + group[0].address() + R"("})") == 1);
  CHECK(http_get(port, "/other").rfind("HTTP/1.0 404", 0) == 0);
  run.signal(SIGTERM);
  CHECK(run.wait().exit_code == 0);
}
