// timeline_svg.hpp — one chaos run as a picture: who held the lock when.
//
// A self-contained SVG (no scripts, no external fonts or styles): the x axis
// is milliseconds since run_start with ticks, one row per client
// ("client N"), each hold window a thin bar — red when it takes part in an
// overlap — and each fault interval a light grey band across all rows with
// its label. The header line gives the title and the run's counts. Bars
// carry no text, so thousands of windows stay readable and the file small.
//
// Drawn with tools/svg (escaping, the axis). Markup the tests (and anyone
// post-processing) may rely on: every window is exactly one
// <rect class="hold"> or <rect class="hold overlap">; every fault one
// <rect class="fault">.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checker.hpp"
#include "history.hpp"

namespace redlock::chaos {

std::string render_timeline_svg(const CheckResult& result, const std::vector<Event>& faults,
                                std::int64_t run_start, std::int64_t run_end, const std::string& title);

}  // namespace redlock::chaos
