// svg.hpp — the one SVG writer of the project's pictures (bench/report's
// plots, tools/chaos's timelines): XML escaping, a document with a viewBox,
// the few elements the pictures use, and axes with ticks and labels.
//
// Output is self-contained SVG 1.1 text (no scripts, fonts or external
// references), one element a line. Every text and attribute value passes
// through xml_escape, so no caller string can break the markup. Numbers are
// written with one decimal: well below a pixel, and files stay small.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace redlock::svg {

// xml_escape makes `s` safe inside an XML element or a quoted attribute
// value: & < > " ' become entities, and the control characters XML 1.0
// forbids (all below 0x20 except tab and newline) become spaces.
std::string xml_escape(std::string_view s);

// num is `v` as an SVG number with one decimal ("12.0", "-3.5").
std::string num(double v);

// Attr is one attribute, its value given as text or as a number (written
// with num). The value is escaped when written.
struct Attr {
  Attr(std::string_view name, std::string_view value) : name(name), value(value) {}
  Attr(std::string_view name, double value) : name(name), value(num(value)) {}
  std::string name;
  std::string value;
};
using Attrs = std::vector<Attr>;

// Point is one vertex of a polyline, in user units.
struct Point {
  double x, y;
};

// Tick is one mark of an Axis: `at` is its coordinate along the axis in user
// units (x on a bottom axis, y on a left one); an empty label draws none; a
// non-empty `grid` colour draws a grid line of that colour across the plot.
struct Tick {
  double at;
  std::string label;
  std::string grid = {};
};

// Axis is one axis of a plot, drawn by Document::axis: an optional axis
// line, outward tick marks, tick labels and a caption (rotated on a left
// axis). Distances are in user units, measured outward from `at`.
struct Axis {
  enum class Side { bottom, left };
  Side side = Side::bottom;
  double start = 0, end = 0;  // the extent along the axis (the line, the caption's centre)
  double at = 0;              // the cross position: the y of a bottom axis, the x of a left one
  double plot_depth = 0;      // grid lines run this far into the plot (up, or to the right)
  std::vector<Tick> ticks;
  std::string caption;
  std::string line_colour = {};  // empty: no axis line
  double tick_length = 0;        // 0: no tick marks
  double label_offset = 16;      // from `at` to a label's baseline (bottom) or its end (left)
  double caption_offset = 32;    // from `at` to the caption's baseline (bottom) or its centre (left)
  double label_size = 10, caption_size = 11;
};

// nice_step is the spacing of ticks over `span` (> 0): the smallest 1, 2 or
// 5 × 10^k that cuts it into at most `max_intervals` (> 0) intervals.
double nice_step(double span, int max_intervals);

// tick_values is every multiple of `step` (> 0) in [lo, hi], ascending,
// computed from integer indices (summing `step` would drift: 0.1 + 0.2 …).
std::vector<double> tick_values(double lo, double hi, double step);

// Document builds one SVG picture in memory. The constructor writes the
// <svg> element (width, height and a matching viewBox, sans-serif text, the
// `root` attributes) and, unless `background` is empty, a full-size rect of
// that colour. Each element call appends one element: an attribute named
// "class" is written first (so `<rect class="…"` finds an element), then
// the geometry, then the other attributes in the order given. Not thread-safe;
// no call fails.
class Document {
 public:
  Document(double width, double height, const Attrs& root = {}, std::string_view background = "white");

  // title is the picture's accessible name (<title>).
  void title(std::string_view text);
  void rect(double x, double y, double width, double height, const Attrs& attrs = {});
  void line(double x1, double y1, double x2, double y2, const Attrs& attrs = {});
  // text draws `content` (escaped) with its baseline at y.
  void text(double x, double y, std::string_view content, const Attrs& attrs = {});
  void polyline(const std::vector<Point>& points, const Attrs& attrs = {});
  // open_group starts a <g> with `attrs`; close_group ends the innermost one.
  void open_group(const Attrs& attrs = {});
  void close_group();
  void axis(const Axis& a);

  // finish closes the groups left open and the <svg>, and returns the text;
  // the document is empty afterwards.
  [[nodiscard]] std::string finish();

 private:
  void element(std::string_view tag, const Attrs& geometry, const Attrs& attrs, std::string_view content,
               bool has_content);

  std::string out_;
  int open_groups_ = 0;
};

}  // namespace redlock::svg
