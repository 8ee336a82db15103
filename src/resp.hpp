// resp.hpp — the one RESP encoder of the library: a command as an array of
// bulk strings, *<argc>\r\n then $<len>\r\n<bytes>\r\n per argument.
// Replies are parsed by hiredis's redisReader (src/socket_wire.cpp).
#pragma once

#include <charconv>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace redlock::detail {

namespace resp {

inline void append_header(std::string& out, char kind, std::size_t n) {
  char digits[24];
  out += kind;
  out.append(digits, std::to_chars(digits, digits + sizeof digits, n).ptr);
  out += "\r\n";
}

// append_bulk appends one bulk string: $<len>\r\n<bytes>\r\n.
inline void append_bulk(std::string& out, std::string_view arg) {
  append_header(out, '$', arg.size());
  out += arg;
  out += "\r\n";
}

// split_bulks reads `n` bulk strings back from `in` (what append_bulk
// wrote) into `out`, as views into `in`; false if `in` is not exactly that.
inline bool split_bulks(std::string_view in, std::size_t n, std::vector<std::string_view>& out) {
  for (std::size_t i = 0; i < n; ++i) {
    if (in.empty() || in.front() != '$') return false;
    const std::size_t eol = in.find("\r\n");
    if (eol == std::string_view::npos) return false;
    std::size_t len = 0;
    const auto [end, ec] = std::from_chars(in.data() + 1, in.data() + eol, len);
    if (ec != std::errc{} || end != in.data() + eol || in.size() < eol + 2 + len + 2) return false;
    out.push_back(in.substr(eol + 2, len));
    if (in.substr(eol + 2 + len, 2) != "\r\n") return false;
    in.remove_prefix(eol + 2 + len + 2);
  }
  return in.empty();
}

}  // namespace resp

// append_command appends one command in RESP to `out`.
inline void append_command(std::string& out, std::span<const std::string_view> argv) {
  resp::append_header(out, '*', argv.size());
  for (std::string_view arg : argv) resp::append_bulk(out, arg);
}

// append_command_encoded appends one command whose first arguments are
// `head` and whose other `tail_args` arguments are already bulk strings,
// in the pieces of `tail`, in order.
inline void append_command_encoded(std::string& out, std::span<const std::string_view> head, std::size_t tail_args,
                                   std::span<const std::string_view> tail) {
  resp::append_header(out, '*', head.size() + tail_args);
  for (std::string_view arg : head) resp::append_bulk(out, arg);
  for (std::string_view piece : tail) out += piece;
}

}  // namespace redlock::detail
