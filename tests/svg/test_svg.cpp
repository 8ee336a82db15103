// test_svg.cpp — tools/svg, the SVG writer of the report plots and the chaos
// timelines: escaping, element markup, axes and well-formed output.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "svg.hpp"

using namespace redlock;

namespace {

std::size_t count(const std::string& s, const std::string& part) {
  std::size_t n = 0;
  for (auto at = s.find(part); at != std::string::npos; at = s.find(part, at + part.size())) ++n;
  return n;
}

// well_formed says what is wrong with `s` as XML markup of elements,
// attributes and text ("" when nothing is): every tag closed in order, no
// raw < or > in text, every & the start of one of the five entities, every
// attribute value quoted.
std::string well_formed(const std::string& s) {
  std::vector<std::string> open;
  std::size_t i = 0;
  auto entity_ok = [&](std::size_t at) {
    for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
      if (s.compare(at, std::char_traits<char>::length(e), e) == 0) return true;
    return false;
  };
  while (i < s.size()) {
    if (s[i] == '>') return "raw > at " + std::to_string(i);
    if (s[i] == '&' && !entity_ok(i)) return "bare & at " + std::to_string(i);
    if (s[i] != '<') {
      ++i;
      continue;
    }
    const bool closing = s.compare(i, 2, "</") == 0;
    std::size_t j = i + (closing ? 2 : 1);
    const std::size_t name_end = s.find_first_of(" />", j);
    if (name_end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    const std::string name = s.substr(j, name_end - j);
    if (name.empty()) return "tag without a name at " + std::to_string(i);
    j = name_end;
    // Attributes: name="value" pairs up to > or />.
    while (j < s.size() && s[j] != '>' && s.compare(j, 2, "/>") != 0) {
      if (s[j] == ' ') {
        ++j;
        continue;
      }
      const std::size_t eq = s.find('=', j);
      if (eq == std::string::npos || eq + 1 >= s.size() || s[eq + 1] != '"') return "unquoted attribute in <" + name;
      const std::size_t close = s.find('"', eq + 2);
      if (close == std::string::npos) return "unterminated attribute in <" + name;
      for (std::size_t k = eq + 2; k < close; ++k) {
        if (s[k] == '<' || s[k] == '>') return "raw < or > in an attribute of <" + name;
        if (s[k] == '&' && !entity_ok(k)) return "bare & in an attribute of <" + name;
      }
      j = close + 1;
    }
    if (j >= s.size()) return "unterminated <" + name;
    if (closing) {
      if (open.empty() || open.back() != name) return "</" + name + "> closes nothing open";
      open.pop_back();
      i = j + 1;
    } else if (s.compare(j, 2, "/>") == 0) {
      i = j + 2;
    } else {
      open.push_back(name);
      i = j + 1;
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> left open";
}

}  // namespace

TEST_CASE("xml_escape: the five markup characters become entities, forbidden controls spaces") {
  CHECK(svg::xml_escape("<a href=\"x\">Tom & Jerry's</a>") ==
        "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&apos;s&lt;/a&gt;");
  CHECK(svg::xml_escape("tab\tnew\nline") == "tab\tnew\nline");
  CHECK(svg::xml_escape(std::string("a\0b\x1f" "c", 5)) == "a b c");
  CHECK(svg::xml_escape("µs ≤ x") == "µs ≤ x");  // UTF-8 passes through
  CHECK(svg::xml_escape("") == "");
}

TEST_CASE("num: one decimal, never minus zero") {
  CHECK(svg::num(12) == "12.0");
  CHECK(svg::num(-3.5) == "-3.5");
  CHECK(svg::num(-0.01) == "0.0");
  CHECK(svg::num(1199.96) == "1200.0");
}

TEST_CASE("the well-formedness check itself catches broken markup") {
  CHECK(well_formed("<svg><g></svg>") != "");
  CHECK(well_formed("<svg><text>a < b</text></svg>") != "");
  CHECK(well_formed("<svg><text>a & b</text></svg>") != "");
  CHECK(well_formed("<svg x=\"1\"><rect y=\"<\"/></svg>") != "");
  CHECK(well_formed("<svg x=\"1\"><rect y=\"&lt;\"/><g></g></svg>") == "");
}

TEST_CASE("a document: one <svg> with its viewBox, hostile text and attributes escaped, well formed") {
  const std::string hostile = "</text><script>alert('x')</script> & \"q\"";
  svg::Document d(300, 200.5, {{"font-size", 12}});
  d.title(hostile);
  d.text(10, 20, hostile, {{"font-size", 15}, {"data-note", hostile}});
  d.rect(1, 2, 3, 4, {{"fill", "red"}, {"class", "bar"}});
  d.line(0, 0, 10, 10, {{"stroke", "black"}});
  d.polyline({{0, 0}, {1.26, 2.5}, {3, -0.01}}, {{"fill", "none"}});
  d.open_group({{"class", "inner"}});
  d.open_group();
  d.rect(0, 0, 1, 1);
  d.close_group();
  const auto s = d.finish();

  CHECK(s.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"300.0\" height=\"200.5\" "
                "viewBox=\"0 0 300.0 200.5\" font-family=\"sans-serif\" font-size=\"12.0\">\n",
                0) == 0);
  CHECK(s.size() >= 7);
  CHECK(s.substr(s.size() - 7) == "</svg>\n");
  CHECK(count(s, "<svg") == 1);
  CHECK(s.find("<rect x=\"0.0\" y=\"0.0\" width=\"300.0\" height=\"200.5\" fill=\"white\"/>") != std::string::npos);
  CHECK(s.find("<script") == std::string::npos);
  CHECK(count(s, "&lt;/text&gt;&lt;script&gt;alert(&apos;x&apos;)&lt;/script&gt; &amp; &quot;q&quot;") == 3);
  // class first, then the geometry, then the rest in order
  CHECK(s.find("<rect class=\"bar\" x=\"1.0\" y=\"2.0\" width=\"3.0\" height=\"4.0\" fill=\"red\"/>\n") !=
        std::string::npos);
  CHECK(s.find("<line x1=\"0.0\" y1=\"0.0\" x2=\"10.0\" y2=\"10.0\" stroke=\"black\"/>\n") != std::string::npos);
  CHECK(s.find("<polyline points=\"0.0,0.0 1.3,2.5 3.0,0.0\" fill=\"none\"/>\n") != std::string::npos);
  CHECK(count(s, "<g") == 2);
  CHECK(count(s, "</g>") == 2);  // finish closed the one left open
  CHECK(well_formed(s) == "");
  CHECK(d.finish() == "</svg>\n");  // finish leaves the document empty
}

TEST_CASE("without a background there is no full-size rect") {
  svg::Document d(10, 10, {}, "");
  const auto s = d.finish();
  CHECK(count(s, "<rect") == 0);
  CHECK(well_formed(s) == "");
}

TEST_CASE("nice_step is 1, 2 or 5 times a power of ten, at most max_intervals per span") {
  CHECK(svg::nice_step(100, 10) == doctest::Approx(10));
  CHECK(svg::nice_step(101, 10) == doctest::Approx(20));
  CHECK(svg::nice_step(73, 10) == doctest::Approx(10));
  CHECK(svg::nice_step(0.3, 10) == doctest::Approx(0.05));
  CHECK(svg::nice_step(12000, 8) == doctest::Approx(2000));
  CHECK(svg::nice_step(45, 10) == doctest::Approx(5));
}

TEST_CASE("tick_values: every multiple of the step in range, without drift") {
  const auto v = svg::tick_values(0, 1, 0.1);
  REQUIRE(v.size() == 11);
  CHECK(v.front() == 0);
  CHECK(v[3] == doctest::Approx(0.3));
  CHECK(v.back() == doctest::Approx(1.0));
  CHECK(svg::tick_values(-25, 25, 10) == std::vector<double>{-20, -10, 0, 10, 20});
  CHECK(svg::tick_values(5, 1, 1).empty());
  CHECK(svg::tick_values(0, 1, 0).empty());
}

TEST_CASE("a bottom axis: line, tick marks, labels under the ticks, grid lines and caption") {
  svg::Axis a;
  a.start = 50;
  a.end = 250;
  a.at = 100;
  a.plot_depth = 80;
  a.line_colour = "black";
  a.tick_length = 5;
  a.label_offset = 17;
  a.caption = "ms since <start> & after";
  for (double v : svg::tick_values(0, 40, svg::nice_step(40, 4)))
    a.ticks.push_back({50 + v * 5, std::to_string(static_cast<int>(v)), v == 0 ? "" : "#eee"});
  svg::Document d(300, 150);
  d.axis(a);
  const auto s = d.finish();

  for (const char* label : {"0", "10", "20", "30", "40"})
    CHECK(s.find(std::string("text-anchor=\"middle\">") + label + "</text>") != std::string::npos);
  CHECK(s.find("<text x=\"100.0\" y=\"117.0\" font-size=\"10.0\" text-anchor=\"middle\">10</text>") !=
        std::string::npos);
  CHECK(count(s, "stroke=\"black\"") == 5 + 1);  // tick marks and the axis line
  CHECK(s.find("<line x1=\"50.0\" y1=\"100.0\" x2=\"250.0\" y2=\"100.0\" stroke=\"black\"/>") != std::string::npos);
  CHECK(count(s, "stroke=\"#eee\"") == 4);  // grid for every tick but 0
  CHECK(s.find("<line x1=\"100.0\" y1=\"20.0\" x2=\"100.0\" y2=\"100.0\" stroke=\"#eee\"/>") != std::string::npos);
  CHECK(s.find(">ms since &lt;start&gt; &amp; after</text>") != std::string::npos);
  CHECK(well_formed(s) == "");
}

TEST_CASE("a left axis: labels end left of it, the caption rotated, no line or marks unless asked") {
  svg::Axis a;
  a.side = svg::Axis::Side::left;
  a.start = 10;
  a.end = 110;
  a.at = 60;
  a.plot_depth = 200;
  a.label_offset = 8;
  a.caption_offset = 42;
  a.caption = "fraction ≤ x";
  a.ticks = {{110, "0.0", "#bbb"}, {60, "0.5", "#eee"}, {10, "1.0", "#bbb"}};
  svg::Document d(300, 150, {}, "");
  d.axis(a);
  const auto s = d.finish();

  CHECK(count(s, "<line") == 3);
  CHECK(s.find("<line x1=\"60.0\" y1=\"60.0\" x2=\"260.0\" y2=\"60.0\" stroke=\"#eee\"/>") != std::string::npos);
  CHECK(s.find("<text x=\"52.0\" y=\"63.5\" font-size=\"10.0\" text-anchor=\"end\">0.5</text>") != std::string::npos);
  CHECK(s.find("<text x=\"18.0\" y=\"60.0\" font-size=\"11.0\" text-anchor=\"middle\" "
               "transform=\"rotate(-90 18.0 60.0)\">fraction ≤ x</text>") != std::string::npos);
  CHECK(well_formed(s) == "");
}
