// svg.cpp — see svg.hpp.
#include "svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace redlock::svg {
namespace {

void append_attr(std::string& out, const Attr& a) { out += " " + a.name + "=\"" + xml_escape(a.value) + "\""; }

}  // namespace

std::string xml_escape(std::string_view s) {
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
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += ' ';
        else out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  // -0.04 would print "-0.0".
  std::snprintf(buf, sizeof buf, "%.1f", std::fabs(v) < 0.05 ? 0.0 : v);
  return buf;
}

double nice_step(double span, int max_intervals) {
  const double raw = std::max(span / std::max(max_intervals, 1), 1e-12);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw * (1 - 1e-9)) return m * mag;
  return 10.0 * mag;
}

std::vector<double> tick_values(double lo, double hi, double step) {
  std::vector<double> v;
  if (!(step > 0) || !(hi >= lo)) return v;
  const auto k_lo = static_cast<long long>(std::ceil(lo / step - 1e-9));
  const auto k_hi = static_cast<long long>(std::floor(hi / step + 1e-9));
  for (long long k = k_lo; k <= k_hi; ++k) v.push_back(static_cast<double>(k) * step);
  return v;
}

Document::Document(double width, double height, const Attrs& root, std::string_view background) {
  Attrs a = {{"xmlns", "http://www.w3.org/2000/svg"},
             {"width", width},
             {"height", height},
             {"viewBox", "0 0 " + num(width) + " " + num(height)},
             {"font-family", "sans-serif"}};
  a.insert(a.end(), root.begin(), root.end());
  out_ = "<svg";
  for (const auto& attr : a) append_attr(out_, attr);
  out_ += ">\n";
  if (!background.empty()) rect(0, 0, width, height, {{"fill", background}});
}

void Document::element(std::string_view tag, const Attrs& geometry, const Attrs& attrs, std::string_view content,
                       bool has_content) {
  out_ += "<";
  out_ += tag;
  for (const auto& a : attrs)
    if (a.name == "class") append_attr(out_, a);
  for (const auto& a : geometry) append_attr(out_, a);
  for (const auto& a : attrs)
    if (a.name != "class") append_attr(out_, a);
  if (has_content) {
    out_ += ">" + xml_escape(content) + "</";
    out_ += tag;
    out_ += ">\n";
  } else {
    out_ += "/>\n";
  }
}

void Document::title(std::string_view text) { element("title", {}, {}, text, true); }

void Document::rect(double x, double y, double width, double height, const Attrs& attrs) {
  element("rect", {{"x", x}, {"y", y}, {"width", width}, {"height", height}}, attrs, {}, false);
}

void Document::line(double x1, double y1, double x2, double y2, const Attrs& attrs) {
  element("line", {{"x1", x1}, {"y1", y1}, {"x2", x2}, {"y2", y2}}, attrs, {}, false);
}

void Document::text(double x, double y, std::string_view content, const Attrs& attrs) {
  element("text", {{"x", x}, {"y", y}}, attrs, content, true);
}

void Document::polyline(const std::vector<Point>& points, const Attrs& attrs) {
  std::string pts;
  pts.reserve(points.size() * 12);
  for (const auto& p : points) {
    if (!pts.empty()) pts += ' ';
    pts += num(p.x) + "," + num(p.y);
  }
  element("polyline", {{"points", pts}}, attrs, {}, false);
}

void Document::open_group(const Attrs& attrs) {
  out_ += "<g";
  for (const auto& a : attrs) append_attr(out_, a);
  out_ += ">\n";
  ++open_groups_;
}

void Document::close_group() {
  if (open_groups_ == 0) return;
  out_ += "</g>\n";
  --open_groups_;
}

void Document::axis(const Axis& a) {
  const bool bottom = a.side == Axis::Side::bottom;
  // A label's baseline sits about a third of its size below the tick on a
  // left axis, so the digits centre on it.
  const double label_shift = bottom ? 0 : a.label_size * 0.35;
  for (const auto& t : a.ticks) {
    if (!t.grid.empty()) {
      if (bottom) line(t.at, a.at - a.plot_depth, t.at, a.at, {{"stroke", t.grid}});
      else line(a.at, t.at, a.at + a.plot_depth, t.at, {{"stroke", t.grid}});
    }
    if (a.tick_length > 0) {
      if (bottom) line(t.at, a.at, t.at, a.at + a.tick_length, {{"stroke", "black"}});
      else line(a.at - a.tick_length, t.at, a.at, t.at, {{"stroke", "black"}});
    }
    if (t.label.empty()) continue;
    if (bottom)
      text(t.at, a.at + a.label_offset, t.label, {{"font-size", a.label_size}, {"text-anchor", "middle"}});
    else
      text(a.at - a.label_offset, t.at + label_shift, t.label, {{"font-size", a.label_size}, {"text-anchor", "end"}});
  }
  if (!a.line_colour.empty()) {
    if (bottom) line(a.start, a.at, a.end, a.at, {{"stroke", a.line_colour}});
    else line(a.at, a.start, a.at, a.end, {{"stroke", a.line_colour}});
  }
  if (a.caption.empty()) return;
  const double mid = (a.start + a.end) / 2;
  if (bottom) {
    text(mid, a.at + a.caption_offset, a.caption, {{"font-size", a.caption_size}, {"text-anchor", "middle"}});
  } else {
    const double cx = a.at - a.caption_offset;
    text(cx, mid, a.caption,
         {{"font-size", a.caption_size},
          {"text-anchor", "middle"},
          {"transform", "rotate(-90 " + num(cx) + " " + num(mid) + ")"}});
  }
}

std::string Document::finish() {
  while (open_groups_ > 0) close_group();
  out_ += "</svg>\n";
  std::string s;
  s.swap(out_);
  return s;
}

}  // namespace redlock::svg
