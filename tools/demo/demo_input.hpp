// demo_input.hpp — what scripts/demo.sh records, read as a chaos history.
//
// The demo writes these kinds of JSON lines (one object per line, files of
// any mix); each line's kind is told by its fields:
//   `redlock run --json` results  {"command":"run", "acquired":…, "started_at_us":…,
//        "acquired_at_us":…, "acquire_us":…, "deadline_at_us":…, "deadline_mono_us":…,
//        "released_at_us":…, "lost":null|"…", "child_signal":null|N, "resource":…,
//        "token":…, "code":…, "error":…}
//   fenced_increment writes       {"t_us":…, "t_mono_us":…, "worker":N|null, "token":…,
//        "fence":F, "read":R, "wrote":R+1, "accepted":bool[, "stalled":bool,
//        "stall_start_us", "stall_end_us" (older records)]}
//   fenced_increment's helpers    {"kind":"stall", "worker", "token", "stall_start_us",
//        "stall_end_us", "cmd_exit_mono_us":N|null, …}
//                                 {"kind":"delayed_write", "worker", "token", "fence",
//        "t_us", "t_mono_us" (issued), "delivered_us", "delivered_mono_us", "read",
//        "wrote", "accepted":bool|null, "highest", "error"?}
//   fault intervals (demo.sh)     {"what":"master 1 down", "start_us":…, "end_us":…}
// Times named *_us are unix-epoch microseconds (events carry them as ns; the
// checker only compares them); *_mono_us are CLOCK_MONOTONIC microseconds,
// compared only with each other.
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
//   stall line         a fault "holder stalled (worker N)" over
//                      [stall_start_us, stall_end_us] (so is an older
//                      "stalled" write line)
//   delayed write      a fault "write delayed (worker N)" over [t_us,
//                      delivered_us]; when accepted, also a write at
//                      delivered_us (when it changed the store)
//   fault line         a fault over [start_us, end_us]
//
// The lease deadline check (finish()): every write — our own and delayed
// ones — is matched by its "token" to its run, and its issue time t_mono_us
// is compared with the run's deadline_mono_us (the lease's last validity
// deadline; deadlines only move forward while a lease is valid, so a time
// after the last one was after the deadline in force then). A write issued
// after it is late-issued: what the guard of `redlock run` must prevent,
// fence or no fence. A write that cannot be matched (no token, no
// t_mono_us, or no run with that token and a deadline_mono_us) is
// unmatched: the check cannot vouch for it.
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <optional>
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

// IssuedWrite — one write as issued by a command (ours or handed to the
// network), for the lease deadline check.
struct IssuedWrite {
  int worker = -1;
  std::string token;
  std::optional<std::int64_t> issued_mono_us;  // t_mono_us
  bool delayed = false;
  // Set by finish() when matched: the run's deadline_mono_us.
  std::optional<std::int64_t> deadline_mono_us;
};

// DelayedWrite — a write issued by a command and delivered later by
// fenced_increment's helper (the network); deadline_mono_us by finish().
struct DelayedWrite {
  int worker = -1;
  std::string token;
  std::uint64_t fence = 0, highest = 0;
  std::optional<bool> accepted;  // null: the store could not be asked (error)
  std::string error;
  std::int64_t issued_mono_us = 0, delivered_mono_us = 0;
  std::optional<std::int64_t> deadline_mono_us;
};

// Stall — one holder stall (its `redlock run` SIGSTOPped); cmd_exit_mono_us
// is when its command died (null: it outlived the stall); deadline_mono_us
// by finish().
struct Stall {
  int worker = -1;
  std::string token;
  std::optional<std::int64_t> cmd_exit_mono_us;
  std::optional<std::int64_t> deadline_mono_us;
};

// RunLease — what the deadline check needs of one acquired run.
struct RunLease {
  int worker = -1;
  std::optional<std::int64_t> deadline_mono_us;
  std::size_t late_writes = 0;  // finish()
};

// DemoInput accumulates the events and counts of every file added to it.
// Not thread-safe; plain value.
struct DemoInput {
  std::vector<chaos::Event> events;
  std::size_t runs = 0;              // run lines
  std::size_t lost_leases = 0;       // acquired runs whose "lost" is set
  std::size_t overdue_holds = 0;     // acquired runs released after their deadline (or never)
  std::size_t killed_commands = 0;   // acquired runs whose lease was lost and whose command died of a signal
  std::size_t accepted_writes = 0;   // accepted writes, delayed ones included
  std::size_t rejected_writes = 0;   // stale writes the fence refused, delayed ones included
  std::size_t stalls = 0;            // holder stalls (stall lines, older stalled writes)
  std::size_t faults = 0;            // fault lines
  std::int64_t first_ns = INT64_MAX, last_ns = INT64_MIN;  // span of all event times

  std::vector<IssuedWrite> issued;            // every write line, in input order
  std::vector<DelayedWrite> delayed;          // delayed write lines
  std::vector<Stall> stall_records;           // stall lines
  std::map<std::string, RunLease> leases;     // acquired runs by token

  // The lease deadline check, computed by finish():
  std::size_t late_issued_writes = 0;  // issued after their own lease's deadline
  std::size_t unmatched_writes = 0;    // could not be matched to a lease deadline
  std::optional<std::int64_t> closest_issue_us;  // smallest deadline − issue time of a write issued in time
  std::size_t delayed_rejected = 0, delayed_accepted = 0, delayed_failed = 0;
  std::size_t delayed_in_time = 0;       // delayed writes issued before their deadline
  std::size_t delayed_arrived_late = 0;  // ... and delivered after it
  std::size_t stall_kills_in_time = 0;   // stalled holders whose command died before its deadline
  std::size_t stall_kills_late = 0;      // ... died after it, outlived the stall, or cannot be matched

  // add parses `text` (JSONL; blank lines skipped) from `source` (a name for
  // errors). `worker` (>= 0) is the worker its run lines belong to; -1 when
  // none was given, which makes a run line an error. Throws InputError; the
  // events of lines before the bad one stay added.
  void add(const std::string& text, const std::string& source, int worker);

  // finish gives writes that carry no resource (fenced_increment run without
  // REDLOCK_RESOURCE) the runs' resource when all runs share one, so the
  // checker finds their hold windows, and runs the lease deadline check
  // (late-issued and unmatched writes, the delayed writes' and stalls'
  // deadlines). Call once, after the last add.
  void finish();

 private:
  void add_line(const std::string& line, int worker);
  void push(chaos::Event e);
};

}  // namespace redlock::demo
