// run_seconds.hpp — the --seconds option of the benchmark programs
// (bench/CONTRACT.md), checked the same way by each. Header-only; CLI11 only,
// so the floor stays free of the library.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace bench {

// run_seconds is the CLI11 check of a run length S in seconds: lo <= S <= hi,
// or lo < S <= hi when `lo_open`. Not CLI::Range: it has no open bound and
// lets NaN through. The range is shown in --help and named in the error.
inline CLI::Validator run_seconds(double lo, double hi, bool lo_open) {
  const std::string range = (lo_open ? "(" : "[") + CLI::detail::to_string(lo) + ", " +
                            CLI::detail::to_string(hi) + "]";
  return CLI::Validator(
      [=](std::string& text) {
        double s = 0;
        const bool ok = CLI::detail::lexical_cast(text, s) && (lo_open ? s > lo : s >= lo) && s <= hi;
        return ok ? std::string() : "not a number of seconds in " + range + ": " + text;
      },
      "in " + range);
}

}  // namespace bench
