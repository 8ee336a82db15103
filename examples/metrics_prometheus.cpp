// metrics_prometheus.cpp — a client's counters (Client::stats()) in the
// Prometheus text format, served over a tiny HTTP endpoint, while a worker
// thread takes and releases a lock every 100 ms.
//
//   REDLOCK_NODES=$(scripts/testbed.sh urls) ./metrics_prometheus [PORT]
//   REDLOCK_CONFIG=redlock.json ./metrics_prometheus [PORT]
//   curl -s http://127.0.0.1:PORT/metrics
//
// PORT 0 (the default) takes a free one; the program prints
// "listening on 127.0.0.1:PORT" once it accepts. It serves one request at
// a time on 127.0.0.1 only, and ends on SIGINT or SIGTERM.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include "redlock/redlock.hpp"

using namespace std::chrono_literals;

namespace {

std::atomic<bool> stopping{false};

// label escapes a label value (backslash, quote, newline).
std::string label(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? 'n' : c;
  }
  return out;
}

void counter(std::ostringstream& out, const char* name, const char* help) {
  out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << " counter\n";
}

// prometheus_text renders one snapshot.
std::string prometheus_text(const redlock::Stats& s) {
  std::ostringstream out;
  struct Op {
    const char* name;
    const redlock::RoundCounts& rounds;
    const redlock::LatencyHistogram& latency;
  };
  const Op ops[] = {{"acquire", s.acquire_rounds, s.acquire_latency},
                    {"extend", s.extend_rounds, s.extend_latency},
                    {"release", s.release_rounds, s.release_latency}};
  counter(out, "redlock_rounds_total", "Decided rounds by operation and outcome.");
  for (const Op& op : ops) {
    const std::pair<const char*, std::uint64_t> outcomes[] = {{"ok", op.rounds.ok},
                                                              {"held", op.rounds.held},
                                                              {"no_quorum", op.rounds.no_quorum},
                                                              {"too_late", op.rounds.too_late},
                                                              {"other", op.rounds.other}};
    for (const auto& [outcome, n] : outcomes)
      out << "redlock_rounds_total{op=\"" << op.name << "\",outcome=\"" << outcome << "\"} " << n << '\n';
  }
  counter(out, "redlock_kind_acquire_rounds_total",
          "Acquire rounds of read locks and of semaphore permits (in redlock_rounds_total too), by outcome.");
  const std::pair<const char*, const redlock::RoundCounts&> kinds[] = {{"read_lock", s.read_lock_acquire_rounds},
                                                                        {"permit", s.permit_acquire_rounds}};
  for (const auto& [kind, rounds] : kinds) {
    const std::pair<const char*, std::uint64_t> outcomes[] = {
        {"ok", rounds.ok}, {"held", rounds.held}, {"no_quorum", rounds.no_quorum}, {"too_late", rounds.too_late},
        {"other", rounds.other}};
    for (const auto& [outcome, n] : outcomes)
      out << "redlock_kind_acquire_rounds_total{kind=\"" << kind << "\",outcome=\"" << outcome << "\"} " << n << '\n';
  }
  out << "# HELP redlock_operation_duration_seconds Operations from the call to their completion.\n"
         "# TYPE redlock_operation_duration_seconds histogram\n";
  for (const Op& op : ops) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i + 1 < redlock::LatencyHistogram::buckets; ++i) {
      cumulative += op.latency.counts[i];
      out << "redlock_operation_duration_seconds_bucket{op=\"" << op.name << "\",le=\""
          << static_cast<double>(redlock::LatencyHistogram::upper_bound(i).count()) / 1e6 << "\"} " << cumulative
          << '\n';
    }
    out << "redlock_operation_duration_seconds_bucket{op=\"" << op.name << "\",le=\"+Inf\"} " << op.latency.count
        << '\n'
        << "redlock_operation_duration_seconds_sum{op=\"" << op.name << "\"} "
        << static_cast<double>(op.latency.sum.count()) / 1e6 << '\n'
        << "redlock_operation_duration_seconds_count{op=\"" << op.name << "\"} " << op.latency.count << '\n';
  }
  struct NodeCounter {
    const char* name;
    const char* help;
    std::uint64_t redlock::NodeStats::*field;
  };
  const NodeCounter node_counters[] = {
      {"redlock_node_timeouts_total", "Commands that missed node_timeout.", &redlock::NodeStats::timeouts},
      {"redlock_node_errors_total", "Error replies and failed sends.", &redlock::NodeStats::errors},
      {"redlock_node_connects_total", "Handshakes completed.", &redlock::NodeStats::connects},
      {"redlock_node_drops_total", "Ready connections lost.", &redlock::NodeStats::drops},
      {"redlock_node_stalls_total", "Connections dropped as stalled.", &redlock::NodeStats::stalls},
      {"redlock_node_quarantines_total", "Quarantines entered.", &redlock::NodeStats::quarantines}};
  for (const NodeCounter& c : node_counters) {
    counter(out, c.name, c.help);
    for (const redlock::NodeStats& n : s.nodes) out << c.name << "{node=\"" << label(n.address) << "\"} " << n.*c.field << '\n';
  }
  counter(out, "redlock_leases_extended_total", "Lease extensions by the watchdog.");
  out << "redlock_leases_extended_total " << s.leases_extended << '\n';
  counter(out, "redlock_leases_lost_total", "Leases lost.");
  out << "redlock_leases_lost_total " << s.leases_lost << '\n';
  counter(out, "redlock_wake_ups_total", "Waiters woken by a release notification.");
  out << "redlock_wake_ups_total " << s.wake_ups << '\n';
  return out.str();
}

