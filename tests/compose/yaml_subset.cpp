// yaml_subset.cpp — see yaml_subset.hpp for the accepted subset.
#include "yaml_subset.hpp"

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace yaml_subset {

Error::Error(int line_no, const std::string& message)
    : std::runtime_error("line " + std::to_string(line_no) + ": " + message), line(line_no) {}

namespace {

using json = nlohmann::ordered_json;

struct Line {
  int number;        // 1-based line number in the text
  std::size_t indent;
  std::string text;  // without indentation, comment and trailing blanks
};

bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::string trim(std::string_view s) {
  std::size_t b = 0;
  std::size_t e = s.size();
  while (b < e && is_blank(s[b])) ++b;
  while (e > b && (is_blank(s[e - 1]) || s[e - 1] == '\r')) --e;
  return std::string(s.substr(b, e - b));
}

// Cuts a comment off CONTENT: a '#' at its start or after a blank, outside
// quotes. Quotes are tracked only where a scalar can start.
std::string strip_comment(const std::string& content, int line_no) {
  char quote = 0;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const char c = content[i];
    if (quote == '"') {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        quote = 0;
      }
    } else if (quote == '\'') {
      if (c == '\'') {
        if (i + 1 < content.size() && content[i + 1] == '\'') {
          ++i;
        } else {
          quote = 0;
        }
      }
    } else if (c == '#' && (i == 0 || is_blank(content[i - 1]))) {
      return content.substr(0, i);
    } else if ((c == '"' || c == '\'') &&
               (i == 0 || is_blank(content[i - 1]) ||
                std::string_view("[{,:-").find(content[i - 1]) != std::string_view::npos)) {
      quote = c;
    }
  }
  if (quote != 0) throw Error(line_no, "unterminated quoted scalar (multi-line scalars are not supported)");
  return content;
}

std::vector<Line> split_lines(const std::string& text) {
  std::vector<Line> out;
  std::istringstream in(text);
  std::string raw;
  int number = 0;
  while (std::getline(in, raw)) {
    ++number;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    std::size_t indent = 0;
    while (indent < raw.size() && raw[indent] == ' ') ++indent;
    if (indent < raw.size() && raw[indent] == '\t') {
      throw Error(number, "tab in indentation (YAML indents with spaces)");
    }
    const std::string content = trim(strip_comment(raw.substr(indent), number));
    if (content.empty()) continue;
    if (indent == 0 && (content.rfind("---", 0) == 0 || content.rfind("...", 0) == 0)) {
      throw Error(number, "document markers (--- ...) are not supported: one document only");
    }
    if (indent == 0 && content[0] == '%') throw Error(number, "directives (%) are not supported");
    out.push_back({number, indent, content});
  }
  return out;
}

