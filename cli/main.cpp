// cli/main.cpp — the `redlock` command: one lock across N independent Redis
// masters, from a shell.
//
//   redlock acquire RESOURCE [--ttl DURATION] [-w DURATION] [--token TOKEN]
//   redlock extend  RESOURCE TOKEN --ttl DURATION
//   redlock release RESOURCE TOKEN
//   redlock run     [options] RESOURCE [--] CMD [ARGS...]  (a distributed flock)
//   redlock run     [options] RESOURCE -c 'SHELL COMMAND'
//   redlock status  RESOURCE
//   redlock nodes   [--watch [--interval DURATION]]
//
// Nodes come from --nodes, else --config, else REDLOCK_NODES, else
// REDLOCK_CONFIG. Output: one JSON object (--json; the default for acquire,
// extend, release) or a human table (--human; the default for status and
// nodes; run prints only messages unless --json). Exit status: 0 done, 1
// not done (held elsewhere, not held), 69 no quorum of usable masters, 2
// usage or configuration error; run exits with its command's status.
// docs/cli.md is the reference.
#include <CLI/CLI.hpp>
#include <poll.h>
#include <sys/eventfd.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "run.hpp"
#include "signal_watch.hpp"

namespace redlock::cli {
namespace {

// What the command line asked for, as given (validated by the commands).
struct Args {
  Globals g;
  std::string resource;
  std::string token;         // extend/release: positional; acquire: --token
  bool token_given = false;  // acquire: --token was given (perhaps as '')
  bool fair = false;         // acquire: --fair
  bool quiet = false;        // acquire: -q, nothing printed when the lock is held elsewhere
  std::string shell_command; // run -c: run through sh -c
  std::string ttl, wait;     // acquire/extend: raw text, validated by parse_duration
  bool watch = false;        // nodes --watch
  std::string interval;      // nodes --interval (only with --watch)
  RunArgs run;
};

// --- acquire / extend / release -------------------------------------------------

// finish prints the JSON object or the human text and returns `status`.
int finish(bool as_json, const json& out, const std::string& human, int status) {
  if (as_json) {
    std::cout << dump_json(out) << '\n' << std::flush;
  } else {
    std::cout << human << std::flush;
  }
  return status;
}

// failure_status: 69 when the masters could not decide (an outage), 1 when
// they said no (held elsewhere, our token not there).
int failure_status(Errc code, const std::vector<NodeOutcome>& nodes) {
  return unavailable(code, nodes) ? kExitUnavailable : kExitNotDone;
}

// print_lock_result renders an acquire or extend: `verb` is "acquired" or "extended".
// `earlier_attempts` counts rounds of calls before the one that gave `r`.
int print_lock_result(const Globals& g, const char* verb, const std::string& resource, const json& token,
                      const Result<Lock>& r, int earlier_attempts = 0) {
  json out;
  out[verb] = r.ok();
  put_name(out, "resource", resource);
  std::string human;
  if (r) {
    out["token"] = r->token;
    out["owner"] = owner_json(owner_of(r->token));
    out["validity_ms"] = r->validity.count();
    out["elapsed_us"] = r->elapsed.count();
    out["attempts"] = r->attempts;
    out["nodes"] = nodes_json(r->nodes);
    human = std::string(verb) + " " + quote(resource) + ": token " + r->token + ", valid for " +
            fmt_ms(r->validity.count()) + " (" + std::to_string(r->attempts) +
            (r->attempts == 1 ? " attempt, " : " attempts, ") + fmt_us(r->elapsed.count()) + ")\n" +
            human_node_outcomes(r->nodes);
  } else {
    throw_if_usage(r.error());
    out["token"] = token;
    out["validity_ms"] = nullptr;
    out["elapsed_us"] = r.error().elapsed.count();
    out["attempts"] = r.error().attempts + earlier_attempts;
    out["nodes"] = nodes_json(r.error().nodes);
    add_error(out, r.error().code, r.error().to_string());
    human = std::string("not ") + verb + " " + quote(resource) + ": " + escaped(r.error().to_string()) + "\n" +
            human_node_outcomes(r.error().nodes);
  }
  return finish(use_json(g, true), out, human, r ? kExitOk : failure_status(r.error().code, r.error().nodes));
}

// interruptible runs `body` on a thread of its own while this one reads
// `signals`: the first that comes requests `cancel` (a wait given its token
// ends with Errc::cancelled). Returns that signal, 0 when none came.
template <class Body>
int interruptible(SignalWatch& signals, std::stop_source& cancel, Body body) {
  const int done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (done_fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  std::exception_ptr failed;
  std::thread worker([&] {
    try {
      body();
    } catch (...) {
      failed = std::current_exception();
    }
    const std::uint64_t one = 1;
    (void)!::write(done_fd, &one, sizeof one);
  });
  int interrupted = 0;
  for (bool done = false; !done;) {
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {done_fd, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) break;
    for (int sig = signals.next(); sig != 0; sig = signals.next()) {
      if (interrupted == 0) {
        interrupted = sig;
        cancel.request_stop();
      }
    }
    done = (fds[1].revents & POLLIN) != 0;
  }
  worker.join();
  ::close(done_fd);
  if (failed) std::rethrow_exception(failed);
  return interrupted;
}

int run_acquire(const Args& a) {
  check_resource(a.resource);
  AcquireOptions opts;
  if (!a.ttl.empty()) opts.ttl = parse_duration("--ttl", a.ttl, 1);
  if (!a.wait.empty()) opts.wait = parse_duration("--wait", a.wait, 0);
  if (a.token_given) check_token("--token", a.token);
  // A fair lock's value is drawn by the library (it names the waiter in the
  // queues), so a given token cannot be fair: refused before connecting.
  if (a.fair && a.token_given)
    throw UsageError("--fair and --token: give only one of them (a fair lock's token is drawn by redlock)");
  opts.token = a.token;
  opts.fair = a.fair;
  // A wait ends on INT, TERM or HUP saying what it waited for (and, when it
  // could not make progress, why). Blocked before the client exists: its
  // loop thread must not take them.
  std::optional<SignalWatch> signals;
  std::stop_source cancel;
  if (opts.wait.count() > 0) {
    signals.emplace(std::initializer_list<int>{SIGINT, SIGTERM, SIGHUP});
    opts.cancel = cancel.get_token();
  }
  auto client = make_client(a.g);
  check_ttl(*client, opts.ttl);
  const auto attempt = [&](milliseconds wait) {
    AcquireOptions o = opts;
    o.wait = wait;
    return client->acquire(a.resource, o);
  };
  // A fair waiter's place is where it joined the queue: it waits in one
  // call, not a try first and a second call that would join at the back
  // again (and could be passed by one that came after it meanwhile).
  std::optional<Waited<Lock>> waited;
  const auto wait = [&] {
    waited.emplace(opts.fair ? Waited<Lock>{attempt(opts.wait), 0, {}}
                             : first_then_wait<Lock>(*client, opts.wait, attempt, [](const std::string& note) {
                                 std::cerr << "redlock: acquire: waiting: " << note << '\n' << std::flush;
                               }));
  };
  const int interrupted = signals ? interruptible(*signals, cancel, wait) : (wait(), 0);
  Waited<Lock>& r = *waited;
  if (interrupted != 0) {
    // Whatever the wait got, the caller asked to stop: a lock taken as the
    // signal came is released, not printed.
    if (r.result) (void)client->release(a.resource, r.result->token);
    std::cerr << "redlock: acquire: interrupted by " << signal_name(interrupted) << " while waiting for "
              << quote(a.resource) << "; nothing is held"
              << (r.stuck.empty() ? "" : "; the wait could not make progress: " + r.stuck) << '\n';
    return 128 + interrupted;
  }
  if (r.result) r.result->attempts += r.earlier_attempts;

  // Without --token the library draws one; a failed attempt does not report
  // it, so the output says null rather than inventing one. A lock taken is
  // printed or released: never left behind without its token shown.
  // -q: a conflict (held elsewhere: exit 1) is an expected answer, said by
  // the status alone; an outage or a usage error still speaks.
  if (a.quiet && !r.result && failure_status(r.result.error().code, r.result.error().nodes) == kExitNotDone) {
    throw_if_usage(r.result.error());
    return kExitNotDone;
  }
  // A closed stdout (`redlock acquire … | head -c0`, a reader gone) must not
  // kill us by SIGPIPE with the lock taken and its token shown to nobody:
  // the write fails instead, and the lock is released.
  ::signal(SIGPIPE, SIG_IGN);
  try {
    const int status = print_lock_result(a.g, "acquired", a.resource, a.token_given ? json(a.token) : json(nullptr),
                                         r.result, r.earlier_attempts);
    if (r.result && !std::cout.good()) {
      (void)client->release(a.resource, r.result->token);
      std::cerr << "redlock: acquire: " << quote(a.resource)
                << ": the token could not be written to stdout (closed?); the lock was released\n";
      return kExitNotDone;
    }
    return status;
  } catch (...) {
    if (r.result) (void)client->release(a.resource, r.result->token);
    throw;
  }
}

int run_extend(const Args& a) {
  check_resource(a.resource);
  check_token("TOKEN", a.token);
  const milliseconds ttl = parse_duration("--ttl", a.ttl, 1);
  auto client = make_client(a.g);
  check_ttl(*client, ttl);
  // The CLI does not know when the lock was taken, so it cannot know the old
  // validity deadline; it lets the servers decide (they extend only a key
  // that still holds our token, and never recreate one).
  Lock lock;
  lock.resource = a.resource;
  lock.token = a.token;
  lock.ttl = ttl;
  lock.validity_deadline = BootClock::now() + ttl;
  auto r = client->extend(lock, ttl);
  return print_lock_result(a.g, "extended", a.resource, json(a.token), r);
}

// describe_release_failure explains a release that did not free the lock:
// no_quorum when a node could not be asked (error, timeout), else not_held
// (every node that answered said our token is not there).
void describe_release_failure(json& out, const ReleaseResult& rr) {
  const auto code = unavailable(Errc::not_held, rr.nodes) ? Errc::no_quorum : Errc::not_held;
  std::string msg = "released on " + std::to_string(rr.released_nodes) + " of " + std::to_string(rr.nodes.size()) +
                    " nodes";
  for (const auto& n : rr.nodes)
    if (n.outcome != Outcome::ok)
      msg += "; " + n.address + " " + std::string(outcome_name(n.outcome)) + (n.error.empty() ? "" : ": " + n.error);
  add_error(out, code, std::string(errc_name(code)) + ": " + msg);
}

int run_release(const Args& a) {
  check_resource(a.resource);
  check_token("TOKEN", a.token);
  auto client = make_client(a.g);
  auto r = client->release(a.resource, a.token);
  json out;
  if (!r) throw_if_usage(r.error());
  const bool released = r && r->released;
  out["released"] = released;
  out["released_nodes"] = r ? r->released_nodes : 0;
  put_name(out, "resource", a.resource);
  out["token"] = a.token;
  out["elapsed_us"] = r ? r->elapsed.count() : r.error().elapsed.count();
  out["nodes"] = nodes_json(r ? r->nodes : r.error().nodes);
  if (!r)
    add_error(out, r.error().code, r.error().to_string());
  else if (!released)
    describe_release_failure(out, *r);
  std::string human = released ? "released " + quote(a.resource) + " on " + std::to_string(r->released_nodes) +
                                     " of " + std::to_string(r->nodes.size()) + " masters (" +
                                     fmt_us(r->elapsed.count()) + ")\n"
                               : "not released " + quote(a.resource) + ": " + escaped(out["error"].get<std::string>()) + "\n";
  human += human_node_outcomes(r ? r->nodes : r.error().nodes);
  const int status = released ? kExitOk
                     : r      ? failure_status(out["code"] == errc_name(Errc::no_quorum) ? Errc::no_quorum : Errc::not_held,
                                               r->nodes)
                              : failure_status(r.error().code, r.error().nodes);
  return finish(use_json(a.g, true), out, human, status);
}

// --- status ------------------------------------------------------------------------

int run_status(const Args& a) {
  check_resource(a.resource);
  auto client = make_client(a.g);
  auto r = client->status(a.resource);
  if (!r) {
    throw_if_usage(r.error());
    throw std::runtime_error(r.error().to_string());
  }
  const ResourceStatus& st = *r;
  std::size_t answered = 0;
  // The fair queue: shown (a QUEUE column, a line) only when a master has one.
  std::size_t queue_nodes = 0, longest_queue = 0;
  for (const NodeHolding& n : st.nodes) {
    queue_nodes += n.queued > 0 ? 1 : 0;
    longest_queue = std::max(longest_queue, n.queued);
  }
  json nodes = json::array();
  std::vector<std::string> header{"NODE", "STATE", "TOKEN", "TTL", "FENCE", "RTT", "DETAIL"};
  if (queue_nodes > 0) header.insert(header.end() - 1, "QUEUE");
  Table table(std::move(header));
  for (const NodeHolding& n : st.nodes) {
    // A wrong_type master answered (it holds no lock of anyone's), but its
    // fence counter was not read.
    const bool up = n.state != NodeHolding::State::unreachable;
    const bool read = up && n.state != NodeHolding::State::wrong_type;
    answered += up && !n.quarantined ? 1 : 0;
    const bool held = n.state == NodeHolding::State::held;
    nodes.push_back({{"address", n.address},
                     {"state", state_name(n.state)},
                     {"token", held ? json(n.token) : json(nullptr)},
                     {"owner", held ? owner_json(n.owner) : json(nullptr)},
                     {"ttl_ms", held ? json(n.ttl.count()) : json(nullptr)},
                     {"fence", read ? json(n.fence) : json(nullptr)},
                     {"quarantined", n.quarantined},
                     {"rtt_us", up ? json(n.rtt.count()) : json(nullptr)},
                     {"error", n.error.empty() ? json(nullptr) : json(n.error)},
                     {"queued", read ? json(n.queued) : json(nullptr)},
                     {"lapsed", read ? json(n.lapsed) : json(nullptr)},
                     {"queue_head", n.queue_head.empty() ? json(nullptr) : json(n.queue_head)}});
    std::string detail = escaped(n.error);
    if (n.quarantined) detail = "quarantined (new, restarted, lost its data or another server recently; does not count)";
    if (held && !st.token.empty() && n.token != st.token) detail = "another token than the majority's";
    std::vector<std::string> row{escaped(n.address),
                                 std::string(state_name(n.state)),
                                 held ? short_token(n.token) : "-",
                                 held ? (n.ttl.count() < 0 ? "no expiry" : fmt_ms(n.ttl.count())) : "-",
                                 read ? std::to_string(n.fence) : "-",
                                 up ? fmt_us(n.rtt.count()) : "-"};
    if (queue_nodes > 0) {
      row.push_back(!read           ? "-"
                    : n.queued == 0 ? "0"
                                    : std::to_string(n.queued) + ", head " + short_token(n.queue_head));
    }
    row.push_back(detail);
    table.add(std::move(row));
  }
  const bool known = answered >= st.quorum;
  json out = {{"resource", st.resource},
              {"held", st.held},
              {"token", st.token.empty() ? json(nullptr) : json(st.token)},
              {"owner", owner_json(st.owner)},
              {"agreeing", st.agreeing},
              {"quorum", st.quorum},
              {"ttl_ms", st.held ? json(st.ttl.count()) : json(nullptr)},
              {"free_nodes", st.free_nodes},
              {"answered", answered},
              {"queued", st.queued},
              {"lapsed", st.lapsed},
              {"queue_head", st.queue_head.empty() ? json(nullptr) : json(st.queue_head)},
              {"nodes", nodes}};
  put_name(out, "resource", st.resource);
  std::string human;
  if (st.held) {
    const std::string holder =
        st.owner ? owner_text(*st.owner) + " (token " + short_token(st.token) + ")" : short_token(st.token);
    human = quote(st.resource) + " is held by " + holder + " on " + std::to_string(st.agreeing) + " of " +
            std::to_string(st.nodes.size()) + " masters (quorum " + std::to_string(st.quorum) + ")" +
            (st.ttl.count() < 0 ? ", with no expiry" : "; a majority holds it for another " + fmt_ms(st.ttl.count())) +
            "\n";
  } else if (!known) {
    human = quote(st.resource) + ": unknown — only " + std::to_string(answered) + " of " +
            std::to_string(st.nodes.size()) + " masters answered (quorum " + std::to_string(st.quorum) + ")\n";
  } else if (st.agreeing == 0) {
    human = quote(st.resource) + " is free on every master that answered (" + std::to_string(st.free_nodes) + " of " +
            std::to_string(st.nodes.size()) + ")\n";
  } else {
    human = quote(st.resource) + " is not held by a majority: at most " + std::to_string(st.agreeing) + " of " +
            std::to_string(st.nodes.size()) + " masters agree on one token (quorum " + std::to_string(st.quorum) +
            ")\n";
  }
  if (queue_nodes > 0) {
    // "fair queue: 3 waiting (head 0123abcd…)": what a majority reports at
    // least; more on a minority of masters is said after it.
    if (st.queued > 0) {
      human += "fair queue: " + std::to_string(st.queued) + " waiting (" +
               (st.queue_head.empty() ? std::string("no head a majority agrees on")
                                      : "head " + short_token(st.queue_head)) +
               ")";
      if (longest_queue > st.queued) human += "; up to " + std::to_string(longest_queue) + " on some masters";
    } else {
      human += "fair queue: none on a majority; up to " + std::to_string(longest_queue) + " waiting on " +
               std::to_string(queue_nodes) + " of " + std::to_string(st.nodes.size()) + " masters";
    }
    human += "\n";
  }
  if (st.lapsed > 0) {
    human += "fair queue: " + std::to_string(st.lapsed) +
             " lapsed place(s) that no waiter serves (dead waiters; removed by the next fair round)\n";
  }
  human += table.render();
  return finish(use_json(a.g, false), out, human, known ? kExitOk : kExitNotDone);
}

// --- nodes ---------------------------------------------------------------------------

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
                     {"error", h.error.empty() ? json(nullptr) : json(h.error)}});
    const std::string quarantine =
        !h.excluded.empty()            ? "excluded"
        : h.quarantine_left.count() > 0 ? fmt_ms(h.quarantine_left.count()) + " left (until " +
                                              iso_utc(until_us).substr(11, 8) + "Z)"
                                        : "no";
    table.add({escaped(h.address), h.reachable ? "up" : "down", h.reachable ? fmt_us(h.rtt.count()) : "-",
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

// write_out writes all of `text` to stdout; false once stdout is closed
// (EPIPE: SIGPIPE is blocked while watching) or fails.
bool write_out(std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(STDOUT_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
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

int run_nodes(const Args& a) {
  if (!a.interval.empty() && !a.watch)
    throw UsageError("--interval needs --watch (redlock nodes --watch --interval " + a.interval + ")");
  if (a.watch)
    return watch_nodes(a.g, a.interval.empty() ? milliseconds{1000} : parse_duration("--interval", a.interval, 1));
  auto client = make_client(a.g);
  const NodesView v = view_nodes(*client);
  return finish(use_json(a.g, false), v.out, v.human, v.status);
}

// --- command line -----------------------------------------------------------------------

constexpr const char* kGlobalHelp =
    "\nAlso: --nodes URL,URL,... | --config FILE | REDLOCK_NODES | REDLOCK_CONFIG,\n"
    "--no-quarantine, --tls-ca FILE, --tls-cert FILE, --tls-key FILE, ...,\n"
    "--json | --human (see redlock --help). DURATION: seconds unless a unit is\n"
    "given (10, 1.5), or a number with a unit: 500ms, 30s, 1.5m, 1h. A RESOURCE\n"
    "that starts with \"-\": --resource=-NAME.\n";

constexpr const char* kNodeHelp =
    "\nNodes: --nodes wins, then --config FILE's nodes, then the environment\n"
    "variable REDLOCK_NODES, then the nodes of the file REDLOCK_CONFIG names\n"
    "(--config wins over REDLOCK_CONFIG; a config file's options apply to nodes\n"
    "from --nodes or REDLOCK_NODES). Node URLs: redis://[user:password@]host[:port][/db],\n"
    "rediss://... (TLS) or unix:///path, comma-separated.\n"
    "Durations (--ttl, --wait, ...): seconds unless a unit is given, as flock(1)\n"
    "and timeout(1) read them (10, 1.5); or 500ms, 30s, 1.5m, 1h.\n"
    "Output: --json (one JSON object; the default for acquire, extend, release) or\n"
    "--human (a table; the default for status and nodes). Exit status: 0 done,\n"
    "1 not done (held elsewhere, not held), 69 no quorum of usable masters\n"
    "(down, unreachable, in restart quarantine), 2 usage or configuration error;\n"
    "run exits with the command's status (see redlock run --help).\n";

// RunUsage — `run`'s usage line ends with "[--] CMD [ARGS...]": the command
// is split off before CLI11 parses, so CLI11 does not know about it.
class RunUsage : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string usage = CLI::Formatter::make_usage(app, std::move(name));
    if (!usage.empty() && usage.back() == '\n') usage.pop_back();
    return usage + " [--] CMD [ARGS...]\n";
  }
};

struct Commands {
  CLI::Option* token = nullptr;  // acquire --token
  CLI::App* acquire = nullptr;
  CLI::App* extend = nullptr;
  CLI::App* release = nullptr;
  CLI::App* run = nullptr;
  CLI::App* status = nullptr;
  CLI::App* nodes = nullptr;
};

Commands build(CLI::App& app, Args& a) {
  app.fallthrough();  // global options are accepted after the subcommand, too
  app.set_version_flag("--version", "redlock " + std::string(redlock::version()));
  app.require_subcommand(0, 1);
  app.allow_extras();
  app.add_option("--nodes", a.g.nodes, "Comma-separated node URLs")->type_name("URL,URL,...");
  app.add_option("--config", a.g.config_file, "JSON config file (nodes and options)")->type_name("FILE");
  app.add_option("--owner", a.g.owner,
                 "A label for the locks this command takes: status shows host:pid:LABEL as their holder")
      ->type_name("LABEL");
  app.add_flag("--no-quarantine", a.g.no_quarantine,
               "Let freshly (re)started masters count at once (test beds; unsafe without appendfsync always)");
  app.add_option("--tls-ca", a.g.tls_ca, "CA certificates (PEM) to verify rediss:// masters with [env REDLOCK_TLS_CA]")
      ->type_name("FILE");
  app.add_option("--tls-ca-dir", a.g.tls_ca_dir, "A directory of CA certificates (c_rehash layout)")->type_name("DIR");
  app.add_option("--tls-cert", a.g.tls_cert, "Client certificate (PEM) for mutual TLS [env REDLOCK_TLS_CERT]")
      ->type_name("FILE");
  app.add_option("--tls-key", a.g.tls_key, "Its private key (PEM) [env REDLOCK_TLS_KEY]")->type_name("FILE");
  app.add_option("--tls-server-name", a.g.tls_server_name, "Name to expect in the masters' certificates (default: each host)")
      ->type_name("NAME");
  app.add_flag("--tls-insecure", a.g.tls_insecure,
               "Do not verify the masters' certificates (UNSAFE: anyone on the path can pose as a master)");
  app.add_option("--user", a.g.user, "ACL user for nodes whose URLs name none [env REDLOCK_USER]")->type_name("NAME");
  app.add_option("--password-file", a.g.password_file,
                 "Password (first line of FILE) for nodes whose URLs carry none [env REDLOCK_PASSWORD_FILE, "
                 "or the password itself in REDLOCK_PASSWORD]")
      ->type_name("FILE");
  auto* json_flag = app.add_flag("--json", a.g.json, "Print one JSON object (run: one JSON line on stderr)");
  app.add_flag("--human", a.g.human, "Print a human-readable table")->excludes(json_flag);
  app.footer(std::string(kNodeHelp) +
             "\nExamples:\n"
             "  export REDLOCK_NODES=redis://10.0.0.1,redis://10.0.0.2,redis://10.0.0.3\n"
             "  redlock run nightly-report -- ./report.sh        # like flock(1), across machines\n"
             "  redlock run --no-wait --fence job -- ./job.sh   # fail at once if held; REDLOCK_FENCE set\n"
             "  redlock status nightly-report\n"
             "  redlock nodes\n"
             "  redlock acquire nightly-report --ttl 30s --wait 5s\n"
             "  redlock extend nightly-report 3f9c0a...e1 --ttl 30s\n"
             "  redlock release nightly-report 3f9c0a...e1\n");

  // RESOURCE is positional, and also --resource=NAME for a name that starts
  // with "-" (which CLI11 would read as an option).
  const auto resource = [](CLI::App* cmd, std::string& into) {
    cmd->add_option("RESOURCE,--resource", into, "Name of the lock (--resource=-NAME for one that starts with \"-\")")
        ->required();
  };

  Commands c;
  c.acquire = app.add_subcommand("acquire", "Take RESOURCE on a majority of the nodes");
  resource(c.acquire, a.resource);
  c.acquire->add_option("--ttl", a.ttl, "Lock time-to-live (default: the config's default_ttl, 10s)")
      ->type_name("DURATION");
  c.acquire->add_option("-w,--wait,--timeout", a.wait, "Keep retrying this long (default 0: one attempt)")
      ->type_name("DURATION");
  c.token = c.acquire->add_option("--token", a.token,
                                  "Token to use, 1-128 of [0-9A-Za-z_-] (default: a fresh random one); re-acquiring "
                                  "with a held token refreshes the TTL")
                ->type_name("TOKEN");
  c.acquire->add_flag("-q,--quiet", a.quiet,
                      "Print nothing when the lock is held elsewhere (exit 1 says it); outages and errors still print");
  c.acquire->add_flag("--fair", a.fair,
                      "Wait in fair order: waiters get the lock in the order they came, across processes (no "
                      "--token)");
  c.acquire->footer(std::string(kGlobalHelp) +
                    "\nExamples:\n"
                    "  redlock acquire nightly-report --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,"
                    "redis://127.0.0.1:7003\n"
                    "  redlock acquire nightly-report --ttl 30s --wait 5s\n"
                    "  redlock acquire nightly-report --ttl 30s --token host1-job42 --human\n"
                    "  redlock acquire nightly-report --ttl 30s --wait 1m --fair   # first come, first served\n"
                    "\nExit status: 0 acquired, 1 held elsewhere, 69 no quorum of usable masters,\n"
                    "2 usage error.\n");

  c.extend = app.add_subcommand("extend", "Make a lock we hold live at least TTL from now (never shorter)");
  resource(c.extend, a.resource);
  c.extend->add_option("TOKEN", a.token, "Token printed by acquire")->required();
  c.extend->add_option("--ttl", a.ttl, "Time-to-live from now; a master with more left keeps it")
      ->type_name("DURATION")
      ->required();
  c.extend->footer(std::string(kGlobalHelp) +
                   "\nextend never shortens a lock: a key with more than TTL left keeps it. The\n"
                   "validity_ms printed counts from TTL (TTL - elapsed - drift), so the lock may\n"
                   "last longer than it says; `redlock status` shows what the keys have left.\n"
                   "\nExit status: 0 extended, 1 not held (expired, taken over), 69 no quorum of\n"
                   "usable masters, 2 usage error.\n"
                   "\nExample:\n  redlock extend nightly-report 3f9c0a...e1 --ttl 30s\n");

  c.release = app.add_subcommand("release", "Delete the lock on every node where TOKEN holds it");
  resource(c.release, a.resource);
  c.release->add_option("TOKEN", a.token, "Token printed by acquire")->required();
  c.release->footer(std::string(kGlobalHelp) +
                    "\nExit status: 0 released, 1 not held (expired, released, another's), 69 no\n"
                    "quorum of usable masters (the lock may still be held), 2 usage error.\n"
                    "\nExample:\n  redlock release nightly-report 3f9c0a...e1\n");

  RunArgs& r = a.run;
  c.run = app.add_subcommand("run", "Run a command while holding RESOURCE (a distributed flock)");
  c.run->formatter(std::make_shared<RunUsage>());
  resource(c.run, r.resource);
  c.run->add_option("--ttl", r.ttl, "Lease time-to-live, extended at 1/3 of it while CMD runs (default 10s)")
      ->type_name("DURATION");
  c.run->add_option("-w,--wait,--timeout", r.wait,
                    "Give up after waiting this long for the lock (default: wait indefinitely)")
      ->type_name("DURATION");
  c.run->add_flag("-n,--no-wait,--nonblock", r.no_wait, "Give up at once if the lock is held");
  c.run->add_option("-c,--command", a.shell_command, "Run STRING with sh -c, as flock -c (instead of CMD [ARGS...])")
      ->type_name("STRING");
  c.run->add_flag("-q,--quiet", r.quiet,
                  "Print nothing when the lock is held by another (so does -n -E 0); outages and errors still print");
  c.run->add_flag("--fence", r.fence, "Take a fencing token too; CMD gets it in REDLOCK_FENCE");
  c.run->add_flag("--fair", r.fair,
                  "Wait in fair order: waiters get the lock in the order they came, across processes (no --fence)");
  c.run->add_option("-E,--conflict-exit-code", r.conflict_exit_code,
                    "Exit status when the lock is held by another (default 1)")
      ->type_name("N");
  c.run->add_option("--unavailable-exit-code", r.unavailable_exit_code,
                    "Exit status when no quorum of masters is usable: down, unreachable, quarantined (default 69)")
      ->type_name("N");
  c.run->add_option("--lost-exit-code", r.lost_exit_code, "Exit status when the lease was lost while CMD ran (default 3)")
      ->type_name("N");
  c.run->add_option("-s,--signal", r.signal,
                    "Signal that ends CMD's process group when the lease ends (default TERM); SIGKILL follows "
                    "--kill-after later")
      ->type_name("SIG");
  c.run->add_option("-k,--kill-after", r.kill_after,
                    "From --signal to SIGKILL when the lease ends: at most TTL/3 - margin (default 1s, or that maximum)")
      ->type_name("DURATION");
  c.run->add_option("--max-hold", r.max_hold, "Stop extending after this long: the lease is then lost")
      ->type_name("DURATION");
  c.run->add_option("--report", r.report_file,
                    "Append the JSON report (one line) to FILE, not to stderr (implies a report without --json)")
      ->type_name("FILE");
  c.run->add_flag("--foreground", r.foreground,
                  "Give CMD the terminal (an interactive CMD: it reads the tty, Ctrl-C and Ctrl-Z reach it)");
  c.run->footer(
      std::string(kGlobalHelp) +
      "\nCMD runs in its own process group with REDLOCK_RESOURCE, REDLOCK_TOKEN and\n"
      "(--fence) REDLOCK_FENCE set. Every signal redlock can catch is handled: while\n"
      "CMD runs, it is passed on to CMD's group (not CHLD or PIPE, redlock's own;\n"
      "Ctrl-Z stops both, CONT continues both); while waiting, INT, TERM, HUP and\n"
      "the others that would end a process end the wait (exit 128+N).\n"
      "The lock is released once the group is empty: what CMD leaves running in\n"
      "the background (cmd &) holds it too, until it exits (processes that leave\n"
      "the group, by setsid, are not followed). If the lease is lost, or is about to\n"
      "run out unextended, the group gets --signal (SIGTERM), then SIGKILL after\n"
      "--kill-after, and never later than just before the lease's deadline. A guard\n"
      "process does the same if redlock is stopped (SIGSTOP) or killed; Ctrl-Z\n"
      "stops CMD with it. --foreground makes CMD's group the terminal's foreground\n"
      "group while it runs (when redlock's is), so the terminal's signals go to\n"
      "CMD directly; the kill schedule is the same.\n"
      "\nExit status: CMD's (128+N if it died of signal N); the conflict code (1)\n"
      "when the lock is held by another; the unavailable code (69) when no quorum\n"
      "of masters is usable; the lost code (3) when the lease was lost; 125 when\n"
      "CMD succeeded but the final release failed (the lock stays until its TTL,\n"
      "or was no longer held);\n"
      "2 usage error; 126 CMD could not be run, 127 CMD not found; 128+N when\n"
      "signal N interrupted the wait.\n"
      "\nExamples:\n"
      "  redlock run nightly-report -- ./report.sh --date today\n"
      "  redlock run -w 10 nightly-report ./report.sh   # wait up to 10 s; CMD starts at the first word\n"
      "  redlock run -n -E 0 cron-job -- ./job.sh   # skip quietly if running; an outage still fails (69)\n"
      "  redlock run -w 1.5 -k 1 job -c 'make -C /srv/app deploy'   # sh -c STRING, as flock -c\n"
      "  redlock run --fence --ttl 5s --wait 1m writer -- sh -c 'write-with-fence \"$REDLOCK_FENCE\"'\n"
      "  redlock run --report runs.jsonl job -- ./job.sh   # one JSON line per run\n"
      "  redlock run --fair --wait 10m deploy -- ./deploy.sh   # deploys run in the order they came\n"
      "  redlock run --foreground -w 10s edit-config -- vi /etc/app.conf\n"
      "\nCMD starts at the first word after RESOURCE (options after it are CMD's);\n"
      "\"--\" before CMD is optional. DURATION: seconds unless a unit is given.\n");

  c.status = app.add_subcommand("status", "Show who holds RESOURCE on each master, and who waits in its fair queue");
  resource(c.status, a.resource);
  c.status->footer(std::string(kGlobalHelp) +
                   "\nExit status: 0 when a quorum of masters answered (held or free), 1 when\n"
                   "too few did to tell.\n"
                   "\nExamples:\n  redlock status nightly-report\n  redlock status nightly-report --json | jq .held\n");

  c.nodes = app.add_subcommand("nodes", "Show each master's health, version, uptime and quarantine");
  c.nodes->add_flag("--watch", a.watch,
                    "Refresh every second (--interval) until interrupted; --json: one JSON line per refresh");
  c.nodes->add_option("--interval", a.interval, "Time between refreshes with --watch (default 1s)")
      ->type_name("DURATION");
  c.nodes->footer(std::string(kGlobalHelp) +
                  "\nExit status: 0 when a quorum of masters is up and out of quarantine (a\n"
                  "lock can be taken), 1 otherwise. --watch: 0 when SIGINT or SIGTERM ends it\n"
                  "or stdout is closed.\n"
                  "\nExamples:\n  redlock nodes\n  until redlock nodes >/dev/null; do sleep 0.5; done   # wait for a usable quorum\n"
                  "  redlock nodes --watch --interval 500ms\n"
                  "  redlock nodes --watch --json | jq -c '{usable, can_lock}'\n");
  return c;
}

// parse_into parses argv[0..argc) into `a`; returns the command chosen (or
// null) and sets `help_status` when --help was asked for.
CLI::App* parse_into(CLI::App& app, const Commands& c, Args& a, int argc, char** argv, std::optional<int>& help) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    help = app.exit(e);  // --help: prints the help of the subcommand asked about
    return nullptr;
  } catch (const CLI::ParseError& e) {
    if (std::string_view(e.what()) == "--resource is required")
      throw UsageError("RESOURCE is required (one that starts with \"-\": --resource=-NAME)");
    throw UsageError(e.what());
  }
  // Extras are allowed by the parser so that they can be named here.
  // CLI11 keeps a "--" that ended a command's options among the extras.
  std::vector<std::string> rest = app.remaining(true);
  std::erase(rest, "--");
  if (!rest.empty()) {
    if (rest[0].starts_with('-')) throw UsageError("unknown option " + quote(rest[0]));
    if (app.get_subcommands().empty())
      throw UsageError("unknown command " + quote(rest[0]) +
                       " (expected acquire, extend, release, run, status or nodes)");
    throw UsageError("unexpected argument " + quote(rest[0]));
  }
  a.token_given = c.token->count() > 0;
  check_owner("--owner", a.g.owner);
  // An option given an empty value ("--ttl ''") is refused, not taken as
  // "not given" (--token: by check_token, as TOKEN is).
  std::vector<const CLI::App*> levels{&app};
  for (const CLI::App* sub : app.get_subcommands()) levels.push_back(sub);
  for (const CLI::App* level : levels) {
    for (const CLI::Option* o : level->get_options()) {
      if (o == c.token || o->get_positional() || o->get_type_size() == 0 || o->count() == 0) continue;
      for (const auto& v : o->results())
        if (v.empty()) throw UsageError(o->get_name() + ": must not be empty");
    }
  }
  for (CLI::App* cmd : {c.acquire, c.extend, c.release, c.run, c.status, c.nodes})
    if (cmd->parsed()) return cmd;
  return nullptr;
}

// guarded runs one command's body: what it did not expect (a bug, memory
// exhaustion) is reported naming the command, exit 1; a usage error goes on
// to main(). The body itself keeps its own promises when that happens:
// acquire releases a lock it could not print, run keeps supervising CMD.
template <class Body>
int guarded(const char* name, Body body) {
  try {
    return body();
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    std::cerr << terminal_safe("redlock: " + std::string(name) + ": internal error: " + e.what()) << '\n';
    return kExitNotDone;
  }
}

// Scan — the command a command line names, and for `run` where CMD starts.
struct Scan {
  const CLI::App* command = nullptr;  // the subcommand word, if any
  int end = -1;                       // run: argv[1, end) are redlock's own arguments
  int cmd = -1;                       // run: CMD is argv[cmd, argc)
};

// scan walks argv as CLI11 will read it, skipping each option's value, to
// find the subcommand and, for `run`, its CMD: after "--", else at the
// first word after RESOURCE (as flock's and timeout's commands start), so
// that CMD's own options never reach our parser.
Scan scan(const CLI::App& app, const Commands& c, int argc, char** argv) {
  Scan s;
  bool have_resource = false;
  const auto option = [&](const std::string& name) -> const CLI::Option* {
    const CLI::Option* o = s.command != nullptr ? s.command->get_option_no_throw(name) : nullptr;
    return o != nullptr ? o : app.get_option_no_throw(name);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool in_run = s.command == c.run;
    if (arg == "--") {
      if (in_run) s.end = i, s.cmd = i + 1;
      return s;
    }
    if (arg.size() > 1 && arg.front() == '-') {
      // --name=value, --name value, -x value, -xvalue, -nx value (flags first).
      if (arg.starts_with("--resource")) have_resource = true;
      if (arg.find('=') != std::string::npos && arg.starts_with("--")) continue;
      const CLI::Option* takes = nullptr;
      if (arg.starts_with("--")) {
        const CLI::Option* o = option(arg);
        if (o != nullptr && o->get_items_expected_min() > 0) takes = o;
      } else {
        for (std::size_t k = 1; k < arg.size(); ++k) {
          const CLI::Option* o = option(std::string{'-', arg[k]});
          if (o == nullptr || o->get_items_expected_min() == 0) continue;  // a flag
          if (k + 1 == arg.size()) takes = o;
          break;
        }
      }
      if (takes != nullptr) ++i;
      continue;
    }
    if (s.command == nullptr) {
      for (const CLI::App* sub : {c.acquire, c.extend, c.release, c.run, c.status, c.nodes})
        if (sub->get_name() == arg) s.command = sub;
      if (s.command == nullptr) return s;
      continue;
    }
    if (!in_run) return s;
    if (!have_resource) {
      have_resource = true;
      continue;
    }
    s.end = s.cmd = i;
    return s;
  }
  return s;
}

int run(int argc, char** argv, std::string& usage_help) {
  Args a;
  CLI::App app{"redlock — one lock across N independent Redis masters (Redlock).", "redlock"};
  Commands c = build(app, a);
  const Scan where = scan(app, c, argc, argv);
  if (where.command != nullptr) usage_help = "redlock " + where.command->get_name() + " --help";
  // Not `run`'s CMD: the first "--" may still end options (acquire -- -name).
  int dash = where.end;
  if (where.command != c.run) {
    for (int i = 1; i < argc && dash < 0; ++i)
      if (std::string_view(argv[i]) == "--") dash = i;
  }
  std::optional<int> help;
  CLI::App* cmd = nullptr;
  std::optional<UsageError> split_error;
  try {
    cmd = parse_into(app, c, a, dash >= 0 ? dash : argc, argv, help);
  } catch (const UsageError& e) {
    if (dash < 0) throw;
    split_error = e;  // perhaps not `run`: then "--" only ends the options (acquire -- -name)
  }
  if (help) return *help;
  if (cmd != c.run && dash >= 0) {
    // Not `run`: "--" means "no more options" as usual; parse everything.
    a = Args{};
    CLI::App again{"redlock", "redlock"};
    c = build(again, a);
    try {
      cmd = parse_into(again, c, a, argc, argv, help);
    } catch (const UsageError&) {
      if (split_error && c.run->parsed()) throw *split_error;  // run's own options are before "--"
      throw;
    }
    if (help) return *help;
    if (cmd == c.run && split_error) throw *split_error;
  }
  if (cmd == c.run) {
    if (where.cmd >= 0) a.run.command.assign(argv + where.cmd, argv + argc);
    if (c.run->get_option("--command")->count() > 0) {
      if (!a.run.command.empty())
        throw UsageError("run: -c and a command: give only one of them (redlock run RESOURCE -c 'STRING', or "
                         "redlock run RESOURCE CMD [ARGS...])");
      if (a.shell_command.empty()) throw UsageError("-c: must not be empty");
      a.run.command = {"/bin/sh", "-c", a.shell_command};
    }
    if (a.run.command.empty())
      throw UsageError("run: no command given: redlock run [OPTIONS] RESOURCE [--] CMD [ARGS...], or -c 'STRING'");
  }
  if (cmd == c.acquire) return guarded("acquire", [&] { return run_acquire(a); });
  if (cmd == c.extend) return guarded("extend", [&] { return run_extend(a); });
  if (cmd == c.release) return guarded("release", [&] { return run_release(a); });
  if (cmd == c.run) return guarded("run", [&] { return run_command(a.g, a.run); });
  if (cmd == c.status) return guarded("status", [&] { return run_status(a); });
  if (cmd == c.nodes) return guarded("nodes", [&] { return run_nodes(a); });
  throw UsageError("no command given (expected acquire, extend, release, run, status or nodes)");
}

}  // namespace
}  // namespace redlock::cli

// Every usage error passes here: the library's messages are masked
// already, but CLI11's and ours echo arguments ("unknown option
// --bogus=redis://:pw@h", "--ttl: \"…\" is not a duration"), so mask them all.
int main(int argc, char** argv) {
  std::string usage_help = "redlock --help";  // the help of the command given, once known
  try {
    return redlock::cli::run(argc, argv, usage_help);
  } catch (const redlock::cli::UsageError& e) {
    std::cerr << redlock::cli::terminal_safe("redlock: " + redlock::mask_credentials(e.what()))
              << "\nRun '" << usage_help << "' for usage.\n";
    return redlock::cli::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << redlock::cli::terminal_safe("redlock: internal error: " + redlock::mask_credentials(e.what())) << '\n';
    return redlock::cli::kExitNotDone;
  }
}
