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
    sigemptyset(&set_);
    for (int s : signals) sigaddset(&set_, s);
    pthread_sigmask(SIG_BLOCK, &set_, &original_);
    fd_ = signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd_ < 0) throw std::runtime_error(std::string("signalfd: ") + std::strerror(errno));
  }
  SignalWatch(const SignalWatch&) = delete;
  SignalWatch& operator=(const SignalWatch&) = delete;
  ~SignalWatch() {
    ::close(fd_);
    pthread_sigmask(SIG_SETMASK, &original_, nullptr);
  }
  int fd() const noexcept { return fd_; }
  const sigset_t& original() const noexcept { return original_; }
  // next returns the next pending signal, or 0.
  int next() {
    signalfd_siginfo info{};
    return ::read(fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info) ? static_cast<int>(info.ssi_signo) : 0;
  }

 private:
  sigset_t set_{}, original_{};
  int fd_ = -1;
};

}  // namespace redlock::cli
