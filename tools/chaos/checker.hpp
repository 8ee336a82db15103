// checker.hpp — the verdict on one chaos run, computed from its merged
// history alone (pure: no clock, no I/O), so it can be tested on synthetic
// histories and rerun on saved ones.
//
// A history may hold many resources at once: every property is checked per
// resource (its own hold windows, its own counter), and the verdict sums
// them.
//
// Properties checked:
//   - mutual exclusion: no two hold windows of one resource overlap,
//     unless both are read locks' (readers share; a reader and a writer,
//     or two writers, never do);
//   - no torn reads: a reader's counter did not change between its two
//     reads inside its window (a writer got in while it held);
//   - no lost updates on the shared counters (read-modify-write increments,
//     one counter per resource: a write's resource names the counter);
//   - no stale writes (a write outside the writer's own valid hold window);
//   - no leaked lock keys after quiescence (counted by the runner);
//   - elections (election_check.hpp): one leader at a time, terms that
//     increase, and the fenced store's rule over the leaders' writes;
// and measured: success rate, acquire latency percentiles, recovery time
// after each fault.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "election_check.hpp"
#include "history.hpp"

namespace redlock::chaos {

struct CheckInput {
  std::vector<Event> events;   // all workers' events + fault events, any order
  // final_values: each resource's counter as read after the run, by
  // resource; a resource with writes that is not here was not read.
  std::map<std::string, std::int64_t> final_values;
  std::size_t leaked_keys = 0;   // lock keys found on masters after quiescence
  std::int64_t run_start = 0, run_end = 0;  // CLOCK_BOOTTIME ns
  // deposed_slack: how late past its deadline (or its SIGCONT) a leader
  // may be told it was deposed (election_check.hpp).
  std::int64_t deposed_slack_ns = 150'000'000;
};

// Window — the interval in which one acquisition's holder acted as owner:
// [ok.t, min(release.t, ok.deadline)], or up to the deadline when no
// release followed. Half-open for overlap purposes: windows that merely
// touch (end == start) do not overlap. A read lock's window is shared:
// it may overlap other shared windows, never one that is not.
struct Window {
  int client = -1;
  std::string resource;
  std::string token;
  std::int64_t start = 0;     // ok.t, ns
  std::int64_t end = 0;       // ns, <= deadline
  std::int64_t deadline = 0;  // ok.deadline, ns
  bool released = false;      // ended by a release (false: by the deadline)
  bool shared = false;        // a read lock's (ok.shared)
  bool overlapped = false;    // takes part in at least one overlapping pair (reader–reader pairs are none)
};

// Recovery — one fault interval and how long the system took to grant a
// lock again after it ended (in an election: to elect a leader from its
// start on, whichever is sooner).
struct Recovery {
  std::string what;
  std::int64_t start = 0, end = 0;  // ns
  std::int64_t recovery_ms = -1;    // fault end → next ok.t (start → next elected.t), whole ms rounded down; -1: none
};

struct CheckResult {
  std::size_t attempts = 0, acquisitions = 0, failures = 0;  // invoke / ok / fail events
  double success_rate = 0;       // acquisitions / attempts (0 without attempts)
  std::int64_t p50_us = 0, p99_us = 0;  // ok.latency_us, nearest rank; 0 without acquisitions
  std::size_t overlaps = 0;      // overlapping pairs of hold windows of one resource, not both shared
  std::size_t shared_overlaps = 0;  // overlapping pairs of shared windows: readers sharing, as they may
  std::size_t shared_windows = 0;   // read locks' windows
  std::vector<std::pair<Window, Window>> overlap_examples;  // the first 10 found
  std::size_t resources = 0;     // distinct resources with a hold window
  std::size_t writes = 0;
  std::size_t lost_updates = 0;  // defined in checker.cpp (check_counter), summed over resources
  std::size_t stale_writes = 0;  // a write after its window's deadline, or outside every window of its client
  std::size_t reads = 0;         // read events (a reader's two looks at the counter)
  // torn_reads: read events with reread != read stamped inside their own
  // window (the same rule as for stale writes): the counter changed while
  // the reader held its lock, so a writer's write landed in it. A read
  // outside its window (a reader paused past its validity) proves nothing.
  std::size_t torn_reads = 0;
  std::size_t bad_increments = 0;     // writes with wrote != read + 1 (a worker bug, not a lock violation)
  std::size_t unrecorded_increments = 0;  // counter steps with no write event (a writer killed before logging)
  // The counters, summed over resources: final_value over those read (-1
  // when none was), expected_final over all (what they should hold
  // according to the history); final_mismatch: a counter read differs from
  // its expected value.
  std::int64_t final_value = -1;
  std::int64_t expected_final = 0;
  bool final_mismatch = false;
  std::size_t leaked_keys = 0;
  std::size_t leases_lost = 0;        // lost events: a watchdog gave a lease up
  std::int64_t max_recovery_ms = 0;   // max over faults; -1 when any fault was never followed by an ok (or elected)
  std::size_t unrecovered_faults = 0;
  // recovery_p50_ms, recovery_p99_ms: over the faults followed by an ok
  // (nearest rank); 0 without them.
  std::int64_t recovery_p50_ms = 0, recovery_p99_ms = 0;
  std::vector<Recovery> recoveries;   // one per fault, in time order
  std::vector<Window> windows;        // every hold window, sorted by (start, client)
  std::vector<int> clients;           // every client id seen in the history, ascending
  ElectionResult election;            // the elections' verdict (empty without elected or fenced events)
  std::int64_t run_start = 0, run_end = 0;
};

CheckResult check(const CheckInput& in);

// leadership_windows: the leaderships as hold windows ([elected, end], on
// resource "NAME (leader)"), overlapped where an overlap was not excused:
// for the timeline.
std::vector<Window> leadership_windows(const ElectionResult& r);

// fault_events picks the fault intervals out of a merged history, by start.
std::vector<Event> fault_events(const std::vector<Event>& events);

// violation is the safety verdict: overlaps + lost_updates + torn_reads +
// leaked_keys + election_violations > 0.
// Stale writes are reported but not part of it: with Redlock they are the
// holder's pause problem (design.md §4), not a lock failure.
bool violation(const CheckResult& r);

// to_json is the run's summary. `extra` fields (e.g. the runner's settings)
// are added first; the checker's own keys win on a name clash, so a runner
// can never mask "violation" by accident.
nlohmann::json to_json(const CheckResult& r, const std::string& scenario, bool expect_violation,
                       const std::map<std::string, nlohmann::json>& extra = {});

}  // namespace redlock::chaos
