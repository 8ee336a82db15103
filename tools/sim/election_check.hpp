// election_check.hpp — the election workload's checker (docs/simulation.md,
// "The election workload"): pure, on a history the schedule recorded, on
// true time. No library code: it judges what the campaigns and observers
// were told, not how.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "world.hpp"

namespace redlock::sim {

// Term — one leadership as its candidate was told it: elected (the
// campaign's answer) at `elected`, over at `ended` — the deposed notice
// (on_deposed) or the moment it began to resign, whichever came first
// (`never`: it was still leading when the run ended).
struct Term {
  std::size_t client = 0;
  std::string name, identity, token;
  std::uint64_t term = 0;
  Nanos elected = 0;
  Nanos ended = never;
  bool deposed = false;  // ended by the deposed notice (else resigned)
};

// Reading — what an observer's callback was told (errors left out):
// a leader (`leader`, its term and identity) or "no leader".
struct Reading {
  std::size_t observer = 0;
  std::string name;
  Nanos at = 0;
  bool leader = false;
  std::uint64_t term = 0;
  std::string identity;
};

struct ElectionHistory {
  std::vector<Term> terms;
  std::vector<Reading> readings;  // in the order each observer was told
  // stopped[c]: the spans (true time, from–to; `never` while it lasts) in
  // which client c's process was stopped by a fault: it ran nothing.
  std::vector<std::vector<std::pair<Nanos, Nanos>>> stopped;
  // Terms (and the observers' terms) are judged only before this moment
  // (the first data loss: the fence counters are data too; docs/design.md).
  Nanos terms_trusted_until = never;
  // After a stop, the deposed notice may take this long (the loop's turn
  // that runs the due timer).
  Nanos slack = 0;
};

struct ElectionFinding {
  std::string kind;  // two_leaders, term_order, observer
  std::string what;
  Nanos at = 0;
  std::vector<std::string> tokens;
};

// check_election:
//   two_leaders  no two terms of one name overlap on true time: each is
//                over (deposed notice, or resign) before the next is
//                elected — except while the earlier one's process was
//                stopped (and `slack` after it came back): a stopped
//                process does nothing, and hears of its loss on its first
//                turn back;
//   term_order   a name's terms strictly increase in election order;
//   observer     no observer is told a leader at a term below one it was
//                told before, and all observers and the elected candidate
//                agree on who led at a term.
std::vector<ElectionFinding> check_election(const ElectionHistory& h);

}  // namespace redlock::sim
