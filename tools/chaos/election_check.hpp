// election_check.hpp — the verdict on an election's history (the elected,
// deposed, resigned and fenced events of history.hpp, and the client
// faults): pure, as the rest of the checker, so it runs on synthetic
// histories too. docs/chaos.md ("Elections") states the rules in prose.
//
// A leadership is one (client, term): [elected, end], where end is when its
// worker was told it ended — on_deposed, or the moment it called resign() —
// or, for a worker killed while leading, the kill. It could act as leader
// only until min(end, its lease's deadline): leading() is false past the
// deadline whatever the loop thread has seen. One whose worker was stopped
// between winning and stamping `elected` may find that deadline already
// passed: an empty leadership, which led no instant and is left out of the
// rules below (counted apart).
//
// Checked, per election (resource):
//   - one leader at a time: no two leaderships [elected, end] overlap,
//     except where the earlier one could not act any more when the later
//     was elected (its deadline, or its end, at or before that election)
//     AND it was told in time: within `slack` of its deadline or, if its
//     process was stopped (SIGSTOP) at its deadline, of the SIGCONT. The
//     excused pairs are counted apart (by a pause, or within the slack of
//     a loop timer); a killed leader's leadership ends at its kill;
//   - told in time: every deposed leader was told within that bound
//     (late_deposals otherwise);
//   - acts only while leading: no store write whose leading() check came
//     at or after its leadership's deadline or end, and no resignation
//     (stamped before its leading() check) at or after its deadline;
//   - terms strictly increase in election order (by elected);
//   - the fenced store's rule, from the record: an accepted write's term is
//     at least that of every write accepted before it (answered before it
//     was sent); a refusal names a higher term than the refused one's; and
//     a write under a term its writer was never elected with is an error.
//     Late writes (sent after their leadership's end: a paused ex-leader's)
//     are counted, refused and accepted apart: one is refused exactly when
//     a newer term was accepted before it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "history.hpp"

namespace redlock::chaos {

// LeaderTerm — one client's term as leader, as the history tells it.
struct LeaderTerm {
  enum class End : std::uint8_t { deposed, resigned, killed, open };
  int client = -1;
  std::string name;
  std::int64_t term = 0;
  std::int64_t elected = 0;   // the elected event's t
  std::int64_t deadline = 0;  // the lease's last deadline known (deposed / resigned; else elected's)
  std::int64_t end = 0;       // told (deposed / resigned t), the kill, or (open) the deadline
  End how = End::open;
  std::int64_t acting_end = 0;  // min(end, deadline); the kill for a killed one
  bool empty = false;           // acting_end <= elected: it led no instant
  bool overlapped = false;      // in an overlapping pair that is not excused
  bool paused_excuse = false;   // in an overlap excused by a pause of its process
};

struct ElectionResult {
  std::vector<LeaderTerm> leaderships;  // by (name, elected)
  std::size_t elections = 0;            // non-empty leaderships
  std::size_t empty_leaderships = 0;
  std::size_t failovers = 0;            // elections whose predecessor was deposed or killed (not resigned)
  std::size_t kills = 0, pauses = 0;    // leaderships ended by a kill; deposed across a pause of their process
  std::size_t leader_overlaps = 0;      // overlapping pairs not excused (a violation)
  std::size_t excused_by_pause = 0;     // overlapping pairs excused: the earlier was stopped at its deadline
  std::size_t excused_by_slack = 0;     // ... told within the slack after its deadline
  std::size_t late_deposals = 0;        // told later than the bound (a violation)
  std::size_t acted_late = 0;           // leading() said true past the leadership: a write's, a resignation's (a violation)
  std::size_t term_regressions = 0;     // a term not above the one elected before it, or used twice (a violation)
  std::size_t fenced_writes = 0, fenced_accepted = 0, fenced_refused = 0, fenced_unanswered = 0;
  std::size_t fence_order_violations = 0;  // accepted below a term accepted before it (a violation)
  std::size_t bad_refusals = 0;         // refused naming a term not above its own (a violation)
  std::size_t unelected_writes = 0;     // under a term its writer was never elected with (a violation)
  std::size_t late_writes = 0, late_writes_refused = 0, late_writes_accepted = 0;
  std::int64_t max_told_delay_ms = 0;   // the longest a deposed leader was told after its bound's start
  std::vector<std::string> examples;    // the first violations, in words (ms since run start)
};

// check_election: `slack_ns` is how late past its deadline (or its SIGCONT)
// a leader may be told; `origin` is the run's start, for the examples. The
// client faults are fault events named "pause client N" (an interval: SIGSTOP
// to SIGCONT) and "kill client N" (the worker killed by SIGKILL).
ElectionResult check_election(const std::vector<Event>& events, std::int64_t slack_ns, std::int64_t origin);

// election_violations: the sum of every count above that is a violation.
std::size_t election_violations(const ElectionResult& r);

}  // namespace redlock::chaos
