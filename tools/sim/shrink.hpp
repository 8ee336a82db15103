// shrink.hpp — delta debugging (Zeller's ddmin) over a schedule's planned
// faults: the smallest set of them, as far as removing chunks finds one,
// with which the schedule still shows the violation. A schedule's plan is
// drawn in full whatever is left out (tools/sim/schedule.hpp, only_faults),
// so a smaller set replays the same workload with fewer faults.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace redlock::sim {

struct ShrinkResult {
  std::vector<std::size_t> kept;  // ascending
  std::size_t runs = 0;           // predicate calls
  bool exhausted = false;         // stopped by max_runs before the end
};

// shrink: from `all` (for which `fails` is true), a subset for which it is
// still true and from which no single chunk of the final granularity can be
// removed (1-minimal when the budget allows). `fails` must be deterministic.
inline ShrinkResult shrink(std::vector<std::size_t> all,
                           const std::function<bool(const std::vector<std::size_t>&)>& fails,
                           std::size_t max_runs = 400) {
  ShrinkResult r;
  std::sort(all.begin(), all.end());
  auto test = [&](const std::vector<std::size_t>& candidate) {
    ++r.runs;
    return fails(candidate);
  };
  if (test({})) return r;  // no fault needed at all
  std::vector<std::size_t> keep = std::move(all);
  std::size_t n = 2;
  while (keep.size() >= 2) {
    if (r.runs >= max_runs) {
      r.exhausted = true;
      break;
    }
    const std::size_t chunk = (keep.size() + n - 1) / n;
    bool reduced = false;
    for (std::size_t start = 0; start < keep.size() && r.runs < max_runs; start += chunk) {
      // Try without this chunk (its complement).
      std::vector<std::size_t> rest;
      rest.reserve(keep.size());
      for (std::size_t i = 0; i < keep.size(); ++i) {
        if (i < start || i >= start + chunk) rest.push_back(keep[i]);
      }
      if (test(rest)) {
        keep = std::move(rest);
        n = std::max<std::size_t>(n - 1, 2);
        reduced = true;
        break;
      }
    }
    if (reduced) continue;
    if (n >= keep.size()) break;  // single faults, none removable
    n = std::min(n * 2, keep.size());
  }
  r.kept = std::move(keep);
  return r;
}

}  // namespace redlock::sim
