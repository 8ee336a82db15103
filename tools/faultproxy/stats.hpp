// stats.hpp — cumulative counters of one listener, summed over all of its
// connections past and present. Gauges (active connections, bytes queued or
// held right now) are not stored: STATUS computes them from the live
// connections, so they can never drift.
#pragma once

#include <algorithm>
#include <cstdint>

#include "faultproxy/faults.hpp"

namespace faultproxy {

struct DirectionStats {
  std::uint64_t forwarded = 0;    // bytes written to the destination socket
  std::uint64_t dropped = 0;      // bytes discarded (drop/blackhole, or queued when the pair closed)
  std::uint64_t peak_queued = 0;  // most bytes ever queued in one connection (shows backpressure works)

  void note_queued(std::uint64_t n) { peak_queued = std::max(peak_queued, n); }
};

struct ListenerStats {
  std::uint64_t accepted = 0;        // every accepted connection, refused ones included
  std::uint64_t refused = 0;         // closed at once because refuse=1
  std::uint64_t reset = 0;           // reset by RESET / reset=1
  std::uint64_t connect_failed = 0;  // the target did not accept the upstream connection
  std::uint64_t closed = 0;          // connections closed for any reason
  DirectionStats up;
  DirectionStats down;

  DirectionStats& dir(Direction d) { return d == Direction::Up ? up : down; }
};

}  // namespace faultproxy
