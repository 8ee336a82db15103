// run_child.hpp — the command `redlock run` supervises: which signals go to
// it, its environment, starting it in a process group of its own, and the
// terminal it is given with --foreground.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <termios.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "redlock/redlock.hpp"

namespace redlock::cli {

// What each signal does (docs/cli.md, "Signals"); every catchable one is
// watched (SignalWatch::catchable_unignored).
inline bool is_job_stop(int sig) { return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU; }
// Not for the command: CHLD and CONT are about our own children and our
// own stop; PIPE comes from a write of ours to a closed stderr (the
// command's own pipes raise its own SIGPIPE).
inline bool is_own(int sig) { return sig == SIGCHLD || sig == SIGCONT || sig == SIGPIPE; }
// is_forwarded: passed on, unchanged, to the command's process group.
inline bool is_forwarded(int sig) { return !is_own(sig) && !is_job_stop(sig); }
// cancels_wait: while waiting, a signal whose default action ends a
// process ends the wait (the command is not run, exit 128+N); the rest
// (WINCH, URG) mean nothing to a process that has no command yet.
inline bool cancels_wait(int sig) { return is_forwarded(sig) && sig != SIGWINCH && sig != SIGURG; }

// child_environment: ours, with REDLOCK_RESOURCE, REDLOCK_TOKEN,
// REDLOCK_OWNER (who the lock's value names: host:pid[:label]) and (with
// --fence) REDLOCK_FENCE set for the command, and without credentials:
// REDLOCK_NODES is dropped when one of its URLs carries a password
// (user:password@), and so are REDLOCK_PASSWORD and REDLOCK_TLS_KEY
// (docs/security.md).
std::vector<std::string> child_environment(const Lease& lease, bool fence);

// Spawn — the command, in a process group of its own (pgid = pid).
struct Spawn {
  pid_t pid = -1;
  int error = 0;  // errno when it could not be started
};

// spawn_command starts the command in a new process group; with `tty` >= 0
// that group becomes the terminal's foreground group before it runs (in the
// child, so that it never reads the terminal from the background).
// The command starts with every signal unblocked, whatever redlock's own
// mask was when it started, and the signals redlock watches at their
// default action (those ignored when redlock started stay ignored).
Spawn spawn_command(const std::vector<std::string>& command, std::vector<std::string> env, const sigset_t& watched,
                    int tty);

// Terminal — the controlling terminal, for --foreground: handed to the
// command's group while it runs, taken back when it stops or ends. Inactive
// (fd -1) without a controlling terminal, or when redlock is not in its
// foreground group (started in the background: the shell keeps it). Our
// tcsetpgrp calls from the background are allowed because SIGTTOU is
// blocked (SignalWatch).
class Terminal {
 public:
  explicit Terminal(bool wanted) {
    if (!wanted) return;
    fd_ = ::open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
    if (fd_ >= 0 && ::tcgetpgrp(fd_) != ::getpgrp()) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;
  ~Terminal() {
    take_back();
    if (fd_ >= 0) ::close(fd_);
  }
  int fd() const noexcept { return fd_; }
  bool active() const noexcept { return fd_ >= 0; }
  // give: to `group`, if we have it now (not when continued by `bg`).
  void give(pid_t group) const {
    if (fd_ >= 0 && ::tcgetpgrp(fd_) == ::getpgrp()) ::tcsetpgrp(fd_, group);
  }
  // take_back: to our own group, if the terminal is not with someone else.
  void take_back() const {
    if (fd_ >= 0 && ::tcgetpgrp(fd_) != ::getpgrp()) ::tcsetpgrp(fd_, ::getpgrp());
  }

 private:
  int fd_ = -1;
};

}  // namespace redlock::cli
