// run_supervise.cpp — see run_supervise.hpp.
#include "run_supervise.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <mutex>

namespace redlock::cli {

Held supervise_group(const Holding& h, pid_t child) {
  using clock = redlock::BootClock;
  const pid_t group = child;  // its process group's id
  const std::string term_name = signal_name(h.term_signal);
  KillSchedule plan(h.times.kill_after, h.times.margin, h.lease.deadline());
  h.guard.watch(group, h.times.kill_after, h.times.margin, plan.deadline(), h.term_signal);
  // How often a moved deadline reaches the guard: far inside the third of
  // the validity that an extension has before SIGTERM's point.
  const milliseconds sync_every = std::clamp(h.times.ttl / 20, milliseconds{5}, milliseconds{200});
  // Messages never stop the supervision: one that cannot be written is dropped.
  auto tell = [&](const std::string& text) noexcept {
    try {
      h.tell(text);
    } catch (...) {
    }
  };

  Held held;
  std::optional<std::string>& lost_reason = held.lost;
  std::optional<int> child_wstatus;  // CMD's, once it exited (reaped at once)
  // check_lost: the lease's loss, once — the group's termination first, the message after.
  auto check_lost = [&] {
    std::optional<std::string> reason;
    {
      std::lock_guard<std::mutex> guard_lost(h.lost->mu);
      reason = h.lost->reason;
    }
    if (!reason || lost_reason) return;
    const bool term_sent = plan.terminating();  // else the SIGTERM step below says it
    plan.request_termination();
    lost_reason = std::move(reason);
    held.lost_while_cmd_ran = !child_wstatus;
    if (term_sent) tell("lost " + h.what + " (" + escaped(*lost_reason) + ")");
  };
  bool rest_killed = false;          // SIGKILL sent to what CMD left of a lost lease's group
  bool group_empty = false;
  bool failed = false;  // an unexpected error was reported (once)
  while (!group_empty) {
    const auto now = clock::now();
    const auto wake = std::min(plan.next(), now + sync_every);
    const int timeout = static_cast<int>(std::max<long long>(0, std::chrono::ceil<milliseconds>(wake - now).count()));
    pollfd fds[2] = {{h.signals.fd(), POLLIN, 0}, {h.lost->efd, POLLIN, 0}};
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
      if ((fds[1].revents & POLLIN) != 0) drain(h.lost->efd);
      check_lost();  // every turn: also after a turn that failed
      bool resume_group = false;
      for (int sig = h.signals.next(); sig != 0; sig = h.signals.next()) {
        if (is_forwarded(sig)) {
          ::kill(-group, sig);
          if (sig == SIGINT || sig == SIGTERM) held.stop_signal = sig;
        } else if (is_job_stop(sig)) {
          // As a shell does for a job: stop the command's group, then
          // ourselves; continue the group when we are continued. The guard
          // keeps the lease's deadline meanwhile.
          h.guard.deadline(h.lease.deadline());
          ::kill(-group, SIGSTOP);
          h.terminal.take_back();
          ::raise(SIGSTOP);
          resume_group = true;
        } else if (sig == SIGCONT) {
          resume_group = true;
        } else if (sig == SIGCHLD && h.terminal.active()) {
          // --foreground: the terminal's Ctrl-Z stopped the command's group,
          // not us. Stop with it, so that the shell sees its job stop and
          // gets the terminal back. (Seen on any child of ours in the
          // group: CMD, or what it left behind.)
          siginfo_t info{};
          if (::waitid(P_PGID, static_cast<id_t>(group), &info, WSTOPPED | WNOHANG) == 0 && info.si_pid != 0 &&
              info.si_code == CLD_STOPPED) {
            h.guard.deadline(h.lease.deadline());
            h.terminal.take_back();
            ::raise(SIGSTOP);
            resume_group = true;
          }
        }
      }
      plan.set_deadline(h.lease.deadline());
      h.guard.deadline(plan.deadline());
      for (auto step = plan.due(clock::now()); step != KillSchedule::Step::none; step = plan.due(clock::now())) {
        signal_group(group, step, h.term_signal);
        if (step == KillSchedule::Step::term) {
          h.guard.terminated(plan.term_sent_at());
          if (!lost_reason) {
            const auto left = std::chrono::ceil<milliseconds>(plan.deadline() - clock::now()).count();
            lost_reason = "redlock.lost: the lease was not extended in time (its validity ends in " +
                          std::to_string(left) + " ms)";
            held.lost_while_cmd_ran = !child_wstatus;
          }
          tell("lost " + h.what + " (" + escaped(*lost_reason) + "); sent " + term_name + " to the command (pid " +
               std::to_string(child) + ")");
        } else {
          const auto after = std::chrono::duration_cast<milliseconds>(clock::now() - plan.term_sent_at()).count();
          tell(plan.terminating() ? "the command had not exited " + std::to_string(after) + " ms after " + term_name +
                                        "; sent SIGKILL to its process group"
                                  : h.noun + "'s validity deadline is near or past; sent SIGKILL to the command's process group");
        }
      }
      // Continued only if the lease still allows it (checked just above).
      if (resume_group && !plan.killed()) {
        h.terminal.give(group);
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
      if (pid == child) child_wstatus = wstatus;
      if (pid == h.guard.pid()) h.guard.reaped();
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
      tell("the command exited; its process group still runs, and " + h.noun + " is held until it is empty");
  }
  if (!lost_reason) {
    // The lease may have ended while we could not see it: redlock itself
    // stopped (SIGSTOP, a VM pause) past its deadline, with CMD exiting
    // the moment both resumed. Then CMD did not finish under the lock.
    if (std::optional<Error> gone = h.lease.lost()) {
      lost_reason = gone->to_string();
    } else if (clock::now() >= h.lease.deadline()) {
      lost_reason = "redlock.lost: the lease's validity deadline passed before the command's exit was seen";
    }
    if (lost_reason) tell("lost " + h.what + " (" + escaped(*lost_reason) + ")");
  }
  held.wstatus = *child_wstatus;
  held.killed = plan.killed() ? "SIGKILL" : plan.terminating() ? term_name : "";
  return held;
}

}  // namespace redlock::cli
