// child.hpp — run a piece of a test in a forked child and see how it ended:
// doctest has no death tests, and a contract violation aborts.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <functional>
#include <string>

namespace redlock::test {

// Died — how a child ended: killed by SIGABRT or not, and what it wrote
// to stderr.
struct Died {
  bool forked = false;   // false: fork or pipe failed (nothing ran)
  bool aborted = false;  // killed by SIGABRT
  std::string stderr_text;
};

// run_in_child runs `body` in a forked child with stderr on a pipe, no
// core file and the default SIGABRT action (not the test framework's
// crash report), and waits for it. A body that returns or throws ends the
// child with exit code 0 ("threw" on stderr for a throw): it never goes
// back into the framework's loop. In a process with threads, `body` may
// use only what the calling thread can do alone (no other thread exists
// in the child).
inline Died run_in_child(const std::function<void()>& body) {
  Died d;
  int fds[2];
  if (pipe(fds) != 0) return d;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return d;
  }
  if (pid == 0) {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGABRT, SIG_DFL);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    try {
      body();
    } catch (...) {
      std::fputs("threw\n", stderr);
    }
    std::fflush(stderr);
    _exit(0);
  }
  close(fds[1]);
  d.forked = true;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    d.stderr_text.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  d.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  return d;
}

}  // namespace redlock::test
