// run.hpp — `redlock run`: a distributed flock(1). Take the lock, run a
// command while a lease keeps it extended, release it when the command
// exits; kill the command if the lease is lost.
#pragma once

#include <string>
#include <vector>

#include "common.hpp"

namespace redlock::cli {

// The options of `run`, as given (validated by run_command).
struct RunArgs {
  std::string resource;
  std::string ttl, wait, kill_after, max_hold;  // durations (parse_duration)
  std::string conflict_exit_code, unavailable_exit_code, lost_exit_code;
  std::string signal;       // -s/--signal: what ends the command (default SIGTERM)
  std::string permits;      // --permits P: RESOURCE is a semaphore of P permits
  std::string report_file;  // --report: the JSON report goes there, appended
  bool no_wait = false;
  bool fence = false;
  bool fair = false;        // --fair: wait in fair order (not with --fence)
  bool shared = false;      // --shared: a read lock (flock -s); -x/--exclusive, the default, sets nothing
  bool exclusive = false;
  bool foreground = false;  // --foreground: the command gets the terminal
  bool quiet = false;       // -q: no message when the lock is held by another
  std::vector<std::string> command;  // CMD [ARGS...], or sh -c STRING (-c)
};

// Exit statuses of `run` besides the command's own.
constexpr int kRunLostDefault = 3;       // the lease was lost while the command ran
constexpr int kRunReleaseFailed = 125;   // the command succeeded, the final release did not
constexpr int kRunCannotExec = 126;      // the command exists but could not be run
constexpr int kRunNotFound = 127;        // the command was not found

int run_command(const Globals& g, const RunArgs& a);

}  // namespace redlock::cli
