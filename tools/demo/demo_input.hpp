// demo_input.hpp — what scripts/demo.sh records, read as a chaos history.
//
// The demo writes three kinds of JSON lines (one object per line, files of
// any mix); each line's kind is told by its fields:
//   `redlock run --json` results  {"command":"run", "acquired":…, "started_at_us":…,
//        "acquired_at_us":…, "acquire_us":…, "deadline_at_us":…, "released_at_us":…,
//        "lost":null|"…", "resource":…, "token":…, "code":…, "error":…}
//   fenced_increment writes       {"t_us":…, "worker":N|null, "fence":F, "read":R,
//        "wrote":R+1, "accepted":bool, "stalled":bool[, "stall_start_us", "stall_end_us"]}
//   fault intervals (demo.sh)     {"what":"master 1 down", "start_us":…, "end_us":…}
// All times are unix-epoch microseconds; events carry them as ns (the
// checker only compares them).
//
// A run line does not say which worker it came from: the reader attributes
// it to the worker set for its file (DemoInput::add's `worker`). A write line
// uses its own "worker" when it is a number, else that one.
//
// The conversion (one chaos::Event per step):
//   run, acquired      invoke at started_at, ok at acquired_at (deadline =
//                      deadline_at, latency_us = acquire_us), release at
//                      released_at when not null (else the window lasts to
//                      its deadline)
//   run, not acquired  invoke at started_at, fail at started_at + acquire_us
//   accepted write     write at t_us (read, wrote); a rejected write is only
//                      counted: the store refused it, so it changed nothing
//   stalled write      also a fault "holder stalled (worker N)" over
//                      [stall_start_us, stall_end_us]
//   fault line         a fault over [start_us, end_us]
#pragma once

#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "history.hpp"

namespace redlock::demo {

// InputError — a line that is not JSON or lacks a field; what() names the
// source and line ("w1/runs.jsonl:7: …").
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// DemoInput accumulates the events and counts of every file added to it.
// Not thread-safe; plain value.
struct DemoInput {
  std::vector<chaos::Event> events;
  std::size_t runs = 0;              // run lines
  std::size_t lost_leases = 0;       // acquired runs whose "lost" is set
  std::size_t overdue_holds = 0;     // acquired runs released after their deadline (or never)
  std::size_t accepted_writes = 0;
  std::size_t rejected_writes = 0;   // stale writes the fence refused
  std::size_t stalls = 0;            // stalled writes
  std::size_t faults = 0;            // fault lines
  std::int64_t first_ns = INT64_MAX, last_ns = INT64_MIN;  // span of all event times

  // add parses `text` (JSONL; blank lines skipped) from `source` (a name for
  // errors). `worker` (>= 0) is the worker its run lines belong to; -1 when
  // none was given, which makes a run line an error. Throws InputError; the
  // events of lines before the bad one stay added.
  void add(const std::string& text, const std::string& source, int worker);

  // finish gives writes that carry no resource (fenced_increment run without
  // REDLOCK_RESOURCE) the runs' resource when all runs share one, so the
  // checker finds their hold windows. Call once, after the last add.
  void finish();

 private:
  void add_line(const std::string& line, int worker);
  void push(chaos::Event e);
};

}  // namespace redlock::demo
