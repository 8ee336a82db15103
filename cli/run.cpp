// run.cpp — `redlock run RESOURCE -- CMD [ARGS...]`.
//
// Two phases, one thread watching every catchable signal in both (signalfd:
// the signals are blocked before the client's loop thread starts, so only
// we see them; none ends us with its default action):
//   acquire  the lease is taken on a helper thread; a signal whose default
//            action ends a process cancels the wait (no command is run,
//            exit 128+N); a wait that cannot make progress says so on
//            stderr (first_then_wait).
//   hold     the command runs in its own process group with REDLOCK_*
//            in its environment while the lease's watchdog extends the
//            lock. Every signal but CHLD, PIPE and the job-control ones is
//            passed on to the group unchanged; TSTP/TTIN/TTOU stop the
//            group, then us (as a shell would), CONT continues it. The group is
//            terminated by KillSchedule (run_guard.hpp): --signal (SIGTERM)
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

int run_command(const Globals& g, const RunArgs& a) {
  check_resource(a.resource);
  if (a.command.empty())
    throw UsageError("run: no command given after \"--\" (redlock run RESOURCE -- CMD [ARGS...])");
  if (a.command.front().empty()) throw UsageError("run: CMD: must not be empty");
  LeaseOptions lo;
  if (!a.ttl.empty()) lo.acquire.ttl = parse_duration("--ttl", a.ttl, 1);
  if (a.no_wait && !a.wait.empty()) throw UsageError("--wait and --no-wait: give only one of them");
  const bool wait_forever = !a.no_wait && a.wait.empty();
  lo.acquire.wait = a.no_wait ? milliseconds{0}
            : wait_forever ? milliseconds{std::numeric_limits<int>::max()}
                           : parse_duration("--wait", a.wait, 0);
  const milliseconds kill_after_asked =
      a.kill_after.empty() ? milliseconds{1000} : parse_duration("--kill-after", a.kill_after, 0);
  if (!a.max_hold.empty()) lo.max_hold = parse_duration("--max-hold", a.max_hold, 1);
  const int conflict_code =
      a.conflict_exit_code.empty() ? kExitNotDone : parse_int("--conflict-exit-code", a.conflict_exit_code, 0, 255);
  const int unavailable_code = a.unavailable_exit_code.empty()
                                   ? kExitUnavailable
                                   : parse_int("--unavailable-exit-code", a.unavailable_exit_code, 0, 255);
  const int lost_code =
      a.lost_exit_code.empty() ? kRunLostDefault : parse_int("--lost-exit-code", a.lost_exit_code, 0, 255);
  const int term_signal = a.signal.empty() ? SIGTERM : parse_signal("--signal", a.signal);
  const std::string term_name = signal_name(term_signal);
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

  Report report;
  report.as_json = use_json(g, false);
  std::optional<Fd> report_file;
  if (!a.report_file.empty()) {
    // Opened now: a report that cannot be written is a usage error before
    // anything is locked or run.
    report_file.emplace(::open(a.report_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666));
    if (report_file->fd < 0) throw UsageError("--report: " + quote(a.report_file) + ": " + std::strerror(errno));
    report.fd = report_file->fd;
  }
  report.j = {{"command", "run"}};
  put_name(report.j, "resource", a.resource);
  if (lo.acquire.permits > 0) report.j["permits"] = lo.acquire.permits;
  if (lo.acquire.shared) report.j["shared"] = true;
  const std::int64_t started_us = unix_us_now();
  const auto started = clock::now();
  report.j["started_at_us"] = started_us;

  // Signals first: the client's loop thread inherits the blocked mask.
  // Every catchable one, read as data: none ends us with its default action.
  SignalWatch signals(SignalWatch::catchable_unignored());
  Fd acquired_efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  auto lost = std::make_shared<LostSignal>();
  Fd lost_efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (acquired_efd.fd < 0 || lost_efd.fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  lost->efd = lost_efd.fd;
  lo.on_lost = [lost](const Error& e) {
    std::lock_guard<std::mutex> guard(lost->mu);
    if (lost->reason) return;
    lost->reason = e.to_string();
    lost->at_us = unix_us_now();
    notify(lost->efd);
  };

  Config config = load_config(g);
  Fd rounds_efd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (rounds_efd.fd < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  std::shared_ptr<FairRounds> fair_rounds;
  if (lo.acquire.fair) {
    fair_rounds = std::make_shared<FairRounds>(rounds_efd.fd);
    config.options.observer = fair_rounds;
  }
  const milliseconds ttl = lo.acquire.ttl.count() > 0 ? lo.acquire.ttl : config.options.default_ttl;
  const milliseconds margin = kill_margin(ttl);
  const milliseconds kill_after = std::min(kill_after_asked, max_kill_after(ttl));  // the default fits any TTL
  if (!a.kill_after.empty() && kill_after_asked > kill_after)
    throw UsageError("--kill-after: " + quote(a.kill_after) + " (" + std::to_string(kill_after_asked.count()) +
                     " ms) does not fit a lease of " + std::to_string(ttl.count()) + " ms: " + term_name +
                     " is sent --kill-after + " + std::to_string(margin.count()) +
                     " ms before the lease's validity deadline, so at most TTL/3 - " +
                     std::to_string(margin.count()) + " = " + std::to_string(kill_after.count()) + " ms");

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
  std::thread acquirer([&] {
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
    if (!lo.acquire.fair) stuck = std::move(waited.stuck);  // --fair: the loop below keeps it
    taken.emplace(std::move(waited.result));
    notify(acquired_efd.fd);
  });
  int interrupted = 0;
  StuckNotes fair_notes;
  for (bool done = false; !done;) {
    pollfd fds[3] = {{signals.fd(), POLLIN, 0}, {acquired_efd.fd, POLLIN, 0}, {rounds_efd.fd, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0 && errno != EINTR) break;
    if ((fds[2].revents & POLLIN) != 0) {
      drain(rounds_efd.fd);
      // Only when a note would be said: with masters in quarantine, making
      // one asks every master.
      if (std::optional<FairRounds::Round> r = fair_rounds->last(); r && fair_notes.due() && interrupted == 0) {
        stuck = stuck_note(*client, r->code, r->nodes);
        if (std::string line = fair_notes.line(stuck); !line.empty()) say_waiting(line);
      }
    }
    for (int sig = signals.next(); sig != 0; sig = signals.next()) {
      if (cancels_wait(sig) && interrupted == 0) {
        interrupted = sig;
        cancel.request_stop();
      }
      if (is_job_stop(sig)) ::raise(SIGSTOP);  // no command yet: only we stop
    }
    if ((fds[1].revents & POLLIN) != 0) done = true;
  }
  acquirer.join();
  if (interrupted != 0 && fair_rounds) {
    // Why the fair wait was stuck, if it was, as of its last round.
    if (std::optional<FairRounds::Round> r = fair_rounds->last()) stuck = stuck_note(*client, r->code, r->nodes);
  }
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
                  << (a.no_wait || wait_forever ? "" : " within " + format_duration(lo.acquire.wait))
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
  const pid_t group = child.pid;  // its process group's id

  KillSchedule plan(kill_after, margin, lease.deadline());
  guard.watch(group, kill_after, margin, plan.deadline(), term_signal);
  // How often a moved deadline reaches the guard: far inside the third of
  // the validity that an extension has before SIGTERM's point.
  const milliseconds sync_every = std::clamp(ttl / 20, milliseconds{5}, milliseconds{200});
  // Messages never stop the supervision: one that cannot be written is dropped.
  auto tell = [&](const std::string& text) noexcept {
    try {
      if (report.human()) std::cerr << terminal_safe("redlock: run: " + text) << '\n';
    } catch (...) {
    }
  };

  std::optional<std::string> lost_reason;
  // check_lost: the lease's loss, once — the group's termination first, the message after.
  auto check_lost = [&] {
    std::optional<std::string> reason;
    {
      std::lock_guard<std::mutex> guard_lost(lost->mu);
      reason = lost->reason;
    }
    if (!reason || lost_reason) return;
    const bool term_sent = plan.terminating();  // else the SIGTERM step below says it
    plan.request_termination();
    lost_reason = std::move(reason);
    if (term_sent) tell("lost the lock on " + quote(a.resource) + " (" + escaped(*lost_reason) + ")");
  };
  std::optional<int> child_wstatus;  // CMD's, once it exited (reaped at once)
  bool rest_killed = false;          // SIGKILL sent to what CMD left of a lost lease's group
  bool group_empty = false;
  bool failed = false;  // an unexpected error was reported (once)
  while (!group_empty) {
    const auto now = clock::now();
    const auto wake = std::min(plan.next(), now + sync_every);
    const int timeout = static_cast<int>(std::max<long long>(0, std::chrono::ceil<milliseconds>(wake - now).count()));
    pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {lost_efd.fd, POLLIN, 0}};
    if (::poll(fds, 2, timeout) < 0 && errno != EINTR) {
      // Cannot wait for events (ENOMEM): wait the same time, then look at
      // everything as a wake-up would. The kill schedule does not stop.
      const timespec pause{timeout / 1000, (timeout % 1000) * 1'000'000L};
      ::nanosleep(&pause, nullptr);
      fds[0].revents = fds[1].revents = POLLIN;
    }
    // Whatever fails in one turn (a message, memory), the next turn still
    // supervises CMD: the kill schedule, the lease's loss and CMD's exit
    // are looked at again.
    try {
      if ((fds[1].revents & POLLIN) != 0) drain(lost_efd.fd);
      check_lost();  // every turn: also after a turn that failed
      bool resume_group = false;
      for (int sig = signals.next(); sig != 0; sig = signals.next()) {
        if (is_forwarded(sig)) {
          ::kill(-group, sig);
        } else if (is_job_stop(sig)) {
          // As a shell does for a job: stop the command's group, then
          // ourselves; continue the group when we are continued. The guard
          // keeps the lease's deadline meanwhile.
          guard.deadline(lease.deadline());
          ::kill(-group, SIGSTOP);
          terminal.take_back();
          ::raise(SIGSTOP);
          resume_group = true;
        } else if (sig == SIGCONT) {
          resume_group = true;
        } else if (sig == SIGCHLD && terminal.active()) {
          // --foreground: the terminal's Ctrl-Z stopped the command's group,
          // not us. Stop with it, so that the shell sees its job stop and
          // gets the terminal back. (Seen on any child of ours in the
          // group: CMD, or what it left behind.)
          siginfo_t info{};
          if (::waitid(P_PGID, static_cast<id_t>(group), &info, WSTOPPED | WNOHANG) == 0 && info.si_pid != 0 &&
              info.si_code == CLD_STOPPED) {
            guard.deadline(lease.deadline());
            terminal.take_back();
            ::raise(SIGSTOP);
            resume_group = true;
          }
        }
      }
      plan.set_deadline(lease.deadline());
      guard.deadline(plan.deadline());
      for (auto step = plan.due(clock::now()); step != KillSchedule::Step::none; step = plan.due(clock::now())) {
        signal_group(group, step, term_signal);
        if (step == KillSchedule::Step::term) {
          guard.terminated(plan.term_sent_at());
          if (!lost_reason) {
            const auto left = std::chrono::ceil<milliseconds>(plan.deadline() - clock::now()).count();
            lost_reason = "redlock.lost: the lease was not extended in time (its validity ends in " +
                          std::to_string(left) + " ms)";
          }
          tell("lost the lock on " + quote(a.resource) + " (" + escaped(*lost_reason) + "); sent " + term_name +
               " to the command (pid " + std::to_string(child.pid) + ")");
        } else {
          const auto after = std::chrono::duration_cast<milliseconds>(clock::now() - plan.term_sent_at()).count();
          tell(plan.terminating() ? "the command had not exited " + std::to_string(after) + " ms after " + term_name +
                                        "; sent SIGKILL to its process group"
                                  : "the lock's validity deadline is near or past; sent SIGKILL to the command's process group");
        }
      }
      // Continued only if the lease still allows it (checked just above).
      if (resume_group && !plan.killed()) {
        terminal.give(group);
        ::kill(-group, SIGCONT);
      }
    } catch (const std::exception& e) {
      if (!failed) tell(std::string("internal error while the command runs (supervising it still): ") + e.what());
      failed = true;
    }
    // Reap every child of ours that exited: CMD (its status is the one
    // reported), the orphans of its group, anything else reparented to us.
    const bool cmd_was_running = !child_wstatus;
    for (int wstatus = 0;;) {
      const pid_t pid = ::waitpid(-1, &wstatus, WNOHANG);
      if (pid <= 0) break;
      if (pid == child.pid) child_wstatus = wstatus;
      if (pid == guard.pid()) guard.reaped();
    }
    if (!child_wstatus) continue;
    if (lost_reason && !rest_killed) {
      ::kill(-group, SIGKILL);  // nothing of the group may outlive a lost lock
      rest_killed = true;
    }
    // The group's members that are our children were reaped just above, so
    // ESRCH means none is left, zombies included; until then its id cannot
    // be reused. Members that are not our children end at their parents'
    // hands: seen at the next turn (within sync_every).
    group_empty = ::kill(-group, 0) < 0 && errno == ESRCH;
    if (cmd_was_running && !group_empty && !rest_killed)
      tell("the command exited; its process group still runs, and the lock is held until it is empty");
  }
  if (!lost_reason) {
    // The lease may have ended while we could not see it: redlock itself
    // stopped (SIGSTOP, a VM pause) past its deadline, with CMD exiting
    // the moment both resumed. Then CMD did not finish under the lock.
    if (std::optional<Error> gone = lease.lost()) {
      lost_reason = gone->to_string();
    } else if (clock::now() >= lease.deadline()) {
      lost_reason = "redlock.lost: the lease's validity deadline passed before the command's exit was seen";
    }
    if (lost_reason) tell("lost the lock on " + quote(a.resource) + " (" + escaped(*lost_reason) + ")");
  }
  guard.done();  // the group is empty: the guard has nothing left to signal
  terminal.take_back();
  const int wstatus = *child_wstatus;

  const bool by_signal = WIFSIGNALED(wstatus);
  const int child_status = by_signal ? 128 + WTERMSIG(wstatus) : WEXITSTATUS(wstatus);
  report.j["child_status"] = by_signal ? json(nullptr) : json(WEXITSTATUS(wstatus));
  report.j["child_signal"] = by_signal ? json(WTERMSIG(wstatus)) : json(nullptr);
  report.j["lost"] = lost_reason ? json(*lost_reason) : json(nullptr);
  if (lost_reason) {
    report.j["killed"] = plan.killed() ? json("SIGKILL") : plan.terminating() ? json(term_name) : json(nullptr);
    return finish_with_release(lost_code);
  }
  return finish_with_release(child_status);
}

}  // namespace redlock::cli
