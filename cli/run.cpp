// run.cpp — `redlock run RESOURCE -- CMD [ARGS...]`; with --campaign,
// run_campaign.cpp runs the same phases under a leadership, again and again.
//
// Two phases, one thread watching every catchable signal in both (signalfd:
// the signals are blocked before the client's loop thread starts, so only
// we see them; none ends us with its default action):
//   acquire  the lease is taken on a helper thread; a signal whose default
//            action ends a process cancels the wait (no command is run,
//            exit 128+N); a wait that cannot make progress says so on
//            stderr (first_then_wait; run_wait.hpp).
//   hold     (run_supervise.hpp) the command runs in its own process
//            group with REDLOCK_* in its environment while the lease's
//            watchdog extends the lock. Every signal but CHLD, PIPE and the
//            job-control ones is passed on to the group unchanged;
//            TSTP/TTIN/TTOU stop the group, then us (as a shell would), CONT
//            continues it. The group is terminated by KillSchedule (run_guard.hpp): --signal (SIGTERM)
//            at once when the lease is lost, or kill_after + margin before
//            its validity deadline; SIGKILL margin before it. The guard
//            process, forked before any thread, keeps the same schedule
//            when we cannot (stopped, killed). The lock is the group's: when
//            the command exits, what it left in its group (orphans, which
//            we reap as their subreaper) keeps the lease until the group is
//            empty; then the lease is released (a lost lease: whatever is
//            left is deleted); a release that fails is reported, and turns
//            the command's 0 into kRunReleaseFailed.
//   --foreground  the group is also the terminal's foreground process
//            group while the command runs (as a shell's job): the terminal's
//            signals go to it, not to us; when it stops (Ctrl-Z) we take the
//            terminal back and stop too, and give it back when continued.
#include "run.hpp"
#include "run_child.hpp"
#include "run_guard.hpp"
#include "run_shared.hpp"
#include "run_supervise.hpp"
#include "run_wait.hpp"
#include "signal_watch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <limits>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>

