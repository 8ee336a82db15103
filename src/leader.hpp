// leader.hpp — an election's reading: each master's leader_read answer
// (src/scripts.hpp) parsed, and what a majority of them says
// (docs/design.md, "Elections"). Pure: no I/O, no time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redlock/election.hpp"

namespace redlock::detail {

// LeaderRecord — a leader's record as a master keeps it.
struct LeaderRecord {
  std::uint64_t term = 0;
  std::uint64_t rev = 0;
  std::string token, identity, value;
};

// LeaderAnswer — one master's leader_read: the lock's PTTL (-2: free, -1:
// none) and value, the record (none: absent, or not of a record's shape)
// and how long the record's term has led there (-1: unknown).
struct LeaderAnswer {
  long long pttl = -2;
  long long led_ms = -1;
  std::string lock;
  std::optional<LeaderRecord> record;
};

// parse_leader_record: a stored record ("TERM REV SINCE TOKLEN IDLEN "
// then token, identity, value); none when the text has not that shape or
// a number is out of range (a term or rev above 2^53, a length past the end).
std::optional<LeaderRecord> parse_leader_record(std::string_view text);
// parse_leader_read: a leader_read reply ("PTTL LED VLEN RLEN " then the
// lock's value and the record, exactly that long); none when malformed.
std::optional<LeaderAnswer> parse_leader_read(std::string_view text);

// leader_verdict: the reading of `name` from the answers of the masters
// that answered and count (none: no answer, quarantined, malformed) out of
// `nodes`, `quorum` needed. A leader: one token that a quorum of answers
// hold in the lock and name in the record; its info from the one of them
// with the highest rev. Without: `last`, the highest (term, rev) record of
// any answer. `answered` counts the parsed answers: under `quorum` the
// caller reports that it could not tell.
LeaderStatus leader_verdict(std::string name, const std::vector<std::optional<LeaderAnswer>>& answers,
                            std::size_t quorum);

// leader_problem: what is wrong with an identity or a value for a
// campaign or proclaim ("" when nothing is).
std::string leader_problem(std::string_view identity, std::string_view value);

}  // namespace redlock::detail
