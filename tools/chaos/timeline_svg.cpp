// timeline_svg.cpp — see timeline_svg.hpp.
#include "timeline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

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
constexpr const char* kOverlap = "#d62728";
constexpr const char* kFault = "#cfcfcf";

// num prints a coordinate compactly: one decimal is well below a pixel.
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// nice_step is the tick spacing in ms: 1, 2 or 5 × 10^k, about ten ticks.
double nice_step(double span_ms) {
  const double raw = std::max(span_ms / 10.0, 1e-6);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw) return m * mag;
  return 10.0 * mag;
}

std::string tick_label(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(ms) < 1e-9 ? 0.0 : ms);
  return buf;
}

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += ' ';
        else out += c;
    }
  }
  return out;
}

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

  std::string s;
  s.reserve(4096 + r.windows.size() * 96 + faults.size() * 256);
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) + "\" height=\"" + num(height) +
       "\" viewBox=\"0 0 " + num(kWidth) + " " + num(height) + "\" font-family=\"sans-serif\">\n";
  s += "<title>" + xml_escape(title) + "</title>\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + num(kWidth) + "\" height=\"" + num(height) + "\" fill=\"white\"/>\n";

  // Header: title, counts, legend.
  s += "<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(title) + "</text>\n";
  char counts[512];
  std::snprintf(counts, sizeof counts,
                "windows %zu · acquisitions %zu of %zu attempts (%.1f %%) · overlaps %zu · lost updates %zu · "
                "stale writes %zu · leaked keys %zu · max recovery %lld ms",
                r.windows.size(), r.acquisitions, r.attempts, 100.0 * r.success_rate, r.overlaps, r.lost_updates,
                r.stale_writes, r.leaked_keys, static_cast<long long>(r.max_recovery_ms));
  s += "<text x=\"10\" y=\"38\" font-size=\"12\">" + xml_escape(counts) + "</text>\n";
  double lx = 10;
  for (auto [colour, label] : {std::pair{kHold, "hold window"}, std::pair{kOverlap, "overlapping window"},
                               std::pair{kFault, "fault"}}) {
    s += "<rect x=\"" + num(lx) + "\" y=\"48\" width=\"12\" height=\"10\" fill=\"" + colour + "\"/>";
    s += "<text x=\"" + num(lx + 16) + "\" y=\"57\" font-size=\"11\">" + label + "</text>\n";
    lx += 150;
  }

  // Row stripes and labels. With many clients, labels thin out so they never
  // overlap (one per ~11 px).
  const std::size_t label_every = static_cast<std::size_t>(std::ceil(11.0 / row_h));
  for (const auto& [client, i] : row) {
    const double y = rows_top + row_h * static_cast<double>(i);
    if (i % 2 == 1)
      s += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(y) + "\" width=\"" + num(plot_w) + "\" height=\"" +
           num(row_h) + "\" fill=\"#f4f4f4\"/>\n";
    if (i % label_every == 0)
      s += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(y + row_h / 2 + 4) +
           "\" font-size=\"10\" text-anchor=\"end\">client " + std::to_string(client) + "</text>\n";
  }

  // Fault bands behind the bars, labels staggered over three lines above
  // the rows so neighbouring faults stay legible.
  for (std::size_t k = 0; k < faults.size(); ++k) {
    const auto& f = faults[k];
    const double x0 = x(f.t), w = std::max(x(f.deadline) - x0, 1.0);
    s += "<rect class=\"fault\" x=\"" + num(x0) + "\" y=\"" + num(kHeaderH) + "\" width=\"" + num(w) +
         "\" height=\"" + num(kFaultLabelH + rows_h) + "\" fill=\"" + kFault + "\" fill-opacity=\"0.6\"/>\n";
    s += "<text x=\"" + num(x0 + 2) + "\" y=\"" + num(kHeaderH + 10 + 12 * static_cast<double>(k % 3)) +
         "\" font-size=\"10\" fill=\"#444\">" + xml_escape(f.error) + "</text>\n";
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
      s += std::string("<rect class=\"") + (hot ? "hold overlap" : "hold") + "\" x=\"" + num(x0) + "\" y=\"" +
           num(y) + "\" width=\"" + num(std::max(x(w.end) - x0, hot ? kMinOverlapW : kMinBarW)) +
           "\" height=\"" + num(bar_h) + "\" fill=\"" + (hot ? kOverlap : kHold) + "\"/>\n";
    }
  }

  // Time axis: ms since run_start, ticks at a 1-2-5 step.
  const double axis_y = rows_top + rows_h + 2;
  s += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(axis_y) + "\" x2=\"" + num(kLeft + plot_w) + "\" y2=\"" +
       num(axis_y) + "\" stroke=\"black\"/>\n";
  const double ms_lo = static_cast<double>(lo - run_start) / 1e6, ms_hi = static_cast<double>(hi - run_start) / 1e6;
  const double step = nice_step(ms_hi - ms_lo);
  // Ticks by integer index: adding `step` repeatedly would drift (0.1 + 0.2 …).
  const auto k_lo = static_cast<long long>(std::ceil(ms_lo / step - 1e-9));
  const auto k_hi = static_cast<long long>(std::floor(ms_hi / step + 1e-9));
  for (long long k = k_lo; k <= k_hi; ++k) {
    const double ms = static_cast<double>(k) * step;
    const double tx = kLeft + (ms - ms_lo) / (ms_hi - ms_lo) * plot_w;
    s += "<line x1=\"" + num(tx) + "\" y1=\"" + num(axis_y) + "\" x2=\"" + num(tx) + "\" y2=\"" + num(axis_y + 5) +
         "\" stroke=\"black\"/><text x=\"" + num(tx) + "\" y=\"" + num(axis_y + 17) +
         "\" font-size=\"10\" text-anchor=\"middle\">" + tick_label(ms) + "</text>\n";
  }
  s += "<text x=\"" + num(kLeft + plot_w / 2) + "\" y=\"" + num(axis_y + 34) +
       "\" font-size=\"11\" text-anchor=\"middle\">ms since run start</text>\n";
  s += "</svg>\n";
  return s;
}

}  // namespace redlock::chaos
