// escape.cpp — see escape.hpp.
#include "escape.hpp"

#include <cstdint>

namespace redlock::cli {

namespace {

// Sequence — one UTF-8 sequence at the start of a string: its length and
// code point; length 0 when the bytes there are not valid UTF-8.
struct Sequence {
  std::size_t length = 0;
  std::uint32_t code = 0;
};

Sequence decode(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return {1, b0};
  std::size_t n = 0;
  std::uint32_t code = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, code = b0 & 0x1Fu, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, code = b0 & 0x0Fu, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, code = b0 & 0x07u, min = 0x10000;
  } else {
    return {};
  }
  if (i + n > s.size()) return {};
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return {};
    code = (code << 6) | (byte(i + k) & 0x3Fu);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return {};
  return {n, code};
}

// is_control: printing it could move the cursor, start an escape sequence
// or reorder the text around it.
bool is_control(std::uint32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

constexpr char kDigits[] = "0123456789abcdef";

void append_hex(std::string& out, unsigned char b) {
  out += "\\x";
  out += kDigits[b >> 4];
  out += kDigits[b & 0x0F];
}

// escape: the escaped form (escape.hpp); `backslash` and `quote_mark`
// say whether \ and " are escaped too.
std::string escape(std::string_view s, bool backslash, bool quote_mark) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const Sequence seq = decode(s, i);
    if (seq.length == 0) {
      append_hex(out, static_cast<unsigned char>(s[i++]));
      continue;
    }
    if (is_control(seq.code)) {
      for (std::size_t k = 0; k < seq.length; ++k) append_hex(out, static_cast<unsigned char>(s[i + k]));
    } else if ((seq.code == '\\' && backslash) || (seq.code == '"' && quote_mark)) {
      out += '\\';
      out += s[i];
    } else {
      out.append(s.substr(i, seq.length));
    }
    i += seq.length;
  }
  return out;
}

}  // namespace

std::string escaped(std::string_view s) { return escape(s, true, false); }

std::string quote(std::string_view s) { return '"' + escape(s, true, true) + '"'; }

std::string terminal_safe(std::string_view s) { return escape(s, false, false); }

bool is_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = decode(s, i).length;
    if (n == 0) return false;
    i += n;
  }
  return true;
}

nlohmann::json printable_json(nlohmann::json j) {
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (!is_utf8(s)) j = escaped(s);
  } else if (j.is_structured()) {
    for (auto& item : j) item = printable_json(std::move(item));
  }
  return j;
}

void put_name(nlohmann::json& out, const std::string& key, std::string_view bytes) {
  if (is_utf8(bytes)) {
    out[key] = std::string(bytes);
    out.erase(key + "_hex");
    return;
  }
  out[key] = escaped(bytes);
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 0x0F];
  }
  out[key + "_hex"] = hex;
}

}  // namespace redlock::cli
