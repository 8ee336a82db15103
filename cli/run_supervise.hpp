// run_supervise.hpp — the holding phase of `redlock run`: CMD's process
// group runs while a lease (a lock's, or a leadership's) is held; signals
// are passed on to it, and the kill schedule ends it when the lease ends.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "run_child.hpp"
#include "run_guard.hpp"
#include "run_shared.hpp"
#include "signal_watch.hpp"

namespace redlock::cli {

// Holding — what the supervision of one group works with.
//   lease        the lease the group runs under (deadline, lost)
//   lost         its loss as told by on_lost / on_deposed (lost->efd wakes us)
//   noun, what   what it holds, for messages: `the lock`, `the lock on "job"`
//   tell         one message for a person (dropped when it cannot be said)
struct Holding {
  const LeaseView& lease;
  std::shared_ptr<LostSignal> lost;
  SignalWatch& signals;
  Guard& guard;
  Terminal& terminal;
  KillTimes times;
  int term_signal = SIGTERM;
  std::string noun, what;
  std::function<void(const std::string&)> tell;
};

// Held — how the group's supervision ended (the group is empty).
//   wstatus           CMD's own wait status
//   lost              why the lease was lost, when it was: while the group
//                     ran (the group was then terminated), or only seen
//                     once it was empty (redlock stopped past the deadline)
//   lost_while_cmd_ran  the loss was seen while CMD itself still ran (not
//                     only what it left in its group): CMD was stopped by it
//   killed            the last signal redlock itself sent on the schedule:
//                     the termination signal's name, "SIGKILL", or empty
//   stop_signal       the last SIGINT or SIGTERM passed on to the group (0:
//                     none): someone asked for the end of the run
struct Held {
  int wstatus = 0;
  std::optional<std::string> lost;
  bool lost_while_cmd_ran = false;
  std::string killed;
  int stop_signal = 0;
};

// supervise_group runs the holding phase for `child` (just spawned, the
// leader of its process group) until that group is empty: the guard is
// told to watch it first; every signal but CHLD, PIPE and the job-control
// ones is passed on to the group; TSTP/TTIN/TTOU stop the group, then us,
// CONT continues it; the group is terminated by KillSchedule when the lease
// is lost or its deadline nears; CMD and the orphans of its group are
// reaped (we are their subreaper). The caller tells the guard afterwards
// (done, or unwatch for another group) and releases the lease.
Held supervise_group(const Holding& h, pid_t child);

}  // namespace redlock::cli
