// test_yaml_subset.cpp — the YAML subset reader parses what it accepts the
// way YAML does, and refuses the rest with the line number instead of
// guessing.
#include <doctest/doctest.h>

#include "yaml_subset.hpp"

#include <string>

using nlohmann::ordered_json;

namespace {

ordered_json parse(const std::string& text) { return yaml_subset::parse(text); }

// The message of the error PARSE throws for TEXT ("" if it does not throw).
std::string error_of(const std::string& text) {
  try {
    yaml_subset::parse(text);
  } catch (const yaml_subset::Error& e) {
    return e.what();
  }
  return "";
}

bool contains_str(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("yaml subset: block mappings, nesting, key order, comments") {
  const auto doc = parse(
      "# leading comment\n"
      "name: bed   # trailing comment\n"
      "\n"
      "services:\n"
      "  b:\n"
      "    image: \"redis:7.0\"\n"
      "    n: 30\n"
      "  a:\n"
      "    flag: true\n"
      "    nothing:\n"
      "    tilde: ~\n"
      "    hash: \"a # not a comment\"\n"
      "    url: redis://127.0.0.1:7001\n"
      "    dur: 1s\n");
  CHECK(doc["name"] == "bed");
  REQUIRE(doc["services"].is_object());
  CHECK(doc["services"].begin().key() == "b");  // order kept
  CHECK(doc["services"]["b"]["image"] == "redis:7.0");
  CHECK(doc["services"]["b"]["n"] == 30);
  CHECK(doc["services"]["a"]["flag"] == true);
  CHECK(doc["services"]["a"]["nothing"].is_null());
  CHECK(doc["services"]["a"]["tilde"].is_null());
  CHECK(doc["services"]["a"]["hash"] == "a # not a comment");
  CHECK(doc["services"]["a"]["url"] == "redis://127.0.0.1:7001");
  CHECK(doc["services"]["a"]["dur"] == "1s");
}

TEST_CASE("yaml subset: flow and block sequences, quoting, escapes") {
  const auto doc = parse(
      "cmd: [\"redis-server\", \"--save\", \"\", 'it''s', plain, \"\\u00e9\\t\"]\n"
      "empty: []\n"
      "map: {}\n"
      "inline: {a: 1, \"b\": [x, z]}\n"
      "ports:\n"
      "  - \"127.0.0.1:7001:6379\"\n"
      "  - 127.0.0.1:7002:6379\n"
      "same_indent:\n"
      "- one\n"
      "- [two]\n");
  CHECK(doc["cmd"] == ordered_json::array({"redis-server", "--save", "", "it's", "plain", "\xc3\xa9\t"}));
  CHECK(doc["empty"] == ordered_json::array());
  CHECK(doc["map"] == ordered_json::object());
  CHECK(doc["inline"]["a"] == 1);
  CHECK(doc["inline"]["b"] == ordered_json::array({"x", "z"}));
  CHECK(doc["ports"] == ordered_json::array({"127.0.0.1:7001:6379", "127.0.0.1:7002:6379"}));
  CHECK(doc["same_indent"] == ordered_json::array({"one", ordered_json::array({"two"})}));
}

TEST_CASE("yaml subset: what it does not understand is an error naming the line") {
  CHECK(error_of("a: 1\nb:\n\t c: 2\n") == "line 3: tab in indentation (YAML indents with spaces)");
  CHECK(contains_str(error_of("base: &b {x: 1}\n"), "anchors"));
  CHECK(contains_str(error_of("a: *b\n"), "aliases"));
  CHECK(contains_str(error_of("a: !!str 1\n"), "tags"));
  CHECK(contains_str(error_of("a: |\n  text\n"), "block scalars"));
  CHECK(contains_str(error_of("a: [1,\n  2]\n"), "line 1: unterminated flow sequence"));
  CHECK(contains_str(error_of("a: \"open\n"), "line 1: unterminated"));
  CHECK(contains_str(error_of("a: plain\n  continued\n"), "line 2: unexpected indentation"));
  CHECK(contains_str(error_of("a: 1\na: 2\n"), "line 2: duplicate key 'a'"));
  CHECK(contains_str(error_of("---\na: 1\n"), "document markers"));
  CHECK(contains_str(error_of("l:\n  - k: v\n"), "line 2: mappings inside sequence items"));
  CHECK(contains_str(error_of("restart: no\n"), "quote it"));
  CHECK(contains_str(error_of("appendonly: yes\n"), "quote it"));
  CHECK(contains_str(error_of("l: [x, y]\n"), "quote it"));
  CHECK(contains_str(error_of("a: b: c\n"), "looks like a mapping"));
  CHECK(contains_str(error_of("just a line\n"), "expected 'key: value'"));
  CHECK(contains_str(error_of("a:\n  - x\n  y: 1\n"), "line 3"));
  CHECK(contains_str(error_of("a: \"bad \\q escape\"\n"), "unsupported escape"));
  CHECK(contains_str(error_of("  a: 1\n"), "column 1"));
  CHECK(parse("restart: \"no\"\n")["restart"] == "no");
  CHECK(parse("").is_null());
}