namespace redlock::cli {

namespace {

using clock = redlock::BootClock;

}  // namespace

RunSettings run_settings(const RunArgs& a) {
  RunSettings s;
  if (!a.ttl.empty()) s.ttl = parse_duration("--ttl", a.ttl, 1);
  if (a.no_wait && !a.wait.empty()) throw UsageError("--wait and --no-wait: give only one of them");
  s.wait_forever = !a.no_wait && a.wait.empty();
  s.wait = a.no_wait ? milliseconds{0}
           : s.wait_forever ? milliseconds{std::numeric_limits<int>::max()}
                            : parse_duration("--wait", a.wait, 0);
  if (!a.kill_after.empty()) s.kill_after_asked = parse_duration("--kill-after", a.kill_after, 0);
  if (!a.conflict_exit_code.empty()) s.conflict_code = parse_int("--conflict-exit-code", a.conflict_exit_code, 0, 255);
  if (!a.unavailable_exit_code.empty())
    s.unavailable_code = parse_int("--unavailable-exit-code", a.unavailable_exit_code, 0, 255);
  if (!a.lost_exit_code.empty()) s.lost_code = parse_int("--lost-exit-code", a.lost_exit_code, 0, 255);
  if (!a.signal.empty()) s.term_signal = parse_signal("--signal", a.signal);
  return s;
}

KillTimes kill_times(const RunArgs& a, const RunSettings& s, milliseconds ttl) {
  KillTimes k{ttl, kill_margin(ttl), std::min(s.kill_after_asked, max_kill_after(ttl))};  // the default fits any TTL
  if (!a.kill_after.empty() && s.kill_after_asked > k.kill_after)
    throw UsageError("--kill-after: " + quote(a.kill_after) + " (" + std::to_string(s.kill_after_asked.count()) +
                     " ms) does not fit a lease of " + std::to_string(ttl.count()) + " ms: " +
                     signal_name(s.term_signal) + " is sent --kill-after + " + std::to_string(k.margin.count()) +
                     " ms before the lease's validity deadline, so at most TTL/3 - " +
                     std::to_string(k.margin.count()) + " = " + std::to_string(k.kill_after.count()) + " ms");
  return k;
}

std::unique_ptr<RunReport> open_report(const Globals& g, const RunArgs& a) {
  auto r = std::make_unique<RunReport>();
  r->report.as_json = use_json(g, false);
  if (!a.report_file.empty()) {
    // Opened now: a report that cannot be written is a usage error before
    // anything is locked or run.
    r->file.emplace(::open(a.report_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666));
    if (r->file->fd < 0) throw UsageError("--report: " + quote(a.report_file) + ": " + std::strerror(errno));
    r->report.fd = r->file->fd;
  }
  return r;
}

int run_command(const Globals& g, const RunArgs& a) {
  check_resource(a.resource);
  if (a.command.empty())
    throw UsageError("run: no command given after \"--\" (redlock run RESOURCE -- CMD [ARGS...])");
  if (a.command.front().empty()) throw UsageError("run: CMD: must not be empty");
  const RunSettings settings = run_settings(a);
  if (a.campaign) return campaign_command(g, a, settings);
  if (!a.identity.empty() || !a.value.empty())
    throw UsageError(std::string(!a.identity.empty() ? "--identity" : "--value") +
                     ": only with --campaign (the leader's identity and value)");
  LeaseOptions lo;
  lo.acquire.ttl = settings.ttl;
  lo.acquire.wait = settings.wait;
  if (!a.max_hold.empty()) lo.max_hold = parse_duration("--max-hold", a.max_hold, 1);
  const int conflict_code = settings.conflict_code;
  const int unavailable_code = settings.unavailable_code;
  const int lost_code = settings.lost_code;
  const int term_signal = settings.term_signal;
  // The library refuses a fair lock with a fence (invalid_argument); say so
  // before anything is connected or run.
  if (a.fair && a.fence)
    throw UsageError("--fair and --fence: give only one of them (a fair lock takes no fencing token)");
  if (!a.permits.empty()) {
    lo.acquire.permits = static_cast<std::uint32_t>(parse_int("--permits", a.permits, 1, 100));
  }
  if (a.shared) {
    if (a.exclusive) throw UsageError("--shared and --exclusive: give only one of them");
    if (!a.permits.empty()) throw UsageError("--shared and --permits: give only one of them");
    if (a.fence) throw UsageError("--shared and --fence: give only one of them (a shared hold takes no fencing token)");
    if (a.fair) throw UsageError("--shared and --fair: give only one of them (shared holds are not taken in fair order yet)");
  }
  lo.acquire.fence = a.fence;
  lo.acquire.fair = a.fair;
  lo.acquire.shared = a.shared;
  lo.auto_extend = true;

  std::unique_ptr<RunReport> reporting = open_report(g, a);
  Report& report = reporting->report;
  report.j = {{"command", "run"}};
  put_name(report.j, "resource", a.resource);
  if (lo.acquire.permits > 0) report.j["permits"] = lo.acquire.permits;
  if (lo.acquire.shared) report.j["shared"] = true;
  const auto started = clock::now();
  report.j["started_at_us"] = unix_us_now();

  // Signals first: the client's loop thread inherits the blocked mask.
  // Every catchable one, read as data: none ends us with its default action.
  SignalWatch signals(SignalWatch::catchable_unignored());
  auto lost = std::make_shared<LostSignal>();
  Fd lost_efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  Fd rounds_efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (lost_efd.fd < 0 || rounds_efd.fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  lost->efd = lost_efd.fd;
  lo.on_lost = tell_loss(lost);

  Config config = load_config(g);
  std::shared_ptr<WaitRounds> fair_rounds;
  if (lo.acquire.fair) {
    fair_rounds = std::make_shared<WaitRounds>(rounds_efd.fd);
    config.options.observer = fair_rounds;
  }
  const KillTimes times =
      kill_times(a, settings, lo.acquire.ttl.count() > 0 ? lo.acquire.ttl : config.options.default_ttl);
  const milliseconds ttl = times.ttl;

  Guard guard;  // forked now: no thread exists yet
  Result<std::unique_ptr<Client>> created = Client::create(std::move(config));
  if (!created) throw UsageError(created.error().message);
  std::unique_ptr<Client> client = std::move(*created);
  check_ttl(*client, ttl);

  // ---- acquire (cancellable by INT/TERM/HUP) ------------------------------
  std::stop_source cancel;
  lo.acquire.cancel = cancel.get_token();
  std::optional<Result<Lease>> taken;
  int earlier_attempts = 0;
  std::string stuck;  // why the wait could not make progress, when it could not
  const auto say_waiting = [&](const std::string& note) {
    // Not with --json alone: stderr is then the report's.
    if (report.human() || report.fd >= 0) std::cerr << "redlock: run: waiting: " << note << '\n' << std::flush;
  };
  const WaitEnd waited_end = wait_watching_signals({signals, cancel, fair_rounds.get(), *client, say_waiting}, [&] {
    const auto attempt = [&](milliseconds wait) {
      LeaseOptions o = lo;
      o.acquire.wait = wait;
      return client->lock(a.resource, std::move(o));
    };
    // --fair: one call, so that the waiter keeps the place it took when it
    // joined the queue (a first try and a second call would join twice).
    auto waited = lo.acquire.fair ? Waited<Lease>{attempt(lo.acquire.wait), 0, {}}
                                  : first_then_wait<Lease>(*client, lo.acquire.wait, attempt, say_waiting);
    earlier_attempts = waited.earlier_attempts;
    if (!lo.acquire.fair) stuck = std::move(waited.stuck);  // --fair: the rounds keep it
    taken.emplace(std::move(waited.result));
  });
  const int interrupted = waited_end.interrupted;
  if (lo.acquire.fair) stuck = waited_end.stuck;
  Result<Lease>& result = *taken;
  const auto acquired = clock::now();

  if (!result) {
    const Error& e = result.error();
    throw_if_usage(e);
    report.j["acquired"] = false;
    report.j["token"] = nullptr;
    report.j["fence"] = nullptr;
    report.j["acquire_us"] = std::chrono::duration_cast<std::chrono::microseconds>(acquired - started).count();
    report.j["attempts"] = e.attempts + earlier_attempts;
    add_error(report.j, e.code, e.to_string());
    const bool outage = interrupted == 0 && unavailable(e.code, e.nodes);
    const int status = interrupted != 0 ? 128 + interrupted : outage ? unavailable_code : conflict_code;
    report.j["unavailable"] = outage;
    report.j["exit_status"] = status;
    report.print();
    if (report.human()) {
      if (interrupted != 0) {
        std::cerr << "redlock: run: interrupted by " << signal_name(interrupted) << " while waiting for "
                  << quote(a.resource) << "; the command was not run"
                  << (stuck.empty() ? "" : "; the wait could not make progress: " + stuck) << '\n';
      } else if (outage || !(a.quiet || (a.no_wait && conflict_code == 0))) {
        // -q, or flock's -n -E 0 ("skip if running"): a conflict is said by
        // the exit status alone; an outage still speaks.
        std::cerr << "redlock: run: " << quote(a.resource) << " not acquired"
                  << (a.no_wait || settings.wait_forever ? "" : " within " + format_duration(lo.acquire.wait))
                  << (outage ? " (no quorum of usable masters)" : "") << ": " << escaped(e.to_string()) << '\n';
      }
    }
    return status;
  }

  Lease lease = std::move(*result);
  report.j["acquired"] = true;
  report.j["token"] = lease.token();
  report.j["fence"] = a.fence ? json(lease.fence()) : json(nullptr);
  if (lease.permit()) report.j["permit"] = *lease.permit();
  report.j["acquired_at_us"] = unix_us(acquired);
  report.j["acquire_us"] = std::chrono::duration_cast<std::chrono::microseconds>(acquired - started).count();
  report.j["attempts"] = lease.attempts() + earlier_attempts;
  // Until CMD has run (it may never: a signal, a failed spawn).
  for (const char* field : {"lost", "child_pid", "child_status", "child_signal"}) report.j[field] = nullptr;

  auto finish_with_release = [&](int status) {
    report.j["deadline_at_us"] = unix_us(lease.deadline());
    // The same deadline on CLOCK_BOOTTIME (the clock it is kept on) and on
    // CLOCK_MONOTONIC, each one clock for every process of the machine: a
    // command can tell exactly whether it did something after its lease's
    // deadline.
    report.j["deadline_boot_us"] =
        std::chrono::duration_cast<std::chrono::microseconds>(lease.deadline().time_since_epoch()).count();
    report.j["deadline_mono_us"] = monotonic_us(lease.deadline());
    report.j["extensions"] = lease.extensions();
    report.j["released_at_us"] = unix_us_now();
    const bool was_lost = lease.lost().has_value();
    Result<ReleaseResult> rel = lease.release();
    const bool released = rel && rel->released;
    report.j["released"] = released;
    // A lost lease's key is expected to be gone or another's; any other
    // release that did not free the lock is an error: the lock stays until
    // its TTL, or it was gone before the release.
    if (!released && !was_lost) {
      std::string why;
      // Not held: our token was on no majority when the release came (it
      // expired unnoticed, was deleted, or masters lost their data): nothing
      // of ours stays, but the lock may have ended before CMD did.
      const bool gone = rel && !unavailable(Errc::not_held, rel->nodes);
      if (!rel) {
        why = rel.error().to_string();
      } else {
        why = std::string(errc_name(gone ? Errc::not_held : Errc::no_quorum)) +
              ": released on " + std::to_string(rel->released_nodes) + " of " + std::to_string(rel->nodes.size()) +
              " masters";
        for (const auto& n : rel->nodes)
          if (n.outcome != Outcome::ok)
            why += "; " + n.address + " " + std::string(outcome_name(n.outcome)) + (n.error.empty() ? "" : ": " + n.error);
      }
      report.j["release_error"] = why;
      if (rel) report.j["release_nodes"] = nodes_json(rel->nodes);
      if (status == 0) status = kRunReleaseFailed;
      // Always on stderr, --json or not: the lock stays until its TTL, or
      // it ended before the release.
      std::cerr << "redlock: run: the lock on " << quote(a.resource)
                << (gone ? " was no longer held at its release (its token was on no majority of masters: expired, "
                           "deleted, or lost with a master's data; the command may have run without it at the end)"
                         : " was not released (it stays until its TTL, " + fmt_ms(ttl.count()) + " at most)")
                << ": " << escaped(why)
                << (status == kRunReleaseFailed ? "; exit status 125" : "") << '\n' << std::flush;
    }
    report.j["exit_status"] = status;
    report.print();
    return status;
  };

  if (interrupted != 0) {  // a signal came just as the lock was taken
    if (report.human())
      std::cerr << "redlock: run: interrupted by " << signal_name(interrupted) << "; the command was not run\n";
    return finish_with_release(128 + interrupted);
  }

  // ---- hold: run the command ------------------------------------------------
  // The lock is held while anything of CMD's group lives, not only CMD:
  // what CMD leaves running in the background (`cmd &`) is reparented to
  // us when its parent exits, so that its exit wakes us (SIGCHLD) and we
  // reap it. Without it (kernels before 3.4) orphans go to init, and the
  // group is still watched, at the loop's periodic turn.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  Terminal terminal(a.foreground);
  Spawn child = spawn_command(a.command, child_environment(lease, a.fence), signals.set(), terminal.fd());
  if (child.pid < 0) {
    const int status = child.error == ENOENT ? kRunNotFound : kRunCannotExec;
    report.j["error"] = "cannot run " + quote(a.command.front()) + ": " + std::strerror(child.error);
    if (report.human()) std::cerr << "redlock: run: " << report.j["error"].get<std::string>() << '\n';
    return finish_with_release(status);
  }
  report.j["child_pid"] = child.pid;

  const Held held = supervise_group(
      {.lease = lease,
       .lost = lost,
       .signals = signals,
       .guard = guard,
       .terminal = terminal,
       .times = times,
       .term_signal = term_signal,
       .noun = "the lock",
       .what = "the lock on " + quote(a.resource),
       .tell =
           [&](const std::string& text) {
             if (report.human()) std::cerr << terminal_safe("redlock: run: " + text) << '\n';
           }},
      child.pid);
  guard.done();  // the group is empty: the guard has nothing left to signal
  terminal.take_back();
  const int wstatus = held.wstatus;
  const std::optional<std::string>& lost_reason = held.lost;

  const bool by_signal = WIFSIGNALED(wstatus);
  const int child_status = by_signal ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);
  report.j["child_status"] = by_signal ? json(nullptr) : json(WEXITSTATUS(wstatus));
  report.j["child_signal"] = by_signal ? json(WTERMSIG(wstatus)) : json(nullptr);
  report.j["lost"] = lost_reason ? json(*lost_reason) : json(nullptr);
  if (lost_reason) {
    report.j["killed"] = held.killed.empty() ? json(nullptr) : json(held.killed);
    return finish_with_release(lost_code);
  }
  return finish_with_release(child_status);
}

}  // namespace redlock::cli
