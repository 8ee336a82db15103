// timeline_svg.cpp — see timeline_svg.hpp.
#include "timeline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "svg.hpp"

namespace redlock::chaos {
namespace {

// Geometry, in SVG user units (px). Fixed width so pictures of different
// runs compare side by side; the height follows the number of clients.
constexpr double kWidth = 1200, kLeft = 90, kRight = 20;
constexpr double kHeaderH = 64;       // title, counts, legend
constexpr double kFaultLabelH = 36;   // three staggered lines of fault labels
constexpr double kAxisH = 44;         // ticks, tick labels, axis caption
constexpr double kRowsMaxH = 600;     // rows shrink to fit; bars stay >= 3 px apart
constexpr double kMinBarW = 0.6;      // a 1 µs window is still visible
constexpr double kMinOverlapW = 2.5;  // a violation must catch the eye among thousands of bars

constexpr const char* kHold = "#4a7ab5";
constexpr const char* kShared = "#9cc3e6";  // a read lock's window: lighter, readers may share
constexpr const char* kOverlap = "#d62728";
constexpr const char* kFault = "#cfcfcf";

std::string tick_label(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(ms) < 1e-9 ? 0.0 : ms);
  return buf;
}

}  // namespace

std::string render_timeline_svg(const CheckResult& r, const std::vector<Event>& faults, std::int64_t run_start,
                                std::int64_t run_end, const std::string& title) {
  // Rows: every client seen in the history (a client that never acquired
  // still gets its empty row: starvation is visible), plus any client that
  // only appears in a window (a hand-made CheckResult).
  std::map<int, std::size_t> row;
  for (int c : r.clients) row.emplace(c, 0);
  for (const auto& w : r.windows) row.emplace(w.client, 0);
  std::size_t n = 0;
  for (auto& [c, i] : row) i = n++;
  const double row_h = std::clamp(kRowsMaxH / static_cast<double>(std::max<std::size_t>(n, 1)), 3.0, 18.0);
  const double rows_top = kHeaderH + kFaultLabelH;
  const double rows_h = row_h * static_cast<double>(std::max<std::size_t>(n, 1));
  const double height = rows_top + rows_h + kAxisH;
  const double plot_w = kWidth - kLeft - kRight;

  // The time domain covers the run and anything drawn outside it (a killed
  // holder's window runs to its deadline, possibly after run_end), so no bar
  // is silently clipped.
  std::int64_t lo = run_start, hi = run_end;
  for (const auto& w : r.windows) lo = std::min(lo, w.start), hi = std::max(hi, w.end);
  for (const auto& f : faults) lo = std::min(lo, f.t), hi = std::max(hi, f.deadline);
  if (hi <= lo) hi = lo + 1'000'000;  // an empty run: one millisecond of nothing
  const double span = static_cast<double>(hi - lo);
  auto x = [&](std::int64_t ns) { return kLeft + static_cast<double>(ns - lo) / span * plot_w; };

  svg::Document d(kWidth, height);
  d.title(title);

  // Header: title, counts, legend.
  d.text(10, 20, title, {{"font-size", 15}, {"font-weight", "bold"}});
  char counts[512];
  std::snprintf(counts, sizeof counts,
                "windows %zu · acquisitions %zu of %zu attempts (%.1f %%) · overlaps %zu · lost updates %zu · "
                "stale writes %zu · leaked keys %zu · max recovery %lld ms",
                r.windows.size(), r.acquisitions, r.attempts, 100.0 * r.success_rate, r.overlaps, r.lost_updates,
                r.stale_writes, r.leaked_keys, static_cast<long long>(r.max_recovery_ms));
  std::string line = counts;
  if (r.shared_windows > 0 || r.reads > 0) {
    std::snprintf(counts, sizeof counts, " · read locks %zu · shared overlaps %zu · torn reads %zu",
                  r.shared_windows, r.shared_overlaps, r.torn_reads);
    line += counts;
  }
  d.text(10, 38, line, {{"font-size", 12}});
  // The read lock's swatch only where there are read locks: other runs'
  // pictures stay as they were.
  std::vector<std::pair<const char*, const char*>> legend{
      {kHold, "hold window"}, {kOverlap, "overlapping window"}, {kFault, "fault"}};
  if (r.shared_windows > 0) legend.insert(legend.begin() + 1, {kShared, "read lock window"});
  double lx = 10;
  for (auto [colour, label] : legend) {
    // Outlined: the light fault swatch must show on white.
    d.rect(lx, 48, 12, 10, {{"fill", colour}, {"stroke", "#888"}, {"stroke-width", 0.5}});
    d.text(lx + 16, 57, label, {{"font-size", 11}});
    lx += 150;
  }

  // Row stripes and labels. With many clients, labels thin out so they never
  // overlap (one per ~11 px).
  const std::size_t label_every = static_cast<std::size_t>(std::ceil(11.0 / row_h));
  for (const auto& [client, i] : row) {
    const double y = rows_top + row_h * static_cast<double>(i);
    if (i % 2 == 1) d.rect(kLeft, y, plot_w, row_h, {{"fill", "#f4f4f4"}});
    if (i % label_every == 0)
      d.text(kLeft - 6, y + row_h / 2 + 4, "client " + std::to_string(client),
             {{"font-size", 10}, {"text-anchor", "end"}});
  }

  // Fault bands behind the bars, labels staggered over three lines above
  // the rows so neighbouring faults stay legible.
  for (std::size_t k = 0; k < faults.size(); ++k) {
    const auto& f = faults[k];
    const double x0 = x(f.t), w = std::max(x(f.deadline) - x0, 1.0);
    d.rect(x0, kHeaderH, w, kFaultLabelH + rows_h, {{"class", "fault"}, {"fill", kFault}, {"fill-opacity", 0.6}});
    d.text(x0 + 2, kHeaderH + 10 + 12 * static_cast<double>(k % 3), f.error, {{"font-size", 10}, {"fill", "#444"}});
  }

  // Hold windows: one rect each, no text. Overlapping ones are drawn last,
  // taller and at least kMinOverlapW wide, so they sit on top of their
  // neighbours and stay visible in a long run.
  for (int pass = 0; pass < 2; ++pass) {
    const bool hot = pass == 1;
    const double bar_h = std::max(row_h * (hot ? 0.95 : 0.7), 2.0);
    for (const auto& w : r.windows) {
      if (w.overlapped != hot) continue;
      const double y = rows_top + row_h * static_cast<double>(row[w.client]) + (row_h - bar_h) / 2;
      const double x0 = x(w.start);
      const char* cls = hot ? "hold overlap" : w.shared ? "hold shared" : "hold";
      d.rect(x0, y, std::max(x(w.end) - x0, hot ? kMinOverlapW : kMinBarW), bar_h,
             {{"class", cls}, {"fill", hot ? kOverlap : w.shared ? kShared : kHold}});
    }
  }

  // Time axis: ms since run_start, ticks at a 1-2-5 step.
  const double ms_lo = static_cast<double>(lo - run_start) / 1e6, ms_hi = static_cast<double>(hi - run_start) / 1e6;
  svg::Axis axis;
  axis.start = kLeft;
  axis.end = kLeft + plot_w;
  axis.at = rows_top + rows_h + 2;
  axis.caption = "ms since run start";
  axis.line_colour = "black";
  axis.tick_length = 5;
  axis.label_offset = 17;
  axis.caption_offset = 34;
  for (double ms : svg::tick_values(ms_lo, ms_hi, svg::nice_step(ms_hi - ms_lo, 10)))
    axis.ticks.push_back({kLeft + (ms - ms_lo) / (ms_hi - ms_lo) * plot_w, tick_label(ms)});
  d.axis(axis);
  return d.finish();
}

}  // namespace redlock::chaos