void reject_special_start(char c, int line_no) {
  switch (c) {
    case '&': throw Error(line_no, "anchors (&) are not supported");
    case '*': throw Error(line_no, "aliases (*) are not supported");
    case '!': throw Error(line_no, "tags (!) are not supported");
    case '|':
    case '>': throw Error(line_no, "block scalars (| >) are not supported");
    case '?': throw Error(line_no, "complex keys (?) are not supported");
    case '@':
    case '`': throw Error(line_no, std::string("'") + c + "' cannot start a plain scalar");
    case '%': throw Error(line_no, "'%' cannot start a plain scalar");
    default: break;
  }
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A cursor over one line's inline text (flow collections and scalars).
class Inline {
 public:
  Inline(std::string_view text, int line_no) : s_(text), line_(line_no) {}

  // The whole text as one value.
  json value_to_end() {
    json v = value(false);
    skip_blanks();
    if (pos_ != s_.size()) fail("unexpected text after the value: '" + std::string(s_.substr(pos_)) + "'");
    return v;
  }

  // A mapping key followed by ':' and a blank or the end; returns the key and
  // leaves the cursor after the ':'. Nothing is consumed if there is none.
  bool key(std::string& out) {
    const std::size_t start = pos_;
    if (pos_ < s_.size() && (s_[pos_] == '"' || s_[pos_] == '\'')) {
      out = s_[pos_] == '"' ? double_quoted() : single_quoted();
      skip_blanks();
      if (pos_ < s_.size() && s_[pos_] == ':' && (pos_ + 1 == s_.size() || is_blank(s_[pos_ + 1]))) {
        ++pos_;
        return true;
      }
      pos_ = start;
      return false;
    }
    for (std::size_t i = pos_; i < s_.size(); ++i) {
      if (s_[i] == ':' && (i + 1 == s_.size() || is_blank(s_[i + 1]))) {
        out = trim(s_.substr(pos_, i - pos_));
        if (out.empty()) fail("empty mapping key");
        reject_special_start(out[0], line_);
        if (out.find_first_of("[]{},\"'") != std::string::npos) fail("unsupported mapping key '" + out + "'");
        pos_ = i + 1;
        return true;
      }
    }
    return false;
  }

  std::string rest() {
    skip_blanks();
    return std::string(s_.substr(pos_));
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw Error(line_, message); }

  void skip_blanks() {
    while (pos_ < s_.size() && is_blank(s_[pos_])) ++pos_;
  }

  json value(bool in_flow) {
    skip_blanks();
    if (pos_ >= s_.size()) {
      if (in_flow) fail("unterminated flow collection (flow collections must fit on one line)");
      return nullptr;
    }
    const char c = s_[pos_];
    if (c == '[') return flow_sequence();
    if (c == '{') return flow_mapping();
    if (c == '"') return double_quoted();
    if (c == '\'') return single_quoted();
    return plain(in_flow);
  }

  json flow_sequence() {
    ++pos_;  // '['
    json out = json::array();
    for (;;) {
      skip_blanks();
      if (pos_ >= s_.size()) fail("unterminated flow sequence (flow collections must fit on one line)");
      if (s_[pos_] == ']') {
        ++pos_;
        return out;
      }
      out.push_back(value(true));
      skip_blanks();
      if (pos_ >= s_.size()) fail("unterminated flow sequence (flow collections must fit on one line)");
      if (s_[pos_] == ',') {
        ++pos_;
      } else if (s_[pos_] != ']') {
        fail(std::string("expected ',' or ']' in a flow sequence, found '") + s_[pos_] + "'");
      }
    }
  }

  json flow_mapping() {
    ++pos_;  // '{'
    json out = json::object();
    for (;;) {
      skip_blanks();
      if (pos_ >= s_.size()) fail("unterminated flow mapping (flow collections must fit on one line)");
      if (s_[pos_] == '}') {
        ++pos_;
        return out;
      }
      std::string k;
      if (s_[pos_] == '"') {
        k = double_quoted();
      } else if (s_[pos_] == '\'') {
        k = single_quoted();
      } else {
        const std::size_t start = pos_;
        while (pos_ < s_.size() && s_[pos_] != ':' && s_[pos_] != ',' && s_[pos_] != '}') ++pos_;
        k = trim(s_.substr(start, pos_ - start));
        if (k.empty()) fail("empty key in a flow mapping");
        reject_special_start(k[0], line_);
      }
      skip_blanks();
      if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':' after key '" + k + "' in a flow mapping");
      ++pos_;
      if (out.contains(k)) fail("duplicate key '" + k + "'");
      out[k] = value(true);
      skip_blanks();
      if (pos_ >= s_.size()) fail("unterminated flow mapping (flow collections must fit on one line)");
      if (s_[pos_] == ',') {
        ++pos_;
      } else if (s_[pos_] != '}') {
        fail(std::string("expected ',' or '}' in a flow mapping, found '") + s_[pos_] + "'");
      }
    }
  }

  std::string double_quoted() {
    ++pos_;  // '"'
    std::string out;
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case '0': out += '\0'; break;
        case 'x': append_utf8(out, hex(2)); break;
        case 'u': append_utf8(out, hex(4)); break;
        default: fail(std::string("unsupported escape '\\") + e + "' in a double-quoted scalar");
      }
    }
    fail("unterminated double-quoted scalar (multi-line scalars are not supported)");
  }

  std::uint32_t hex(int digits) {
    if (pos_ + static_cast<std::size_t>(digits) > s_.size()) fail("short hex escape");
    std::uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        fail("bad hex digit in an escape");
      }
    }
    return v;
  }

  std::string single_quoted() {
    ++pos_;  // '\''
    std::string out;
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '\'') {
        if (pos_ < s_.size() && s_[pos_] == '\'') {
          out += '\'';
          ++pos_;
          continue;
        }
        return out;
      }
      out += c;
    }
    fail("unterminated single-quoted scalar (multi-line scalars are not supported)");
  }

  json plain(bool in_flow) {
    const std::size_t start = pos_;
    reject_special_start(s_[pos_], line_);
    if (s_[pos_] == ',' || s_[pos_] == ']' || s_[pos_] == '}') fail(std::string("unexpected '") + s_[pos_] + "'");
    if (s_[pos_] == '-' && (pos_ + 1 == s_.size() || is_blank(s_[pos_ + 1]))) {
      fail("a sequence item ('- ') cannot stand where a value was expected on the same line");
    }
    if (in_flow) {
      while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != ']' && s_[pos_] != '}') ++pos_;
    } else {
      pos_ = s_.size();
    }
    const std::string text = trim(s_.substr(start, pos_ - start));
    if (text.find(": ") != std::string::npos || (!text.empty() && text.back() == ':')) {
      fail("'" + text + "' looks like a mapping where a value was expected (quote it if it is a string)");
    }
    if (in_flow && text.find_first_of("[{") != std::string::npos) fail("unexpected '[' or '{' in a plain scalar");
    return resolve_plain(text);
  }

  json resolve_plain(const std::string& t) const {
    if (t.empty() || t == "~" || t == "null" || t == "Null" || t == "NULL") return nullptr;
    if (t == "true" || t == "True" || t == "TRUE") return true;
    if (t == "false" || t == "False" || t == "FALSE") return false;
    static const char* const ambiguous[] = {"yes", "Yes", "YES", "no", "No", "NO", "on", "On", "ON",
                                            "off", "Off", "OFF", "y", "Y", "n", "N"};
    for (const char* a : ambiguous) {
      if (t == a) fail("unquoted '" + t + "' is a boolean in YAML 1.1 and a string in 1.2: quote it");
    }
    std::size_t i = (t[0] == '-' || t[0] == '+') ? 1 : 0;
    if (i < t.size() && t.size() - i <= 18 && t.find_first_not_of("0123456789", i) == std::string::npos) {
      return std::stoll(t);
    }
    return t;
  }

  std::string_view s_;
  int line_;
  std::size_t pos_ = 0;
};

