// process.cpp — see process.hpp.
#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <fstream>
#include <stdexcept>
#include <system_error>
#include <thread>

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char** environ;

namespace redlock::support {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what, int error) {
  throw std::system_error(error, std::generic_category(), what);
}

// Fd — one descriptor, closed by the destructor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = other.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// ms_left — milliseconds until DEADLINE for poll(2): rounded up, so a wait
// never ends just short of it; 0 once it passed.
int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  const auto now = Clock::now();
  return timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now)
             ? Clock::time_point::max()
             : now + timeout;
}

int code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));  // always close-on-exec
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// append_some reads once from FD into SINK; on end of file or an error FD
// is closed and set to -1.
void append_some(int& fd, std::string& sink) {
  char buf[4096];
  const ssize_t got = ::read(fd, buf, sizeof buf);
  if (got > 0) {
    sink.append(buf, static_cast<std::size_t>(got));
  } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
    close_fd(fd);
  }
}

// The child's side of one standard stream, opened in the parent.
struct StreamEnds {
  Fd child;  // becomes fd 0, 1 or 2 in the child; -1: inherited
  Fd parent;  // our end of a pipe
};

StreamEnds open_stream(const Stream& s, bool input, const std::string& who) {
  StreamEnds ends;
  switch (s.kind) {
    case Stream::Kind::inherit:
      break;
    case Stream::Kind::null:
      ends.child = Fd(::open("/dev/null", O_RDWR | O_CLOEXEC));
      if (ends.child.get() < 0) fail(who + ": open /dev/null", errno);
      break;
    case Stream::Kind::file:
      ends.child = Fd(input ? ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC)
                            : ::open(s.path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
      if (ends.child.get() < 0) fail(who + ": open " + s.path, errno);
      break;
    case Stream::Kind::pipe: {
      int p[2];
      if (::pipe2(p, O_CLOEXEC) != 0) fail(who + ": pipe", errno);
      ends.child = Fd(input ? p[0] : p[1]);
      ends.parent = Fd(input ? p[1] : p[0]);
      break;
    }
  }
  return ends;
}

// What a child that could not exec reports on its close-on-exec pipe.
enum class Step : int { redirect, chdir, exec };
struct ChildFailure {
  Step step;
  int error;
};

const char* step_name(Step s) {
  switch (s) {
    case Step::redirect: return "redirect";
    case Step::chdir: return "chdir";
    case Step::exec: return "exec";
  }
  return "start";
}

// Everything the child runs between fork and exec: async-signal-safe calls
// only (the parent may have threads), on data prepared before fork.
struct ChildPlan {
  char** argv;
  char** envp;
  const char* cwd;        // nullptr: ours
  int streams[3];         // -1: inherited
  int report;             // write end of the close-on-exec report pipe
  pid_t parent;
  bool new_group;
  bool die_with_parent;
  int open_max;
};

[[noreturn]] void child_fail(const ChildPlan& plan, Step step) {
  const ChildFailure f{step, errno};
  ssize_t ignored = ::write(plan.report, &f, sizeof f);
  (void)ignored;
  ::_exit(127);
}

[[noreturn]] void child_main(ChildPlan& plan) {
  if (plan.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != plan.parent) ::_exit(127);  // the parent died before prctl
  }
  if (plan.new_group) ::setpgid(0, 0);
  // Default dispositions and an empty mask: what a shell gives a command,
  // whatever the test binary ignores or blocks.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);  // glibc's own refuse: ignored
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Move sources out of 0..2 first, so one dup2 cannot overwrite another's
  // source; dup2 clears close-on-exec on the copy.
  for (int& fd : plan.streams) {
    if (fd >= 0 && fd < 3 && (fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) child_fail(plan, Step::redirect);
  }
  for (int i = 0; i < 3; ++i) {
    if (plan.streams[i] >= 0 && ::dup2(plan.streams[i], i) < 0) child_fail(plan, Step::redirect);
  }
  if (plan.cwd != nullptr && ::chdir(plan.cwd) != 0) child_fail(plan, Step::chdir);
  // No descriptor of the parent beyond 0..2 survives exec, whoever opened
  // it without O_CLOEXEC (the report pipe stays open until exec).
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
#endif
  {
    for (int fd = 3; fd < plan.open_max; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  ::execve(plan.argv[0], plan.argv, plan.envp);
  child_fail(plan, Step::exec);
}

std::vector<std::string> environment_strings(const ProcessOptions& o) {
  Environment env = o.env ? *o.env : current_environment();
  for (const auto& [name, value] : o.env_set) env[name] = value;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

int open_max() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY || r.rlim_cur > 1 << 20) return 1 << 16;
  return static_cast<int>(r.rlim_cur);
}

}  // namespace

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Environment current_environment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string_view::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

std::string find_program(std::string_view name, std::string_view path_list) {
  std::size_t start = 0;
  while (start <= path_list.size()) {
    const auto end = std::min(path_list.find(':', start), path_list.size());
    const std::string_view dir = path_list.substr(start, end - start);
    const std::string candidate = std::string(dir.empty() ? "." : dir) + "/" + std::string(name);
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return {};
}

Process::Process(ProcessOptions o) {
  if (o.argv.empty()) throw std::invalid_argument("Process: empty argv");
  const std::string who = "spawn " + o.argv.front();
  std::vector<std::string> env_strings = environment_strings(o);
  std::vector<char*> envp = pointers(env_strings);
  std::vector<char*> argv = pointers(o.argv);
  StreamEnds in = open_stream(o.in, true, who);
  StreamEnds out = open_stream(o.out, false, who);
  StreamEnds err = open_stream(o.err, false, who);
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) fail(who + ": pipe", errno);
  Fd report_read(report[0]);
  Fd report_write(report[1]);

  ChildPlan plan{argv.data(), envp.data(), o.cwd.empty() ? nullptr : o.cwd.c_str(),
                 {in.child.get(), out.child.get(), err.child.get()}, report_write.get(), ::getpid(),
                 o.new_process_group, o.die_with_parent, open_max()};
  const pid_t pid = ::fork();
  if (pid < 0) fail(who + ": fork", errno);
  if (pid == 0) child_main(plan);
  // Also from the parent, so that a group kill right after the constructor
  // cannot miss the group (EACCES once the child has exec'd: it did it).
  if (o.new_process_group) ::setpgid(pid, pid);
  pid_ = pid;
  own_group_ = o.new_process_group;
  report_write.reset();
  in.child.reset();
  out.child.reset();
  err.child.reset();

  // End of file: exec succeeded (the pipe was close-on-exec).
  ChildFailure failure{};
  ssize_t got;
  while ((got = ::read(report_read.get(), &failure, sizeof failure)) < 0 && errno == EINTR) {
  }
  if (got == static_cast<ssize_t>(sizeof failure)) {
    reap(0);
    fail(who + ": " + step_name(failure.step) + (failure.step == Step::chdir ? " " + o.cwd : ""), failure.error);
  }
  in_fd_ = in.parent.release();
  out_fd_ = out.parent.release();
  err_fd_ = err.parent.release();
}

Process::~Process() {
  close_fd(in_fd_);
  close_fd(out_fd_);
  close_fd(err_fd_);
  kill();
  close_pidfd();
}

bool Process::running() const {
  if (exit_code_) return false;
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;
  return info.si_pid == 0;
}

bool Process::stopped() const {
  if (exit_code_) return false;
  std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');  // the command name may hold anything
  return paren != std::string::npos && paren + 2 < line.size() && (line[paren + 2] == 'T' || line[paren + 2] == 't');
}

void Process::signal(int sig) const {
  if (!exit_code_) ::kill(pid_, sig);
}

bool Process::reap(int options) {
  while (!exit_code_) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, options);
    if (r == pid_) {
      exit_code_ = code_of(status);
    } else if (r == 0) {
      return false;
    } else if (errno != EINTR) {
      exit_code_ = -1;  // ECHILD: reaped elsewhere (SIGCHLD ignored, say)
    }
  }
  close_pidfd();
  return true;
}

