// test_cli_escape.cpp — the escaped form the `redlock` command prints names
// and server text in (cli/escape.hpp): what it escapes, that it reads back
// to the same bytes, and JSON that never throws.
#include <doctest/doctest.h>

#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "escape.hpp"

namespace {

using redlock::cli::escaped;
using redlock::cli::is_utf8;
using redlock::cli::printable_json;
using redlock::cli::put_name;
using redlock::cli::quote;
using redlock::cli::terminal_safe;

// unescape reads the escaped form back (docs/cli.md): \\, \" and \xHH.
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    REQUIRE(i + 1 < s.size());
    const char next = s[++i];
    if (next == 'x') {
      REQUIRE(i + 2 < s.size());
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      REQUIRE((next == '\\' || next == '"'));
      out += next;
    }
  }
  return out;
}

// safe: no byte a terminal acts on, and valid UTF-8.
bool safe(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return is_utf8(s) && s.find("\xc2\x9b") == std::string::npos;
}

}  // namespace

TEST_CASE("escape: printable UTF-8 is copied; controls, DEL, C1, bidi and bytes that are not UTF-8 are \\xHH") {
  CHECK(escaped("report-1") == "report-1");
  CHECK(escaped("caf\xc3\xa9 \xe2\x80\xa6") == "caf\xc3\xa9 \xe2\x80\xa6");  // café …
  CHECK(escaped("caf\xe9") == R"(caf\xe9)");
  CHECK(escaped("\xff\xfe") == R"(\xff\xfe)");
  CHECK(escaped("a\nb\tc\x1b[31m\x7f") == R"(a\x0ab\x09c\x1b[31m\x7f)");
  CHECK(escaped("\xc2\x9b" "2J") == R"(\xc2\x9b2J)");                      // C1 CSI, in UTF-8
  CHECK(escaped("a\xe2\x80\xae" "b") == R"(a\xe2\x80\xaeb)");              // U+202E RIGHT-TO-LEFT OVERRIDE
  CHECK(escaped("back\\slash \"q\"") == R"(back\\slash "q")");
  CHECK(quote("back\\slash \"q\"") == R"("back\\slash \"q\"")");
  CHECK(quote("") == R"("")");
  // Not UTF-8: overlong forms, surrogates, past U+10FFFF, cut short.
  CHECK(escaped("\xc0\xaf") == R"(\xc0\xaf)");
  CHECK(escaped("\xed\xa0\x80") == R"(\xed\xa0\x80)");
  CHECK(escaped("\xf4\x90\x80\x80") == R"(\xf4\x90\x80\x80)");
  CHECK(escaped("\xe2\x80") == R"(\xe2\x80)");
  // terminal_safe leaves backslashes alone: what was escaped stays as it is.
  CHECK(terminal_safe(quote("a\\b\x1b")) == quote("a\\b\x1b"));
  CHECK(terminal_safe("x\x1by\\z") == R"(x\x1by\z)");
}

TEST_CASE("escape: any bytes read back to themselves, and print safely") {
  std::mt19937 rng(20261128);
  for (int round = 0; round < 2000; ++round) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 0x20 : rng() % 256);
    CAPTURE(round);
    const std::string e = escaped(s);
    CHECK(unescape(e) == s);
    CHECK(safe(e));
    const std::string q = quote(s);
    REQUIRE(q.size() >= 2);
    CHECK(unescape(q.substr(1, q.size() - 2)) == s);
    CHECK(safe(q));
  }
}

TEST_CASE("escape: JSON gives UTF-8 strings as they are, others escaped; a name that is not UTF-8 adds _hex") {
  nlohmann::json j = {{"ok", "caf\xc3\xa9\n"}, {"bad", "caf\xe9"}, {"nested", {{"list", {"\xff", 1, nullptr}}}}};
  const nlohmann::json p = printable_json(j);
  CHECK(p["ok"] == "caf\xc3\xa9\n");
  CHECK(p["bad"] == R"(caf\xe9)");
  CHECK(p["nested"]["list"][0] == R"(\xff)");
  CHECK(p["nested"]["list"][1] == 1);
  CHECK_NOTHROW((void)p.dump());
  CHECK_THROWS((void)j.dump());  // what printable_json is for

  nlohmann::json out;
  put_name(out, "resource", "caf\xe9");
  CHECK(out["resource"] == R"(caf\xe9)");
  CHECK(out["resource_hex"] == "636166e9");
  put_name(out, "resource", "caf\xc3\xa9");
  CHECK(out["resource"] == "caf\xc3\xa9");
  CHECK_FALSE(out.contains("resource_hex"));
}