class Parser {
 public:
  explicit Parser(std::vector<Line> lines) : lines_(std::move(lines)) {}

  json document() {
    if (lines_.empty()) return nullptr;
    if (lines_[0].indent != 0) throw Error(lines_[0].number, "the document must start at column 1");
    json v = block(0);
    if (pos_ != lines_.size()) throw Error(lines_[pos_].number, "unexpected indentation");
    return v;
  }

 private:
  static bool is_item(const Line& l) { return l.text == "-" || l.text.rfind("- ", 0) == 0; }

  json block(std::size_t indent) {
    return is_item(lines_[pos_]) ? sequence(indent) : mapping(indent);
  }

  // The value of a key or item whose inline part was empty: a deeper block,
  // a sequence at the parent's indentation (for keys only), or null.
  json nested(std::size_t indent, bool allow_same_indent_sequence) {
    if (pos_ < lines_.size()) {
      const Line& next = lines_[pos_];
      if (next.indent > indent) return block(next.indent);
      if (allow_same_indent_sequence && next.indent == indent && is_item(next)) return sequence(indent);
    }
    return nullptr;
  }

  void expect_no_deeper(std::size_t indent) const {
    if (pos_ < lines_.size() && lines_[pos_].indent > indent) {
      throw Error(lines_[pos_].number,
                  "unexpected indentation (multi-line scalars are not supported)");
    }
  }

  json mapping(std::size_t indent) {
    json out = json::object();
    while (pos_ < lines_.size() && lines_[pos_].indent == indent) {
      const Line& line = lines_[pos_];
      if (is_item(line)) throw Error(line.number, "sequence item where a mapping key was expected");
      Inline in(line.text, line.number);
      std::string key;
      if (!in.key(key)) throw Error(line.number, "expected 'key: value', found '" + line.text + "'");
      if (out.contains(key)) throw Error(line.number, "duplicate key '" + key + "'");
      const std::string rest = in.rest();
      ++pos_;
      if (rest.empty()) {
        out[key] = nested(indent, true);
      } else {
        out[key] = Inline(rest, line.number).value_to_end();
        expect_no_deeper(indent);
      }
    }
    return out;
  }

  json sequence(std::size_t indent) {
    json out = json::array();
    while (pos_ < lines_.size() && lines_[pos_].indent == indent && is_item(lines_[pos_])) {
      const Line& line = lines_[pos_];
      const std::string rest = trim(std::string_view(line.text).substr(1));
      ++pos_;
      if (rest.empty()) {
        out.push_back(nested(indent, false));
        continue;
      }
      std::string ignored;
      if (rest[0] != '[' && rest[0] != '{' && Inline(rest, line.number).key(ignored)) {
        throw Error(line.number, "mappings inside sequence items ('- key: value') are not supported");
      }
      if (rest == "-" || rest.rfind("- ", 0) == 0) {
        throw Error(line.number, "nested sequences on one line ('- - x') are not supported");
      }
      out.push_back(Inline(rest, line.number).value_to_end());
      expect_no_deeper(indent);
    }
    return out;
  }

  std::vector<Line> lines_;
  std::size_t pos_ = 0;
};

}  // namespace

nlohmann::ordered_json parse(const std::string& text) { return Parser(split_lines(text)).document(); }

nlohmann::ordered_json parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read");
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return parse(text.str());
  } catch (const Error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace yaml_subset
