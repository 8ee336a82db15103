// run_guard.hpp — when `redlock run` signals CMD's process group, and the
// guard: a process outside redlock that keeps that schedule when redlock
// itself cannot (stopped by SIGTSTP/SIGSTOP, SIGKILLed, crashed).
//
// Times are redlock::BootClock, CLOCK_BOOTTIME on Linux: one clock for the
// whole system, so the guard reads the same time points as the supervisor
// that sends them, and one that counts system suspend, as the masters' key
// expiry does. The guard sleeps on a CLOCK_BOOTTIME timer, so a deadline
// that passed while the machine was suspended is kept at the resume.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>

#include "redlock/clock.hpp"

namespace redlock::cli {

using boot = redlock::BootClock;

// kill_margin is how long before the lease's validity deadline CMD's group
// gets SIGKILL: min(50 ms, ttl / 10). The validity deadline itself lies
// ttl·drift_factor + 2 ms before the keys can expire on the masters.
std::chrono::milliseconds kill_margin(std::chrono::milliseconds ttl);
// max_kill_after is the largest --kill-after a lease of `ttl` allows:
// ttl / 3 − kill_margin (at least 0). SIGTERM is due kill_after + margin
// before the deadline; a healthy lease is extended when two thirds of its
// validity are left, so a third of it remains for that round (and its
// retries) before SIGTERM's point.
std::chrono::milliseconds max_kill_after(std::chrono::milliseconds ttl);

// KillTimes — one lease's kill schedule: its TTL, the margin (kill_margin)
// and --kill-after (at most max_kill_after).
struct KillTimes {
  std::chrono::milliseconds ttl, margin, kill_after;
};

// KillSchedule — the one rule both the supervisor and the guard follow.
// "SIGTERM" below is the termination signal, run -s's (SIGTERM by default).
// SIGTERM (then SIGCONT, so that a stopped group sees it) is due at
// deadline − kill_after − margin (+ term_delay), or at once after
// request_termination(); SIGKILL at min(SIGTERM's time + kill_after,
// deadline − margin), also when no SIGTERM was sent. SIGKILL ends a stopped
// group too. The guard runs it with a term_delay, so that a live
// supervisor's SIGTERM (reported through terminated_at) comes first and the
// group never gets two. Not thread-safe; one per process.
class KillSchedule {
 public:
  enum class Step { none, term, kill };
  KillSchedule(std::chrono::milliseconds kill_after, std::chrono::milliseconds margin, boot::time_point deadline,
               std::chrono::milliseconds term_delay = std::chrono::milliseconds{0})
      : kill_after_(kill_after), margin_(margin), term_delay_(term_delay), deadline_(deadline) {}
  void set_deadline(boot::time_point d) noexcept { deadline_ = d; }
  boot::time_point deadline() const noexcept { return deadline_; }
  void request_termination() noexcept { requested_ = true; }
  // terminated_at: SIGTERM was sent at `t` by someone else.
  void terminated_at(boot::time_point t) noexcept {
    if (!terminating()) term_at_ = t;
  }
  // due returns the step to take at `now` and counts it as taken; call it
  // until it returns none.
  Step due(boot::time_point now) noexcept;
  // next is when the next step falls due (max() once SIGKILL was taken).
  boot::time_point next() const noexcept;
  bool terminating() const noexcept { return term_at_ != boot::time_point{}; }
  bool killed() const noexcept { return killed_; }
  boot::time_point term_sent_at() const noexcept { return term_at_; }

 private:
  boot::time_point kill_point() const noexcept;
  std::chrono::milliseconds kill_after_, margin_, term_delay_;
  boot::time_point deadline_;
  boot::time_point term_at_{};  // when SIGTERM was sent (epoch: not yet)
  bool requested_ = false, killed_ = false;
};

// signal_group sends a step's signals to process group `pgid`: for term,
// `term_signal` (SIGTERM unless run -s said otherwise) and SIGCONT.
void signal_group(pid_t pgid, KillSchedule::Step step, int term_signal) noexcept;

// Guard — the supervisor's handle on the guard process. The constructor
// forks it: construct it before any thread exists (the Client's loop
// thread included). The guard lives in a session of its own (a terminal's
// SIGINT/SIGTSTP never reach it), ignores SIGINT, SIGHUP, SIGPIPE, SIGTSTP,
// SIGTTIN and SIGTTOU, and follows KillSchedule for the group it is told
// to watch. Told nothing, it exits when this handle goes. When the
// supervisor's end closes without done() — redlock died — it starts
// termination at once. It exits after done(), or, abandoned, after sending
// SIGKILL or when the group is empty. It never signals a group it was not
// told about. Errors starting it throw std::runtime_error; messages after
// that are best-effort (a guard that died cannot be helped). One guard
// watches one group at a time, and, after unwatch(), the next (run
// --campaign starts CMD again in each term it leads).
class Guard {
 public:
  Guard();
  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

  // watch: CMD's group, just spawned, ended by `term_signal` then SIGKILL.
  // The group's id stays in use until done(): the supervisor reaps its last
  // member only just before, and pids are handed out cyclically, so the id
  // is not another group's by the time the guard hears of it.
  void watch(pid_t pgid, std::chrono::milliseconds kill_after, std::chrono::milliseconds margin,
             boot::time_point deadline, int term_signal);
  // deadline: the lease's validity deadline, sent when it moved.
  void deadline(boot::time_point d);
  // terminated: the supervisor sent SIGTERM to the group at `t`.
  void terminated(boot::time_point t);
  // done: CMD's group is empty. Tells the guard, and waits (up to a
  // second, then SIGKILL) for it to exit.
  void done();
  // unwatch: CMD's group is empty, and the guard stays for the next
  // watch(). Returns once the guard has answered that it forgot the group
  // (so that it never signals the group's id once that may be reused);
  // false when it did not answer within a second: it is then killed and
  // reaped, and there is no guard any more (alive() is false).
  bool unwatch();
  // alive: the guard runs (not reaped, not killed by unwatch).
  bool alive() const noexcept { return pid_ > 0 && fd_ >= 0; }
  // pid is the guard's process id (-1 once reaped); reaped: the caller
  // collected it (its waitpid(-1) reaps every child of ours), so it is not
  // waited for again.
  pid_t pid() const noexcept { return pid_; }
  void reaped() noexcept { pid_ = -1; }

 private:
  void send(std::int32_t kind, pid_t pgid, std::int64_t a = 0, std::int64_t b = 0, std::int64_t c = 0,
            std::int32_t sig = 0);
  int fd_ = -1;
  pid_t pid_ = -1;
  bool watching_ = false;
  boot::time_point sent_deadline_{};
};

}  // namespace redlock::cli