bool Process::await_exit(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max()) return reap(0);
  for (;;) {
    if (reap(WNOHANG)) return true;
    const int left = ms_left(deadline);
    if (left == 0) return false;
    if (pidfd_ < 0) pidfd_ = open_pidfd(pid_);
    if (pidfd_ >= 0) {
      pollfd p{pidfd_, POLLIN, 0};  // readable once the child exits
      ::poll(&p, 1, left);
    } else {
      // Kernels before 5.3 have no pidfd: look again shortly.
      std::this_thread::sleep_for(std::min(std::chrono::milliseconds(left), std::chrono::milliseconds(5)));
    }
  }
}

void Process::close_pidfd() { close_fd(pidfd_); }

std::optional<int> Process::wait(std::chrono::milliseconds timeout) {
  if (!await_exit(deadline_after(timeout))) return std::nullopt;
  return exit_code_;
}

int Process::wait() {
  reap(0);
  return *exit_code_;
}

int Process::stop(std::chrono::milliseconds grace) {
  if (exit_code_) return *exit_code_;
  const pid_t target = own_group_ ? -pid_ : pid_;
  // SIGCONT first (a stopped child acts on SIGTERM only once it runs),
  // never after SIGTERM: a child that exits at once on SIGTERM may already
  // be stopping its own threads — an ASan build's leak check at exit
  // suspends them with SIGSTOP through ptrace — and a SIGCONT arriving then
  // discards that stop: the checker waited for a thread that kept running,
  // and the child hung until killed (faultproxy tests, 1 run in 5 under
  // ASan on two loaded cores).
  ::kill(target, SIGCONT);
  ::kill(target, SIGTERM);
  if (await_exit(deadline_after(grace))) return *exit_code_;
  return kill();
}

