// nodes.cpp — `redlock nodes [--watch]`: each master's health, version,
// uptime and quarantine, and whether a lock can be taken now; --watch
// refreshes it like watch(1).
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "commands.hpp"
#include "signal_watch.hpp"

namespace redlock::cli {
namespace {

// NodesView — one `nodes` report, in both forms, and its exit status.
struct NodesView {
  json out;
  std::string human;
  int status = kExitOk;
};

NodesView view_nodes(Client& client) {
  auto r = client.nodes();
  if (!r) throw std::runtime_error(r.error().to_string());
  const NodesReport& rep = *r;
  const std::int64_t now_us = unix_us_now();
  json nodes = json::array();
  Table table({"NODE", "STATE", "RTT", "VERSION", "RUN ID", "UPTIME", "QUARANTINE", "DETAIL"});
  for (const NodeHealth& h : rep.nodes) {
    const std::int64_t until_us = now_us + h.quarantine_left.count() * 1000;
    nodes.push_back({{"address", h.address},
                     {"reachable", h.reachable},
                     {"rtt_us", h.reachable ? json(h.rtt.count()) : json(nullptr)},
                     {"version", h.version.empty() ? json(nullptr) : json(h.version)},
                     {"run_id", h.run_id.empty() ? json(nullptr) : json(h.run_id)},
                     {"uptime_s", h.uptime.count() >= 0 ? json(h.uptime.count()) : json(nullptr)},
                     {"quarantined", h.quarantined},
                     {"quarantine_left_ms", h.quarantine_left.count()},
                     {"quarantine_until", h.quarantine_left.count() > 0 ? json(iso_utc(until_us)) : json(nullptr)},
                     {"excluded", h.excluded.empty() ? json(nullptr) : json(h.excluded)},
                     {"replicas", h.replicas >= 0 ? json(h.replicas) : json(nullptr)},
                     {"primary", h.primary.empty() ? json(nullptr) : json(h.primary)},
                     {"error", h.error.empty() ? json(nullptr) : json(h.error)}});
    const std::string quarantine =
        !h.excluded.empty()            ? "excluded"
        : h.quarantine_left.count() > 0 ? fmt_ms(h.quarantine_left.count()) + " left (until " +
                                              iso_utc(until_us).substr(11, 8) + "Z)"
                                        : "no";
    // A sentinel member shows the primary it follows; a cluster member its
    // shard primaries.
    const std::string node = h.primary.empty() ? h.address : h.address + " -> " + h.primary;
    table.add({escaped(node), h.reachable ? "up" : "down", h.reachable ? fmt_us(h.rtt.count()) : "-",
               h.version.empty() ? "-" : escaped(h.version), h.run_id.empty() ? "-" : escaped(h.run_id.substr(0, 8)),
               fmt_duration_s(h.uptime.count()), quarantine, escaped(h.error.empty() ? h.excluded : h.error)});
  }
  NodesView v;
  v.out = {{"nodes", nodes}, {"usable", rep.usable()}, {"quorum", rep.quorum}, {"can_lock", rep.can_lock()}};
  v.human = table.render() + std::to_string(rep.usable()) + " of " + std::to_string(rep.nodes.size()) +
            " masters usable (up and not quarantined; quorum " + std::to_string(rep.quorum) + "): " +
            (rep.can_lock() ? "locks can be taken\n" : "NO lock can be taken now\n");
  v.status = rep.can_lock() ? kExitOk : kExitNotDone;
  return v;
}

// watch_nodes refreshes the report every `interval`, like watch(1), until
// SIGINT or SIGTERM (exit 0) or until stdout is closed (exit 0: whoever
// read it has stopped). JSON: one line per refresh; human: the screen is
// cleared first on a terminal, else the tables follow one another after
// a blank line. Refreshes start `interval` apart; a slow one (masters
// timing out) is followed by the next at once, never by a pile of them.
int watch_nodes(const Globals& g, milliseconds interval) {
  // Signals first: the client's loop thread inherits the blocked mask.
  // SIGPIPE too: a closed stdout is then an EPIPE we can see, not a death.
  SignalWatch signals{SIGINT, SIGTERM, SIGPIPE};
  auto client = make_client(g);
  const bool as_json = use_json(g, false);
  const bool clear = !as_json && ::isatty(STDOUT_FILENO) == 1;
  const std::string header = "Every " + format_duration(interval) + ": redlock nodes";
  for (bool first = true;; first = false) {
    const auto due = std::chrono::steady_clock::now() + interval;
    const NodesView v = view_nodes(*client);
    const std::string heading = header + "    " + iso_utc(unix_us_now()) + "\n";
    const std::string text = as_json ? dump_json(v.out) + "\n"
                             : clear ? "\033[H\033[2J" + heading + "\n" + v.human
                                     : (first ? "" : "\n") + heading + v.human;
    if (!write_out(text)) return kExitOk;
    // Wait for the next refresh, a signal, or the reader going away (a
    // pipe's write end reports POLLERR once its reader closed it).
    for (;;) {
      const auto left = std::chrono::ceil<milliseconds>(due - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {STDOUT_FILENO, 0, 0}};
      const int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 60'000)));
      if (n < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
      if (n <= 0) continue;
      if (fds[0].revents != 0 && signals.next() != 0) return kExitOk;
      if ((fds[1].revents & (POLLERR | POLLHUP)) != 0) return kExitOk;
    }
  }
}
}  // namespace

int run_nodes(const Args& a) {
  if (!a.interval.empty() && !a.watch)
    throw UsageError("--interval needs --watch (redlock nodes --watch --interval " + a.interval + ")");
  if (a.watch)
    return watch_nodes(a.g, a.interval.empty() ? milliseconds{1000} : parse_duration("--interval", a.interval, 1));
  auto client = make_client(a.g);
  const NodesView v = view_nodes(*client);
  return finish(use_json(a.g, false), v.out, v.human, v.status);
}

}  // namespace redlock::cli