// serve answers one connection: GET /metrics, or 404.
void serve(int conn, redlock::Client& client) {
  char buf[2048];
  std::string request;
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 16384) {
    const ssize_t n = ::read(conn, buf, sizeof buf);
    if (n <= 0) return;
    request.append(buf, static_cast<std::size_t>(n));
  }
  const bool metrics = request.rfind("GET /metrics ", 0) == 0;
  const std::string body = metrics ? prometheus_text(client.stats()) : "not found: try /metrics\n";
  const std::string head = std::string(metrics ? "HTTP/1.0 200 OK\r\n" : "HTTP/1.0 404 Not Found\r\n") +
                           "Content-Type: text/plain; version=0.0.4\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  const std::string reply = head + body;
  for (std::size_t at = 0; at < reply.size();) {
    const ssize_t n = ::write(conn, reply.data() + at, reply.size() - at);
    if (n <= 0) return;
    at += static_cast<std::size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 0;
  // The masters: a config file (REDLOCK_CONFIG, as the CLI reads it) or
  // REDLOCK_NODES with the default options.
  const char* file = std::getenv("REDLOCK_CONFIG");
  auto config = file != nullptr && *file != '\0' ? redlock::load_config_file(file) : redlock::config_from_env();
  if (!config) {
    std::fprintf(stderr, "%s\n", config.error().to_string().c_str());
    return 2;
  }
  auto client = redlock::Client::create(*config);
  if (!client) {
    std::fprintf(stderr, "%s\n", client.error().to_string().c_str());
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = [](int) { stopping = true; };
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int yes = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 16) != 0 || ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("metrics_prometheus: listen on 127.0.0.1");
    return 2;
  }
  std::printf("listening on 127.0.0.1:%d\n", ntohs(addr.sin_port));
  std::fflush(stdout);

  // Something to count: a lock taken and released every 100 ms.
  std::thread worker([&] {
    while (!stopping) {
      if (auto lock = (*client)->acquire("metrics-demo", {.ttl = 2s, .wait = 0ms})) (void)(*client)->release(*lock);
      std::this_thread::sleep_for(100ms);
    }
  });
  while (!stopping) {
    pollfd p{listener, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    serve(conn, **client);
    ::close(conn);
  }
  worker.join();
  ::close(listener);
  return 0;
}
