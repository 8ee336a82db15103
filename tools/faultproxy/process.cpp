// process.cpp — see process.hpp.
#include "faultproxy/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "faultproxy/address.hpp"

namespace faultproxy {
namespace {

using Clock = std::chrono::steady_clock;

int wait_status_code(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

void reap(pid_t pid, int* st) {
  while (::waitpid(pid, st, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

FaultProxyProcess::FaultProxyProcess(FaultProxyOptions options) { spawn(options); }

FaultProxyProcess::FaultProxyProcess(std::string binary, std::string target, std::vector<std::string> listen) {
  FaultProxyOptions o;
  o.binary = std::move(binary);
  o.target = std::move(target);
  o.listen = std::move(listen);
  spawn(o);
}

FaultProxyProcess::~FaultProxyProcess() { kill(); }

void FaultProxyProcess::spawn(const FaultProxyOptions& o) {
  std::string listen;
  for (const auto& l : o.listen) listen += (listen.empty() ? "" : ",") + l;
  std::vector<std::string> args{o.binary, "--target", o.target, "--listen", listen, "--control", o.control};
  if (o.seed) args.insert(args.end(), {"--seed", std::to_string(*o.seed)});
  args.insert(args.end(), o.extra_args.begin(), o.extra_args.end());
  // Everything the child needs is built before fork: in a multi-threaded
  // parent only async-signal-safe calls are allowed after it.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(std::string("faultproxy: pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    const int e = errno;
    ::close(out[0]);
    ::close(out[1]);
    throw std::runtime_error(std::string("faultproxy: fork: ") + std::strerror(e));
  }
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::dup2(out[1], STDOUT_FILENO);            // dup2 clears CLOEXEC on the copy
    const int nul = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nul >= 0) ::dup2(nul, STDIN_FILENO);
#ifdef SYS_close_range
    if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
#endif
    {
      for (int i = 3; i < 4096; ++i) ::close(i);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::execv(argv[0], argv.data());
    static const char msg[] = "faultproxy: execv failed\n";
    ssize_t ignored = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(127);
  }
  ::close(out[1]);
  pid_ = child;

  // Read up to the first newline: the proxy prints it once every socket is
  // bound, so the addresses in it are ready to use.
  std::string line;
  std::string problem;
  const auto deadline = Clock::now() + o.startup_timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      problem = "no startup line within " + std::to_string(o.startup_timeout.count()) + " ms";
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) < 0 && errno != EINTR) {
      problem = std::string("poll: ") + std::strerror(errno);
      break;
    }
    char buf[1024];
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n > 0) {
      line.append(buf, static_cast<std::size_t>(n));
      if (line.find('\n') != std::string::npos) break;
    } else if (n == 0) {
      int st = 0;
      reap(pid_, &st);
      pid_ = -1;
      problem = "exited before it was ready (status " + std::to_string(wait_status_code(st)) + "; see its stderr)";
      break;
    } else if (errno != EINTR && errno != EAGAIN) {
      problem = std::string("read: ") + std::strerror(errno);
      break;
    }
  }
  // Later output (there is none by design) would hit a closed pipe; the
  // proxy ignores SIGPIPE.
  ::close(out[0]);
  if (problem.empty()) {
    try {
      info_ = nlohmann::json::parse(line.substr(0, line.find('\n')));
      control_ = info_.at("control").get<std::string>();
      listeners_ = info_.at("listeners").get<std::vector<std::string>>();
    } catch (const std::exception& e) {
      problem = "bad startup line '" + line + "': " + e.what();
    }
  }
  if (!problem.empty()) {
    kill();
    throw std::runtime_error("faultproxy " + o.binary + ": " + problem);
  }
}

std::string FaultProxyProcess::host(std::size_t i) const {
  return parse_endpoint(listener(i), "listener", false).host();
}

int FaultProxyProcess::port(std::size_t i) const { return parse_endpoint(listener(i), "listener", false).port(); }

int FaultProxyProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  // A pidfd becomes readable when the child exits: wait on that event
  // instead of polling waitpid (kernels before 5.3 fall back to polling).
  int pidfd = -1;
#ifdef SYS_pidfd_open
  pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
#endif
  ::kill(pid_, SIGTERM);
  const auto deadline = Clock::now() + grace;
  int st = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) break;
    if (r < 0 && errno != EINTR) {  // reaped elsewhere
      st = -1;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      ::kill(pid_, SIGKILL);
      reap(pid_, &st);
      break;
    }
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  pid_ = -1;
  return st == -1 ? -1 : wait_status_code(st);
}

void FaultProxyProcess::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  reap(pid_, &st);
  pid_ = -1;
}

}  // namespace faultproxy