int Process::kill() {
  if (!exit_code_) {
    ::kill(own_group_ ? -pid_ : pid_, SIGKILL);
    reap(0);
  }
  return *exit_code_;
}

bool Process::await_report(int option) {
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, option);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      exit_code_ = -1;  // ECHILD: reaped elsewhere
      break;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      exit_code_ = code_of(status);
      break;
    }
    // A report left from an earlier stop or continue may come first: /proc
    // says whether this one is the state asked for.
    if (stopped() == (option == WUNTRACED)) return true;
  }
  close_pidfd();
  return false;
}

bool Process::pause() {
  if (exit_code_) return false;
  if (stopped()) return true;  // no new stop report would come
  ::kill(pid_, SIGSTOP);
  return await_report(WUNTRACED);
}

bool Process::resume() {
  if (exit_code_) return false;
  const bool was_stopped = stopped();
  ::kill(pid_, SIGCONT);
  if (!was_stopped) return running();  // no "continued" report will come
  return await_report(WCONTINUED);
}

void Process::write_input(std::string_view data) {
  if (in_fd_ < 0) fail("write_input: stdin of " + std::to_string(pid_) + " is not an open pipe", EBADF);
  // EPIPE instead of a SIGPIPE that would end this process: block it in
  // this thread and take back the one the write raised.
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  int error = 0;
  for (std::size_t done = 0; done < data.size() && error == 0;) {
    const ssize_t n = ::write(in_fd_, data.data() + done, data.size() - done);
    if (n >= 0) {
      done += static_cast<std::size_t>(n);
    } else if (errno != EINTR) {
      error = errno;
    }
  }
  if (error == EPIPE && !was_pending) {
    const timespec zero{};
    ::sigtimedwait(&pipe_only, nullptr, &zero);
  }
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (error != 0) fail("write_input: stdin of " + std::to_string(pid_), error);
}

void Process::close_input() { close_fd(in_fd_); }

void Process::close_output() { close_fd(out_fd_); }

bool Process::read_some(int& fd, std::string& sink, Clock::time_point deadline) {
  while (fd >= 0) {
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, ms_left(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("poll", errno);
    if (n == 0) return false;
    const std::size_t before = sink.size();
    append_some(fd, sink);
    if (sink.size() > before) return true;
  }
  return false;
}

std::optional<std::string> Process::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = deadline_after(timeout);
  for (;;) {
    const auto nl = out_buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = out_buffer_.substr(0, nl);
      out_buffer_.erase(0, nl + 1);
      return line;
    }
    if (!read_some(out_fd_, out_buffer_, deadline)) return std::nullopt;  // ended, or timed out
  }
}

bool Process::wait_for_output(std::string_view text, std::chrono::milliseconds timeout) {
  const auto deadline = deadline_after(timeout);
  while (out_buffer_.find(text) == std::string::npos) {
    if (!read_some(out_fd_, out_buffer_, deadline)) return out_buffer_.find(text) != std::string::npos;
  }
  return true;
}

ProcessResult Process::finish(std::chrono::milliseconds timeout) {
  const auto deadline = deadline_after(timeout);
  ProcessResult r;
  close_input();  // a child reading stdin sees its end
  bool in_time = true;
  while (in_time && (out_fd_ >= 0 || err_fd_ >= 0)) {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};  // fd -1: skipped
    const int n = ::poll(fds, 2, ms_left(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("poll", errno);
    if (n == 0) in_time = false;
    if (fds[0].revents != 0) append_some(out_fd_, out_buffer_);
    if (fds[1].revents != 0) append_some(err_fd_, r.err);
  }
  if (!in_time || !await_exit(deadline)) {
    r.timed_out = true;
    kill();
  }
  close_output();
  close_fd(err_fd_);
  r.exit_code = *exit_code_;
  r.out = std::move(out_buffer_);
  out_buffer_.clear();
  return r;
}

ProcessResult run(ProcessOptions options, std::chrono::milliseconds timeout) {
  options.out = Stream::pipe();
  options.err = Stream::pipe();
  Process p(std::move(options));
  return p.finish(timeout);
}

}  // namespace redlock::support
