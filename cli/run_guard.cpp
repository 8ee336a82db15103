// run_guard.cpp — the kill schedule and the guard process (run_guard.hpp).
#include "run_guard.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

namespace redlock::cli {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

milliseconds kill_margin(milliseconds ttl) { return std::min(milliseconds{50}, ttl / 10); }

milliseconds max_kill_after(milliseconds ttl) { return std::max(milliseconds{0}, ttl / 3 - kill_margin(ttl)); }

boot::time_point KillSchedule::kill_point() const noexcept {
  return terminating() ? std::min(term_at_ + kill_after_, deadline_ - margin_) : deadline_ - margin_;
}

KillSchedule::Step KillSchedule::due(boot::time_point now) noexcept {
  if (killed_) return Step::none;
  if (now >= kill_point()) {
    killed_ = true;
    return Step::kill;
  }
  if (terminating() || now < next()) return Step::none;
  term_at_ = now;
  return Step::term;
}

boot::time_point KillSchedule::next() const noexcept {
  if (killed_) return boot::time_point::max();
  if (terminating()) return kill_point();
  const boot::time_point term = requested_ ? boot::time_point{} : deadline_ - kill_after_ - margin_ + term_delay_;
  return std::min(term, kill_point());
}

void signal_group(pid_t pgid, KillSchedule::Step step, int term_signal) noexcept {
  if (pgid <= 0) return;
  if (step == KillSchedule::Step::term) {
    ::kill(-pgid, term_signal);
    ::kill(-pgid, SIGCONT);  // a stopped process sees SIGTERM only once continued
  } else if (step == KillSchedule::Step::kill) {
    ::kill(-pgid, SIGKILL);
  }
}

namespace {

// Message — one datagram from the supervisor (SOCK_SEQPACKET: whole or none).
struct Message {
  std::int32_t kind = 0;
  std::int32_t pgid = 0;  // kWatch
  std::int64_t a = 0, b = 0, c = 0;
  std::int32_t sig = 0;  // kWatch: the termination signal
  std::int32_t unused = 0;
};
enum Kind : std::int32_t { kWatch = 1, kDeadline, kTerminated, kDone, kUnwatch };

// The guard's SIGTERM waits this long past its due point for a live
// supervisor's own (kTerminated), so that the group does not get two.
constexpr milliseconds kGuardTermDelay{20};

std::int64_t to_ns(boot::time_point t) { return nanoseconds(t.time_since_epoch()).count(); }
boot::time_point from_ns(std::int64_t ns) {
  return boot::time_point(std::chrono::duration_cast<boot::duration>(nanoseconds(ns)));
}

void say(const std::string& text) {
  const std::string line = "redlock: run (guard): " + text + "\n";
  [[maybe_unused]] const ssize_t n = ::write(2, line.data(), line.size());
}

// guard_main is the guard process. `sock` is its end of the socket pair.
[[noreturn]] void guard_main(int sock) {
  ::setsid();  // its own session and group: no terminal signal reaches it
  for (int s : {SIGINT, SIGHUP, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU}) ::signal(s, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Only stderr and the socket stay open: holding CMD's stdout open
  // would keep a reader of redlock's output from seeing its end.
  const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 0);
    ::dup2(null, 1);
  }
  if (sock != 3) ::dup2(sock, 3);
  sock = 3;
  ::close_range(4, ~0U, 0);

