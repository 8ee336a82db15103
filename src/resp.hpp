// resp.hpp — the one RESP encoder of the library: a command as an array of
// bulk strings, *<argc>\r\n then $<len>\r\n<bytes>\r\n per argument.
// Replies are parsed by hiredis's redisReader (src/socket_wire.cpp).
#pragma once

#include <charconv>
#include <span>
#include <string>
#include <string_view>

namespace redlock::detail {

namespace resp {

inline void append_header(std::string& out, char kind, std::size_t n) {
  char digits[24];
  out += kind;
  out.append(digits, std::to_chars(digits, digits + sizeof digits, n).ptr);
  out += "\r\n";
}

}  // namespace resp

// append_command appends one command in RESP to `out`.
inline void append_command(std::string& out, std::span<const std::string_view> argv) {
  resp::append_header(out, '*', argv.size());
  for (std::string_view arg : argv) {
    resp::append_header(out, '$', arg.size());
    out += arg;
    out += "\r\n";
  }
}

}  // namespace redlock::detail
