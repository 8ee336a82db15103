// lock_commands.cpp — `redlock acquire`, `extend` and `release`: one call to
// the masters each (acquire may wait, cancellable by INT/TERM/HUP), printed
// as one JSON object or a human line and table.
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

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

#include "commands.hpp"
#include "signal_watch.hpp"

namespace redlock::cli {
namespace {

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

}  // namespace

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

}  // namespace redlock::cli
