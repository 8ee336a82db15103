// process.hpp — the one way the tests and the tools run a child process:
// spawn an argv with a chosen environment, directory and standard streams,
// talk to it over pipes, wait for it with a deadline, and stop it by pid
// (never by name). Every descriptor opened here is close-on-exec, so one
// child never holds another's pipes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redlock::support {

// Environment — a whole environment, name → value.
using Environment = std::map<std::string, std::string>;

// current_environment returns this process's environment. Not safe against
// a concurrent setenv in another thread (nothing here calls setenv).
Environment current_environment();

// find_program returns the first executable file NAME in the directories
// of PATH_LIST (colon-separated, an empty entry is "."), or "" if there is
// none. Process never searches PATH itself.
std::string find_program(std::string_view name, std::string_view path_list);

// Stream — where a child's stdin comes from, or its stdout / stderr go.
// inherit: this process's own; null: /dev/null; pipe: a pipe to this
// Process (read with read_line, wait_for_output, finish; write with
// write_input); file: PATH, opened for reading (stdin) or created 0600 and
// appended to (stdout, stderr — both may name the same file).
struct Stream {
  enum class Kind { inherit, null, pipe, file };
  Kind kind = Kind::inherit;
  std::string path;  // for file only

  static Stream inherit() { return {}; }
  static Stream null() { return {Kind::null, {}}; }
  static Stream pipe() { return {Kind::pipe, {}}; }
  static Stream file(std::string path) { return {Kind::file, std::move(path)}; }
};

// ProcessOptions — what to start and how. Defaults: this process's
// environment and directory, stdin from /dev/null, stdout and stderr
// inherited, the caller's process group, killed when its parent dies.
struct ProcessOptions {
  // argv[0] is the program's path: no PATH search (see find_program).
  std::vector<std::string> argv;
  // The whole environment; nullopt: this process's (current_environment).
  std::optional<Environment> env;
  // Set on top of env (replacing same-named variables), e.g. LD_PRELOAD.
  std::vector<std::pair<std::string, std::string>> env_set;
  std::string cwd;  // the child's working directory; empty: ours
  Stream in = Stream::null();
  Stream out = Stream::inherit();
  Stream err = Stream::inherit();
  // new_process_group: the child leads a group of its own; kill(), stop()
  // and a timed-out finish() then signal the whole group.
  bool new_process_group = false;
  // die_with_parent: PR_SET_PDEATHSIG(SIGKILL) — the child is killed when
  // the thread that started it ends (a crashed test leaves nothing behind).
  // Start long-lived children from a thread that outlives them.
  bool die_with_parent = true;
};

// ProcessResult — how a child ended and what it wrote to its pipes.
struct ProcessResult {
  int exit_code = -1;      // exit status, or 128 + signal number; -1: unknown
  bool timed_out = false;  // killed (SIGKILL) at the deadline of finish()
  std::string out;         // stdout, when it was a pipe
  std::string err;         // stderr, when it was a pipe
};

// Process — one child process, owned: the destructor kills it (SIGKILL, to
// its group when it has one) and reaps it unless it was reaped already, so
// a failing test never leaves it running. Neither copied nor moved (the pid
// is owned once). Not thread-safe: one thread at a time uses an object.
// Errors (pipe, fork, a failed exec or chdir) throw std::system_error whose
// text names argv[0].
class Process {
 public:
  // Starts the child; returns once it has exec'd (a failed exec throws).
  explicit Process(ProcessOptions options);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  Process(Process&&) = delete;
  Process& operator=(Process&&) = delete;

  // pid — the child's, also after it was reaped (for messages).
  pid_t pid() const noexcept { return pid_; }
  // running — not exited yet. Does not reap (waitid WNOWAIT), so const.
  bool running() const;
  // stopped — the child is stopped (SIGSTOP, SIGTSTP…), per /proc.
  bool stopped() const;
  // exit_code — set once the child was reaped here.
  std::optional<int> exit_code() const noexcept { return exit_code_; }

  // signal sends SIG to the child's pid (never to its group) while it is
  // not reaped; a no-op afterwards.
  void signal(int sig) const;

  // wait returns the exit code once the child exits, or nullopt when
  // TIMEOUT passes first. It waits on the exit event (a pidfd), and does
  // not read pipes: a child blocked on a full stdout pipe never exits —
  // use finish for those.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  int wait();  // without a deadline

  // stop sends SIGCONT (so a stopped child acts on what follows), then SIGTERM, waits
  // up to GRACE, then SIGKILL; returns the exit code (128 + SIGTERM after
  // the default action, the child's own status if it handles SIGTERM).
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // kill sends SIGKILL (a stopped child dies too) and reaps; returns the
  // exit code. A no-op returning the known code once reaped.
  int kill();

  // pause sends SIGSTOP and returns once the child is stopped (true), or
  // has exited (false). resume sends SIGCONT and, if it was stopped,
  // returns once it runs again; false if it has exited.
  bool pause();
  bool resume();

  // write_input writes all of DATA to the stdin pipe; throws
  // std::system_error if the child closed it (EPIPE, without SIGPIPE).
  void write_input(std::string_view data);
  void close_input();

  // read_line returns the next line of stdout (without its '\n'), reading
  // from the pipe as needed; nullopt when stdout ended or TIMEOUT passed.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // wait_for_output reads stdout until what was read contains TEXT (true),
  // or stdout ends or TIMEOUT passes (false). Nothing is consumed.
  bool wait_for_output(std::string_view text, std::chrono::milliseconds timeout);
  // output — stdout read so far and not consumed by read_line.
  const std::string& output() const noexcept { return out_buffer_; }
  // output_ended — stdout reached its end (or was closed here).
  bool output_ended() const noexcept { return out_fd_ < 0; }
  // close_output stops reading stdout: the child's later writes fail (EPIPE).
  void close_output();

  // finish reads the stdout and stderr pipes to their ends and reaps the
  // child. When TIMEOUT passes first the child (its group, if any) is
  // killed and timed_out is set. out starts with output().
  ProcessResult finish(std::chrono::milliseconds timeout);

 private:
  bool reap(int options);  // waitpid; true once the exit status is known
  bool await_exit(std::chrono::steady_clock::time_point deadline);
  // await_report waits for the stop (WUNTRACED) or continue (WCONTINUED)
  // OPTION asks for: true; false when the child ended instead (reaped).
  bool await_report(int option);
  // read_some reads once from FD into SINK, waiting up to DEADLINE; false
  // on end of file (FD is closed and set to -1) or at the deadline.
  bool read_some(int& fd, std::string& sink, std::chrono::steady_clock::time_point deadline);
  void close_pidfd();

  pid_t pid_ = -1;
  bool own_group_ = false;
  std::optional<int> exit_code_;
  int pidfd_ = -1;  // opened on the first timed wait, closed at reaping
  int in_fd_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_buffer_;
};

// run starts OPTIONS with stdout and stderr on pipes and finishes it
// within TIMEOUT (see Process::finish).
ProcessResult run(ProcessOptions options, std::chrono::milliseconds timeout);

// pointers: the char* array execve and posix_spawn take (null-terminated),
// pointing into `strings`, which must outlive it. Also used by `redlock run`.
std::vector<char*> pointers(std::vector<std::string>& strings);

}  // namespace redlock::support