  // The guard sleeps on a CLOCK_BOOTTIME timer, not ppoll's timeout
  // (CLOCK_MONOTONIC, which stops while the system is suspended).
  const int alarm = ::timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK);
  if (alarm < 0) ::_exit(1);
  std::optional<KillSchedule> plan;
  pid_t pgid = 0;
  int term_signal = SIGTERM;
  bool orphaned = false;  // the supervisor is gone
  for (;;) {
    itimerspec wait{};  // all zero: disarmed
    if (plan) {
      auto next = plan->next();
      // An abandoned group is checked for members every 10 ms, to exit
      // with it rather than signal its id after it may have been reused.
      if (orphaned) next = std::min(next, boot::now() + milliseconds{10});
      // At least 1 ns: a zero it_value disarms the timer.
      const auto left = std::max(nanoseconds{1}, next - boot::now());
      wait.it_value.tv_sec = static_cast<time_t>(left.count() / 1000000000);
      wait.it_value.tv_nsec = static_cast<long>(left.count() % 1000000000);
    }
    if (::timerfd_settime(alarm, 0, &wait, nullptr) != 0) ::_exit(1);
    pollfd p[2] = {{orphaned ? -1 : sock, POLLIN, 0}, {alarm, POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) ::_exit(1);
    if (p[1].revents != 0) {
      std::uint64_t expirations = 0;
      [[maybe_unused]] const ssize_t r = ::read(alarm, &expirations, sizeof expirations);
    }
    if (p[0].revents != 0) {
      Message m;
      const ssize_t n = ::recv(sock, &m, sizeof m, 0);
      if (n == static_cast<ssize_t>(sizeof m)) {
        switch (m.kind) {
          case kWatch:  // a: kill_after, b: margin, c: deadline
            pgid = m.pgid;
            term_signal = m.sig;
            plan.emplace(std::chrono::duration_cast<milliseconds>(nanoseconds(m.a)),
                         std::chrono::duration_cast<milliseconds>(nanoseconds(m.b)), from_ns(m.c),
                         kGuardTermDelay);
            break;
          case kDeadline:
            if (plan) plan->set_deadline(from_ns(m.a));
            break;
          case kTerminated:
            if (plan) plan->terminated_at(from_ns(m.a));
            break;
          case kDone:
            ::_exit(0);
          case kUnwatch: {  // the group is empty: forget it, say so, wait for the next
            plan.reset();
            pgid = 0;
            [[maybe_unused]] const ssize_t sent = ::send(sock, &m, sizeof m, MSG_NOSIGNAL);
            break;
          }
        }
      } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        if (!plan) ::_exit(0);
        orphaned = true;
        plan->request_termination();
        say("redlock exited while its command ran; terminating process group " + std::to_string(pgid));
      }
    }
    if (plan) {
      for (auto step = plan->due(boot::now()); step != KillSchedule::Step::none; step = plan->due(boot::now())) {
        signal_group(pgid, step, term_signal);
        // After SIGKILL nothing is left to send: an abandoned group's guard
        // exits; a live supervisor's waits for done(), or for unwatch() and
        // the next group (run --campaign).
        if (step == KillSchedule::Step::kill && orphaned) ::_exit(0);
      }
    }
    if (orphaned && ::kill(-pgid, 0) < 0 && errno == ESRCH) ::_exit(0);
  }
}

// reap waits up to `bound` for child `pid` to exit, then SIGKILLs it, and
// collects it.
void reap(pid_t pid, milliseconds bound) {
  const int pfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pfd >= 0) {
    pollfd p{pfd, POLLIN, 0};
    while (::poll(&p, 1, static_cast<int>(bound.count())) < 0 && errno == EINTR) {
    }
    ::close(pfd);
  }
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

}  // namespace

Guard::Guard() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    throw std::runtime_error(std::string("socketpair: ") + std::strerror(errno));
  pid_ = ::fork();
  if (pid_ < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(e));
  }
  if (pid_ == 0) guard_main(fds[1]);
  ::close(fds[1]);
  fd_ = fds[0];
}

Guard::~Guard() {
  if (fd_ >= 0) ::close(fd_);  // EOF: a watching guard now terminates the group
  // Watching an abandoned group, the guard outlives us by design.
  if (pid_ > 0 && !watching_) reap(pid_, milliseconds{1000});
}

void Guard::send(std::int32_t kind, pid_t pgid, std::int64_t a, std::int64_t b, std::int64_t c, std::int32_t sig) {
  Message m;
  m.sig = sig;
  m.kind = kind;
  m.pgid = pgid;
  m.a = a;
  m.b = b;
  m.c = c;
  // Never block, never SIGPIPE: a stopped or dead guard must not stop us.
  [[maybe_unused]] const ssize_t n = ::send(fd_, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void Guard::watch(pid_t pgid, milliseconds kill_after, milliseconds margin, boot::time_point deadline,
                  int term_signal) {
  send(kWatch, pgid, nanoseconds(kill_after).count(), nanoseconds(margin).count(), to_ns(deadline), term_signal);
  watching_ = true;
  sent_deadline_ = deadline;
}

void Guard::deadline(boot::time_point d) {
  if (d == sent_deadline_) return;
  sent_deadline_ = d;
  send(kDeadline, 0, to_ns(d));
}

void Guard::terminated(boot::time_point t) { send(kTerminated, 0, to_ns(t)); }

void Guard::done() {
  if (!watching_) return;
  send(kDone, 0);
  if (pid_ > 0) reap(pid_, milliseconds{1000});
  pid_ = -1;
  watching_ = false;
}

bool Guard::unwatch() {
  if (!watching_) return alive();
  watching_ = false;
  send(kUnwatch, 0);
  // The answer is the message echoed; nothing else comes from the guard.
  const auto until = boot::now() + milliseconds{1000};
  for (;;) {
    const auto left = std::chrono::ceil<milliseconds>(until - boot::now()).count();
    pollfd p{fd_, POLLIN, 0};
    const int n = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n > 0 && (p.revents & POLLIN) != 0) {
      Message m;
      if (::recv(fd_, &m, sizeof m, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof m) && m.kind == kUnwatch) return true;
    }
    if (n == 0 || (n > 0 && (p.revents & (POLLHUP | POLLERR)) != 0)) break;
  }
  if (pid_ > 0) reap(pid_, milliseconds{0});
  pid_ = -1;
  ::close(fd_);
  fd_ = -1;
  return false;
}

}  // namespace redlock::cli
