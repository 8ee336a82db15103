// run.hpp — `redlock run`: a distributed flock(1). Take the lock, run a
// command while a lease keeps it extended, release it when the command
// exits; kill the command if the lease is lost.
#pragma once

#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "run_guard.hpp"
#include "run_shared.hpp"

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
  bool campaign = false;    // --campaign: run CMD while leader of RESOURCE (run_campaign.cpp)
  std::string identity, value;  // --identity, --value: the campaign's (only with --campaign)
  std::vector<std::string> command;  // CMD [ARGS...], or sh -c STRING (-c)
};

// Exit statuses of `run` besides the command's own.
constexpr int kRunLostDefault = 3;       // the lease was lost while the command ran
constexpr int kRunReleaseFailed = 125;   // the command succeeded, the final release did not
constexpr int kRunCannotExec = 126;      // the command exists but could not be run
constexpr int kRunNotFound = 127;        // the command was not found

// RunSettings — the options a lock's run and a campaign share, checked
// (usage errors name the option): the lease's TTL as given (zero: the
// config's default), the wait (-w / -n; forever when neither), the exit
// codes, the termination signal and the --kill-after asked for.
struct RunSettings {
  milliseconds ttl{0};
  milliseconds wait{0};
  bool wait_forever = false;
  milliseconds kill_after_asked{1000};
  int conflict_code = kExitNotDone;
  int unavailable_code = kExitUnavailable;
  int lost_code = kRunLostDefault;
  int term_signal = SIGTERM;
};
RunSettings run_settings(const RunArgs& a);

// kill_times: the kill schedule's times for a lease of `ttl`
// (run_guard.hpp): kill_after is --kill-after's, or the default capped to
// what the TTL allows; an explicit --kill-after that does not fit is a
// usage error.
KillTimes kill_times(const RunArgs& a, const RunSettings& s, milliseconds ttl);

// RunReport — the report and the --report file it goes to (opened first:
// one that cannot be is a usage error before anything is locked or run).
struct RunReport {
  Report report;
  std::optional<Fd> file;
};
std::unique_ptr<RunReport> open_report(const Globals& g, const RunArgs& a);

int run_command(const Globals& g, const RunArgs& a);
// campaign_command: `run --campaign` (run_campaign.cpp).
int campaign_command(const Globals& g, const RunArgs& a, const RunSettings& s);

}  // namespace redlock::cli
