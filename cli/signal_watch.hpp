// signal_watch.hpp — signals read as data: blocked in every thread and read
// through a signalfd, for the commands that wait on several things at once
// with poll(2) (`run`, `nodes --watch`).
#pragma once

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace redlock::cli {

// SignalWatch — blocks `signals` in the calling thread, and so in every
// thread started after it (create it before the Client: the client's loop
// thread must not take them), and reads them through a signalfd. The
// destructor restores the original mask (the client's thread is gone by
// then: declare the Client after the SignalWatch). A blocked SIGCONT still
// continues the process.
class SignalWatch {
 public:
  SignalWatch(std::initializer_list<int> signals) {
    sigset_t set;
    sigemptyset(&set);
    for (int s : signals) sigaddset(&set, s);
    start(set);
  }
  explicit SignalWatch(const sigset_t& set) { start(set); }
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;
  // The destructor drops what is still pending: a signal that came after
  // the command's last decision must not end the process with its default
  // action once unblocked.
  ~SignalWatch() {
    while (next() != 0) {
    }
    ::close(fd_);
    pthread_sigmask(SIG_SETMASK, &original_, nullptr);
  }
  int fd() const noexcept { return fd_; }
  const sigset_t& set() const noexcept { return set_; }
  const sigset_t& original() const noexcept { return original_; }
  // next returns the next pending signal, or 0.
  int next() {
    signalfd_siginfo info{};
    return ::read(fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info) ? static_cast<int>(info.ssi_signo) : 0;
  }

  // catchable_unignored: every signal a process can catch (not KILL or
  // STOP, not the C library's own real-time signals) that was not ignored
  // when this process started — a caller that ignored one (nohup, a
  // script's `cmd &`) meant it for the command too, which inherits it —
  // except the program-error signals (SEGV, BUS, FPE, ILL, TRAP, SYS,
  // ABRT): they report a bug in this process and keep their default
  // action (a core dump, and sanitizers' handlers).
  static sigset_t catchable_unignored() {
    sigset_t set;
    sigemptyset(&set);
    for (int s = 1; s <= SIGRTMAX; ++s) {
      if (s == SIGKILL || s == SIGSTOP || is_program_error(s)) continue;
      struct sigaction now {};
      if (::sigaction(s, nullptr, &now) != 0 || now.sa_handler == SIG_IGN) continue;
      sigaddset(&set, s);  // refuses (EINVAL) the C library's internal signals
    }
    return set;
  }

 private:
  void start(const sigset_t& set) {
    set_ = set;
    pthread_sigmask(SIG_BLOCK, &set_, &original_);
    fd_ = signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd_ < 0) {
      pthread_sigmask(SIG_SETMASK, &original_, nullptr);
      throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
    }
  }
  static bool is_program_error(int s) {
    return s == SIGSEGV || s == SIGBUS || s == SIGFPE || s == SIGILL || s == SIGTRAP || s == SIGSYS || s == SIGABRT;
  }
  sigset_t set_{}, original_{};
  int fd_ = -1;
};

}  // namespace redlock::cli
